import re
from pathlib import Path

from jaxgpu.records import results

import experiments
from experiments.analysis import claims
from experiments.analysis.evidence import Evidence
from experiments.report import STUDY_RUNS

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


COMMITTED = STUDY_RUNS


def _committed_pairs():
    return results.merge([results.read_run(ROOT / "reports" / r) for r in COMMITTED])


def _ledgers():
    """The evidence every rule is decided on in the committed report: the runs as measured, and the CPU runs'
    programs as predicted on a GPU (the ledger's forecast column)."""
    from experiments.analysis import pricing

    pairs = _committed_pairs()
    runs = list({id(r): r for r, _ in pairs}.values())
    cpu = [(r, x) for r, x in pairs if r.env.get("backend") == "cpu"]
    return {"measured": pairs, "predicted on a GPU": cpu + pricing.predicted_pairs(runs)}


def _split(pairs):
    return Evidence([p for p in pairs if not p[1].compiled]), Evidence([p for p in pairs if p[1].compiled])


def _decisions():
    """(claim, its verdict, what its rule asked the door for) over the committed ledger and every scenario."""
    from tests.test_verdicts import SCENARIOS

    evidence = [(c, pairs) for pairs in _ledgers().values() for c in claims.CLAIMS]
    evidence += [(claims.by_id(cid), pairs) for cid, cases in SCENARIOS.items() for pairs in cases.values()]
    out = []
    for c, pairs in evidence:
        v, log = claims.decide_logged(c, *_split(pairs))
        out.append((c, v, list(log.reads)))
    return out


def test_each_rule_asks_only_for_what_its_claim_declares_and_for_all_of_it():
    from experiments.analysis.evidence import covers

    used = {c.id: set() for c in claims.CLAIMS}
    for c, _, asked in _decisions():
        for experiment, params in asked:
            match = [i for i, (e, want) in enumerate(c.reads) if e == experiment and covers(want, params)]
            assert match, (c.id, experiment, params, c.reads)  # a request wider than any the claim declares
            used[c.id] |= {i for i in match if c.reads[i][1] == params}
    for c in claims.CLAIMS:  # every declared read is asked for as it stands somewhere: none is wider than the rule
        unused = [c.reads[i] for i in sorted(set(range(len(c.reads))) - used[c.id])]
        assert not unused, (c.id, unused)


def test_each_rule_reads_exactly_the_experiments_its_claim_declares():
    read = {c.id: set() for c in claims.CLAIMS}
    for c, _, asked in _decisions():
        read[c.id] |= {e for e, _ in asked}
    for c in claims.CLAIMS:
        assert read[c.id] == set(c.experiments), (c.id, sorted(read[c.id]), c.experiments)
        assert claims.decide(c, Evidence([]))[1] <= set(c.experiments)


def test_a_run_cut_to_the_cases_verdicts_rest_on_keeps_every_verdict():
    # what a budget-cut run measures first (its key cases, claims.rests_on) must carry the whole ledger
    for which, pairs in _ledgers().items():
        cut = [p for p in pairs if claims.rests_on(p[1].experiment, p[1].params)]
        assert len(cut) < len(pairs)
        full, kept = claims.ledger(pairs), claims.ledger(cut)
        for (c, a), (_, b) in zip(full, kept):
            assert a == b, (which, c.id, a, b)


def test_the_committed_ledger_is_decided_by_the_declared_experiments_alone():
    # what a budgeted run measures first is chosen by the declarations: they must carry every verdict
    for which, pairs in _ledgers().items():
        for c in claims.CLAIMS:
            full = claims.decide(c, *_split(pairs))[0]
            mine = claims.decide(c, *_split([p for p in pairs if p[1].experiment in c.experiments]))[0]
            assert mine == full, (which, c.id, full, mine)


def test_the_committed_ledger_reaches_verdicts_not_only_not_run():
    graded = [v for pairs in _ledgers().values() for c in claims.CLAIMS
              for v in [claims.decide(c, *_split(pairs))[0]] if v.verdict != "not run"]
    assert len(graded) >= 18  # the test above would pass on nothing; it is run on real verdicts


def test_a_rule_that_raises_is_a_bug_not_missing_data():
    def broken(e, th):
        e.ok("matmul")
        return 1 / 0

    claim = claims.Claim("C99", "a claim", ("matmul",), "never", broken)
    try:
        claims.decide(claim, Evidence(_committed_pairs()))
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("a rule's ZeroDivisionError was turned into a verdict")
    # a record without the field a rule reads is damaged data: not run, and says which field
    damaged = [(None, _rec("tensor_parallel", {"data": 1, "model": 1}, {"rel_error": 0.0})),
               (None, _rec("tensor_parallel", {"data": 1, "model": 4}, {"rel_error": 0.0}))]
    v = _decide("C11", damaged)
    assert v.verdict == "not run" and "bytes_measured" in v.evidence, v


def test_c13_names_the_cpu_feature_that_decides_it(tmp_path):
    from pathlib import Path as P

    from jaxgpu.ground import devices

    from tests.test_verdicts import SCENARIOS

    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n")
    assert devices.cpu_features(str(info)) == ["amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512f", "avx2"]
    assert devices.cpu_features(str(tmp_path / "none")) == []
    pairs = SCENARIOS["C13"]["supported"]
    said = {}
    for label, feats in (("amx", "amx_tile amx_bf16 amx_int8 avx512_bf16"), ("vnni", "avx512_vnni avx2"),
                         ("none", "avx2"), ("unrecorded", None)):
        env = {"backend": "cpu", "device_kind": "cpu", **({"cpu_features": feats} if feats is not None else {})}
        run = results.Run(P("cpu-run"), {"env": env}, ())
        said[label] = _decide("C13", [(run, rec) for _, rec in pairs]).evidence
    assert "AMX tiles (amx_tile, amx_bf16, amx_int8)" in said["amx"]
    assert "no AMX tiles, only dot instructions (avx512_vnni)" in said["vnni"]
    assert "neither AMX tiles nor AVX-512 BF16/VNNI" in said["none"] and "did not record" in said["unrecorded"]
