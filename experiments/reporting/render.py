"""The report rendered: Markdown with PNG figures beside it, and one self-contained HTML page.

Re-rendering the same sections gives byte-identical files (no dates, no software stamps). Imports no JAX.
"""

from __future__ import annotations

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

from experiments.reporting.build import INTRO, TITLE, build_sections


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


# the page's CSS, one rule set to a line as the browser reads it (not Python: the noqa below)
_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:auto;padding:0 1rem;line-height:1.45;color:#222}
img{max-width:100%;height:auto}.tw{overflow-x:auto}table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ccc;padding:.2rem .45rem;text-align:left}caption{text-align:left;font-style:italic;padding:.2rem 0}
.takeaway{background:#f3f6fa;border-left:4px solid #4a7ab5;padding:.4rem .7rem}nav li{margin:.1rem 0}
.v-yes{background:#dcefd9;font-weight:600}.v-caveat{background:#fbf1cf;font-weight:600}
.v-no{background:#f6d5d5;font-weight:600}.v-unsure{background:#e6e0f2;font-weight:600}.v-none{color:#777}"""  # noqa: E501


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


def once(dirs: Sequence[str | Path]) -> tuple[list[Path], list[results.Run], list[str]]:
    """The folders and runs to report, each run once (its run id, or its folder where it has none), and a
    sentence for each one named more than once: counted twice, its records would weigh twice in every
    figure and verdict."""
    kept: dict[str, tuple[Path, results.Run]] = {}
    named: dict[str, list[str]] = {}
    for d in dirs:
        run = results.read_run(d)
        ident = run.meta.get("run_id") or str(Path(d).resolve())
        named.setdefault(ident, []).append(str(d))
        kept.setdefault(ident, (Path(d), run))
    notes = [f"Run {ident} was named {len(where)} times ({', '.join(where)}): it is counted once."
             for ident, where in named.items() if len(where) > 1]
    return [d for d, _ in kept.values()], [r for _, r in kept.values()], notes


def write_report(dirs: Sequence[str | Path], out_dir: str | Path) -> tuple[Path, Path]:
    """Reads the result folders (each run once: ``once``), writes report.md, report.html and figures into
    out_dir.

    Raises:
      jaxgpu.results.ResultsError: a folder is not a run, or holds a record that is not one.
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
