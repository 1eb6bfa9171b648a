import numpy as np
import pytest

from jaxgpu.kernels import matmul


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "int8"])
def test_worked_example_is_exact(dtype, device):
    out = matmul.worked_example(dtype, device)
    np.testing.assert_array_equal(out, [[19, 22], [43, 50]])


def test_jax_matmul_matches_float64(device):
    sets = matmul.operands(96, 80, 72, n_sets=2, seed=1)
    r = matmul.bench_jax(sets, "fp32", device, target_s=0.01)
    assert r.rel_error < 1e-6
    assert r.gflops > 0 and r.flops == 2 * 96 * 80 * 72
    assert r.timing.n_iters >= 5


def test_numpy_peer_matches_float64():
    r = matmul.bench_numpy(matmul.operands(64, 64, 64, n_sets=1), target_s=0.01)
    assert r.impl == "numpy" and r.rel_error < 1e-6


def test_operands_are_random_and_never_zero():
    (a, b), (c, d) = matmul.operands(32, 16, 8, n_sets=2)
    assert a.dtype == np.float32 and a.shape == (32, 16) and b.shape == (16, 8)
    assert np.count_nonzero(a) == a.size and not np.array_equal(a, c)


def test_rotation_is_bounded_by_memory():
    assert len(matmul.operands(8, 8, 8)) == 4
    assert len(matmul.operands(4096, 4096, 4096)) == 2  # 128 MiB a set: two fit the 256 MiB budget


def test_reference_check_catches_a_wrong_result():
    (a, b), = matmul.operands(64, 64, 64, n_sets=1)
    assert matmul.check_against_reference(a @ b, a, b) < 1e-6
    assert matmul.check_against_reference((a @ b).T, a, b) > 0.5
    bad = a @ b
    bad[3, 3] = np.nan
    assert matmul.check_against_reference(bad, a, b) == float("inf")
    with pytest.raises(ValueError, match="all zeros"):
        matmul.rel_error(np.ones(3), np.zeros(3))


def test_large_outputs_are_checked_on_sampled_rows():
    rows = matmul.reference_rows(10_000)
    assert len(rows) == 512 and rows[0] == 0 and rows[-1] == 9_999
    assert len(matmul.reference_rows(100)) == 100


def test_the_speed_probe_measures_a_rate_not_a_launch_latency(monkeypatch):
    import types

    # a clock the fake products advance: a real sleep of 200 us overshoots past a millisecond on a busy machine
    clock = [0.0]
    monkeypatch.setattr(matmul, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    launch, per_flop = 2e-4, 1e-12  # a GPU: 200 us to launch anything, 1 TFLOP/s beyond that
    sizes = []

    def run(d):
        sizes.append(d)
        clock[0] += launch + 2.0 * d**3 * per_flop

    def cpu(d):
        clock[0] += 2.0 * d**3 * 1e-9

    got = matmul.probe_seconds_per_flop(run, lambda d: d, largest=8192)
    assert sizes[-1] >= 1024  # grew until one product took a millisecond
    assert got < 2 * per_flop  # 256^3 alone would have said 6e-12 s per FLOP: a launch, not a rate
    slow = matmul.probe_seconds_per_flop(cpu, lambda d: d, largest=8192)
    assert slow == pytest.approx(1e-9)  # a slow CPU kernel: 256^3 already takes milliseconds


def test_torch_peer_when_installed():
    pytest.importorskip("torch")
    r = matmul.bench_torch(matmul.operands(64, 64, 64, n_sets=1), target_s=0.01)
    assert r.rel_error < 1e-6


def test_a_size_that_cannot_fit_is_recorded_not_crashed(monkeypatch):
    from jaxgpu.ground import devices
    from jaxgpu.records import results

    from experiments.harness import runner

    monkeypatch.setattr(devices, "device_memory_bytes", lambda dev: 10**6)
    sets = matmul.operands(256, 256, 256, n_sets=1)
    case = runner.Case({"n": 256}, lambda: matmul.bench_jax(sets, "fp32", target_s=0.0).metrics())
    import experiments

    rec = runner._measure(experiments.load("matmul"), case, runner.RunContext("cpu", "cpu", 1, None), "r")
    assert rec.status == "does_not_fit"
    assert "needs" in rec.reason and "available" in rec.reason
    assert matmul.bytes_needed(256, 256, 256, "fp32") > 10**6
    assert results.Record.from_dict(rec.to_dict()) == rec
