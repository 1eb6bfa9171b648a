"""The report rendered: Markdown with PNG figures beside it, and one self-contained HTML page.

Re-rendering the same sections gives byte-identical files (no dates, no software stamps). Imports no JAX.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from jaxgpu.records import figures, results

from experiments.reporting.build import EXPLAINER, INTRO, TITLE, build_sections


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # 2x resolution (text stays sharp on a phone's or a laptop's dense screen); no Software/date metadata:
    # re-running the report gives byte-identical figures
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


DPI = 200


def alt_text(plot: figures.Plot) -> str:
    """What a figure shows, for a reader who cannot see it: its title, its axes and its takeaway."""
    parts = []
    for ax in plot.figure.get_axes():
        title, x, y = ax.get_title(), ax.get_xlabel(), ax.get_ylabel()
        if title or x or y:
            parts.append(" ".join(filter(None, [title + ":" if title else "", f"{y} against {x}" if x and y else
                                                y or x])))
    return "; ".join(parts) + ". " + plot.takeaway if parts else plot.takeaway


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _md_table(t: figures.Table) -> list[str]:
    out = [f"*{t.caption}*", ""] if t.caption else []
    out.append("| " + " | ".join(_cell(h) for h in t.headers) + " |")
    out.append("|" + "---|" * len(t.headers))
    out += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in t.rows]
    return out + [""]


_MD_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _html_text(x) -> str:
    """Escaped text with the markdown links the report writes ([text](target)) made into anchors."""
    return _MD_LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', html.escape(str(x)))


def _md_text(x) -> str:
    return _MD_LINK.sub(lambda m: m.group(1), str(x))


def _html_table(t: figures.Table) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in t.headers)

    def td(i, x, r):
        mark = t.mark(i, x)
        classes = [f"v-{mark}"] if mark else []
        if t.id == "ledger-table" and i in (1, 2):
            classes.append("verdict" if i == 1 else "pred" if x != "-" else "pred none")
        if t.id == "summary-table" and i == 3 and x == "-":
            classes.append("none")
        if t.id == "ledger-table" and i == 1 and "compiled" in str(x):
            classes.append("compiled")
        text = _html_text(x)
        if i == 0 and r < len(t.details):
            text = f"<details><summary>{text}</summary><p>{_html_text(t.details[r])}</p></details>"
        return (f'<td class="{" ".join(classes)}">' if classes else "<td>") + text + "</td>"

    body = "".join("<tr>" + "".join(td(i, x, r) for i, x in enumerate(row)) + "</tr>" for r, row in enumerate(t.rows))
    # the caption above the table's scroll box, not a <caption> in it: a caption takes the table's width, and on a
    # phone the lines of a wide table's caption ran past the screen inside the box
    cap = f'<p class="cap">{html.escape(t.caption)}</p>' if t.caption else ""
    ident = f' id="{t.id}"' if t.id else ""
    return f'{cap}<div class="tw"><table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _csv(t: figures.Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.headers)
    w.writerows([[_md_text(x) for x in row] for row in t.rows])
    return buf.getvalue()


# the page's CSS, one rule set to a line as the browser reads it (not Python: the noqa below). Wide screens set
# a section's figure beside its words; on a phone the ledger's rows become cards, the verdict under the claim.
_CSS = """body{font-family:system-ui,sans-serif;max-width:78rem;margin:auto;padding:0 1rem;line-height:1.45;color:#222}
img{max-width:100%;height:auto;display:block}.tw{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.2rem .45rem;text-align:left;vertical-align:top}p.cap{font-style:italic;font-size:.9rem;margin:.6rem 0 .2rem}
.takeaway{background:#f3f6fa;border-left:4px solid #4a7ab5;padding:.4rem .7rem;margin:.4rem 0}figure{margin:0}
details.more{margin:.4rem 0 1rem}details.more>summary,details.toc>summary{cursor:pointer;color:#2a5a95}
.v-yes{background:#dcefd9;font-weight:600}.v-caveat{background:#fbf1cf;font-weight:600}
.v-no{background:#f6d5d5;font-weight:600}.v-unsure{background:#e6e0f2;font-weight:600}.v-none{color:#777}
td.pred{font-style:italic;border-style:dashed;font-weight:400}td.compiled{border:2px dashed #888}
#summary table{font-size:.95rem}#summary td:first-child{font-weight:600}section{border-top:1px solid #ddd;margin-top:1rem}
p.note{font-size:.9rem;color:#444}#summary p.lead{background:#fbf1cf;padding:.3rem .6rem;font-size:.9rem}
@media (min-width:701px){#ledger-table,#summary-table{width:100%;table-layout:fixed}#ledger-table th:nth-child(1){width:40%}
#ledger-table th:nth-child(2){width:14%}#ledger-table th:nth-child(3){width:9%}#summary-table th:nth-child(1){width:25%}
#summary-table th:nth-child(2),#summary-table th:nth-child(3){width:18%}#summary-table th:nth-child(4){width:6%}}
@media (min-width:1000px){.pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.25fr);gap:1.5rem;align-items:start}}
@media (max-width:700px){h1{font-size:1.45rem;margin:.8rem 0 .5rem}h2{font-size:1.25rem;margin:.7rem 0 .4rem}#ledger-table thead,#summary-table thead{display:none}
#ledger-table tr,#summary-table tr{display:block;border-top:2px solid #999;padding:.15rem 0}#ledger-table{line-height:1.25}
#ledger-table td,#summary-table td{display:block;border:none;padding:.05rem .2rem;box-sizing:border-box}#ledger>p{font-size:.9rem}#summary p.lead{font-size:.8rem}
#ledger-table td.verdict,#ledger-table td.pred{display:inline-block;margin-right:.4rem}#ledger-table td.pred.none{display:none}
#ledger-table td.pred:before{content:"GPU, predicted: "}#ledger-table td:last-child{display:inline;font-size:.8rem}
#summary-table tr{display:flex;flex-wrap:wrap;align-items:baseline}#summary-table td:first-child{flex:0 0 calc(100% - 4.5rem)}
#summary-table td:nth-child(4){order:-1;flex:0 0 4.5rem;text-align:right;font-weight:600;margin-left:auto}
#summary-table td:first-child{order:-2}#summary-table td.none{visibility:hidden}
#summary-table td:nth-child(2),#summary-table td:nth-child(3){margin-right:.5rem}
#summary-table td:nth-child(2):before{content:"here: "}#summary-table td:nth-child(3):before{content:"GPU: "}
#summary table{font-size:.9rem}#summary-table td:nth-child(5){flex:0 0 100%;color:#555;font-size:.8rem}}"""  # noqa: E501

def _css(sections) -> str:
    """The page's style, its summary cards naming the GPU they compare with ("H200 SXM: 53.4 TFLOP/s") as the
    table's column does on a wide screen."""
    summary = next((s for s in sections if s.anchor == "summary" and s.tables), None)
    gpu = summary.tables[0].headers[2] if summary and len(summary.tables[0].headers) > 2 else "GPU"
    card = re.sub(r'[^\w .,/()+-]', "", gpu)  # a CSS string: no quotes or backslashes from the header
    return _CSS.replace('content:"GPU: "', f'content:"{card}: "')


# the sections shown whole: the answer and the ledger; every other section shows its first paragraph and figure
_WHOLE = ("summary", "ledger")


def _figure(plot: figures.Plot, out_dir: Path) -> tuple[list[str], tuple[str, str]]:
    png = _png(plot.figure)
    (out_dir / f"{plot.name}.png").write_bytes(png)
    alt = alt_text(plot)
    md = [f"[![{_cell(alt)}]({plot.name}.png)]({plot.name}.png)", "", f"> **Takeaway:** {plot.takeaway}", ""]
    b64 = base64.b64encode(png).decode("ascii")
    figure = (f'<figure><a href="{plot.name}.png" title="full size"><img alt="{html.escape(alt)}" '
              f'src="data:image/png;base64,{b64}"></a></figure>')
    return md, (figure, f'<p class="takeaway"><b>Takeaway:</b> {html.escape(plot.takeaway)}</p>')


def _table_files(s: figures.Section, t: figures.Table, i: int, out_dir: Path) -> str:
    """Writes a folded table as CSV beside the report; returns its file name."""
    name = f"{s.anchor}-{i + 1}.csv" if len(s.tables) > 1 else f"{s.anchor}.csv"
    (out_dir / "tables").mkdir(exist_ok=True)
    (out_dir / "tables" / name).write_text(_csv(t), encoding="utf-8")
    return f"tables/{name}"


def _section(s: figures.Section, out_dir: Path) -> tuple[list[str], list[str]]:
    claims = f" (claims {', '.join(s.claims)})" if s.claims else ""
    md = [f'<a id="{s.anchor}"></a>', f"## {s.title}{claims}", ""]
    head = f'<section id="{s.anchor}"><h2>{html.escape(s.title + claims)}</h2>'
    figures = [_figure(p, out_dir) for p in s.plots]
    if s.anchor in _WHOLE:  # the lead (if any) above the table, every other paragraph below it
        body = [head] + [f'<p class="lead">{_html_text(p)}</p>' for p in [s.lead] if p]
        md += sum(([p, ""] for p in [s.lead] if p), [])
        for t in s.tables:
            md += _md_table(t)
            body.append(_html_table(t))
            if t.details:
                md += [f"<details><summary>{t.details_title}</summary>", ""]
                md += [f"- {row[0].split(':')[0]}: {d}" for row, d in zip(t.rows, t.details)]
                md += ["", "</details>", ""]
        notes = "".join(f'<p class="note">{_html_text(p)}</p>' for p in s.paragraphs)
        md += sum(([p, ""] for p in s.paragraphs), [])
        if notes and s.anchor == "summary":  # how to read the answer: folded, so the ledger stays near on a phone
            notes = f'<details class="more"><summary>How to read this table</summary>{notes}</details>'
        body.append(notes)
        for fmd, fpage in figures:
            md += fmd
            body.append("".join(fpage))
        return md, body + ["</section>"]
    lead, rest = ([s.lead], s.paragraphs) if s.lead else (s.paragraphs[:1], s.paragraphs[1:])
    words = "".join(f"<p>{_html_text(p)}</p>" for p in lead)
    md += sum(([p, ""] for p in lead), [])
    body = [head]
    if figures:  # the words and the takeaway beside the figure (under it on a narrow screen)
        md += figures[0][0]
        figure, takeaway = figures[0][1]
        body.append(f'<div class="pair"><div>{words}{takeaway}</div><div>{figure}</div></div>')
    else:
        body.append(words)
    more = len(rest) + len(figures[1:]) + len(s.tables)
    if more:
        what = ", ".join(f"{n} {w}{'s' if n > 1 else ''}" for n, w in ((len(rest), "note"), (len(figures) - 1 if
                         figures else 0, "figure"), (len(s.tables), "table")) if n)
        md += ["<details><summary>More: " + what + "</summary>", ""]
        fold = [f'<details class="more"><summary>More: {what}</summary>']
        for p in rest:
            md += [p, ""]
            fold.append(f"<p>{_html_text(p)}</p>")
        for fmd, fpage in figures[1:]:
            md += fmd
            fold.append("".join(fpage))
        for i, t in enumerate(s.tables):
            path = _table_files(s, t, i, out_dir)
            md += _md_table(t) + [f"([{path}]({path}))", ""]
            fold.append(_html_table(t) + f'<p><a href="{path}">{path}</a> ({len(t.rows)} rows)</p>')
        md += ["</details>", ""]
        body.append("".join(fold) + "</details>")
    return md, body + ["</section>"]


def render(sections: Sequence[figures.Section], out_dir: Path, sources: Sequence[str]) -> tuple[str, str]:
    """Writes the figures, the folded tables as CSV and each section's exports into out_dir; returns
    (markdown, html)."""
    raw = ", ".join(f"[{s}]({s}/{results.RESULTS_FILE})" for s in sources)
    explainer = f"[{EXPLAINER[0]}]({EXPLAINER[1]})"
    intro = INTRO.format(explainer=explainer)
    md = [f"# {TITLE}", "", intro, ""]
    toc = "".join(f'<li><a href="#{s.anchor}">{html.escape(s.title)}</a></li>' for s in sections)
    body = [f"<h1>{html.escape(TITLE)}</h1><p>{_html_text(intro)}</p>"]
    for i, s in enumerate(sections):
        if i == 2:  # after the answer and the ledger: where to go next, folded
            md += ["<details><summary>Contents</summary>", ""] + [f"- [{x.title}](#{x.anchor})" for x in sections]
            md += ["", "</details>", ""]
            body.append(f'<details class="toc"><summary>Contents</summary><ul>{toc}</ul></details>')
        smd, sbody = _section(s, out_dir)
        md += smd
        body += sbody
        for name, data in s.exports.items():
            (out_dir / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if s.anchor == "ledger" and s.tables:
            (out_dir / "ledger.csv").write_text(_csv(s.tables[0]), encoding="utf-8")
    md += [f"Runs (raw records): {raw}", ""]
    body.append(f"<p>Runs (raw records): {_html_text(raw)}</p>")
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(TITLE)}</title><style>{_css(sections)}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
    return "\n".join(md) + "\n", page


def once(dirs: Sequence[str | Path]) -> tuple[list[Path], list[results.Run], list[str]]:
    """The folders and runs to report, each run once (its run id, or its folder where it has none), each
    experiment's records of its newest method only (``results.newest_methods``), and a sentence for each run
    named more than once (counted twice, its records would weigh twice in every figure and verdict) and for
    each run's records left out."""
    kept: dict[str, tuple[Path, results.Run]] = {}
    named: dict[str, list[str]] = {}
    for d in dirs:
        run = results.read_run(d)
        ident = run.meta.get("run_id") or str(Path(d).resolve())
        named.setdefault(ident, []).append(str(d))
        kept.setdefault(ident, (Path(d), run))
    notes = [f"Run {ident} was named {len(where)} times ({', '.join(where)}): it is counted once."
             for ident, where in named.items() if len(where) > 1]
    runs, older = results.newest_methods([r for _, r in kept.values()])
    return [d for d, _ in kept.values()], runs, notes + older


def write_report(dirs: Sequence[str | Path], out_dir: str | Path) -> tuple[Path, Path]:
    """Reads the result folders (each run once: ``once``), writes report.md, report.html and figures into
    out_dir.

    Raises:
      jaxgpu.records.results.ResultsError: a folder is not a run, or holds a record that is not one.
      OSError: the report could not be written (the message names the file).
    """
    dirs, runs, notes = once(dirs)
    for note in notes:
        print(f"experiments.report: {note}", file=sys.stderr)
    out = Path(out_dir)
    # Relative to the report, so the links work wherever the folders are copied together.
    sources = [os.path.relpath(Path(d).resolve(), out.resolve()) for d in dirs]
    sections = build_sections(runs, notes)
    try:
        out.mkdir(parents=True, exist_ok=True)
        md, page = render(sections, out, sources)
        for name, text in (("report.md", md), ("report.html", page)):
            tmp = out / f"{name}.tmp"  # renamed over the old one: a full disk leaves the last report whole
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, out / name)
    except OSError as err:
        raise OSError(err.errno, f"cannot write the report into {out}: {err.strerror or err}") from None
    return out / "report.md", out / "report.html"
