"""GPU-only checks: skipped unless ``--backend gpu`` on a machine with a GPU."""

import pytest

from jaxgpu import hardware, matmul

pytestmark = pytest.mark.gpu


def test_fp32_highest_is_true_fp32_on_gpu(device):
    # A silent TF32 would land near 1e-3; true fp32 at k=2048 stays far under 1e-5.
    r = matmul.bench_jax(matmul.operands(2048, 2048, 2048, n_sets=1), "fp32", device, target_s=0.05)
    assert r.rel_error < 1e-5


def test_gpu_is_in_the_table(device):
    assert hardware.gpu_spec(device.device_kind) is not None, device.device_kind
