"""Plans and budgets: what a lent GPU's first minutes depend on, tested on CPU (the check's parts:
tests/test_gpu_check.py)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxgpu.records import results

import experiments
from experiments import report
from experiments.contract import Case, Cost
from experiments.harness import budget, runner
from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
GPU_STUDY_S = 2 * 240  # the quick GPU study runs in the GPU check's two parts of 240 s at most each


def _env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _total(text: str) -> tuple[int, float]:
    last = text.strip().splitlines()[-1]
    assert last.startswith("total: "), last
    words = last.split()
    return int(words[1]), float(words[4])


def test_the_gpu_plan_fits_the_window_and_starts_no_jax():
    # JAX_PLATFORMS=cuda on a machine without a GPU: any backend start would fail the command
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "--backend", "gpu", "--dry-run"], cwd=ROOT,
                          env=_env(JAX_PLATFORMS="cuda"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cases, seconds = _total(proc.stdout)
    assert cases > 100 and seconds <= GPU_STUDY_S, proc.stdout
    for name in experiments.names():  # one line per experiment
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), name


@pytest.mark.parametrize("platform", ["cpu", "gpu"], ids=["on_cpu", "on_a_gpu"])
def test_every_experiment_a_claim_reads_has_key_cases_in_the_plan(platform):
    # a budgeted run measures key cases first: each experiment a verdict reads must have some wherever it has
    # cases at all (threads has none on a GPU: it measures a CPU's cores)
    from experiments.analysis import claims

    s = RunSettings(tuple(experiments.names()), devices=4 if platform == "cpu" else None)
    ctx, _ = runner._dry_context(s, platform)
    plans = runner._build(s, ctx, rests_on=claims.rests_on)
    by_name = {p.name: p.cases for p in plans}
    for c in claims.CLAIMS:
        for name in c.experiments:
            assert not by_name[name] or any(case.key for case in by_name[name]), (c.id, name, platform)


def test_gpu_loops_are_capped():
    for profile in ("quick", "full"):
        cfg = experiments.config("serial_parallel", profile, "gpu")
        assert max(cfg.recurrence_sizes) <= 10**5 and cfg.fori_max <= 10**5


SWEEPS = ("sizes", "sweep", "ks", "batches", "presets", "sweep_widths", "mlp_widths", "recurrence_sizes",
          "model_sizes", "device_counts", "dtypes", "shapes", "mamf_presets")


def test_no_profile_lists_a_size_twice():
    for name in experiments.names():
        for (profile, platform), cfg in experiments.load(name).profiles.items():
            for field in SWEEPS:
                value = getattr(cfg, field, ())
                assert len(set(value)) == len(value), (name, profile, platform, field)


def _cases(n, seconds=1.0, key_every=0):
    return [Case({"i": i}, lambda i=i: {"i": float(i)}, Cost(compiles=0, min_iters=0, warmup=0, calls=0,
                                                            fixed_s=seconds),
                 key=bool(key_every and i % key_every == 0))
            for i in range(n)]


def test_a_budget_runs_key_cases_first_and_shares_the_rest():
    m = budget.machine("cpu")
    spec = experiments.load("matmul")  # any spec that is not run-first
    plans = [runner._Plan("a", spec, _cases(6, key_every=3), 6.0), runner._Plan("b", spec, _cases(6), 6.0)]
    order = runner._order(plans, budget_s=9.0)
    assert [c.key for _, c in order[:2]] == [True, True] and not any(c.key for _, c in order[2:])
    allow = runner._allowances(plans, 9.0, m)
    taken = [(p.name, c.params["i"]) for p, c in order if allow.take(p.name, c.key, 1.0, elapsed_s=0.0)]
    assert taken[:2] == [("a", 0), ("a", 3)]
    assert {name for name, _ in taken[2:]} == {"a", "b"}  # what is left is shared, not spent on the first
    assert len(taken) < 12
    # nothing starts that would end past the budget
    assert not runner._allowances(plans, 9.0, m).take("a", True, 1.0, elapsed_s=8.5)


def test_a_case_reading_a_skipped_case_is_skipped_with_it_and_a_resumed_one_is_priced():
    m = budget.machine("cpu")
    run = {"case": "run"}
    ran = []
    cases = [Case(run, lambda: ran.append("run") or {"x": 1.0},
                  Cost(compiles=0, min_iters=0, warmup=0, calls=0, fixed_s=50.0)),
             *[Case({"case": "point", "i": i}, lambda: ran.append("point") or {"x": 1.0}, Cost.none(), needs=run)
               for i in range(3)]]
    plans = [runner._Plan("a", experiments.load("matmul"), cases, 50.0)]

    class Writer:
        def write(self, record):
            pass

    ctx = runner.RunContext("cpu", "cpu", 1, None)
    counts = {s: 0 for s in results.STATUSES}
    # a budget too small for the run: its points, cheap by themselves, must not run (they would train it)
    skipped = runner._measure_all(plans, ctx, "r", 10.0, m, Writer(), counts, {"a": 0.0}, None, lambda msg: None,
                                  time.perf_counter())
    assert skipped == 4 and ran == []
    # resumed after the run was measured: the first point redoes its work, and is priced so
    again = runner._still_to_do("a", cases, {results.case_key("a", run)})
    assert [c.params for c in again] == [{"case": "point", "i": i} for i in range(3)]
    assert again[0].cost == cases[0].cost and again[1].cost == Cost.none()


def test_the_cpu_plan_of_the_quick_study_is_minutes():
    lines = runner.dry_run(RunSettings(tuple(experiments.names()), backend="cpu", profile="quick", devices=4))
    _, seconds = _total("\n".join(lines))
    assert 60 < seconds < 600  # a quick study takes minutes on two cores, not seconds or hours


@pytest.mark.slow
def test_a_budgeted_run_is_cut_cleanly_and_resume_finishes_it(tmp_path):
    out = tmp_path / "run"
    from experiments.analysis import claims

    runner.run_study(RunSettings(("matmul", "precision"), profile="tiny", out=str(out), progress=False, budget_s=4.0),
                     "cpu", log=lambda m: None, rests_on=claims.rests_on)
    report.write_report([out], out)
    run = results.read_run(out)
    assert run.completion["state"] == "cut_by_budget" and run.completion["cases_skipped"] > 0
    keys = {r.key for r in run.records}
    worked = [r for r in run.records if r.params.get("case") == "worked_example"]
    assert worked, "the key cases run first"
    assert "was cut by its time budget" in (out / "report.md").read_text()
    runner.run_study(RunSettings(("matmul", "precision"), profile="tiny", out=str(out), resume=True, progress=False),
                     "cpu", log=lambda m: None)
    run = results.read_run(out)
    assert run.completion["state"] == "complete" and keys < {r.key for r in run.records}
    timing = json.loads((out / "run.json").read_text())["timing"]
    assert set(timing) == {"matmul", "precision"} and all("planned_s" in t for t in timing.values())


def test_settings_are_checked_against_the_config():
    got = experiments.parse_settings(["matmul.sizes=(64, 128)", "matmul.target_s=1"], ["matmul"])
    assert got == {"matmul": {"sizes": (64, 128), "target_s": 1.0}}
    assert experiments.config("matmul", "tiny", "cpu", got["matmul"]).sizes == (64, 128)
    for bad, says in (("matmul.sizez=(1,)", "has no field 'sizez'"), ("matmul.sizes=big", "takes tuple"),
                      ("matmul=1", "EXPERIMENT.FIELD=VALUE"), ("precision.sizes=(1,)", "not among the experiments"),
                      ("matmull.sizes=(1,)", "unknown experiment")):
        with pytest.raises(experiments.BadSetting, match=says):
            experiments.parse_settings([bad], ["matmul"])


def test_an_info_hook_that_fails_leaves_the_run_folder_and_its_records(tmp_path, monkeypatch):
    from experiments.matmul import measure

    def broken(ctx):
        raise ImportError("torch: a broken install")

    monkeypatch.setattr(measure, "info", broken)  # the spec's hook looks it up when it is called
    runner.run_study(RunSettings(("matmul",), profile="tiny", out=str(tmp_path), progress=False), "cpu",
                     log=lambda m: None)
    run = results.read_run(tmp_path)
    assert run.records and run.completion["state"] == "complete"
    assert "torch: a broken install" in run.meta["info"]["matmul"]["error"]


def test_a_run_first_experiment_stays_first_when_key_cases_go_first():
    # memory_fit reads the device's high-water mark: other experiments' key cases must not run before it
    first = runner._Plan("memory_fit", experiments.load("memory_fit"), _cases(3), 3.0)
    other = runner._Plan("matmul", experiments.load("matmul"), _cases(3, key_every=1), 3.0)
    for seconds in (None, 100.0):
        order = [(p.name, c.params["i"]) for p, c in runner._order([first, other], seconds)]
        assert order[:3] == [("memory_fit", 0), ("memory_fit", 1), ("memory_fit", 2)], (seconds, order)
