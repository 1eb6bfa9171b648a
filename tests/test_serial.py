import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu import serial, stack, threads

from experiments import compiler, runner


@pytest.mark.parametrize("variant", [v for v in serial.VARIANTS if v != "python_loop"])
def test_every_variant_computes_the_same(variant, device):
    x = serial.inputs(1000)
    ref = serial.reference(x)
    np.testing.assert_allclose(np.asarray(serial.python_loop(x.tolist())), ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(serial.program(variant)(jax.device_put(x, device))), ref, rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("n", [1, 17, 5000])
def test_recurrence_scan_associative_and_closed_form_agree(n, device):
    x = jax.device_put(np.ones(1, np.float32), device)
    ref = serial.recurrence_reference(n)
    for v in serial.RECURRENCE:
        np.testing.assert_allclose(np.asarray(serial.recurrence(v, n)(x)), ref, atol=1e-4, err_msg=v)


def test_jit_fuses_the_chain_and_op_by_op_does_not(device):
    x = jax.device_put(jnp.linspace(-3, 3, 4096), device)
    lowered = jax.jit(compiler.gelu_chain).lower(x)
    assert stack.count_ops(lowered.as_text(dialect="hlo"))["fusions"] == 0  # before XLA optimises
    assert stack.count_ops(lowered.compile().as_text())["fusions"] >= 1
    # Op by op, each primitive is its own one-op program: nothing to fuse with.
    one_op = jax.jit(jnp.tanh).lower(x).compile().as_text()
    assert stack.count_ops(one_op)["instructions"] <= 3


def test_compiler_case_measures_speedup_and_compile(device):
    ctx = runner.RunContext("cpu", "tiny", device.device_kind, 1, None)
    m = compiler._measure("gelu_chain", compiler.config("tiny", "cpu"), ctx)
    assert m["compile_s"] > 0 and m["eager_time_s"] > 0 and m["fusions_after"] >= 1
    assert m["instructions_before"] > m["instructions_after"]


def test_lowering_chain_has_every_stage():
    chain = stack.lowering_chain(compiler.gelu_chain, jnp.ones(8))
    assert "tanh" in chain["jaxpr.txt"] and "stablehlo" in chain["stablehlo.mlir"]
    assert "HloModule" in chain["optimized_hlo.txt"]


def test_worker_process_is_pinned_to_one_core():
    m = threads.measure(1, matmul_n=64, elementwise_n=4096, target_s=0.01, timeout_s=120)
    assert m["cores_seen"] == 1 and m["matmul_gflops"] > 0
