"""Price the committed records again with today's code: ``python -m experiments.reprice [--check] [RUN ...]``.

Records that hold prices (``jaxgpu.pricing.fingerprint.PRICED``: the published cases' and the transformer plans') carry
in their run.json the stamp of the code that priced them. When the pricing code changes, a committed run priced by
other code is stale, and a test says so. This command finds the stale runs among those reports/study merges and
prices them again:

- a run made of one priced experiment alone (reports/priced-published) is run again whole, into its own folder (the
  old folder is kept aside until the new run is complete);
- a run whose priced experiment is one part of it (reports/compiled-h200, reports/compiled-h100: the transformer plans
  among every experiment's compiled facts) has that experiment compiled again for its target and its records
  replaced, run.json's info saying when and why.

Then it rebuilds reports/study and freezes its predictions (experiments.report --freeze). ``--check`` only lists what
is stale (exit 1 if anything is). About 20 minutes for priced-published on two cores with its plans cached (more
where programs changed and compile again), 2 for each compiled run.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxgpu.pricing import fingerprint
from jaxgpu.records import results

from experiments import cli
from experiments.report import STUDY_RUNS

COMMAND = "experiments.reprice"
REPORTS = fingerprint.ROOT / "reports"


def _priced_in(run: results.Run) -> list[str]:
    """The priced experiments whose records in ``run`` the study shows (records of an older method are left out)."""
    return sorted({r.experiment for r in run.records if r.experiment in fingerprint.PRICED})


def stale(names=STUDY_RUNS, root: Path = REPORTS) -> dict[str, list[str]]:
    """{run folder: [its priced experiments whose stamp is not today's code's]} over the study's runs, each
    experiment judged on its records of the newest method among them (older ones are not shown, so not checked).
    The compiler's versions count only where this machine has the same: another JAX cannot say a plan is stale."""
    runs, _ = results.newest_methods([results.read_run(root / n) for n in names])
    out = {}
    for run in runs:
        said = run.meta.get("info", {})
        old = []
        for name in _priced_in(run):
            now, then = fingerprint.stamp(name), said.get(name, {})
            same = then.get("pricing_code") == now["pricing_code"] and (
                then.get("pricing_versions") != now["pricing_versions"]
                or then.get("pricing_fingerprint") == now["pricing_fingerprint"])
            if not same:
                old.append(name)
        if old:
            out[run.path.name] = old
    return out


def _run(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", *args], cwd=fingerprint.ROOT, check=True)


def whole(folder: Path, experiment: str) -> None:
    """Run the folder's one experiment again into it, the old folder kept aside until the new run completes."""
    profile = json.loads((folder / "run.json").read_text())["config"].get("profile") or "full"
    aside = Path(tempfile.mkdtemp(prefix=f"{folder.name}-before-"))
    shutil.move(str(folder), aside / folder.name)
    try:
        _run(["experiments.run", "--only", experiment, "--profile", profile, "--out", str(folder), "--no-progress"])
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.move(str(aside / folder.name), folder)
        raise
    # the folder holds its records alone, as committed (the study is their view): the run's own report goes
    kept = {p.name for p in (aside / folder.name).iterdir()} | {"results.jsonl", "run.json"}
    for extra in folder.iterdir():
        if extra.name not in kept:
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    shutil.rmtree(aside, ignore_errors=True)


def part(folder: Path, experiment: str, why: str) -> None:
    """Compile ``experiment`` again for the folder's target and put its records in place of the old ones (the run's
    id kept: they belong to that run), run.json's info stamped and saying when and why; the run's own report
    rebuilt."""
    meta = json.loads((folder / "run.json").read_text())
    target, profile = meta["config"]["compile_for"], meta["config"].get("profile") or "quick"
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "run"
        _run(["experiments.run", "--only", experiment, "--compile-for", target, "--profile", profile, "--out",
              str(fresh), "--no-progress"])
        new = [json.loads(x) for x in (fresh / "results.jsonl").read_text().splitlines() if x.strip()]
        stamp = json.loads((fresh / "run.json").read_text())["info"][experiment]
    lines = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines() if x.strip()]
    at = next((i for i, r in enumerate(lines) if r["experiment"] == experiment), len(lines))
    kept = [r for r in lines if r["experiment"] != experiment]
    for r in new:
        r["run_id"] = meta["run_id"]
    lines = kept[:at] + new + kept[at:]
    (folder / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    info = meta.setdefault("info", {})
    note = (f"{experiment}'s records compiled again on {_dt.date.today().isoformat()} (experiments.reprice, "
            f"{fingerprint.versions()}): {why.rstrip('.')}.")
    before = info.get("recompiled")
    info["recompiled"] = note + (f" Before that: {before}" if before else "")
    info[experiment] = {**info.get(experiment, {}), **stamp}
    (folder / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")  # as RunWriter writes it
    _run(["experiments.report", str(folder)])


def main(argv: list[str] | None = None) -> int:
    ap = cli.Parser(prog=cli.prog(COMMAND), description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*", metavar="RUN", help=f"folders under reports/ (default: the stale ones of "
                                                             f"{', '.join(STUDY_RUNS)})")
    ap.add_argument("--check", action="store_true", help="only list the stale runs (exit 1 if any)")
    ap.add_argument("--why", default="the pricing code changed", help="what changed, for run.json's note")
    args = ap.parse_args(argv)
    if unknown := [r for r in args.runs if r not in STUDY_RUNS]:
        return cli.fail(cli.name(COMMAND), f"{', '.join(unknown)} is not one of the study's runs "
                                           f"({', '.join(STUDY_RUNS)})")
    found = stale()
    if args.check:
        for name, exps in found.items():
            print(f"{name}: {', '.join(exps)} priced by other code")
        print("nothing stale" if not found else f"price them again: {cli.prog(COMMAND)}")
        return 1 if found else 0
    todo = {r: _priced_in(results.read_run(REPORTS / r)) for r in args.runs} if args.runs else found
    for name, exps in todo.items():
        folder = REPORTS / name
        every = {r.experiment for r in results.read_run(folder).records}
        for exp in exps:
            print(f"{cli.name(COMMAND)}: {name}: {exp}", file=sys.stderr, flush=True)
            whole(folder, exp) if every == {exp} else part(folder, exp, args.why)
    if todo:
        _run(["experiments.report", *(str(REPORTS / n) for n in STUDY_RUNS), "--out", str(REPORTS / "study"),
              "--freeze", str(REPORTS / "predictions")])
    else:
        print("nothing stale", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
