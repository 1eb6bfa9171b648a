"""Verdicts that can fail: synthetic records drive every rule to each verdict it names, and a rule
whose inputs are missing or damaged says "not run" (or "inconclusive"), never a grade."""

from pathlib import Path

import pytest

from jaxgpu.records import results

from experiments.analysis import claims
from experiments.analysis.evidence import Evidence

CPU = results.Run(Path("cpu-run"), {"env": {"backend": "cpu", "device_kind": "cpu", "cpu_model": "X"}}, ())
GPU = results.Run(Path("gpu-run"), {"env": {"backend": "gpu", "device_kind": "NVIDIA H200", "cpu_model": "X"},
                                    "info": {"matmul": {"jax_dot": "__cublas$lt$matmul"}}}, ())
GRADES = ("supported", "supported with caveats", "contradicted")


def _p(run, experiment, params, metrics, status="ok"):
    rec = results.Record(experiment=experiment, params=params, metrics=metrics, run_id="r",
                         backend=run.env["backend"], device_kind=run.env["device_kind"], status=status,
                         reason=None if status == "ok" else "boom")
    return (run, rec)


def _t(median, spread=0.02):
    """Timing metrics with a quartile spread of +-spread around the median."""
    return {"time_s_median": median, "time_s_q25": median * (1 - spread), "time_s_q75": median * (1 + spread)}


def c01(ratio):
    return [_p(GPU, "devices", {"device": "NVIDIA H200", "role": "accelerator"},
               {"parallel_lanes": 64.0 * ratio, "cores": 132.0}),
            _p(GPU, "devices", {"device": "host cpu", "role": "cpu"}, {"parallel_lanes": 64.0, "cores": 16.0})]


def c02(flop_share, time_share):
    return [_p(CPU, "op_mix", {"model": "mlp", "width": 1024, "batch": 512},
               {"dot_flop_share": flop_share, "dot_time_share": time_share})]


def c03(exact):
    return [_p(CPU, "matmul", {"case": "worked_example", "dtype": d}, {"exact": float(e)})
            for d, e in (("float32", True), ("bfloat16", exact))]


def c04(gflops_two_cores):
    return [_p(CPU, "threads", {"workers": 1}, {"matmul_gflops": 100.0, "elementwise_time_s": 1.0}),
            _p(CPU, "threads", {"workers": 2}, {"matmul_gflops": gflops_two_cores, "elementwise_time_s": 0.6})]


def c05(small_cpu, big_gpu, serial_cpu):
    out = []
    for n, cpu_wins in ((10, small_cpu), (10**8, not big_gpu)):
        out.append(_p(CPU, "serial_parallel", {"kind": "independent", "variant": "vectorized", "n": n},
                      _t(1.0 if cpu_wins else 2.0)))
        out.append(_p(GPU, "serial_parallel", {"kind": "independent", "variant": "vectorized", "n": n},
                      _t(2.0 if cpu_wins else 1.0)))
    out.append(_p(CPU, "serial_parallel", {"kind": "recurrence", "variant": "scan", "n": 10**5},
                  _t(1.0 if serial_cpu else 2.0)))
    out.append(_p(GPU, "serial_parallel", {"kind": "recurrence", "variant": "scan", "n": 10**5},
                  _t(2.0 if serial_cpu else 1.0)))
    return out


def c06(speedup, spread=0.02):
    return [_p(CPU, "serial_parallel", {"kind": "independent", "variant": "vectorized", "n": 10**8}, _t(speedup,
                                                                                                        spread)),
            _p(GPU, "serial_parallel", {"kind": "independent", "variant": "vectorized", "n": 10**8}, _t(1.0, spread))]


def c07(speedup):
    return [_p(CPU, "training", {"case": "to_target", "width": 4096}, {"time_s_to_target": 20.0}),
            _p(GPU, "training", {"case": "to_target", "width": 4096}, {"time_s_to_target": 20.0 / speedup})]


def c08(ratio):
    return [_p(GPU, "transfer", {"direction": "host_to_device", "bytes": 2**30}, {"gbytes_per_s": 20.0}),
            _p(GPU, "transfer", {"direction": "on_device_copy", "bytes": 2**30}, {"gbytes_per_s": 20.0 * ratio})]


