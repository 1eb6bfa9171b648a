"""The drift probes: spread through a run, checked before they are timed, and read as the run's noise floor."""

from pathlib import Path

import pytest

from jaxgpu.records import results

import experiments
from experiments import drift
from experiments.contract import Case, Seen
from experiments.harness import runner
from experiments.harness.settings import RunSettings


def _pairs(name, moments):
    return [(name, Case({"moment": m, "program": p}, lambda: {})) for m in range(moments) for p in ("a", "b")]


def test_probes_are_spread_from_the_first_case_to_after_the_last_one_moment_together():
    body = [("x", i) for i in range(10)]
    out = runner.spread_through(body, _pairs("drift", 3))
    at = [i for i, item in enumerate(out) if item[0] == "drift"]
    assert at == [0, 1, 7, 8, 14, 15]  # moment 0 first, moment 1 before the sixth case, moment 2 after the last
    assert [item for item in out if item[0] == "x"] == body
    assert [c.params["moment"] for _, c in runner.spread_through([], _pairs("drift", 2))] == [0, 0, 1, 1]
    assert runner.spread_through(body, []) == body


def test_a_run_interleaves_the_drift_probes_with_the_other_experiments():
    s = RunSettings(("matmul", "drift"), devices=1)
    ctx, _ = runner._dry_context(s, "cpu")
    plans = runner._build(s, ctx)
    for budget in (None, 1e9):
        names = [p.name for p, _ in runner._order(plans, budget)]
        assert names[0] == "drift" and names[-1] == "drift" and "drift" in names[len(names) // 3: -3]


def _rec(moment, program, t):
    return results.Record("drift", {"moment": moment, "program": program}, {"time_s_median": t}, backend="cpu")


def test_the_drift_of_a_program_is_how_far_two_of_its_moments_lie_apart():
    d = drift.of_run([_rec(0, "matmul", 1.0), _rec(1, "matmul", 2.0), _rec(0, "call", 5e-6), _rec(1, "call", 5e-6),
                      _rec(0, "triad", 1.0)])
    assert d["matmul"].pairwise == pytest.approx(0.75)  # |1/2 - 1| and |2/1 - 1|
    assert d["matmul"].slowest_over_fastest == 2.0 and d["matmul"].times_s == (1.0, 2.0)
    assert d["call"].pairwise == 0.0
    assert "triad" not in d  # one moment: nothing to compare
    assert drift.sentence(d) == ("the same matmul and call timed at 2 moments of the run differ pairwise by a "
                                 "median of 75% and 0%")
    assert drift.sentence({}) == ""


def test_the_roofline_check_names_the_drift_beside_its_error():
    from experiments.analysis.pricing import errors, measured_roofs
    from experiments.reporting.accuracy import check_sentence
    from tests.test_predict import RUN, _records

    recs = _records()
    run = results.Run(RUN.path, RUN.meta, tuple(recs))
    plain = check_sentence(run, errors(run, recs), measured_roofs(run, recs))
    probes = [_rec(0, "matmul", 1.0), _rec(1, "matmul", 1.2)]
    noisy = results.Run(RUN.path, RUN.meta, tuple(recs + probes))
    said = check_sentence(noisy, errors(noisy, recs + probes), measured_roofs(noisy, recs + probes))
    assert "For scale" not in plain and "differ pairwise by a median of 18%" in said
    assert len(errors(noisy, recs + probes)) == len(errors(run, recs))  # the probes are not more cases


def test_a_probe_checks_its_program_before_timing_it(monkeypatch):
    from experiments.drift import measure

    exp = experiments.load("drift")
    cfg = exp.config_for("tiny", "cpu")
    ctx, _ = runner._dry_context(RunSettings((), devices=1), "cpu")
    got = {prog: measure.probe(prog, cfg, ctx) for prog in ("matmul", "triad", "call")}
    assert all(m["time_s_median"] > 0 for m in got.values())
    compiled, args, want, rtol = measure._program("triad", cfg.matmul_n, cfg.triad_n, ctx.seed, ctx.device)
    monkeypatch.setattr(measure, "_program", lambda *a: (compiled, args, want + 1e-3, rtol))
    with pytest.raises(ArithmeticError, match="wrong result"):
        measure.probe("triad", cfg, ctx)


def test_the_report_draws_the_drift_of_a_run(tmp_path):
    from experiments.drift import view

    run = results.Run(Path("cpu-x"), {"env": {"backend": "cpu", "cpu_model": "X"}}, ())
    sec = view.section(Seen(tuple((run, r) for r in (_rec(0, "matmul", 1.0), _rec(1, "matmul", 1.1)))))
    assert sec.plots and "differ pairwise by a median of 10%" in sec.plots[0].takeaway  # 9.1% and 10%
    assert sec.tables[0].rows[0][1:3] == ["matmul", 2]


def test_a_busy_machine_says_so_first_in_the_summary_and_the_closing_lines(tmp_path):
    """A run whose probes moved by a median of 25% or more (another job on its cores) says so before its answer:
    the summary's first paragraph, summary.json, and the lines a run prints when it ends; a steady run says
    nothing of it."""
    import json

    from experiments import report
    from experiments.reporting import build

    busy = [_rec(0, "triad", 1.0), _rec(1, "triad", 1.6), _rec(2, "triad", 1.0), _rec(3, "triad", 1.7),
            _rec(0, "matmul", 1.0), _rec(1, "matmul", 1.05), _rec(2, "matmul", 1.0), _rec(3, "matmul", 1.05)]
    steady = [_rec(m, p, t) for m, t in enumerate((1.0, 1.1, 1.0, 1.1)) for p in ("triad", "matmul")]
    smoke = busy[:2]  # two moments of a smoke run: noise, not a verdict
    assert "triad probe's timings at 4 moments" in drift.unsteady(busy)
    assert drift.unsteady(steady) == "" and drift.unsteady(smoke) == ""
    for recs, said in ((busy, True), (steady, False)):
        run = results.Run(Path("cpu-busy"), {"env": {"backend": "cpu", "cpu_model": "X"}}, tuple(recs))
        sec = build.summary_section([run], [(run, r) for r in recs], "H200 SXM", [])
        first = sec.lead
        assert first.startswith("This machine was not steady during run cpu-busy: the triad probe's") == said
        assert ("Re-run the study on an idle machine" in first) == said
        (tmp_path / "summary.json").write_text(json.dumps(sec.exports["summary.json"]))
        (tmp_path / "ledger.json").write_text("[]")
        lines = report.closing_lines(tmp_path)
        assert lines[0].startswith("warning: This machine was not steady during run cpu-busy") == said
