"""The report as data: runs in, sections out (each experiment's view, the claims ledger, the predictions).

``build_sections(runs)`` merges the runs once, makes the predicted twins once, and hands each view its
experiment's records; ``experiments.reporting.render`` writes the result. Imports no JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxgpu.records import figures, labels, results

import experiments
from experiments.analysis import claims, pricing
from experiments.analysis.evidence import MissingField, guard
from experiments.contract import Seen
from experiments.reporting import accuracy, frozen, summary

TITLE = "jaxgpu: what does a GPU really buy deep learning?"
INTRO = ("This report measures the 18 claims of a popular explainer, {explainer}, through JAX and XLA: the answer "
         "first, then each claim's verdict, then a section per experiment. Every figure and verdict is computed from "
         "the runs' records; a GPU figure compiled or predicted, not measured, says so.")
# Metrics for which a larger value is better, in the order a speed-up is taken from.
_RATE_METRICS = ("gflops", "gbytes_per_s", "samples_per_s")


def build_sections(runs: Sequence[results.Run], notes: Sequence[str] = ()) -> list[figures.Section]:
    """The report's sections from runs (``notes``: sentences about how they were read, for the Runs section).

    Every record reaches the views guarded (``analysis.evidence``): a section whose records lack a field
    it draws says so in one line, and the others build."""
    runs = [dataclasses.replace(r, records=tuple(guard(x) for x in r.records)) for r in runs]  # plans kept
    runs, older = results.newest_methods(runs)  # one method per experiment (write_report's runs have it already)
    notes = [*notes, *older]
    pairs = results.merge(runs)
    present = {rec.experiment for _, rec in pairs}
    broken: list[str] = []  # what could not be drawn, in one line each (the ledger's first paragraphs)
    gpu, guessed = _drawn(lambda: predictions(runs), "The GPU predictions", broken) or (pricing.gpu_of(runs), [])
    sections = [summary_section(runs, pairs, gpu, broken), ledger_section(pairs, present, guessed, gpu)]
    forecasts = _drawn(lambda: predicted_tables(runs, pairs, guessed, gpu), "The predicted tables", broken) or {}
    for name in experiments.names():
        if name in present:
            sec = experiment_section(name, pairs, [p for p in guessed if p[1].experiment == name])
            if name in forecasts:
                sec.tables.append(forecasts[name])
            sections.append(sec)
    speed = _drawn(lambda: speedup_table(pairs), "The GPU / CPU speed-up table", broken)
    if speed is not None and speed.rows:
        sections.append(figures.Section("GPU / CPU speed-up per case", "speedup", paragraphs=[
            "For every case measured on both a GPU and a CPU run: the GPU's rate over the CPU's "
            "(or the CPU's time over the GPU's), against the CPU of the GPU's own machine where that run is "
            "here."], tables=[speed]))
    before = _drawn(lambda: frozen.section(runs), "The predictions made before the GPU ran", broken)
    if before is not None:
        sections.append(before)
    predicted = _drawn(lambda: accuracy.section(runs), "How well does the roofline predict?", broken)
    if predicted:
        sections.append(predicted)
    sections[1].paragraphs[:0] = completion_notes(runs) + broken
    tables = [figures.env_table(list(runs))]
    plan = plan_table(runs)
    if plan.rows:
        tables.append(plan)
    sections.append(figures.Section("Runs", "runs", tables=tables, paragraphs=[*notes, _status_summary(runs)]))
    return sections


def summary_section(runs, pairs, gpu: str, broken: list[str]) -> figures.Section:
    """What a GPU buys, first: ``summary.rows`` as a table, the machine named, each row's source below."""
    rows = _drawn(lambda: summary.rows(runs, pairs, gpu), "The summary", broken) or []
    cpu = next((r for r in runs if r.env.get("backend") == "cpu" and not r.compiled), None)
    hw = cpu.hardware if cpu else None
    machine = cpu.machine if cpu else "this machine"
    peak = (f", fp32 peak {labels.si(hw.peak_flops('fp32'), 'FLOP/s')} ({hw.kind})" if hw and hw.peak_flops("fp32")
            else "")
    sec = figures.Section("What a GPU buys: the answer", "summary", paragraphs=[
        f"\"Here\" is the machine this study ran on, {machine}{peak}, measured (run {cpu.path.name if cpu else '-'}). "
        f"The GPU column is the {gpu}: measured where a GPU run is merged; otherwise \"compiled, not run\" (XLA "
        "compiled the program for that GPU and its memory plan is read) or \"predicted, not run\" (that compiled "
        "program priced on the GPU's datasheet rates), as the last column says."])
    busy = _unsteady(cpu, rows)
    sec.lead = busy  # a busy machine's warning comes before the answer it touches; the rest after it
    if rows:
        sec.tables.append(summary.table(rows, machine, gpu))
    sec.exports["summary.json"] = {"machine": machine, "gpu": gpu, "rows": [r.as_dict() for r in rows],
                                   **({"unsteady": busy} if busy else {})}
    return sec


