"""Roofline predictions: the bound's arithmetic, XLA's kernels, and the report's use of both."""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from jaxgpu.ground import hardware
from jaxgpu.pricing import roofline
from jaxgpu.records import results

from experiments.analysis import pricing as view

ROOFS = roofline.Roofs("test", {"fp32": 100e9, "elementwise": 10e9, "bf16": 400e9}, 10e9, 1e-5, "by hand", 1e-6)


def test_the_bound_by_hand():
    p = roofline.bound(2e9, 1e8, ROOFS)  # 20 ms of compute, 10 ms of memory
    assert p.lower_s == pytest.approx(0.02 + 1e-5) and p.upper_s == pytest.approx(0.03 + 1e-5)
    assert p.bound == "compute"
    assert roofline.bound(2e9, 1e8, ROOFS, "bf16").bound == "memory"  # 5 ms of compute now
    assert roofline.bound(0, 0, ROOFS, loop_steps=1000).lower_s == pytest.approx(1e-5 + 1e-3)


def test_gpu_roofs_are_datasheet_times_achieved_shares():
    r = roofline.roofs_for(hardware.GPUS["H200 SXM"])
    assert r.bandwidth == pytest.approx(4.3e12)  # the copy measured on the lent H200
    assert r.flops["bf16"] == pytest.approx(794.5e12)  # an H100's bf16 MAMF, the same processor
    assert r.flops["fp8"] == pytest.approx(1453.4e12)  # its own fp8 MAMF
    assert r.flops["elementwise"] == pytest.approx(51.34e12)  # its fp32 torch.mm, the SIMT lanes' share
    b200 = roofline.roofs_for(hardware.GPUS["B200"])
    assert b200.flops["bf16"] == pytest.approx(1745.0e12) and b200.shares["memory"].stand_in == "H200 SXM"
    assert "H200 SXM's, standing in" in b200.source


def test_kernels_are_read_from_the_optimised_program():
    f = lambda x, w: jax.nn.gelu(x @ w) * 2 + 1
    x, w = jnp.ones((256, 512)), jnp.ones((512, 128))
    ks = roofline.kernels(jax.jit(f).lower(x, w).compile().as_text())
    assert ks and any(k.is_dot for k in ks)
    assert sum(k.flops for k in ks) >= 2 * 256 * 512 * 128
    assert sum(k.bytes for k in ks) >= 4 * (256 * 512 + 512 * 128 + 256 * 128)


def test_an_unfused_product_is_counted_from_the_shapes_of_what_it_reads():
    # a layer's weight gradient, x^T g: XLA:CPU leaves it a plain dot whose operands are other kernels' results
    f = jax.grad(lambda w, x: jnp.sum(jnp.maximum(x @ w, 0.0) ** 2))
    x, w = jnp.ones((256, 128)), jnp.ones((128, 64))
    compiled = jax.jit(f).lower(w, x).compile()
    dots = [k for k in roofline.kernels(compiled.as_text()) if k.is_dot]
    assert len(dots) == 2 and all(k.flops == 2 * 256 * 128 * 64 for k in dots)
    assert {k.gemm for k in dots} == {(1, 256, 64, 128), (1, 128, 64, 256)} and all(k.precision != "" for k in dots)
    xla = compiled.cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    assert sum(k.flops * k.count for k in roofline.kernels(compiled.as_text())) == pytest.approx(xla["flops"], rel=0.05)


def test_predict_says_which_roof_binds():
    big = jnp.ones((1024, 1024))
    mm = roofline.predict(lambda a, b: a @ b, big, big, on="H200 SXM")
    assert mm.bound == "compute" and mm.lower_s <= mm.upper_s
    vec = roofline.predict(lambda a: a * 2 + 1, jnp.ones(1 << 22), on="H200 SXM")
    assert vec.bound == "memory"
    with pytest.raises(KeyError, match="unknown GPU"):
        roofline.predict(lambda a: a, big, on="TPU v9")


