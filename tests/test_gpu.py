"""GPU-only checks: skipped unless ``--backend gpu`` on a machine with a GPU."""

import pytest

from jaxgpu.ground import hardware
from jaxgpu.kernels import matmul

pytestmark = pytest.mark.gpu


def test_fp32_highest_is_true_fp32_on_gpu(device):
    # A silent TF32 would land near 1e-3; true fp32 at k=2048 stays far under 1e-5.
    r = matmul.bench_jax(matmul.operands(2048, 2048, 2048, n_sets=1), "fp32", device, target_s=0.05)
    assert r.rel_error < 1e-5


def test_gpu_is_in_the_table(device):
    assert hardware.gpu_spec(device.device_kind) is not None, device.device_kind


def test_tf32_really_uses_tensor_cores_and_fp32_does_not(device):
    sets = matmul.operands(2048, 2048, 2048, n_sets=1)
    fp32 = matmul.bench_jax(sets, "fp32", device, target_s=0.0)
    tf32 = matmul.bench_jax(sets, "tf32", device, target_s=0.0)
    assert tf32.rel_error > 10 * fp32.rel_error  # TF32's 10-bit mantissa shows in the error


def test_low_precision_runs_natively_on_gpu(device):
    sets = matmul.operands(1024, 1024, 1024, n_sets=1)
    for name in ("bf16", "fp16", "int8"):
        r = matmul.bench_jax(sets, name, device, target_s=0.0)
        assert not r.upcast_to_fp32, name