def _unsteady(cpu, rows) -> str:
    """A sentence, first, where the measured run's own probes say the machine was not steady (another job on its
    cores): which rows that touches and what to do; "" for a steady run."""
    if cpu is None:
        return ""
    clauses = [exp.pricing.unsteady([r for r in cpu.records if r.experiment == exp.name])
               for exp in map(experiments.load, experiments.names()) if exp.pricing.unsteady]
    said = "; ".join(c for c in clauses if c)
    if not said:
        return ""
    touched = [r.topic for r in rows if r.here_value is not None]
    return (f"This machine was not steady during run {cpu.path.name}: {said}. The figures measured here"
            + (f" ({'; '.join(touched)})" if touched else "") + " may read slow (another job on its cores). Re-run "
            "the study on an idle machine before quoting them.")


def _drawn(make, what: str, broken: list[str]):
    """``make()``, or None with a line in ``broken`` where a record lacks a field it reads."""
    try:
        return make()
    except MissingField as err:
        broken.append(f"{what} could not be drawn from the records: {err}.")
        return None


# How the HTML ledger colours each verdict (the words stay: the Markdown shows only them).
VERDICT_MARKS = {"supported": "yes", "supported with caveats": "caveat", "contradicted": "no",
                 "inconclusive": "unsure", "not run": "none"}


def experiment_section(name: str, pairs, predicted=()) -> figures.Section:
    """An experiment's section: its view of the measured records, then what compiled runs planned.

    A compiled record (a program compiled for a GPU this machine does not have) never enters
    the measured figures: the view's ``compiled`` part shows it, labelled, or a plain table.
    ``predicted``: the CPU cases as predicted on a GPU (``pricing.predicted_pairs``), which the view
    draws as one more run, its label saying "predicted, not run"."""
    view = experiments.view(name)
    mine = [p for p in pairs if p[1].experiment == name]
    measured = [p for p in mine if not p[1].compiled]
    compiled = [p for p in mine if p[1].compiled]
    try:
        sec = view.section(Seen(tuple(measured), tuple(predicted), claims.for_experiment(name)))
    except MissingField as err:  # a damaged or older record: this section says so, the others build
        return figures.Section(f"{name}: {experiments.load(name).description}", name, claims.for_experiment(name),
                          paragraphs=[f"This section could not be drawn from its records: {err}. The records are "
                                      "in results.jsonl; the other sections and the ledger do not need them."])
    if not measured:  # only compiled records: the measured figures would be empty frames
        sec.plots, sec.tables = [], []
    if compiled:
        try:
            if view.compiled is not None:
                view.compiled(sec, compiled)
            else:
                sec.tables.append(_compiled_table(compiled))
        except MissingField as err:
            sec.paragraphs.append(f"What runs compiled for a GPU planned could not be drawn: {err}.")
    spec = experiments.load(name)
    sec.lead = sec.lead or f"{spec.description[0].upper()}{spec.description[1:]}."
    return sec