RUN = results.Run(Path("cpu-run"), {"env": {"backend": "cpu", "device_kind": "cpu", "cpu_model": "X"}}, ())


def _rec(experiment, params, metrics):
    return results.Record(experiment, params, metrics, backend="cpu", device_kind="cpu")


def _records():
    t = lambda s: {"time_s_median": s}
    return [
        _rec("matmul", {"impl": "jax", "n": 1024}, {"gflops": 100.0, "flops_xla": 2e9, "bytes_xla": 1.2e7, **t(0.021)}),
        _rec("roofline", {"kind": "fma", "k": 16}, {"gflops": 10.0, "flops_xla": 1e9, "bytes_xla": 8e8, **t(0.1)}),
        _rec("bandwidth", {"impl": "jax", "kernel": "triad", "variant": "jit", "n": 1 << 25, "dtype": "float32"},
             {"gbytes_per_s": 10.0, "flops_xla": 6.7e7, "bytes_xla": 4e8, **t(0.04)}),
        _rec("serial_parallel", {"kind": "independent", "variant": "vectorized", "n": 1},
             {"flops_xla": 2.0, "bytes_xla": 8.0, **t(1e-5)}),
    ]


def test_the_run_predicts_its_own_records_from_its_own_roofs():
    recs = _records()
    roofs = view.measured_roofs(RUN, recs)
    assert roofs.flops["fp32"] == 100e9 and roofs.flops["elementwise"] == 10e9 and roofs.bandwidth == 10e9
    errs = {r.experiment: ratio for r, _, ratio in view.errors(RUN, recs)}
    assert errs["matmul"] == pytest.approx(0.021 / (0.02 + 1e-5))
    assert view.measured_roofs(RUN, recs[1:]) is None  # no matmul: no compute roof, no prediction


def test_predicted_gpu_records_carry_times_rates_and_counts_and_pair_with_their_cpu_run():
    cpu = _records()
    pairs = view.predicted_pairs([results.Run(RUN.path, RUN.meta, tuple(cpu))])
    assert pairs and all(r.backend == "gpu" for _, r in pairs)
    assert pairs[0][0].host == RUN.host  # the CPU run's own host: the ledger sets them side by side
    assert pairs[0][0].predicted and "not run" in pairs[0][0].label
    assert pairs[0][0].hardware.name == "H200 SXM"  # the figure's limit lines are the predicted GPU's
    mm = next(r for _, r in pairs if r.experiment == "matmul")
    t = mm.metrics["time_s_median"]
    assert set(mm.metrics) == {"time_s_median", "time_s_min", "time_s_max", "time_s_q25", "time_s_q75", "gflops",
                               "flops_xla", "bytes_xla"}  # no error, no loss: those a bound cannot predict
    assert mm.metrics["gflops"] == pytest.approx(100.0 * 0.021 / t)  # the same work in the predicted time
    assert mm.metrics["flops_xla"] == 2e9


def test_host_only_variants_get_no_gpu_twin():
    sharded = _rec("bandwidth", {"impl": "jax", "kernel": "triad", "variant": "sharded", "n": 1 << 25,
                                 "dtype": "float32"}, {"gbytes_per_s": 9.0, "flops_xla": 1e7, "bytes_xla": 1e8,
                                                      "time_s_median": 0.05})
    pairs = view.predicted_pairs([results.Run(RUN.path, RUN.meta, tuple(_records() + [sharded]))])
    assert sharded.key not in {r.key for _, r in pairs}
    assert any(r.experiment == "bandwidth" for _, r in pairs)


