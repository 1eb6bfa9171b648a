"""jax.distributed across local processes: agreement with one process, and bounded failure."""

import time

import numpy as np
import pytest

from jaxgpu.kernels import distributed
from jaxgpu.kernels.distributed import Spec
from jaxgpu.records import results

from experiments.harness.settings import RunSettings

SPEC = Spec(widths=(16,), input_dim=8, global_batch=8, steps=3)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def one_process():
    return distributed.launch(1, SPEC, timeout_s=90)


def test_two_processes_train_the_same_model_as_one(one_process):
    t0 = time.perf_counter()
    two = distributed.launch(2, SPEC, timeout_s=110)
    assert time.perf_counter() - t0 < 120
    assert two.processes == 2 and len(two.losses) == SPEC.steps
    assert all(np.isfinite(one_process.losses)) and len(set(one_process.losses)) == SPEC.steps
    np.testing.assert_allclose(two.losses, one_process.losses, rtol=1e-5)


def test_a_killed_peer_is_a_recorded_failure_not_a_hang():
    t0 = time.perf_counter()
    with pytest.raises(distributed.DistributedFailure, match="process 1 of 2 exited with code 3") as err:
        distributed.launch(2, SPEC, timeout_s=60, grace_s=5, die_after=(1, 1))
    assert time.perf_counter() - t0 < 75
    status, reason = results.status_of(err.value)
    assert status == "failed" and "process 1" in reason and "\n" not in reason


def test_a_hung_peer_times_out():
    t0 = time.perf_counter()
    with pytest.raises(distributed.DistributedFailure, match="timed out after 25 s"):
        distributed.launch(2, SPEC, timeout_s=25, grace_s=5, hang_after=(0, 1))
    assert time.perf_counter() - t0 < 40


def test_gpu_workers_do_not_preallocate_the_gpu_their_parent_holds():
    env = distributed._worker_env("gpu")
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and env["JAX_PLATFORMS"] == "cuda"


def test_bad_process_counts_are_refused():
    with pytest.raises(ValueError, match="at least 1 process"):
        distributed.launch(0, SPEC)
    with pytest.raises(ValueError, match="does not split"):
        distributed.launch(3, SPEC)


def test_the_experiment_records_a_dead_peer_as_failed(tmp_path):
    from experiments.harness import runner

    runner.run_study(RunSettings(("distributed",), profile="tiny", out=str(tmp_path), processes=2, progress=False,
                                 overrides={"distributed": {"die_after": (1, 1), "timeout_s": 60.0}}),
                     "cpu", log=lambda m: None)
    from experiments import report

    report.write_report([tmp_path], tmp_path)
    (rec,) = results.read_run(tmp_path).records
    assert rec.status == "failed" and "process 1 of 2 exited" in rec.reason, rec
    assert "failed" in (tmp_path / "report.md").read_text()