def predictions(runs: Sequence[results.Run]) -> tuple[str, list[tuple[results.Run, results.Record]]]:
    """The GPU the CPU runs' programs are predicted on (a merged GPU run's own, else an H200) and their timed
    cases as predicted there: the report's predicted twins, made once per report."""
    gpu = pricing.gpu_of(list(runs))
    return gpu, pricing.predicted_pairs(list(runs), gpu)


def predicted_tables(runs: Sequence[results.Run], pairs=None, guessed=None, gpu: str | None = None
                     ) -> dict[str, figures.Table]:
    """Per experiment: its timed CPU cases predicted on ``gpu`` (``guessed``, as ``predictions`` makes them),
    with that GPU's measured time and the prediction's error where it was merged."""
    pairs = results.merge(runs) if pairs is None else pairs
    if guessed is None:
        gpu, guessed = predictions(runs)
    on_gpu = pricing.measured_on(list(runs), gpu)
    tables = {name: _predicted_table(name, pairs, guessed, gpu, on_gpu) for name in {r.experiment for _, r in guessed}}
    return {name: t for name, t in tables.items() if t.rows}


def _predicted_table(name: str, pairs, guessed, gpu: str, on_gpu: dict[str, float]) -> figures.Table:
    """The experiment's timed CPU cases beside what they should take on ``gpu`` (predicted); where a merged
    run of that GPU measured the same case, its time and the prediction's error beside them."""
    measured = {x.key: (run, x) for run, x in pairs if x.experiment == name and not x.compiled
                and x.backend == "cpu" and x.status == "ok"}
    short = gpu.split()[0]
    rows = []
    for _, g in guessed:
        if g.experiment == name and g.key in measured:
            run, x = measured[g.key]
            params = labels.case_label(x.params, ("impl",))
            t, p = pricing.measured_s(x), pricing.measured_s(g)
            row = [run.path.name, params, labels.fmt(t * 1e3), labels.fmt(p * 1e3), f"{t / p:.3g}x"]
            if on_gpu:
                m = on_gpu.get(g.key)
                row += [labels.fmt(m * 1e3), f"{p / m - 1:+.0%}"] if m else ["-", "-"]
            rows.append(row)
    head = ["CPU run", "case", "measured here (ms)", f"{short} predicted (ms)", "predicted speed-up"]
    if on_gpu:
        return figures.Table(head + [f"{short} measured (ms)", "prediction error"], rows,
                        f"Predicted on the {gpu} from XLA's count of each CPU program and the GPU's datasheet roofs "
                        "x achieved shares, then measured on it in the merged GPU run: the error is "
                        "predicted / measured - 1")
    return figures.Table(head, rows,
                    f"Predicted, not run: each timed case on {labels.a_or_an(gpu)} {gpu}, from XLA's count of its "
                    "program and the GPU's datasheet roofs x achieved shares (see How well does the roofline predict?)")


def _compiled_table(pairs) -> figures.Table:
    rows = [[run.label, labels.case_label(x.params, ("case",)),
             labels.fmt(x.metrics.get("bytes_compiled", float("nan")) / 1e6), labels.libraries(x.metrics),
             x.status if x.status != "ok" else ""] for run, x in pairs]
    return figures.Table(["run", "case", "MB (XLA memory analysis)", "library calls", "status"], rows,
                    "Compiled for the GPU, not run: what XLA:GPU planned")


EXPLAINER = ('"How does a GPU work for deep learning?" (Amit Shekhar, Outcome School)',
             "https://outcomeschool.com/blog/how-does-a-gpu-work-for-deep-learning")


