"""The figures the docs state, written from the records: ``python -m experiments.docs_figures [--check]``.

The README, docs/api.md and docs/guide.md say how many published cases there are, how the committed runs were made
and how far the GPU column's predictions miss. Each such sentence is a ``PHRASES`` entry with slots (``{cases}``)
that ``figures`` fills from the data (``jaxgpu.pricing.published``), the committed runs' run.json and the study's
report (the view of their records). The command writes them where they differ; ``--check`` only names them (exit
1). experiments.reprice runs it after rebuilding the study, so a re-price leaves no figure behind.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from experiments import cli

COMMAND = "experiments.docs_figures"
ROOT = Path(__file__).resolve().parents[1]

# (doc, sentence): each slot a name of ``figures``; the rest must stand in the doc as written (its spaces may be any
# white space, a line break among them)
PHRASES = (
    ("README.md", "the {cases} published GPU measurements"),
    ("README.md", "checked against {cases} measurements"),
    ("README.md", "every experiment: {reference_cases} cases in {reference_minutes} minutes"),
    ("README.md", "priced both ways: {published_cases} cases in {published_minutes} minutes"),
    ("README.md", "out of sample, the GPU plan's predictions missed by a median {first_median}% ({first_n} first "
                  "prices); in sample, the CPU plan's by {cpu_median}%"),
    ("README.md", "over the {first_n} cases with one, median error {first_median}%, {first_within}% within 15%, "
                  "predictions {first_lean}% {first_way} on the geometric mean"),
    ("README.md", "of the {dev_n} scored cases (the development set, whose errors shaped the model): median error "
                  "{dev_median}%, {dev_within}% within 15%, predictions {dev_lean}% {dev_way} on the geometric mean"),
    ("README.md", "the {kernels} GEMM and memory cases and {serving_one} of the {serving} decode and prefill steps"),
    ("docs/api.md", "over the {first_n} cases with one"),
    ("docs/api.md", "could apart), median error {first_median}%, {first_within}% within 15%, predictions "
                    "{first_lean}% {first_way} on the geometric mean"),
    ("docs/api.md", "of the {dev_n} scored cases (the development set, whose errors shaped the model): median error "
                    "{dev_median}%, {dev_within}% within 15%, predictions {dev_lean}% {dev_way} on the geometric "
                    "mean"),
    ("docs/api.md", "miss by a median of {cpu_median}%"),
    ("docs/adding-a-published-case.md", "(the committed run: {published_seconds} s)"),
    ("docs/guide.md", "against {cases} published"),
    ("docs/guide.md", "{train} whole training steps"),
    ("docs/guide.md", "{serving} decode and prefill steps"),
)
_LEAN = (r"median error (\d+)%, (\d+)% within 15%, predictions (\d+)% (fast|slow) on the geometric mean "
         r"\((\d+) cases\)")


def _data() -> dict[str, str]:
    from jaxgpu.pricing import published

    kinds = Counter(c.kind for c in published.CASES)
    serving = [c for c in published.CASES if c.kind in ("decode", "prefill")]
    return {"cases": len(published.CASES), "train": kinds["train"], "serving": len(serving),
            "kernels": kinds["gemm"] + kinds["memory"],
            "serving_one": sum(published.spans(c) == (1, 1) for c in serving)}


def _runs(root: Path) -> dict[str, str]:
    out = {}
    for name, run in (("reference", "cpu-reference"), ("published", "priced-published")):
        done = json.loads((root / "reports" / run / "run.json").read_text())["completion"]
        out[f"{name}_cases"], out[f"{name}_minutes"] = done["cases_done"], round(done["elapsed_s"] / 60)
        out[f"{name}_seconds"] = f"{round(done['elapsed_s']):,}"
    return out


def _report(root: Path) -> dict[str, str]:
    """The validation's figures as the study's report states them (its paragraph on the GPU column)."""
    md = (root / "reports" / "study" / "report.md").read_text()
    para = next(p for p in md.split("## How good is the GPU column?")[1].split("\n\n")
                if "predicted, not run here" in p)
    out = {}
    for who, lead in (("first", "Out of sample, "), ("dev", "In sample, today's prices of the same scored cases "
                                                          r"\(the development set, whose errors shaped the model\): ")):
        found = re.search(lead + _LEAN, para)
        if found is None:
            raise LookupError(f"reports/study/report.md does not say {lead!r} as it did")
        out.update(zip((f"{who}_{k}" for k in ("median", "within", "lean", "way", "n")), found.groups()))
    cpu = re.search(r"predicted before\), in sample: median error (\d+)%", para)
    if cpu is None:
        raise LookupError("reports/study/report.md does not give the CPU plan's error as it did")
    out["cpu_median"] = cpu.group(1)
    return out


def figures(root: Path = ROOT) -> dict[str, str]:
    """Every slot's figure: the data's counts, the committed runs' cases and minutes, the report's validation."""
    return {k: str(v) for k, v in {**_data(), **_runs(root), **_report(root)}.items()}


def _pattern(phrase: str) -> re.Pattern:
    parts = re.split(r"(\{\w+\})", phrase)
    out = []
    for part in parts:
        if re.fullmatch(r"\{\w+\}", part):
            out.append(rf"(?P<{part[1:-1]}_{len(out)}>[\w.,]+?)")
        else:
            out.append(r"\s+".join(re.escape(w) for w in part.split(" ")))
    return re.compile("".join(out))


def differences(root: Path = ROOT, write: bool = False) -> list[str]:
    """One line for each phrase whose figures differ from ``figures`` (or that is gone from its doc); ``write``:
    put the figures in, each in place, the doc's line breaks kept."""
    figs, out = figures(root), []
    texts = {doc: (root / doc).read_text() for doc, _ in PHRASES}
    for doc, phrase in PHRASES:
        pattern, text = _pattern(phrase), texts[doc]
        found = list(pattern.finditer(text))
        if not found:
            out.append(f"{doc}: no longer says {phrase!r}")
            continue
        for m in reversed(found):
            for slot, value in reversed(list(m.groupdict().items())):
                want = figs[slot.rpartition("_")[0]]
                if value != want:
                    out.append(f"{doc}: {slot.rpartition('_')[0]} is {want}, not {value} ({phrase!r})")
                    text = text[:m.start(slot)] + want + text[m.end(slot):]
        texts[doc] = text
    if write:
        for doc, text in texts.items():
            if (root / doc).read_text() != text:
                (root / doc).write_text(text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = cli.Parser(prog=cli.prog(COMMAND), description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only name the figures that differ (exit 1 if any)")
    args = ap.parse_args(argv)
    try:
        found = differences(write=not args.check)
    except (LookupError, OSError) as err:
        return cli.fail(cli.name(COMMAND), str(err))
    for line in found:
        print(line)
    if args.check:
        return 1 if found else 0
    print(f"{len(found)} figures written" if found else "every figure as the records say")
    return 0


if __name__ == "__main__":
    sys.exit(main())