def test_a_compiled_plan_that_widens_a_format_prices_it_at_the_wider_roof():
    fp8 = _rec("precision", {"impl": "jax", "preset": "fp8_e5m2", "n": 4096, "case": "sweep"},
               {"gflops": 50.0, "flops_xla": 2 * 4096.0**3, "bytes_xla": 3 * 4096.0**2, "time_s_median": 2.7})
    cpu = results.Run(RUN.path, RUN.meta, tuple(_records() + [fp8]))
    alone = {r.key: r.metrics["time_s_median"] for _, r in view.predicted_pairs([cpu])}
    plan = results.Record("precision", {"case": "plan", "n": 1024, "preset": "fp8_e5m2"},
                          {"upcast_bits": 16.0, "upcast_to_fp32": 0.0}, backend="gpu", device_kind="NVIDIA H200",
                          mode="compiled")
    compiled = results.Run(Path("compiled-h200"), {"env": {"backend": "gpu", "device_kind": "NVIDIA H200"},
                                                    "mode": "compiled",
                                                    "hardware": dataclasses.asdict(hardware.GPUS["H200 SXM"])},
                           (plan,))
    assert view.compiled_plan([cpu, compiled], "H200 SXM") == {"fp8_e5m2": "bf16"}
    assert view.compiled_plan([cpu, compiled], "A100 80GB") == {}  # a plan speaks for its own GPU only
    widened = {r.key: r.metrics["time_s_median"] for _, r in view.predicted_pairs([cpu, compiled])}
    roofs = roofline.roofs_for(hardware.GPUS["H200 SXM"])
    at = lambda dtype: roofline.bound(fp8.metrics["flops_xla"], fp8.metrics["bytes_xla"], roofs, dtype).lower_s
    assert alone[fp8.key] == pytest.approx(at("fp8")) and widened[fp8.key] == pytest.approx(at("bf16"))
    assert widened[fp8.key] > 1.7 * alone[fp8.key]  # the H200's fp8 roof is 1,453 TFLOP/s, its bf16 794


def test_a_time_to_target_is_priced_as_its_steps():
    to_target = _rec("training", {"case": "to_target", "width": 1024, "batch": 128, "target": 0.9},
                     {"time_s_to_target": 30.0, "steps": 500.0, "step_flops_xla": 1e9, "step_bytes_xla": 1e7})
    assert view.timed_as(to_target) == ("time_s_to_target", 500.0, 1e9, 1e7)
    one = roofline.bound(1e9, 1e7, ROOFS).lower_s
    assert view.predicted_s(to_target, ROOFS) == pytest.approx(500 * one)
    twin = view.predicted_record(to_target, 3.0, "NVIDIA H200 SXM, predicted")
    assert twin.metrics["time_s_to_target"] == 3.0 and twin.metrics["steps"] == 500.0
    assert view.timed_as(_rec("training", {"case": "curve"}, {"loss": 1.0})) is None


def test_predictions_are_recomputed_from_the_records():
    run = results.Run(RUN.path, RUN.meta, tuple(_records()))
    assert view.measured_roofs(run, list(run.records)).flops["fp32"] == 100e9
    errs = view.errors(run, list(run.records))
    assert len(errs) == len(view.timed(run.records)) == 4
    assert all(p == view.predicted_s(r, view.measured_roofs(run, list(run.records))) for r, p, _ in errs)
    # a stale time_s_predicted (older runs stored one) is not read: the model's figure is the model's
    stale = [dataclasses.replace(r, metrics={**r.metrics, "time_s_predicted": 1e9}) for r in run.records]
    assert [p for _, p, _ in view.errors(run, stale)] == [p for _, p, _ in errs]
    assert view.errors(run, list(run.records)[1:]) == []  # without its matmul the run has no roofs