def first_clause(evidence: str) -> str:
    """The deciding figure as a ledger card shows it: the evidence up to its first "; " outside brackets (a rule
    joins its figures with "; "); the rest is folded under the claim."""
    depth = 0
    for i, ch in enumerate(evidence):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and evidence.startswith("; ", i):
            return evidence[:i]
    return evidence


def ledger_rows(pairs, guessed_pairs, gpu: str) -> list[dict]:
    """Every claim as the ledger shows it and ledger.json holds it: the verdict on the merged runs, the same
    rule on the CPU programs as predicted on ``gpu`` (where the GPU was not run, or beside what it measured),
    the deciding figure, the claim's wording, the rule, its experiments, and whether a small profile decided it."""
    runs = list({id(r): r for r, _ in pairs}.values())
    cpu_pairs = [(r, x) for r, x in pairs if r.env.get("backend") == "cpu"]
    guessed = {c.id: v for c, v in claims.ledger(cpu_pairs + list(guessed_pairs))}
    gpu_ran = any(r.env.get("backend") == "gpu" and not r.compiled for r in runs)
    tiny = {r.path.name for r in runs if r.meta.get("config", {}).get("profile") == "tiny"}
    out = []
    for c, v in claims.ledger(pairs):
        g = guessed[c.id]
        predicted = "-"
        if g.verdict != "not run" and (v.verdict == "not run" or gpu_ran):
            predicted = g.verdict
        small = sorted({r.path.name for r, x in pairs if r.path.name in tiny and x.experiment in c.experiments})
        evidence = v.evidence.replace("; " + claims.GPU_HINT, "").replace(claims.GPU_HINT, "needs a GPU run")
        verdict = v.shown + (f" (indicative only: profile tiny, {', '.join(small)})" if small and
                             v.verdict != "not run" else "")
        out.append({"claim": c.id, "text": c.text, "verdict": v.verdict, "shown": verdict, "basis": v.basis,
                    "evidence": evidence, "deciding": first_clause(evidence),
                    "predicted_on": gpu, "predicted_verdict": (g.verdict + (" (indicative only: profile tiny)" if small
                                                                            else "")) if predicted != "-" else None,
                    "predicted_evidence": g.evidence if predicted != "-" else None, "rule": c.rule_text,
                    "experiments": list(c.experiments), "indicative_only": bool(small)})
    return out