def c09(flop_share_outside, time_share_outside):
    return [_p(CPU, "op_mix", {"model": "mlp", "width": 1024, "batch": 512},
               {"dot_flop_share": 1 - flop_share_outside, "dot_time_share": 1 - time_share_outside})]


def c10(memory_ratio, held_out_error):
    fit = lambda err, held: _p(CPU, "memory_fit", {"case": "mlp_train", "widths": [64], "batch": 16,
                                                   **({"held_out": True} if held else {})},
                               {"prediction_error": err})
    return [_p(CPU, "inference", {"case": "train_vs_infer", "batch": 1024}, {"memory_ratio": memory_ratio}),
            fit(0.01, False), fit(held_out_error, True)]


def c11(share, err=0.0):
    return [_p(CPU, "tensor_parallel", {"data": 1, "model": 1}, {"bytes_measured": 100.0, "rel_error": 0.0}),
            _p(CPU, "tensor_parallel", {"data": 1, "model": 4}, {"bytes_measured": 100.0 * share, "rel_error": err})]


def c12(speedup, spread=0.02):
    sweep = lambda preset, t: _p(GPU, "precision", {"case": "sweep", "preset": preset, "n": 8192, "impl": "jax"},
                                 _t(t, spread))
    return [sweep("fp32", speedup), sweep("bf16", 1.0)]


def c13(speedups, spread=0.02, err=1e-3):
    out = [_p(CPU, "precision", {"case": "sweep", "preset": "fp32", "n": 1024, "impl": "jax"},
              {**_t(1.0, spread), "rel_error": 1e-7})]
    for preset, s in zip(("bf16", "fp16", "int8"), speedups):
        out.append(_p(CPU, "precision", {"case": "sweep", "preset": preset, "n": 1024, "impl": "jax"},
                      {**_t(1.0 / s, spread), "rel_error": err}))
    return out


def c14(loss, values_ratio, spread=0.02):
    n = 1 << 25
    triad = lambda dtype, t: _p(CPU, "bandwidth", {"kernel": "triad", "impl": "jax", "variant": "jit", "n": n,
                                                   "dtype": dtype}, _t(t, spread))
    return [_p(CPU, "precision", {"case": "accumulate", "dtype": "bfloat16", "accumulator": "bfloat16"},
               {"rel_error": loss}), triad("float32", values_ratio), triad("bfloat16", 1.0)]


def c15(speedup, gpu_calls):
    out = [_p(CPU, "compiler", {"program": "gelu_chain"}, {"speedup": speedup, "fusions_after": 1.0,
                                                          "library_calls": 0.0})]
    if gpu_calls is not None:
        out.append(_p(GPU, "compiler", {"program": "mlp_layer"}, {"speedup": speedup, "fusions_after": 1.0,
                                                                 "library_calls": float(gpu_calls)}))
    return out


def c16(time_ratio, flops_ratio):
    return [_p(CPU, "inference", {"case": "train_vs_infer", "batch": 1024},
               {"time_ratio": time_ratio, "flops_ratio": flops_ratio, "memory_ratio": 3.0})]


def c17(efficiency, agree="ok"):
    return [_p(GPU, "data_parallel", {"case": "agreement", "variant": "pmap", "devices": 4}, {"rel_error": 1e-7},
               status=agree),
            _p(GPU, "data_parallel", {"case": "strong", "variant": "jit_sharding", "devices": 4},
               {"speedup": 4 * efficiency, "efficiency": efficiency})]


def c18(peak_fraction, step_speedup):
    return [_p(GPU, "precision", {"case": "sweep", "preset": "bf16", "n": 8192, "impl": "jax"},
               {"peak_fraction": peak_fraction, **_t(1.0)}),
            _p(GPU, "training", {"case": "throughput", "width": 8192, "impl": "jax"},
               {"samples_per_s": 100.0 * step_speedup}),
            _p(CPU, "training", {"case": "throughput", "width": 8192, "impl": "jax"}, {"samples_per_s": 100.0})]