def test_a_merged_gpu_run_turns_the_predictions_into_errors():
    from experiments.reporting import build as report

    cpu = results.Run(RUN.path, RUN.meta, tuple(_records()))
    table = report.predicted_tables([cpu])["matmul"]
    assert table.headers[3] == "H200 predicted (ms)" and len(table.headers) == 5
    assert "(not run)" in report.ledger_section(results.merge([cpu])).tables[0].headers[2]
    predicted = {r.key: r.metrics["time_s_median"] for _, r in view.predicted_pairs([cpu])}
    # an H200 run that measured every case at twice the prediction
    gpu_env = {"backend": "gpu", "device_kind": "NVIDIA H200", "cpu_model": "X"}
    gpu = results.Run(Path("gpu-run"), {"env": gpu_env}, tuple(
        results.Record(r.experiment, r.params, {**r.metrics, "time_s_median": 2 * predicted[r.key]}, backend="gpu",
                       device_kind="NVIDIA H200") for r in _records() if r.key in predicted))
    assert view.gpu_of([cpu, gpu]) == hardware.gpu_spec("NVIDIA H200").name
    tables = report.predicted_tables([cpu, gpu])
    assert set(tables) == {r.experiment for r in _records()}
    for t in tables.values():
        assert t.headers[-1] == "prediction error" and t.rows and all(row[-1] == "-50%" for row in t.rows), t.rows
    ledger = report.ledger_section(results.merge([cpu, gpu])).tables[0]
    assert ledger.headers[2].startswith("predicted on H200") and "(not run)" not in ledger.headers[2]


def test_the_ledger_forecasts_c07_from_the_time_to_target_steps():
    from experiments.reporting import build as report

    to_target = _rec("training", {"case": "to_target", "width": 1024, "batch": 256, "target": 0.93},
                     {"time_s_to_target": 40.0, "steps": 2000.0, "step_flops_xla": 4e9, "step_bytes_xla": 2e7})
    cpu = results.Run(RUN.path, RUN.meta, tuple(_records() + [to_target]))
    sec = report.ledger_section(results.merge([cpu]))
    i, row = next((i, r) for i, r in enumerate(sec.tables[0].rows) if r[0].startswith("C07"))
    assert row[1] == "not run"  # measured: no GPU ran
    twin = next(r for _, r in view.predicted_pairs([cpu]) if r.experiment == "training")
    speedup = 40.0 / twin.metrics["time_s_to_target"]
    verdict = "supported" if speedup >= 10 else "supported with caveats" if speedup >= 2 else "contradicted"
    assert row[2] == verdict, row
    # the figure behind the prediction is folded under the claim, and ledger.json holds it
    assert f"{speedup:.1f}x" in sec.tables[0].details[i]
    item = next(it for it in sec.exports["ledger.json"] if it["claim"] == "C07")
    assert item["predicted_verdict"] == verdict and f"{speedup:.1f}x" in item["predicted_evidence"]


def test_predicted_twins_say_so_and_are_never_written(tmp_path):
    cpu = results.Run(RUN.path, RUN.meta, tuple(_records()))
    twins = view.predicted_pairs([cpu])
    assert twins and all(run.predicted and rec.predicted and rec.mode == "predicted" for run, rec in twins)
    from jaxgpu.records import labels

    assert labels.measured(twins) == []
    with results.RunWriter(tmp_path / "run", {"run_id": "r", "env": RUN.env}) as w:
        with pytest.raises(ValueError, match="predicted record is not written"):
            w.write(twins[0][1])
    assert (tmp_path / "run" / "results.jsonl").read_text() == ""


def test_wave_fill_by_hand():
    # 1024 x 1024 outputs on 132 SMs, k too short to split: 128x128 tiles make 64 tiles, one wave of 132 slots
    assert roofline.wave_fill((1, 1024, 1024, 256), 132, ((128, 128),)) == pytest.approx(64 / 132)
    # the best tile of several: 128x256 gives 32 tiles (32/132), so 128x128 is kept
    assert roofline.wave_fill((1, 1024, 1024, 256), 132, ((128, 256), (128, 128))) == pytest.approx(64 / 132)
    # with k = 1024 the reduction splits in two: 128 tiles of half the work in one wave
    assert roofline.wave_fill((1, 1024, 1024, 1024), 132, ((128, 128),)) == pytest.approx(128 / 132)
    # 132 tiles exactly fill a wave; no SMs to fill: no quantisation
    assert roofline.wave_fill((1, 128 * 12, 128 * 11, 64), 132, ((128, 128),)) == pytest.approx(1.0)
    assert roofline.wave_fill((1, 100, 100, 100), 0, ((128, 128),)) == 1.0
    # a matrix-vector product (one row) uses 1/64 of a 64-row tile at best
    assert roofline.wave_fill((1, 1, 4096, 4096), 108, roofline.TENSOR_TILES) <= 1 / 64