def ledger_section(pairs, present: set[str] | None = None, guessed_pairs=None, gpu: str | None = None
                   ) -> figures.Section:
    """One row per claim: claim, verdict, the verdict predicted on a GPU, the deciding figure; the explainer's
    wording, the rule and its experiments folded under each claim (``ledger_rows``; ledger.json and .csv)."""
    runs = list({id(r): r for r, _ in pairs}.values())
    present = {rec.experiment for _, rec in pairs} if present is None else present
    if guessed_pairs is None:
        gpu, guessed_pairs = predictions(runs)
    items = ledger_rows(pairs, guessed_pairs, gpu)
    gpu_ran = any(r.env.get("backend") == "gpu" and not r.compiled for r in runs)
    rows, details = [], []
    decided = [it for it in items if it["verdict"] != "not run"]
    # every verdict from a tiny run: said once above the table, not on each card
    all_tiny = bool(decided) and all(it["indicative_only"] for it in decided)
    plain = (lambda v: v.split(" (indicative only")[0]) if all_tiny else (lambda v: v)
    for it in items:
        links = ", ".join(f"[{e}](#{e})" if e in present else f"{e} (not run)" for e in it["experiments"])
        rows.append([f"{it['claim']}: {it['text']}", plain(it["shown"]), plain(it["predicted_verdict"] or "-"),
                     it["deciding"]])
        rest = it["evidence"][len(it["deciding"]):].removeprefix("; ")
        details.append((f"Also: {rest}. " if rest else "") + f"Rule: {it['rule']}. Experiments: {links}."
                       + (f" Predicted on {gpu}, not run: {it['predicted_evidence']}." if it["predicted_evidence"]
                          else ""))
    counts = {k: sum(it["verdict"] == k for it in items) for k in claims.VERDICTS}
    compiled = sum(it["basis"] == "compiled" for it in items)
    profiles = sorted({str(r.meta.get("config", {}).get("profile", "?")) for r in runs
                       if not (r.predicted or r.compiled)})
    lead = (", ".join(f"{n} {k}" for k, n in counts.items() if n).capitalize() + ". Each verdict is computed from "
            "the runs' records by the rule folded under its claim." + (" Every one is indicative only: the runs used "
                                                                      "the tiny profile." if all_tiny else ""))
    paras = [f"{compiled} verdicts rest in part on programs compiled for a GPU that did not run them, and say so."
             ] if compiled else []
    if counts["not run"] and not gpu_ran:
        paras.append(f"A verdict \"not run\" needs a GPU run: {claims.GPU_HINT.split(': ', 1)[1]}. Until one is "
                     f"merged, the third column applies the same rule to this CPU's programs predicted on {gpu} (not "
                     "run).")
    if len(profiles) > 1:
        paras.append(f"These runs used different profiles ({', '.join(profiles)}): a verdict that compares them "
                     "compares different sizes.")
    return figures.Section("Claims ledger", "ledger", paragraphs=paras, lead=lead,
                      tables=[figures.Table(["claim", "verdict", f"predicted on {gpu}" + ("" if gpu_ran else
                                                                                     " (not run)"),
                                        "deciding figure"], rows, marks={1: VERDICT_MARKS, 2: VERDICT_MARKS},
                                       details=details, details_title="The rules", id="ledger-table")],
                      exports={"ledger.json": items})


def _status_summary(runs) -> str:
    parts = []
    for run in runs:
        recs = results.latest(run.records)
        counts = {s: sum(r.status == s for r in recs) for s in results.STATUSES}
        parts.append(f"{run.label} ({run.path.name}): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "Records per run: " + "; ".join(parts) + ". Raw records: results.jsonl in each run folder."


def speedup_table(pairs) -> figures.Table:
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
            params = labels.case_label(c.params)
            rows.append([c.experiment, params, metric, labels.fmt(c.metrics[metric]), labels.fmt(g.metrics[metric]),
                         labels.fmt(ratio) + "x" if ratio else "-", where])
    return figures.Table(["experiment", "case", "metric", "CPU", "GPU", "GPU/CPU", "CPU run"], rows)


def plan_table(runs) -> figures.Table:
    """Each run's planned seconds per experiment (experiments.harness.budget, before it ran) beside the measured."""
    rows = []
    for run in runs:
        timing = run.meta.get("timing") or {}
        for name, t in timing.items():
            if t.get("cases"):
                ratio = t["measured_s"] / t["planned_s"] if t.get("planned_s") else None
                rows.append([run.path.name, name, t["cases"], labels.fmt(t["planned_s"]), labels.fmt(t["measured_s"]),
                             labels.fmt(ratio) + "x" if ratio else "-"])
        if timing:
            planned = sum(t.get("planned_s", 0) for t in timing.values())
            measured = sum(t.get("measured_s", 0) for t in timing.values())
            rows.append([run.path.name, "all", sum(t.get("cases", 0) for t in timing.values()), labels.fmt(planned),
                         labels.fmt(measured), labels.fmt(measured / planned) + "x" if planned else "-"])
    return figures.Table(["run", "experiment", "cases", "planned s", "measured s", "measured / planned"], rows,
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
        why = {"cut_by_budget": f"cut by its time budget of {c.get('budget_s') or 0:.0f} s",
               "interrupted": "interrupted", "running": "stopped without finishing (killed)"}.get(state, state)
        notes.append(f"Run {run.path.name} ({run.label}) was {why}: {done}; the figures below use what it "
                     f"measured, and python -m experiments.run --resume {run.path.name} continues it.")
    return notes


