"""threads: does throughput grow with parallel workers? XLA:CPU pinned to 1..N cores."""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import devices

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    matmul_n: int = 1024
    elementwise_n: int = 1 << 24
    target_s: float = 0.3


PROFILES = {
    ("tiny", "any"): Config(matmul_n=128, elementwise_n=1 << 16, target_s=0.01),
    ("quick", "any"): Config(),
    ("full", "any"): Config(matmul_n=2048, target_s=1.0),
}

# A worker process: Python, JAX and XLA:CPU starting (measured here: about 2.5 s).
WORKER_START_S = 2.5


def worker_counts() -> list[int]:
    n = devices.cpu_count()
    counts, k = [], 1
    while k < n:
        counts.append(k)
        k *= 2
    return counts + [n]


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    # CPU workers only: on a GPU run this would measure the host's CPU, which a CPU run measures (the GPU
    # check's host study leaves it out: python -m experiments.run --backend cpu --only threads runs it)
    if ctx.platform != "cpu":
        return []
    n, e = cfg.matmul_n, cfg.elementwise_n
    return [Case({"workers": k}, functools.partial(_measure.run, k, cfg),
                 Cost(compiles=2, gemm_compiles=1, flops=2.0 * n**3 * devices.cpu_count() / k,
                      target_s=2 * cfg.target_s, bytes=8.0 * e, calls=2,
                      fixed_s=WORKER_START_S, rng_bytes=8.0 * n * n, host_flops=2.0 * min(n, 512) * n * n))
            for k in worker_counts()]


EXPERIMENT = Experiment(
    name="threads", gpu_part=3, benchmark_version=2, config=Config, profiles=PROFILES, cases=cases, in_host_check=False,
    description="matmul and elementwise speed with XLA:CPU limited to 1..N cores, each in its own process")