def test_a_small_gemm_is_priced_below_a_large_ones_rate():
    roofs = roofline.roofs_for(hardware.GPUS["H100 SXM"])
    k = lambda n: roofline.Kernel("gemm", 2.0 * n**3, 6.0 * n * n, True, gemm=(1, n, n, n), dtype="bf16")
    rate = lambda n: 2.0 * n**3 / roofline.price([k(n)], roofs).estimate_s
    assert rate(1024) < 0.6 * rate(16384)  # a 1024^3 GEMM fills half a wave of 132 SMs, and its launch shows
    assert rate(16384) == pytest.approx(roofs.flops["bf16"], rel=0.02)


def test_kernels_inside_a_loop_count_its_trips():
    def f(x, w):
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=7)[0]

    x = jnp.ones((64, 64))
    hlo = jax.jit(f).lower(x, x).compile().as_text()
    dots = [k for k in roofline.kernels(hlo) if k.is_dot]
    assert dots and all(k.count == 7 for k in dots)
    from jaxgpu.ground import launches

    assert launches.loop_steps(hlo) == 7


def test_predict_prices_xla_gpus_own_plan_from_shapes_alone():
    from jaxgpu.pricing import targets

    if targets.unavailable():
        pytest.skip(targets.unavailable())
    S = jax.ShapeDtypeStruct
    p = roofline.predict(lambda a, b: a @ b, S((8192, 8192), jnp.bfloat16), S((8192, 8192), jnp.bfloat16), on="h100")
    assert p.plan == "xla:gpu h100" and p.kernels == 1 and p.lower_s <= p.estimate_s <= p.upper_s
    assert 2 * 8192**3 / p.estimate_s == pytest.approx(roofline.roofs_for(hardware.GPUS["H100 SXM"]).flops["bf16"],
                                                       rel=0.05)
    cpu = roofline.predict(lambda a, b: a @ b, S((8192, 8192), jnp.bfloat16), S((8192, 8192), jnp.bfloat16), on="h100",
                          plan="cpu")
    assert cpu.plan == "xla:cpu, estimate"


def test_without_the_extra_predict_falls_back_to_the_cpu_plan_and_says_so(monkeypatch):
    from jaxgpu.pricing import targets

    monkeypatch.setattr(targets, "unavailable", lambda: "the CUDA plugin is not installed")
    S = jax.ShapeDtypeStruct
    p = roofline.predict(lambda a: a * 2, S((1 << 26,), jnp.float32), on="H200 SXM")
    assert p.plan == "xla:cpu, estimate (the CUDA plugin is not installed)" and p.bound == "memory"
    with pytest.raises(RuntimeError, match="the CUDA plugin is not installed"):
        roofline.predict(lambda a: a * 2, S((1 << 20,), jnp.float32), on="H200 SXM", plan="gpu")
    assert roofline.predict(lambda a: a * 2, S((16,), jnp.float32), on="L4").plan == (
        "xla:cpu, estimate (the CUDA plugin is not installed)")


def test_a_gpu_without_a_target_is_priced_on_its_nearest_targets_plan():
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    S = jax.ShapeDtypeStruct
    p = roofline.predict(lambda a, b: a @ b, S((1024, 1024), jnp.bfloat16), S((1024, 1024), jnp.bfloat16), on="L4")
    assert p.plan.startswith("xla:gpu a100, standing in for the L4"), p.plan
    nvl = roofline.predict(lambda a: a * 2, S((1 << 20,), jnp.float32), on="h200 nvl")
    assert nvl.plan == "xla:gpu h200, standing in for the H200 NVL"


