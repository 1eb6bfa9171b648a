"""The compiled plans a run keeps beside its records, and the predictions priced on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxgpu.ground import launches
from jaxgpu.pricing import plans, roofline
from jaxgpu.records import results

from experiments.analysis import pricing as view


def _kernel(name, flops, nbytes, is_dot=False, count=1, gemm=None, dtype="f32"):
    return launches.Kernel(name, flops, nbytes, is_dot, count, gemm, dtype)


def test_alike_kernels_merge_and_come_back_whole():
    ks = [_kernel("add.1", 10, 40), _kernel("add.2", 10, 40, count=3),
          _kernel("dot", 2e6, 3e4, True, 1, (1, 100, 100, 100))]
    rows = plans.compact(ks)
    assert len(rows) == 2
    back = plans.expand(json.loads(json.dumps(rows)))
    assert sum(k.count for k in back) == 5 and back[1].gemm == (1, 100, 100, 100) and back[1].is_dot
    assert sum(k.flops * k.count for k in back) == sum(k.flops * k.count for k in ks)


def test_the_timed_program_is_the_one_whose_counts_the_record_carries():
    import jax
    import jax.numpy as jnp

    from jaxgpu.ground import timing

    x = jnp.ones((64, 64))
    with timing.collecting_programs() as programs:
        matmul = timing.time_jitted(jax.jit(jnp.matmul), x, x, target_s=0.0, min_iters=1, warmup=0)
        timing.time_jitted(jax.jit(lambda a: a * 2.0 + 1.0), x, target_s=0.0, min_iters=1, warmup=0)
    assert len(programs) == 2
    assert plans.timed_program(matmul.metrics(), programs) is programs[0]
    assert plans.timed_program({"time_s_median": 1.0}, programs) is None  # no counts: no join
    (own,) = plans.of_case(matmul.metrics(), programs, "cpu")
    assert own["plan"] == "xla:cpu" and any(k[3] for k in own["kernels"])  # the product is there, as a dot


def test_a_cpu_run_compiles_its_timed_programs_for_the_gpu_where_the_extra_is_installed():
    import jax
    import jax.numpy as jnp

    from jaxgpu.ground import timing
    from jaxgpu.pricing import targets

    if targets.unavailable():
        pytest.skip(targets.unavailable())
    assert plans.gpu_targets("cpu", "measured") == plans.GPU_TARGETS
    assert plans.gpu_targets("cpu", "compiled") == () and plans.gpu_targets("gpu", "measured") == ()
    x = jnp.ones((256, 256), jnp.bfloat16)
    with timing.collecting_programs() as programs:
        t = timing.time_jitted(jax.jit(jnp.matmul), x, x, target_s=0.0, min_iters=1, warmup=0)
    got = {p["plan"]: p for p in plans.of_case(t.metrics(), programs, "cpu", ("h200",))}
    assert set(got) == {"xla:cpu", "xla:gpu h200", "xla:gpu h200, triton gemm"}
    gemm = [k for k in plans.expand(got["xla:gpu h200"]["kernels"]) if k.is_dot]
    assert gemm and gemm[0].dtype == "bf16" and gemm[0].gemm == (1, 256, 256, 256)
    # a quick run leaves the Triton choice out
    assert {p["plan"] for p in plans.of_case(t.metrics(), programs, "cpu", ("h200",), triton=False)} == {
        "xla:cpu", "xla:gpu h200"}


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / results.PLANS_FILE
    p.write_text("".join(line + "\n" for line in lines))
    return p


def test_a_damaged_plan_line_is_dropped_with_a_warning_and_the_rest_read(tmp_path):
    good = {"schema": results.SCHEMA, "key": "matmul:{}", "plan": "xla:cpu", "loop_steps": 0,
            "kernels": plans.compact([_kernel("add", 1, 8)])}
    path = _write(tmp_path, [json.dumps(good), '{"schema": 1, "key": "x"', json.dumps({**good, "schema": 99})])
    with pytest.warns(UserWarning, match="2 line"):
        got = results.read_plans(path)
    assert list(got) == ["matmul:{}"] and got["matmul:{}"]["xla:cpu"]["loop_steps"] == 0
    assert results.read_plans(tmp_path / "none.jsonl") == {}


def test_the_writer_puts_each_records_plans_beside_it(tmp_path):
    rec = results.Record("matmul", {"n": 8}, {"time_s_median": 1.0, "flops_xla": 1.0, "bytes_xla": 8.0}, run_id="r")
    plan = {"plan": "xla:cpu", "loop_steps": 0, "kernels": plans.compact([_kernel("add", 1, 8)])}
    with results.RunWriter(tmp_path, {"run_id": "r"}, new=True) as w:
        w.write(rec, [plan])
        w.write(results.Record("matmul", {"n": 9}, {}, status="failed", reason="x", run_id="r"))
    run = results.read_run(tmp_path)
    assert set(run.plans) == {rec.key} and run.plans[rec.key]["xla:cpu"]["kernels"] == plan["kernels"]


RUN = results.Run(Path("reports/cpu-x"), {"env": {"backend": "cpu", "cpu_model": "X", "cpu_cores": 2}}, ())


def _with_plans(recs, plan_rows):
    return results.Run(RUN.path, RUN.meta, tuple(recs), plan_rows)


def _records():
    t = lambda s: {"time_s_median": s}
    return [
        results.Record("matmul", {"impl": "jax", "n": 1024}, {"gflops": 100.0, "flops_xla": 2e9, "bytes_xla": 1.2e7,
                                                             **t(0.021)}, backend="cpu"),
        results.Record("roofline", {"kind": "fma", "k": 16}, {"gflops": 10.0, "flops_xla": 1e9, "bytes_xla": 8e8,
                                                             **t(0.1)}, backend="cpu"),
        results.Record("bandwidth", {"impl": "jax", "kernel": "triad", "variant": "jit", "n": 1 << 25,
                                     "dtype": "float32"}, {"gbytes_per_s": 10.0, "flops_xla": 6.7e7, "bytes_xla": 4e8,
                                                           **t(0.04)}, backend="cpu"),
        results.Record("serial_parallel", {"kind": "independent", "variant": "vectorized", "n": 1},
                       {"flops_xla": 2.0, "bytes_xla": 8.0, **t(1e-5)}, backend="cpu"),
        results.Record("inference", {"case": "batch", "batch": 8}, {"flops_xla": 1e6, "bytes_xla": 1e6,
                                                                    **t(1e-3)}, backend="cpu"),
    ]


def test_a_record_with_a_plan_is_priced_kernel_by_kernel_and_one_without_from_its_counts():
    recs = _records()
    inf = recs[-1]
    # the step as XLA:CPU compiled it: a product and 10 elementwise kernels of 1 MB each
    cpu = plans.compact([_kernel("dot", 1e6, 1e5, True, 1, (1, 10, 100, 500))] + [_kernel("e", 1e3, 1e6)] * 10)
    run = _with_plans(recs, {inf.key: {"xla:cpu": {"loop_steps": 0, "kernels": cpu}}})
    roofs = view.measured_roofs(run, recs)
    with_plan = view.predicted_s(inf, roofs, run=run)
    counts = view.predicted_s(inf, roofs, run=RUN)
    assert with_plan == pytest.approx(roofline.price(plans.expand(cpu), roofs, exclude=inf.key).estimate_s)
    assert with_plan > 10 * 1e6 / roofs.bandwidth_at(1e6) and counts < with_plan  # counts as one kernel: a bound
    assert view.priced(inf, roofs, [])[1] == "counts"


def test_a_twin_is_priced_on_xla_gpus_plan_and_another_gpu_on_the_h200s_named_so():
    recs = _records()
    inf = recs[-1]
    gpu = plans.compact([_kernel("gemm", 1e6, 1e5, True, 1, (1, 10, 100, 500), "bf16")])
    run = _with_plans(recs, {inf.key: {"xla:gpu h200": {"loop_steps": 0, "kernels": gpu},
                                       "xla:gpu h200, triton gemm": {"loop_steps": 0, "kernels": gpu + gpu}}})
    (h200,) = {name for *_, name in view.gpu_plans(run, inf, "H200 SXM")} - {"xla:gpu h200, triton gemm"}
    assert h200 == "xla:gpu h200"
    assert all("standing in for the A100 80GB" in name for *_, name in view.gpu_plans(run, inf, "A100 80GB"))
    roofs = roofline.roofs_for(roofline.hardware.GPUS["H200 SXM"])
    t, name = view.priced(inf, roofs, view.gpu_plans(run, inf, "H200 SXM"), own=False)
    assert name == "xla:gpu h200"  # the cheaper of the two GEMM choices, as an autotuner keeps
    assert t == pytest.approx(roofline.price(plans.expand(gpu), roofs).estimate_s)
    twin = next(r for _, r in view.predicted_pairs([run]) if r.key == inf.key)
    assert twin.metrics["time_s_median"] == pytest.approx(t)


def test_exp_log_and_pow_are_counted_apart_and_priced_at_their_own_rate():
    import jax
    import jax.numpy as jnp

    hlo = jax.jit(lambda x: jnp.exp(x) * 2.0 + jnp.log(x)).lower(jnp.ones(1000)).compile().as_text()
    (k,) = [k for k in launches.kernels(hlo) if k.flops]
    assert k.transcendentals == 2000 and k.flops >= 3000
    slow = roofline.Roofs("x", {"elementwise": 1e12, "transcendental": 1e6}, 1e12, 0.0, "test")
    fast = roofline.Roofs("x", {"elementwise": 1e12}, 1e12, 0.0, "test")
    assert roofline.price([k], slow).estimate_s == pytest.approx(2000 / 1e6 + (k.flops - 2000) / 1e12)
    assert roofline.price([k], fast).estimate_s < 1e-6  # without a measured rate, one FLOP each, as XLA counts


def test_a_loop_timed_per_kernel_is_priced_as_its_share_of_the_loop_program():
    rec = results.Record("bandwidth", {"impl": "jax", "kernel": "triad", "variant": "loop", "n": 8},
                         {"time_s_median": 1.0, "flops_xla": 2.0, "bytes_xla": 100.0, "kernels_per_call": 10.0})
    assert view.timed_as(rec) == ("time_s_median", 0.1, 2.0, 100.0)


def test_the_report_prices_on_the_plans_its_runs_kept():
    from experiments.reporting import build

    recs = _records()
    inf = recs[-1]
    cpu = plans.compact([_kernel("e", 1e3, 1e6)] * 10)
    run = _with_plans(recs, {r.key: {"xla:cpu": {"loop_steps": 0, "kernels": cpu}} for r in recs})
    text = " ".join(p for s in build.build_sections([run]) for p in s.paragraphs)
    assert "Each was priced on the plan the run compiled" in text
    text = " ".join(p for s in build.build_sections([RUN.__class__(RUN.path, RUN.meta, tuple(recs))])
                    for p in s.paragraphs)
    assert "kept no compiled plans" in text and inf.key


def test_a_thread_pool_wake_seen_in_the_stream_curve_is_paid_once_per_program():
    # triad points: 3 KB in 1 us, then 6 KB in 61 us and 96 KB in 80 us (the pool waking, then bytes)
    curve = ((3072.0, 3072 / 1e-6, "a"), (6144.0, 6144 / 61e-6, "b"), (98304.0, 98304 / 80e-6, "c"))
    roofs = roofline.Roofs("x", {"elementwise": 1e12}, 1e10, 0.0, "test", bandwidth_curve=curve)
    at, wake = roofs.split()
    assert at == pytest.approx((3072 * 6144) ** 0.5) and wake == pytest.approx(60e-6)  # between the two sizes
    # a kernel between the sizes on either side of the jump is split too: priced without the point at 6 kB, a
    # curve whose next point is 12 kB still wakes the pool for a 6 kB kernel
    wider = roofline.Roofs("x", {"elementwise": 1e12}, 1e10, 0.0, "test",
                          bandwidth_curve=(*curve, (12288.0, 12288 / 62e-6, "b2")))
    assert wider.split(exclude="b")[0] <= 6144 < 12288
    assert roofs.bandwidth_at(98304) == pytest.approx(98304 / 20e-6)  # the bytes' own time, the wake apart
    small = _kernel("f", 10.0, 50_000.0)
    one = roofline.price([small], roofs).estimate_s
    ten = roofline.price([small] * 10, roofs).estimate_s
    assert one > 60e-6 and ten - one == pytest.approx(9 * (one - 60e-6))  # woken once, not ten times
    # a kernel that may update its buffer in place is never split: no wake
    dus = _kernel("select_dynamic-update-slice_fusion", 10.0, 50_000.0)
    assert roofline.price([dus], roofs).estimate_s < 30e-6
    # without a point on both sides of the jump there is none to find
    assert roofs.split(exclude="a") == (float("inf"), 0.0)
    flat = roofline.Roofs("x", {"elementwise": 1e12}, 1e10, 0.0, "test", bandwidth_curve=curve[1:])
    assert flat.split() == (float("inf"), 0.0)
    # leaving the last-level cache for DRAM (50 MB in 1.1 ms, 200 MB in 7.6 ms) is bytes, not a wake
    dram = roofline.Roofs("x", {"elementwise": 1e12}, 1e10, 0.0, "test",
                         bandwidth_curve=((5e7, 5e7 / 1.1e-3, "d"), (2e8, 2e8 / 7.6e-3, "e")))
    assert dram.split() == (float("inf"), 0.0)


def test_pow_is_counted_apart_and_priced_at_the_pow_chains_rate():
    import jax
    import jax.numpy as jnp

    from jaxgpu.kernels import chains

    hlo = jax.jit(chains.power_chain(3)).lower(jnp.ones(100)).compile().as_text()
    (k,) = [k for k in launches.kernels(hlo) if k.flops]
    assert k.powers == 300 and k.transcendentals == 300
    assert launches.Kernel.from_list(k.to_list()) == k and launches.Kernel.from_list(k.to_list()[:10]).powers == 0.0
    rates = {"elementwise": 1e12, "transcendental": 1e9}
    slow = roofline.price([k], roofline.Roofs("x", {**rates, "power": 1e8}, 1e12, 0.0, "test")).estimate_s
    as_exp = roofline.price([k], roofline.Roofs("x", rates, 1e12, 0.0, "test")).estimate_s
    assert slow == pytest.approx(300 / 1e8, rel=0.01) and as_exp == pytest.approx(300 / 1e9, rel=0.01)
    p = chains.bench_power(2, 1 << 10, target_s=0.0)
    assert p.metrics()["powers_per_s"] > 0 and "transcendentals_per_s" not in p.metrics()


def test_a_call_over_several_host_devices_is_priced_as_the_one_machine_runs_it():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxgpu.ground import timing

    mesh = jax.make_mesh((4,), ("x",), devices=jax.devices("cpu")[:4])
    x = jax.device_put(jnp.ones(1 << 16), NamedSharding(mesh, P("x")))
    with timing.collecting_programs() as programs:
        t = timing.time_jitted(jax.jit(lambda a: a * 2.0 + 1.0), x, target_s=0.0, min_iters=1, warmup=0)
    (own,) = plans.of_case(t.metrics(), programs, "cpu")
    assert own["devices"] == 4 and launches.devices("HloModule m, entry_computation_layout={()->()}") == 1
    one = plans.expand(own["kernels"])
    assert sum(k.bytes for k in one) == pytest.approx(t.metrics()["bytes_xla"])  # one device's quarter
    recs = _records()
    rec = results.Record("bandwidth", {"impl": "jax", "kernel": "triad", "variant": "sharded", "n": 1 << 16},
                         t.metrics(), backend="cpu")
    row = {"loop_steps": 0, "kernels": own["kernels"]}
    shared = _with_plans(recs + [rec], {rec.key: {"xla:cpu": {**row, "devices": 4}}})
    alone = _with_plans(recs + [rec], {rec.key: {"xla:cpu": row}})
    roofs = view.measured_roofs(shared, recs)
    (ks, _, _), = view.own_plans(shared, rec)
    assert sum(k.bytes for k in ks) == pytest.approx(4 * sum(k.bytes for k in one))
    assert view.predicted_s(rec, roofs, run=shared) > view.predicted_s(rec, roofs, run=alone)
