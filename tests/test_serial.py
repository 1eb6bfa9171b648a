import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground import stack
from jaxgpu.kernels import serial, threads

import experiments
from experiments import compiler
from experiments.compiler import measure as compiler_measure
from experiments.harness import runner


@pytest.mark.parametrize("variant", [v for v in serial.VARIANTS if v != "python_loop"])
def test_every_variant_computes_the_same(variant, device):
    x = serial.inputs(1000)
    ref = serial.reference(x)
    np.testing.assert_allclose(np.asarray(serial.python_loop(x.tolist())), ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(serial.program(variant)(jax.device_put(x, device))), ref, rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("n", [1, 17, 5000])
def test_recurrence_scan_associative_and_closed_form_agree(n, device):
    x, a, b = jax.device_put((np.ones(1, np.float32), *serial.coefficients()), device)
    ref = serial.recurrence_reference(n)
    for v in serial.RECURRENCE:
        np.testing.assert_allclose(np.asarray(serial.recurrence(v, n)(x, a, b)), ref, atol=1e-4, err_msg=v)


def test_no_recurrence_program_holds_its_work_as_a_folded_constant(device):
    import re

    n = 100_000
    args = jax.device_put((np.ones(1, np.float32), *serial.coefficients()), device)
    for v in serial.RECURRENCE:
        hlo = serial.recurrence(v, n).lower(*args).compile().as_text()
        big = [c for c in re.findall(r"= f32\[(\d+)\]\S* constant\(", hlo) if int(c) > 1000]
        assert not big, (v, big)


def test_jit_fuses_the_chain_and_op_by_op_does_not(device):
    x = jax.device_put(jnp.linspace(-3, 3, 4096), device)
    lowered = jax.jit(compiler_measure.gelu_chain).lower(x)
    assert stack.count_ops(lowered.as_text(dialect="hlo"))["fusions"] == 0  # before XLA optimises
    assert stack.count_ops(lowered.compile().as_text())["fusions"] >= 1
    # Op by op, each primitive is its own one-op program: nothing to fuse with.
    one_op = jax.jit(jnp.tanh).lower(x).compile().as_text()
    assert stack.count_ops(one_op)["instructions"] <= 3


def test_compiler_case_measures_speedup_and_compile(device):
    ctx = runner.RunContext("cpu", device.device_kind, 1, None)
    m = compiler_measure.program("gelu_chain", experiments.config("compiler", "tiny", "cpu"), ctx)
    assert m["compile_s"] > 0 and m["eager_time_s"] > 0 and m["fusions_after"] >= 1
    assert m["instructions_before"] > m["instructions_after"]


def test_the_dots_only_program_keeps_each_dots_precision():
    x = jnp.ones((8, 8))
    f = lambda a: (jnp.matmul(a, a, precision="highest"), jnp.matmul(a, a), jnp.matmul(a, a, precision="tensorfloat32"))
    hlo = jax.jit(f).lower(x).as_text(dialect="hlo")
    assert [d["precision"] for d in stack.dot_shapes(hlo)] == ["highest", "default", "high"]
    prog, args = stack.dots_only(hlo)
    again = stack.dot_shapes(prog.lower(args).as_text(dialect="hlo"))
    assert [d["precision"] for d in again] == ["highest", "default", "high"]


def test_the_layer_is_checked_against_float64_not_against_another_gemm():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((64, 256)), rng.standard_normal((256, 32)), rng.standard_normal(32)
    exact = compiler_measure._tanh_gelu(x @ w + b)
    tf32_like = exact * (1 + 1e-3 * rng.standard_normal(exact.shape))  # two TF32 GEMMs differ like this
    errs = compiler_measure._errors("mlp_layer", (x, w, b), {"jit": exact, "op-by-op": tf32_like})
    assert errs["jit"] < 1e-12 and errs["op-by-op"] < compiler.TOLERANCE["mlp_layer"]


def test_lowering_chain_has_every_stage():
    chain = stack.lowering_chain(compiler_measure.gelu_chain, jnp.ones(8))
    assert "tanh" in chain["jaxpr.txt"] and "stablehlo" in chain["stablehlo.mlir"]
    assert "HloModule" in chain["optimized_hlo.txt"]


def test_worker_process_is_pinned_to_one_core():
    m = threads.measure(1, matmul_n=64, elementwise_n=4096, target_s=0.01, timeout_s=120)
    assert m["cores_seen"] == 1 and m["matmul_gflops"] > 0
