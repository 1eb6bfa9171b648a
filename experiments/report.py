"""``python -m experiments.report DIR [DIR ...] [--out OUT]``: the report of one or many runs.

Reads result folders only (a GPU run made on another machine is reported exactly like a
local one) and writes ``report.md``, a self-contained ``report.html`` (figures embedded)
and the figures as PNG into OUT (default: the folder itself when there is one, else
``reports/merged``). Every section comes from its experiment's view (``experiments.views``),
and nothing here imports JAX: a report can be made where JAX is not installed.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from jaxgpu import report as rp
from jaxgpu import results

import experiments
from experiments import claims, views
from experiments.views import prediction

TITLE = "jaxgpu: what does a GPU really buy deep learning?"
INTRO = ("Each section below measures one thing the popular explanation of GPUs claims, on every backend "
         "that was run, next to its limit (a datasheet peak, a CPU estimate or the best peer measured in the "
         "same run). Figures and takeaways are computed from the records in results.jsonl; nothing is typed in.")
# Metrics for which a larger value is better, in the order a speed-up is taken from.
_RATE_METRICS = ("gflops", "gbytes_per_s", "samples_per_s")


def build_sections(runs: Sequence[results.Run]) -> list[rp.Section]:
    pairs = results.merge(runs)
    present = {rec.experiment for _, rec in pairs}
    sections = [ledger_section(pairs, present)]
    forecasts = predicted_tables(runs)
    guessed = prediction.predicted_pairs(list(runs), prediction.gpu_of(list(runs)))
    for name in experiments.names():
        if name in present:
            sec = experiment_section(name, pairs, [p for p in guessed if p[1].experiment == name])
            if name in forecasts:
                sec.tables.append(forecasts[name])
            sections.append(sec)
    speed = speedup_table(pairs)
    if speed.rows:
        sections.append(rp.Section("GPU / CPU speed-up per case", "speedup", paragraphs=[
            "For every case measured on both a GPU and a CPU run: the GPU's rate over the CPU's "
            "(or the CPU's time over the GPU's), against the CPU of the GPU's own machine where that run is "
            "here."], tables=[speed]))
    predicted = prediction.section(list(runs))
    if predicted:
        sections.append(predicted)
    sections[0].paragraphs[:0] = completion_notes(runs)
    tables = [rp.env_table(list(runs))]
    plan = plan_table(runs)
    if plan.rows:
        tables.append(plan)
    sections.append(rp.Section("Runs", "runs", tables=tables, paragraphs=[_status_summary(runs)]))
    return sections


# How the HTML ledger colours each verdict (the words stay: the Markdown shows only them).
VERDICT_MARKS = {"supported": "yes", "supported with caveats": "caveat", "contradicted": "no",
                 "inconclusive": "unsure", "not run": "none"}


def experiment_section(name: str, pairs, predicted=()) -> rp.Section:
    """An experiment's section: its view of the measured records, then what compiled runs planned.

    A compiled record (a program compiled for a GPU this machine does not have) never enters
    the measured figures: the view's ``compiled`` part shows it, labelled, or a plain table.
    ``predicted``: the CPU cases as predicted on a GPU (``prediction.predicted_pairs``), which the view
    draws as one more run, its label saying "predicted, not run"."""
    view = views.load(name)
    mine = [p for p in pairs if p[1].experiment == name]
    measured = [p for p in mine if not p[1].compiled]
    compiled = [p for p in mine if p[1].compiled]
    sec = view.section(measured + list(predicted))
    if not measured:  # only compiled records: the measured figures would be empty frames
        sec.plots, sec.tables = [], []
    if compiled:
        if hasattr(view, "compiled"):
            view.compiled(sec, compiled)
        else:
            sec.tables.append(_compiled_table(compiled))
    _version_warning(sec, name, pairs)
    return sec


def predicted_tables(runs: Sequence[results.Run]) -> dict[str, rp.Table]:
    """Per experiment: its timed CPU cases predicted on a GPU (a merged GPU run's own, else an H200), with
    that GPU's measured time and the prediction's error where it was merged."""
    pairs = results.merge(runs)
    gpu = prediction.gpu_of(list(runs))
    guessed = prediction.predicted_pairs(list(runs), gpu)
    on_gpu = prediction.measured_on(list(runs), gpu)
    tables = {name: _predicted_table(name, pairs, guessed, gpu, on_gpu) for name in {r.experiment for _, r in guessed}}
    return {name: t for name, t in tables.items() if t.rows}


def _predicted_table(name: str, pairs, guessed, gpu: str, on_gpu: dict[str, float]) -> rp.Table:
    """The experiment's timed CPU cases beside what they should take on ``gpu`` (predicted); where a merged
    run of that GPU measured the same case, its time and the prediction's error beside them."""
    measured = {x.key: (run, x) for run, x in pairs if x.experiment == name and not x.compiled
                and x.backend == "cpu" and x.status == "ok"}
    short = gpu.split()[0]
    rows = []
    for _, g in guessed:
        if g.experiment == name and g.key in measured:
            run, x = measured[g.key]
            params = ", ".join(f"{k}={v}" for k, v in x.params.items() if k != "impl")
            t, p = prediction.measured_s(x), prediction.measured_s(g)
            row = [run.path.name, params, rp.fmt(t * 1e3), rp.fmt(p * 1e3), f"{t / p:.3g}x"]
            if on_gpu:
                m = on_gpu.get(g.key)
                row += [rp.fmt(m * 1e3), f"{p / m - 1:+.0%}"] if m else ["-", "-"]
            rows.append(row)
    head = ["CPU run", "case", "measured here (ms)", f"{short} predicted (ms)", "predicted speed-up"]
    if on_gpu:
        return rp.Table(head + [f"{short} measured (ms)", "prediction error"], rows,
                        f"Predicted on the {gpu} from XLA's count of each CPU program and the GPU's datasheet roofs "
                        "x achieved shares, then measured on it in the merged GPU run: the error is "
                        "predicted / measured - 1")
    return rp.Table(head, rows,
                    f"Predicted, not run: each timed case on an {gpu}, from XLA's count of its program and the "
                    "GPU's datasheet roofs x achieved shares (see How well does the roofline predict?)")


def _compiled_table(pairs) -> rp.Table:
    rows = [[run.label, ", ".join(f"{k}={v}" for k, v in x.params.items() if k != "case"),
             rp.fmt(x.metrics.get("bytes_compiled", float("nan")) / 2**20), rp.libraries(x.metrics),
             x.status if x.status != "ok" else ""] for run, x in pairs]
    return rp.Table(["run", "case", "MiB (XLA memory analysis)", "library calls", "status"], rows,
                    "Compiled for the GPU, not run: what XLA:GPU planned")


def ledger_section(pairs, present: set[str] = frozenset()) -> rp.Section:
    """One row per claim: the rule, the deciding figure and the verdict the rule computed.

    Each experiment named links to its section (and so to its figure) where it ran.
    """
    rows, verdicts = [], []
    runs = list({id(r): r for r, _ in pairs}.values())
    # the same rules on the CPU runs' programs as predicted on an H200 (times only): where a GPU was not run
    cpu_pairs = [(r, x) for r, x in pairs if r.env.get("backend") == "cpu"]
    gpu = prediction.gpu_of(runs)
    guessed = {c.id: v for c, v in claims.ledger(cpu_pairs + prediction.predicted_pairs(runs, gpu))}
    gpu_ran = any(r.env.get("backend") == "gpu" and not r.compiled for r in runs)
    for c, v in claims.ledger(pairs):
        links = ", ".join(f"[{e}](#{e})" if e in present else f"{e} (not run)" for e in c.experiments)
        g = guessed[c.id]
        forecast = "-"
        if g.verdict != "not run" and v.verdict == "not run":
            forecast = f"{g.verdict}: {g.evidence}"
        elif g.verdict != "not run" and gpu_ran:
            # a GPU run is merged: the forecast is now checked, not shown as if it were still open
            forecast = f"predicted {g.verdict}, measured {v.verdict}" + (
                "" if g.verdict == v.verdict else f" (the prediction said: {g.evidence})")
        rows.append([c.id, c.text, links, v.evidence, v.shown, forecast, c.rule_text])
        verdicts.append(v)
    counts = {k: sum(v.verdict == k for v in verdicts) for k in claims.VERDICTS}
    compiled = sum(v.basis == "compiled" for v in verdicts)
    return rp.Section("Claims ledger", "ledger", paragraphs=[
        "Each verdict is computed by the rule beside it from the records of the runs below; "
        + ", ".join(f"{n} {k}" for k, n in counts.items() if n) + "."
        + (f" {compiled} of them rest in part on programs compiled for a GPU that did not run them; their "
           "verdict says so." if compiled else "")],
        tables=[rp.Table(["claim", "the explainer says", "experiments", "deciding figure", "verdict",
                          f"predicted on {gpu}" + ("" if gpu_ran else " (not run)"), "rule"], rows,
                         marks={4: VERDICT_MARKS})])


def _version_warning(sec: rp.Section, name: str, pairs) -> None:
    versions = {rec.benchmark_version for _, rec in pairs if rec.experiment == name}
    if len(versions) > 1:
        sec.paragraphs.insert(0, f"Warning: these runs measured {name} with different methods "
                                 f"(benchmark_version {sorted(versions)}); compare their figures with care.")


def _status_summary(runs) -> str:
    parts = []
    for run in runs:
        recs = results.latest(run.records)
        counts = {s: sum(r.status == s for r in recs) for s in results.STATUSES}
        parts.append(f"{run.label} ({run.path.name}): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "Records per run: " + "; ".join(parts) + ". Raw records: results.jsonl in each run folder."


def speedup_table(pairs) -> rp.Table:
    """GPU/CPU ratio for each case (same experiment and params) measured on both backends.

    Each GPU run is set beside the CPU run of its own host where the merged runs have one
    (``results.cpu_partner``); the last column says which CPU run it was.
    """
    runs = list({id(run): run for run, _ in pairs}.values())
    rows = []
    for grun in [r for r in runs if r.env.get("backend") == "gpu" and not r.compiled]:  # compiled: no times
        crun = results.cpu_partner(grun, runs)
        if crun is None:
            continue
        where = f"{crun.path.name}, " + ("same host" if crun.host == grun.host else "another machine")
        cpu = {rec.key: rec for run, rec in pairs if run is crun and rec.status == "ok"}
        gpu = {rec.key: rec for run, rec in pairs if run is grun and rec.status == "ok"}
        for key in sorted(set(cpu) & set(gpu)):
            c, g = cpu[key], gpu[key]
            metric = next((m for m in _RATE_METRICS if m in c.metrics and m in g.metrics), None)
            if metric:
                ratio = g.metrics[metric] / c.metrics[metric] if c.metrics[metric] else None
            elif "time_s_median" in c.metrics and "time_s_median" in g.metrics:
                metric, ratio = "time_s_median", c.metrics["time_s_median"] / g.metrics["time_s_median"]
            else:
                continue
            params = ", ".join(f"{k}={v}" for k, v in c.params.items())
            rows.append([c.experiment, params, metric, rp.fmt(c.metrics[metric]), rp.fmt(g.metrics[metric]),
                         rp.fmt(ratio) + "x" if ratio else "-", where])
    return rp.Table(["experiment", "case", "metric", "CPU", "GPU", "GPU/CPU", "CPU run"], rows)


def plan_table(runs) -> rp.Table:
    """Each run's planned seconds per experiment (experiments.plan, before it ran) beside the measured ones."""
    rows = []
    for run in runs:
        timing = run.meta.get("timing") or {}
        for name, t in timing.items():
            if t.get("cases"):
                ratio = t["measured_s"] / t["planned_s"] if t.get("planned_s") else None
                rows.append([run.path.name, name, t["cases"], rp.fmt(t["planned_s"]), rp.fmt(t["measured_s"]),
                             rp.fmt(ratio) + "x" if ratio else "-"])
        if timing:
            planned = sum(t.get("planned_s", 0) for t in timing.values())
            measured = sum(t.get("measured_s", 0) for t in timing.values())
            rows.append([run.path.name, "all", sum(t.get("cases", 0) for t in timing.values()), rp.fmt(planned),
                         rp.fmt(measured), rp.fmt(measured / planned) + "x" if planned else "-"])
    return rp.Table(["run", "experiment", "cases", "planned s", "measured s", "measured / planned"], rows,
                    "The plan (python -m experiments.run --dry-run) against the time each experiment took")


def completion_notes(runs) -> list[str]:
    """A sentence for each run that did not finish: cut by its budget, interrupted, or killed."""
    notes = []
    for run in runs:
        c = run.completion
        state = c.get("state", "complete")
        if state == "complete":
            continue
        done = f"{c.get('cases_done', '?')} of {c.get('cases_planned', '?')} cases measured"
        why = {"cut_by_budget": f"cut by its time budget of {c.get('budget_s', 0):.0f} s",
               "interrupted": "interrupted", "running": "stopped without finishing (killed)"}.get(state, state)
        notes.append(f"Run {run.path.name} ({run.label}) was {why}: {done}; the figures below use what it "
                     f"measured, and python -m experiments.run --resume {run.path.name} continues it.")
    return notes


# ---------------------------------------------------------------- rendering


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No Software/date metadata: re-running the report gives byte-identical figures.
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def _md_table(t: rp.Table) -> list[str]:
    def cell(x):
        return str(x).replace("|", "\\|").replace("\n", " ")

    out = [f"*{t.caption}*", ""] if t.caption else []
    out.append("| " + " | ".join(cell(h) for h in t.headers) + " |")
    out.append("|" + "---|" * len(t.headers))
    out += ["| " + " | ".join(cell(x) for x in row) + " |" for row in t.rows]
    return out + [""]


_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _html_text(x) -> str:
    """Escaped text with the markdown links the report writes ([text](target)) made into anchors."""
    return _MD_LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', html.escape(str(x)))


def _html_table(t: rp.Table) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in t.headers)

    def td(i, x):
        mark = t.mark(i, x)
        return f'<td class="v-{mark}">' if mark else "<td>"

    body = "".join("<tr>" + "".join(f"{td(i, x)}{_html_text(x)}</td>" for i, x in enumerate(row)) + "</tr>"
                   for row in t.rows)
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return f'<div class="tw"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:auto;padding:0 1rem;line-height:1.45;color:#222}
img{max-width:100%;height:auto}.tw{overflow-x:auto}table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.2rem .45rem;text-align:left}caption{text-align:left;font-style:italic;padding:.2rem 0}
.takeaway{background:#f3f6fa;border-left:4px solid #4a7ab5;padding:.4rem .7rem}nav li{margin:.1rem 0}
.v-yes{background:#dcefd9;font-weight:600}.v-caveat{background:#fbf1cf;font-weight:600}
.v-no{background:#f6d5d5;font-weight:600}.v-unsure{background:#e6e0f2;font-weight:600}.v-none{color:#777}"""


def render(sections: Sequence[rp.Section], out_dir: Path, sources: Sequence[str]) -> tuple[str, str]:
    """Writes the figures into out_dir; returns (markdown, html)."""
    raw = ", ".join(f"[{s}]({s}/{results.RESULTS_FILE})" for s in sources)
    md = [f"# {TITLE}", "", INTRO, "", f"Runs (raw records): {raw}", "", "## Contents", ""]
    md += [f"- [{s.title}](#{s.anchor})" for s in sections] + [""]
    toc = "".join(f'<li><a href="#{s.anchor}">{html.escape(s.title)}</a></li>' for s in sections)
    body = [f"<h1>{html.escape(TITLE)}</h1><p>{html.escape(INTRO)}</p>",
            f"<p>Runs (raw records): {_html_text(raw)}</p>",
            f"<nav><h2>Contents</h2><ul>{toc}</ul></nav>"]
    for s in sections:
        claims = f" (claims {', '.join(s.claims)})" if s.claims else ""
        md += [f'<a id="{s.anchor}"></a>', f"## {s.title}{claims}", ""]
        body.append(f'<h2 id="{s.anchor}">{html.escape(s.title + claims)}</h2>')
        for p in s.paragraphs:
            md += [p, ""]
            body.append(f"<p>{_html_text(p)}</p>")
        for plot in s.plots:
            png = _png(plot.figure)
            (out_dir / f"{plot.name}.png").write_bytes(png)
            md += [f"![{plot.name}]({plot.name}.png)", "", f"> **Takeaway:** {plot.takeaway}", ""]
            b64 = base64.b64encode(png).decode("ascii")
            body.append(f'<figure><img alt="{plot.name}" src="data:image/png;base64,{b64}"></figure>'
                        f'<p class="takeaway"><b>Takeaway:</b> {html.escape(plot.takeaway)}</p>')
        for t in s.tables:
            md += _md_table(t)
            body.append(_html_table(t))
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(TITLE)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
    return "\n".join(md) + "\n", page


def write_report(dirs: Sequence[str | Path], out_dir: str | Path) -> tuple[Path, Path]:
    """Reads the result folders, writes report.md, report.html and figures into out_dir."""
    runs = [results.read_run(d) for d in dirs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Relative to the report, so the links work wherever the folders are copied together.
    sources = [os.path.relpath(Path(d).resolve(), out.resolve()) for d in dirs]
    md, page = render(build_sections(runs), out, sources)
    (out / "report.md").write_text(md, encoding="utf-8")
    (out / "report.html").write_text(page, encoding="utf-8")
    return out / "report.md", out / "report.html"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"experiments.report: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m experiments.report", description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", metavar="DIR", help="result folders (run.json + results.jsonl)")
    p.add_argument("--out", metavar="OUT", help="where to write (default: DIR if one, else reports/merged)")
    args = p.parse_args(argv)
    out = args.out or (args.dirs[0] if len(args.dirs) == 1 else "reports/merged")
    try:
        md, page = write_report(args.dirs, out)
    except results.ResultsError as err:
        print(f"experiments.report: error: {err}", file=sys.stderr)
        return 2
    print(f"{md}\n{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
