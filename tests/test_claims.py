import re
from pathlib import Path

from jaxgpu import results

from experiments.analysis import claims
from experiments.analysis.evidence import Evidence

import experiments

ROOT = Path(__file__).resolve().parents[1]


def test_every_claim_has_a_rule_and_an_experiment():
    ids = [c.id for c in claims.CLAIMS]
    assert ids == [f"C{i:02d}" for i in range(1, 19)]
    for c in claims.CLAIMS:
        assert c.experiments and callable(c.rule) and c.rule_text, c.id
    shared = ROOT.parent / "shared" / "CLAIMS.md"
    if shared.exists():
        assert ids == re.findall(r"^\| (C\d\d) \|", shared.read_text(), re.M)


def test_claims_name_registered_experiments():
    known = set(experiments.names())
    for c in claims.CLAIMS:
        assert set(c.experiments) <= known, (c.id, c.experiments)


def _decide(cid, pairs):
    return claims.decide(claims.by_id(cid), Evidence(pairs))[0]


def _rec(experiment, params, metrics, backend="cpu", status="ok"):
    return results.Record(experiment=experiment, params=params, metrics=metrics, run_id="r", backend=backend,
                          device_kind="cpu", n_devices=4, benchmark_version=1, status=status,
                          reason=None if status == "ok" else "boom")


def test_c11_follows_the_memory_per_device():
    run = None
    split = lambda share, err=0.0: [
        (run, _rec("tensor_parallel", {"data": 1, "model": 1}, {"bytes_measured": 100.0, "rel_error": 0.0})),
        (run, _rec("tensor_parallel", {"data": 1, "model": 4}, {"bytes_measured": 100.0 * share, "rel_error": err}))]
    assert _decide("C11", split(0.27)).verdict == "supported"
    assert _decide("C11", split(0.6)).verdict == "supported with caveats"
    assert _decide("C11", split(0.9)).verdict == "contradicted"
    assert _decide("C11", split(0.27, err=1e-2)).verdict == "contradicted"
    assert _decide("C11", split(0.27)[:1]).verdict == "not run"


def test_c17_needs_agreement_and_real_devices_for_a_speedup():
    agree = lambda status="ok": (None, _rec("data_parallel", {"case": "agreement", "variant": "pmap", "devices": 4},
                                            {"rel_error": 1e-7}, status=status))
    strong = lambda backend, eff: (None, _rec("data_parallel", {"case": "strong", "variant": "jit_sharding",
                                                                "devices": 4},
                                              {"speedup": 4 * eff, "efficiency": eff}, backend=backend))
    assert _decide("C17", [agree(), strong("cpu", 0.2)]).verdict == "supported with caveats"
    assert _decide("C17", [agree(), strong("gpu", 0.9)]).verdict == "supported"
    assert _decide("C17", [agree("failed"), strong("gpu", 0.9)]).verdict == "contradicted"
    assert _decide("C17", []).verdict == "not run"


def test_verdicts_on_no_records_are_not_run():
    for c, v in claims.ledger([]):
        assert v.verdict == "not run", c.id


def test_verdicts_on_the_reference_run_are_computed():
    run = results.read_run(ROOT / "reports" / "cpu-reference")
    pairs = [(run, r) for r in run.records]
    verdicts = dict((c.id, v) for c, v in claims.ledger(pairs))
    assert all(v.verdict in claims.VERDICTS for v in verdicts.values())
    assert verdicts["C03"].verdict == "supported"
    assert verdicts["C09"].verdict == "contradicted"  # a memory-bound op far below peak: the cores wait
    assert verdicts["C12"].verdict == "not run" and "--backend gpu" in verdicts["C12"].evidence