SCENARIOS = {
    "C01": {"supported": c01(264), "supported with caveats": c01(50), "contradicted": c01(5)},
    "C02": {"supported": c02(0.99, 0.8), "supported with caveats": c02(0.99, 0.3), "contradicted": c02(0.5, 0.6),
            "inconclusive": c02(0.99, 1.1)},
    "C03": {"supported": c03(True), "contradicted": c03(False)},
    "C04": {"supported": c04(190), "supported with caveats": c04(130), "contradicted": c04(50)},
    "C05": {"supported": c05(True, True, True), "supported with caveats": c05(True, True, False),
            "contradicted": c05(False, True, False)},
    "C06": {"supported": c06(20), "supported with caveats": c06(5), "contradicted": c06(1.5),
            "inconclusive": c06(10, spread=0.2)},
    "C07": {"supported": c07(20), "supported with caveats": c07(5), "contradicted": c07(1)},
    "C08": {"supported": c08(100), "supported with caveats": c08(3), "contradicted": c08(1)},
    "C09": {"supported": c09(0.01, 0.03), "supported with caveats": c09(0.05, 0.3), "contradicted": c09(0.01, 0.18),
            "inconclusive": c09(0.01, -0.1)},
    "C10": {"supported": c10(3.0, 0.05), "supported with caveats": c10(3.0, 0.3), "contradicted": c10(1.5, 0.05)},
    "C11": {"supported": c11(0.27), "supported with caveats": c11(0.6), "contradicted": c11(0.9)},
    "C12": {"supported": c12(10), "supported with caveats": c12(3), "contradicted": c12(1.5),
            "inconclusive": c12(5, spread=0.2)},
    "C13": {"supported": c13((4, 2, 5)), "supported with caveats": c13((4, 1.0, 5)), "contradicted": c13((1, 1, 1)),
            "inconclusive": c13((4, 1.12, 5), spread=0.1)},
    "C14": {"supported": c14(0.9, 2.0), "supported with caveats": c14(0.9, 1.2), "contradicted": c14(0.9, 0.9),
            "inconclusive": c14(0.9, 1.5, spread=0.2)},
    "C15": {"supported": c15(6.0, 2), "supported with caveats": c15(1.2, 2), "contradicted": c15(0.8, 2),
            "inconclusive": c15(6.0, None)},
    "C16": {"supported": c16(3.0, 3.0), "supported with caveats": c16(1.5, 3.0), "contradicted": c16(1.0, 3.0)},
    "C17": {"supported": c17(0.9), "supported with caveats": c17(0.5), "contradicted": c17(0.9, agree="failed")},
    "C18": {"supported": c18(0.7, 50), "supported with caveats": c18(0.7, 3), "contradicted": c18(0.2, 3)},
}


def _verdict(cid, pairs):
    return dict((c.id, v) for c, v in claims.ledger(pairs))[cid]


@pytest.mark.parametrize("cid", sorted(SCENARIOS))
def test_each_rule_reaches_every_verdict_it_names(cid):
    for verdict, pairs in SCENARIOS[cid].items():
        got = _verdict(cid, pairs)
        assert got.verdict == verdict, (cid, verdict, got)
    # every grade a rule's text names is reached by one of its scenarios
    assert {"supported", "contradicted"} <= set(SCENARIOS[cid]), cid


@pytest.mark.parametrize("cid", sorted(SCENARIOS))
def test_a_rule_without_one_of_its_inputs_does_not_grade(cid):
    pairs = SCENARIOS[cid]["supported"]
    for i in range(len(pairs)):
        got = _verdict(cid, pairs[:i] + pairs[i + 1:])
        assert got.verdict not in GRADES or (cid, i) in _STILL_DECIDED, (cid, i, got)


# Inputs whose absence legitimately leaves a decision: C03's other dtype (one exact product is still
# evidence of the worked example).
_STILL_DECIDED = {("C03", 0), ("C03", 1)}


