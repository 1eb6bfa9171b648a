"""``python -m experiments.report DIR [DIR ...] [--out OUT]``: the report of one or many runs.

Reads result folders only (a GPU run made on another machine is reported exactly like a
local one) and writes ``report.md``, a self-contained ``report.html`` (figures embedded)
and the figures as PNG into OUT (default: the folder itself when there is one, else
``reports/merged``). Every section comes from its experiment's view (``experiments.<name>.view``),
and nothing here imports JAX: a report can be made where JAX is not installed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from jaxgpu.records import results

from experiments import cli
from experiments.reporting.build import build_sections  # noqa: F401 - the report as data, for notebooks
from experiments.reporting.render import once, write_report

COMMAND = "experiments.report"

__all__ = ["STUDY_RUNS", "build_sections", "closing_lines", "main", "write_report"]

# The committed runs under reports/ that reports/study merges (README: how each was made)
STUDY_RUNS = ("cpu-reference", "cpu-multidevice", "compiled-h200", "compiled-h100", "priced-published")




def closing_lines(out_dir: str | Path) -> list[str]:
    """What a person wants when a report is written: where to open it, the ledger's counts and the summary's
    rows (read back from ledger.json and summary.json beside it)."""
    out = Path(out_dir)
    lines = [f"open {out / 'report.html'} in a browser (Markdown: {out / 'report.md'})"]
    try:
        ledger = json.loads((out / "ledger.json").read_text())
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return lines
    from experiments.analysis.claims import VERDICTS

    if summary.get("unsteady"):  # before the answer: its figures may be a busy machine's
        lines.insert(0, f"warning: {summary['unsteady']}")
    counts = {v: sum(item["verdict"] == v for item in ledger) for v in VERDICTS}
    lines.append("claims: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n))
    for r in summary.get("rows", []):
        factor = f" ({r['factor']})" if r["factor"] != "-" else ""
        shown = r.get("shown", r["basis"])
        lines.append(f"  {r['topic']}: here {r['here']}; {summary['gpu']} {r['gpu']}{factor}, {shown}")
    return lines


def main(argv: list[str] | None = None) -> int:
    prog = cli.prog(COMMAND)
    p = cli.Parser(prog=prog, description=__doc__.split("\n\n")[0].replace(f"python -m {COMMAND}", prog))
    p.add_argument("dirs", nargs="+", metavar="DIR", help="result folders (run.json + results.jsonl)")
    p.add_argument("--out", metavar="OUT", help="where to write (default: DIR if one, else reports/merged)")
    p.add_argument("--freeze", metavar="FOLDER",
                   help="also add the runs' predictions for an H100 SXM and an H200 SXM to FOLDER as a new file "
                        "(never rewriting one: experiments.reporting.frozen), e.g. reports/predictions")
    args = p.parse_args(argv)
    out = args.out or (args.dirs[0] if len(args.dirs) == 1 else "reports/merged")
    try:
        md, page = write_report(args.dirs, out)
    except results.ResultsError as err:
        return cli.fail(cli.name(COMMAND), str(err))
    except OSError as err:  # the folders were fine: the report could not be written
        if not Path(out).is_dir():  # a place no report can go: the input's fault, as experiments.run --out
            why = os.strerror(err.errno) if err.errno else (err.strerror or str(err))
            return cli.fail(cli.name(COMMAND), f"cannot create the report folder {out}: {why}")
        print(f"{cli.name(COMMAND)}: error: {err.strerror or err}", file=sys.stderr)  # a full disk, say
        return 1
    print(f"{md}\n{page}")
    if args.freeze:
        from experiments.reporting import frozen

        try:
            print(frozen.write(frozen.freeze(once(args.dirs)[1]), args.freeze))
        except FileExistsError as err:
            print(f"experiments.report: {err}", file=sys.stderr)
    print("\n".join(closing_lines(out)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