def test_on_gpus_prices_a_step_from_its_shapes_on_every_gpu():
    import optax

    import jaxgpu

    model, opt = jaxgpu.MLP(widths=(64, 64)), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: jaxgpu.init_state(model, opt, jax.random.key(0), 32))
    S = jax.ShapeDtypeStruct
    x, y = S((128, 32), jnp.float32), S((128,), jnp.int32)
    step = jaxgpu.make_train_step(model, opt, donate=False)
    table = jaxgpu.on_gpus(step, state, x, y, measure=True, target_s=0.02)
    rows = list(table)
    assert rows[0].measured and rows[0].seconds > 0 and rows[0].plan == "measured"
    assert [r.device for r in rows[1:]] == list(jaxgpu.GPUS)
    for r in rows[1:]:
        assert not r.measured and r.fits and 0 < r.lower_s <= r.seconds <= r.upper_s, r
        # what one device holds: at least the state the step takes and gives back (XLA may alias it)
        params = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(state))
        assert r.bytes_per_device >= params, r
    assert table["H200 SXM"].seconds == pytest.approx(jaxgpu.predict(step, state, x, y, on="h200").estimate_s)
    # the same step named in any spelling, and a step too large for a 24 GB card but not for an H200
    big = S((60_000, 60_000), jnp.float32)  # 14.4 GB in, 14.4 GB out
    fits = {r.device: r.fits for r in jaxgpu.on_gpus(lambda a: a * 2, big, gpus=["h200", "rtx4090"])}
    assert fits == {"H200 SXM": True, "RTX 4090": False}
    assert "predicted, not run" in table._repr_html_()


def test_a_16_bit_stream_kernel_is_not_a_point_of_the_bandwidth_curve():
    # XLA:CPU widens each bf16 element to f32 and back: its triad is slower than its bytes say, and on the curve
    # it would price the fp32 kernel of the same bytes at its rate
    fp32, bf16 = ({"impl": "jax", "kernel": "triad", "variant": "jit", "n": n, "dtype": d}
                  for n, d in ((1 << 24, "float32"), (1 << 25, "bfloat16")))
    recs = _records() + [_rec("bandwidth", fp32, {"gbytes_per_s": 40.0, "bytes_xla": 2e8, "time_s_median": 5e-3}),
                         _rec("bandwidth", bf16, {"gbytes_per_s": 17.0, "bytes_xla": 2e8, "time_s_median": 1.2e-2})]
    keys = {k for *_, k in view.measured_roofs(RUN, recs).bandwidth_curve}
    assert recs[-2].key in keys and recs[-1].key not in keys
    errs = {r.key: ratio for r, _, ratio in view.errors(RUN, recs)}
    assert errs[recs[-1].key] > 1.2  # the bf16 kernel is still priced, on the fp32 curve, and found slower


def test_a_fusion_xla_renamed_takes_its_scope_from_its_body():
    """XLA names some fusions after an op of its own ("reshape.46") rather than JAX's path: a fused attention's
    kernel so renamed is still the fused attention's (its body's ops are), not memory traffic of its own."""
    from jaxgpu.ground import launches

    body = ('%fused_exp (p0: f32[8,64,64]) -> f32[8,64,64] {\n'
            '  %p0 = f32[8,64,64]{2,1,0} parameter(0)\n'
            '  ROOT %e = f32[8,64,64]{2,1,0} exponential(f32[8,64,64]{2,1,0} %p0), '
            'metadata={op_name="jit(step)/checkpoint/flash_attention/exp"}\n}\n\n')
    entry = ('ENTRY %main (x: f32[8,64,64]) -> f32[8,64,64] {\n'
             '  %x = f32[8,64,64]{2,1,0} parameter(0)\n'
             '  ROOT %loop_fusion.1 = f32[8,64,64]{2,1,0} fusion(f32[8,64,64]{2,1,0} %x), kind=kLoop, '
             'calls=%fused_exp, metadata={op_name="NAME"}\n}\n')
    scope = {name: [k.scope for k in launches.kernels(body + entry.replace("NAME", name))]
             for name in ("reshape.46", "jit(step)/checkpoint/flash_attention/exp", "jit(step)/add")}
    assert scope == {"reshape.46": ["flash_attention"], "jit(step)/checkpoint/flash_attention/exp": ["flash_attention"],
                     "jit(step)/add": [""]}


