import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground import precision
from jaxgpu.kernels import matmul
from jaxgpu.records import results

import experiments
from experiments.harness import runner


@pytest.mark.parametrize("name", list(precision.PRESETS))
def test_each_preset_agrees_with_float64_within_its_tolerance(name, device):
    sets = matmul.operands(128, 192, 96, n_sets=1, seed=3)
    r = matmul.bench_jax(sets, name, device, target_s=0.0)
    p = precision.PRESETS[name]
    assert r.rel_error <= p.tolerance, (name, r.rel_error)
    assert r.preset == name and r.dtype == p.operand_dtype
    assert r.metrics()["bytes_per_element"] == np.dtype(p.operand_dtype).itemsize


def test_error_levels_at_n_1024(device):
    sets = matmul.operands(1024, 1024, 1024, n_sets=1, seed=5)
    bf16 = matmul.bench_jax(sets, "bf16", device, target_s=0.0)
    fp32 = matmul.bench_jax(sets, "fp32", device, target_s=0.0)
    assert 1e-3 <= bf16.rel_error <= 1e-2
    assert fp32.rel_error < 1e-5


def test_int8_is_exact_on_integer_inputs(device):
    rng = np.random.default_rng(0)
    a = rng.integers(-127, 128, (64, 256)).astype(np.float32)
    b = rng.integers(-127, 128, (256, 48)).astype(np.float32)
    a[:, 0], b[0, :] = 127, -127  # every row/column reaches 127: per-channel scales are exactly 1
    out = precision.matmul(jnp.asarray(a), jnp.asarray(b), "int8")
    np.testing.assert_array_equal(np.asarray(out), a.astype(np.int64) @ b.astype(np.int64))


def test_scope_applies_and_is_restored_even_on_error():
    a = jnp.asarray(matmul.operands(64, 64, 64, n_sets=1)[0][0])
    fp32 = np.asarray(precision.matmul(a, a))
    with precision.use("bf16") as p:
        assert p.name == "bf16" and precision.get().name == "bf16"
        scoped = np.asarray(precision.matmul(a, a))
        with precision.use("int8"):
            assert precision.get().name == "int8"
        assert precision.get().name == "bf16"
    assert not np.array_equal(scoped, fp32)  # the scope reached the compiled program
    with pytest.raises(RuntimeError):
        with precision.use("fp16"):
            raise RuntimeError("boom")
    assert precision.get().name == "fp32"
    np.testing.assert_array_equal(np.asarray(precision.matmul(a, a)), fp32)


def test_fp64_scope_enables_x64_only_inside():
    with precision.use("fp64"):
        assert jnp.asarray(1.0, dtype=jnp.float64).dtype == jnp.float64
    assert jnp.asarray(1.0).dtype == jnp.float32


def test_unknown_preset_lists_the_known():
    with pytest.raises(KeyError, match="unknown precision preset 'fp4'; known: fp64, fp32"):
        precision.get("fp4")


def test_a_preset_that_does_not_compile_is_reported_unsupported(monkeypatch):
    def no_compile(*a, **k):
        raise RuntimeError("UNIMPLEMENTED: no fp8 GEMM on this backend\nmore")

    monkeypatch.setattr(matmul.timing, "compile_timed", no_compile)
    with pytest.raises(results.Unsupported, match="fp8_e4m3 does not compile"):
        matmul.bench_jax(matmul.operands(8, 8, 8, n_sets=1), "fp8_e4m3")
    case = runner.Case({"preset": "fp8_e4m3"}, lambda: matmul.bench_jax(matmul.operands(8, 8, 8, n_sets=1),
                                                                           "fp8_e4m3").metrics())
    ctx = runner.RunContext("cpu", "cpu", 1, None)
    rec = runner._measure(experiments.load("precision"), case, ctx, "r")
    assert rec.status == "unsupported" and "no fp8 GEMM" in rec.reason


def test_format_table():
    f = {x.name: x for x in precision.formats()}
    assert f["bfloat16"].eps == 2.0**-7 and f["bfloat16"].exponent_bits == 8
    assert f["float16"].max == 65504 and f["float16"].mantissa_bits == 10
    assert f["float8_e4m3fn"].max == 448 and f["float8_e5m2"].max == 57344
    assert f["tf32"].bits == 19 and f["int8"].max == 127
    assert f["float32"].decimal_digits == pytest.approx(7.22, abs=0.01)


def test_low_precision_accumulation_loses_the_sum():
    exact = 0.01 * 4096
    assert abs(precision.accumulate(0.01, 4096, "bfloat16") - exact) / exact > 0.5
    assert abs(precision.accumulate(0.01, 4096, "bfloat16", "float32") - exact) / exact < 0.01
    assert abs(precision.accumulate(0.01, 4096, "float32") - exact) / exact < 1e-4


def test_fp16_range_versus_bf16():
    assert precision.round_trip(70000.0, "float16") == float("inf")
    assert precision.round_trip(70000.0, "bfloat16") == pytest.approx(70000, rel=0.01)
    assert precision.round_trip(1e-8, "float16") == 0.0
    assert precision.round_trip(1e-8, "bfloat16") == pytest.approx(1e-8, rel=0.01)


