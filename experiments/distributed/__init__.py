"""distributed: one data-parallel training job over N processes with ``jax.distributed``.

``--processes N`` (default 2) local processes meet through JAX's coordination service on
127.0.0.1 and train the MLP together (``jaxgpu.kernels.distributed``); the same job in one
process is the reference, and ``rel_error`` is the largest relative difference of the
per-step losses. A process that dies or hangs ends the case as ``failed`` with the
reason within ``timeout_s``; nothing waits forever. On CPU the processes talk through
gloo over loopback; with fewer GPUs than processes they run on the CPU, and the record's
``params.worker_platform`` says so.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.kernels import distributed
from jaxgpu.records import results

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


TOLERANCE = 1e-5


@dataclasses.dataclass(frozen=True)
class Config:
    spec: distributed.Spec = distributed.Spec()
    timeout_s: float = 100.0
    die_after: tuple[int, int] | None = None  # (process, step): a crash drill (tests)


PROFILES = {
    ("tiny", "any"): Config(spec=distributed.Spec(widths=(32,), input_dim=16, global_batch=8, steps=3), timeout_s=90.0),
    ("quick", "any"): Config(),
    ("full", "any"): Config(spec=distributed.Spec(widths=(512, 512), input_dim=784, global_batch=512, steps=10)),
}

# One jax.distributed job: the processes start, meet and compile (about 5 s each job in the
# committed multi-device run: 11 s for the 2-process job and the 1-process reference).
JOB_START_S = 5.0


def worker_platform(ctx: RunContext, processes: int) -> str:
    """One GPU per process where there are enough, else the CPU (the run's devices count them)."""
    return "gpu" if ctx.platform == "gpu" and ctx.n_devices >= processes else "cpu"


def _too_few_gpus(n: int, ctx: RunContext):
    raise results.Unsupported(f"{n} processes need {n} GPUs and this run has {ctx.n_devices}; the CPU run of the "
                              "same machine can run the job through gloo: python -m experiments.run --backend cpu "
                              "--only distributed")


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    n = ctx.processes or 2
    if worker_platform(ctx, n) != ctx.platform:
        return [Case({"processes": n, "worker_platform": ctx.platform}, functools.partial(_too_few_gpus, n, ctx),
                     Cost.none())]
    return [Case({"processes": n, "worker_platform": worker_platform(ctx, n)},
                 functools.partial(_measure.job, n, cfg, ctx), Cost(compiles=0, min_iters=0, warmup=0, calls=0,
                                                            fixed_s=2 * JOB_START_S + 0.05 * cfg.spec.steps))]


def _processes(cfg: Config, n: int) -> str | None:
    """Why ``n`` processes cannot run the job: its global batch does not split over them."""
    if cfg.spec.global_batch % n:
        return (f"the distributed job's global batch ({cfg.spec.global_batch}) does not split evenly over {n} "
                "processes")
    return None


EXPERIMENT = Experiment(
    name="distributed", gpu_part=3, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    in_host_check=False, processes=_processes,
    description="2+ processes via jax.distributed (gloo on CPU): one data-parallel job; agreement with 1 process")
