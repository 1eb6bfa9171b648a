"""Price the committed records again with today's code and data: ``python -m experiments.reprice [--check] [RUN ...]``.

Records that hold prices (``jaxgpu.pricing.fingerprint.PRICED``: the published cases' and the transformer plans') carry
in their run.json the stamp of the code that priced them and the hash of each entry of the data they used (a case, a
card with its calibration, a named model: ``fingerprint.used``). A committed run priced by other code, or whose records
used an entry since edited, is stale, and a test says so. This command finds the stale runs among those reports/study
merges and prices them again:

- a run made of one priced experiment alone (reports/priced-published) is run again whole where the code changed,
  into its own folder (the old folder kept aside until the new run is complete); where only the data changed, the
  records that used an edited entry, and those a new case or card asks for, are priced alone (``some``) and the rest
  kept byte for byte;
- a run whose priced experiment is one part of it (reports/compiled-h200, reports/compiled-h100: the transformer plans
  among every experiment's compiled facts) has that experiment compiled again for its target and its records
  replaced, run.json's info saying when and why.

Then it rebuilds reports/study, freezes its predictions (experiments.report --freeze) and writes the docs' figures
from them (experiments.docs_figures). ``--check`` only lists what is stale (exit 1 if anything is). About 20 minutes
for priced-published on two cores with its plans cached (more where programs changed and compile again), 2 for each
compiled run, seconds to minutes for records priced alone.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from jaxgpu.pricing import fingerprint
from jaxgpu.records import results

import experiments
from experiments import cli
from experiments.report import STUDY_RUNS

COMMAND = "experiments.reprice"
REPORTS = fingerprint.ROOT / "reports"


def _priced_in(run: results.Run) -> list[str]:
    """The priced experiments whose records in ``run`` the study shows (records of an older method are left out)."""
    return sorted({r.experiment for r in run.records if r.experiment in fingerprint.PRICED})


def _card(run: results.Run) -> str | None:
    hw = run.hardware
    return hw.name if hw is not None and not hw.estimate else None


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _expected(run: results.Run, experiment: str) -> list[dict]:
    """The params of the records a run of ``experiment`` alone would make today (its profile's cases, for the cases
    and cards the data now holds)."""
    exp = experiments.load(experiment)
    cfg = exp.config_for(run.meta["config"].get("profile") or "full", "cpu")
    return [c.params for c in exp.cases(cfg, types.SimpleNamespace(platform="cpu", mode="measured"))]


def judged(run: results.Run) -> dict[str, list[dict] | None]:
    """{priced experiment of ``run``: None where the code that priced it changed (every record is stale), else the
    params of its records priced from an entry of the data since changed (``fingerprint.used``), with, where the
    experiment is the run's only one, the records the data now asks for that it lacks (a new case, a card new to the
    report) and those it no longer names}; experiments with nothing stale left out. The compiler's versions count
    only where this machine has the same: another JAX cannot say a plan is stale."""
    said, out = run.meta.get("info", {}), {}
    alone = {r.experiment for r in run.records} == set(_priced_in(run))
    for name in _priced_in(run):
        now, then = fingerprint.stamp(name), said.get(name, {})
        same = then.get("pricing_code") == now["pricing_code"] and (
            then.get("pricing_versions") != now["pricing_versions"]
            or then.get("pricing_fingerprint") == now["pricing_fingerprint"])
        if not same or "pricing_data" not in then:
            out[name] = None
            continue
        hashes = {}
        mine = [r.params for r in run.records if r.experiment == name]
        old = [p for p in mine if any(then["pricing_data"].get(k) != hashes.setdefault(k, fingerprint.data(k))
                                      for k in fingerprint.used(name, p, _card(run)))]
        if alone:
            expected, have = _expected(run, name), {_key(p) for p in mine}
            old += [p for p in expected if _key(p) not in have]
            wanted = {_key(p) for p in expected}
            old += [p for p in mine if _key(p) not in wanted and p not in old]
        if old:
            out[name] = old
    return out


def found(names=STUDY_RUNS, root: Path = REPORTS) -> dict[str, dict[str, list[dict] | None]]:
    """{run folder: ``judged`` of it} over the study's runs with anything stale, each experiment judged on its records
    of the newest method among them (older ones are not shown, so not checked)."""
    runs, _ = results.newest_methods([results.read_run(root / n) for n in names])
    return {run.path.name: j for run in runs if (j := judged(run))}


def stale(names=STUDY_RUNS, root: Path = REPORTS) -> dict[str, list[str]]:
    """{run folder: [its priced experiments with stale records]} (``found``)."""
    return {name: sorted(exps) for name, exps in found(names, root).items()}


def _said(params: list[dict]) -> str:
    named = [p.get("case") if p.get("case") not in (None, "headline") else
             " ".join(str(p[k]) for k in sorted(p) if k != "case") for p in params]
    return ", ".join(named[:6]) + (f" and {len(named) - 6} more" if len(named) > 6 else "")


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


# how a run of one priced experiment prices some of its records alone: the --set lines that narrow its config to them
NARROWED = {"gpu_model": lambda params: [
    f"gpu_model.ids={tuple(sorted({p['case'] for p in params if p['case'] != 'headline'}))!r}",
    f"gpu_model.headline_gpus={tuple(sorted({p['gpu'] for p in params if p['case'] == 'headline'}))!r}"]}


def some(folder: Path, experiment: str, params: list[dict], why: str) -> None:
    """Price again only the records of ``params`` in the folder's run of ``experiment`` alone (``NARROWED``): those
    priced from data since changed and those the data now asks for; the records no case or card names any longer
    leave, the rest stay as they are. run.json's info says when and why, and its completion counts the records."""
    run = results.read_run(folder)
    expected = _expected(run, experiment)
    wanted = [p for p in params if _key(p) in {_key(e) for e in expected}]
    fresh, stamp, took = {}, {}, 0.0
    if wanted:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            sets = [a for line in NARROWED[experiment](wanted) for a in ("--set", line)]
            _run(["experiments.run", "--only", experiment, "--profile", run.meta["config"].get("profile") or "full",
                  *sets, "--out", str(out), "--no-progress", "--no-report"])
            lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
            fresh = {_key(r["params"]): r for r in lines}
            meta = json.loads((out / "run.json").read_text())
            stamp, took = meta["info"][experiment], meta["completion"]["elapsed_s"]
    meta = json.loads((folder / "run.json").read_text())
    old = {_key(json.loads(x)["params"]): json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()
           if x.strip()}
    kept = []
    for p in expected:
        r = fresh.get(_key(p)) or old.get(_key(p))
        if r is not None:
            kept.append({**r, "run_id": meta["run_id"]})
    (folder / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
    info = meta.setdefault("info", {})
    before = info.get(experiment, {})
    used = {k for r in kept for k in fingerprint.used(experiment, r["params"], _card(run))}
    data = {**before.get("pricing_data", {}), **stamp.get("pricing_data", {})}
    info[experiment] = {**before, **stamp, "pricing_data": {k: v for k, v in sorted(data.items()) if k in used}}
    gone = len(set(old) - {_key(r["params"]) for r in kept})
    note = (f"{len(fresh)} of {experiment}'s records priced again and {gone} left out on "
            f"{_dt.date.today().isoformat()} (experiments.reprice): {why.rstrip('.')}.")
    info["recompiled"] = note + (f" Before that: {info['recompiled']}" if info.get("recompiled") else "")
    done = meta.setdefault("completion", {})
    done.update(cases_planned=len(kept), cases_done=len(kept), elapsed_s=round(done.get("elapsed_s", 0) + took, 1))
    (folder / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


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
    stale_now = found()
    if args.check:
        for name, exps in stale_now.items():
            for exp, params in exps.items():
                print(f"{name}: {exp} " + ("priced by other code" if params is None else
                                           f"{len(params)} record{'s' * (len(params) > 1)} of changed or new data: "
                                           f"{_said(params)}"))
        print("nothing stale" if not stale_now else f"price them again: {cli.prog(COMMAND)}")
        return 1 if stale_now else 0
    todo = ({r: dict.fromkeys(_priced_in(results.read_run(REPORTS / r))) for r in args.runs} if args.runs
            else stale_now)
    for name, exps in todo.items():
        folder = REPORTS / name
        every = {r.experiment for r in results.read_run(folder).records}
        for exp, params in exps.items():
            print(f"{cli.name(COMMAND)}: {name}: {exp}" + (f" ({len(params)} records)" if params else ""),
                  file=sys.stderr, flush=True)
            if params is not None and every == {exp} and exp in NARROWED:
                some(folder, exp, params, args.why)
            else:
                whole(folder, exp) if every == {exp} else part(folder, exp, args.why)
    if todo:
        _run(["experiments.report", *(str(REPORTS / n) for n in STUDY_RUNS), "--out", str(REPORTS / "study"),
              "--freeze", str(REPORTS / "predictions")])
        _run(["experiments.docs_figures"])  # the docs' counts and errors, as the rebuilt study says them
    else:
        print("nothing stale", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