@pytest.mark.parametrize("cid", sorted(SCENARIOS))
def test_a_damaged_record_is_not_graded(cid):
    for i, (run, rec) in enumerate(SCENARIOS[cid]["supported"]):
        damaged = results.Record(rec.experiment, rec.params, {}, run_id="r", backend=rec.backend,
                                 device_kind=rec.device_kind)  # its metrics lost
        pairs = list(SCENARIOS[cid]["supported"])
        pairs[i] = (run, damaged)
        got = _verdict(cid, pairs)
        assert got.verdict not in GRADES or (cid, i) in _STILL_DECIDED | _DAMAGE_OK, (cid, i, got)


# A record whose metrics are gone but that is still evidence by its presence: C17's failed agreement
# would be contradicted anyway; C15's GPU record without library calls is read as none.
_DAMAGE_OK = {("C17", 0)}


def test_each_rule_text_is_made_of_its_thresholds():
    import string

    for c in claims.CLAIMS:
        fields = {f for _, f, _, _ in string.Formatter().parse(c.template) if f}
        assert fields == set(c.thresholds), (c.id, sorted(fields), sorted(c.thresholds))
        for name, value in c.thresholds.items():  # the printed rule changes with the threshold it names
            assert c.template.format(**{**c.thresholds, name: value * 3 + 7}) != c.rule_text, (c.id, name)


def _moved(value: float) -> list[float]:
    return [value * 1e3 + 1e3, value / 1e3, 0.0, -1e3]


@pytest.mark.parametrize("cid", sorted(SCENARIOS))
def test_each_rule_applies_the_thresholds_its_text_prints(cid):
    # a threshold written into the rule's code instead of read from the claim would not move any verdict
    claim = claims.by_id(cid)
    for name, value in claim.thresholds.items():
        moved = False
        for pairs in SCENARIOS[cid].values():
            base = claims.decide(claim, Evidence(pairs))[0].verdict
            for other in _moved(value):
                got = claims.decide(claim, Evidence(pairs), thresholds={**claim.thresholds, name: other})[0]
                moved |= got.verdict != base
        assert moved, (cid, name)


# The GPU check runs the study in parts, each a run of its own: a rule that pairs a GPU run with its CPU run reads,
# for each of its inputs, the GPU run that holds it (of two tries of one part, the later).
PART_1 = results.Run(Path("gpu-part-1-try-1"), {**GPU.meta, "run_id": "20261206T120000Z-aaaaaa"}, ())
PART_2 = results.Run(Path("gpu-part-2-try-1"), {**GPU.meta, "run_id": "20261206T121000Z-bbbbbb"}, ())


def _split(pairs, part_of):
    """``pairs`` with each GPU record moved into the part ``part_of(record)`` names."""
    return [((part_of(rec) if run is GPU else run), rec) for run, rec in pairs]


@pytest.mark.parametrize("cid, part_of", [
    ("C18", lambda rec: PART_1 if rec.experiment == "precision" else PART_2),  # the product in part 1, the step in 2
    ("C18", lambda rec: PART_2 if rec.experiment == "precision" else PART_1),
    ("C05", lambda rec: PART_1 if rec.params["kind"] == "independent" else PART_2),
    ("C07", lambda rec: PART_2),
])
def test_a_rule_reads_each_input_from_the_gpu_run_that_holds_it(cid, part_of):
    for verdict, pairs in SCENARIOS[cid].items():
        assert _verdict(cid, _split(pairs, part_of)).verdict == verdict, (cid, verdict)


def test_of_two_tries_holding_a_case_the_later_is_read():
    earlier, later = (results.Run(Path(f"gpu-part-1-try-{i}"), {**GPU.meta, "run_id": f"20261206T12{i}000Z-x"}, ())
                      for i in (1, 2))
    sweep = lambda run, frac: _p(run, "precision", {"case": "sweep", "preset": "bf16", "n": 8192, "impl": "jax"},
                                 {"peak_fraction": frac, **_t(1.0)})
    steps = c18(0.7, 50)[1:]
    for first, second in ((earlier, later), (later, earlier)):  # in either order of the merge
        pairs = [sweep(first, 0.2 if first is earlier else 0.7), sweep(second, 0.2 if second is earlier else 0.7),
                 *steps]
        assert _verdict("C18", pairs).verdict == "supported"