def test_upcast_is_read_from_the_hlo():
    upcast = ("%p (param_0.1: f16[4,4]) -> f32[4,4] {\n  ROOT %convert.2 = f32[4,4]{1,0} convert(%param_0.1)\n}")
    native = "ROOT %dot.1 = f32[4,4]{1,0} dot(%x.1, %y.1)\n%x.1 = f16[4,4]{1,0} parameter(0)"
    assert precision.upcast_in_hlo(upcast, "fp16") == "f32"
    assert precision.upcast_in_hlo(native, "fp16") is None
    assert precision.upcast_in_hlo(upcast, "fp32") is None


def test_an_upcast_to_fp16_counts_too():
    # XLA:GPU on Hopper: cuBLASLt refuses e5m2 x e5m2, so the GEMM rewriter widens both to f16
    hlo = ("%fused (param_0: f8e5m2[64,64]) -> f16[64,64] {\n"
           "  ROOT %convert.1 = f16[64,64]{1,0} convert(%param_0)\n}")
    assert precision.upcast_in_hlo(hlo, "fp8_e5m2") == "f16"
    r = matmul.MatmulResult("jax", 4, 4, 4, "float8_e5m2", "default", None, 0.0, "fp8_e5m2", "f16")
    assert not r.upcast_to_fp32


def test_the_narrowing_convert_of_a_round_trip_survives_optimisation():
    import jax

    # the device program must end in the narrow type: a convert chain f32 -> f16 -> f32 is an
    # identity to an optimiser (XLA:GPU's SimplifyFPConversions removes it)
    hlo = precision._narrow.lower(jnp.float32(1.0), jnp.dtype("float16")).compile().as_text()
    entry = hlo[hlo.index("ENTRY"):]
    assert "-> f16[]" in entry.splitlines()[0], entry
    lowered = precision._narrow.trace(jnp.float32(1.0), jnp.dtype("float16")).lower(lowering_platforms=("cuda",))
    assert "f16" in lowered.as_text().split("return")[-1]
    assert jax.default_backend() in ("cpu", "gpu")


def test_mamf_search_respects_its_budget(device, monkeypatch):
    found = matmul.mamf_search("fp32", 256, budget_s=0.0, device=device, target_s=0.0)
    assert found.shapes_tried == 1 and (found.best.m, found.best.k, found.best.n) == (256, 256, 256)
    found = matmul.mamf_search("bf16", 256, budget_s=0.5, device=device, step=64, target_s=0.0)
    assert found.shapes_tried > 1 and found.best.gflops > 0
    # a slow operand draw and a first shape whose compile (a GPU's autotuning) outlasts the budget: the
    # search still tries more than that one shape
    import time

    real_operands, real_bench = matmul.operands, matmul.bench_jax
    calls = []

    def slow_draw(*a, **k):
        time.sleep(0.6)
        return real_operands(*a, **k)

    def slow_first(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.6)
        return real_bench(*a, **k)

    monkeypatch.setattr(matmul, "operands", slow_draw)
    monkeypatch.setattr(matmul, "bench_jax", slow_first)
    found = matmul.mamf_search("fp32", 128, budget_s=0.5, device=device, step=32, target_s=0.0)
    assert found.shapes_tried > 1 and found.search_s > 1.2, found


def test_tf32_asks_for_the_tf32_algorithm_on_a_gpu_and_runs_as_fp32_on_the_cpu():
    # Precision.HIGH alone runs as IEEE fp32 on XLA:GPU's Triton GEMMs; the algorithm asks for TF32 everywhere
    import re

    import jax
    import optax

    from jaxgpu.kernels import mlp

    a = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32))
    algo = r"algorithm = <lhs_precision_type = tf32, rhs_precision_type = tf32, accumulation_type = f32"
    cuda = jax.jit(lambda a, b: precision.dot(a, b, preset="tf32")).trace(a, a).lower(lowering_platforms=("cuda",))
    assert re.search(algo, cuda.as_text())
    for other in ("fp32", "bf16"):  # only tf32 changes
        text = jax.jit(lambda a, b, p=other: precision.dot(*precision.prepare(a, b, p), preset=p)).trace(a, a) \
            .lower(lowering_platforms=("cuda",)).as_text()
        assert "tf32" not in text, other
    # XLA:CPU has no TF32: fp32, and it runs. On the host's device even under --backend gpu, where the default
    # device is the GPU and the same product runs as TF32 (an error near 1e-4)
    host = jax.devices("cpu")[0]
    on_host = jax.device_put(a, host)
    out = precision.matmul(on_host, on_host, "tf32")
    assert on_host.devices() == {host} and out.devices() == {host}
    cpu = np.asarray(out, np.float64)
    assert matmul.rel_error(cpu, np.asarray(a, np.float64) @ np.asarray(a, np.float64)) < 1e-6
    model, opt = mlp.MLP(widths=(16,)), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), 8))
    x, y = jax.ShapeDtypeStruct((4, 8), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.int32)
    step = mlp.make_train_step(model, opt, "tf32").trace(state, x, y).lower(lowering_platforms=("cuda",))
    assert len(re.findall(algo, step.as_text())) >= 3  # forward and both backward products of a layer