def test_a_triton_plan_xla_gpu_will_not_tile_leaves_the_cublas_plan(monkeypatch):
    """predict prices a program's GEMMs as cuBLAS calls and as Triton fusions and keeps the cheaper, as XLA's
    autotuner would; where XLA:GPU cannot compile the Triton plan (its fixed tiles fit no output: "Couldn't find
    output tile sizes", GPT-2's backward on an A100 target), the cuBLAS plan is the price, not a failure."""
    from jaxgpu.ground import hardware, launches

    gemm = launches.Kernel("gemm", 2.0 * 1024**3, 3 * 2 * 1024**2, True, gemm=(1, 1024, 1024, 1024), dtype="bf16")

    def plan_for(fn, *args, on, plan="auto", triton_gemm=False):
        if triton_gemm:
            raise RuntimeError("INTERNAL: Couldn't find output tile sizes that satisfy hlo")
        return [gemm], 0, "xla:gpu a100"

    monkeypatch.setattr(roofline, "plan_for", plan_for)
    hw = hardware.find_gpu("a100")
    p = roofline.predict(lambda x: x, jnp.ones(4), on=hw)
    assert p.plan == "xla:gpu a100" and p.estimate_s == roofline.price([gemm], roofline.roofs_for(hw)).estimate_s


def test_a_fusion_that_slices_a_few_layers_out_of_a_converted_stack_reads_those_layers():
    """An unrolled step's fusion takes the stacked fp32 weights [L, d, f] and writes a few layers' fp8 copies: it reads
    those layers, at 4 bytes an element, not the whole stack (GPT3 20B's step on 64 H100s: 236 such kernels, each
    priced as reading its 10 GB stack, 0.81 s of its 2.0 s)."""
    from jaxgpu.ground import launches

    body = ('%fused_slices (p0: f32[4,8,16]) -> (f8e4m3fn[1,8,16], f8e4m3fn[1,8,16]) {\n'
            '  %p0 = f32[4,8,16]{2,1,0} parameter(0)\n'
            '  %c = f8e4m3fn[4,8,16]{2,1,0} convert(%p0)\n'
            '  %s1 = f8e4m3fn[1,8,16]{2,1,0} slice(%c), slice={[1:2], [0:8], [0:16]}\n'
            '  %s3 = f8e4m3fn[1,8,16]{2,1,0} slice(%c), slice={[3:4], [0:8], [0:16]}\n'
            '  ROOT %t = (f8e4m3fn[1,8,16]{2,1,0}, f8e4m3fn[1,8,16]{2,1,0}) tuple(%s1, %s3)\n}\n\n')
    entry = ('ENTRY %main (w: f32[4,8,16]) -> (f8e4m3fn[1,8,16], f8e4m3fn[1,8,16]) {\n'
             '  %w = f32[4,8,16]{2,1,0} parameter(0)\n'
             '  ROOT %input_slice_fusion = (f8e4m3fn[1,8,16]{2,1,0}, f8e4m3fn[1,8,16]{2,1,0}) fusion(%w), '
             'kind=kInput, calls=%fused_slices\n}\n')
    (k,) = launches.kernels(body + entry)
    assert k.bytes == 2 * 8 * 16 * 4 + 2 * 8 * 16  # two layers read in fp32, written in fp8
