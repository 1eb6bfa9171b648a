"""threads, measured: one worker process per core count (jaxgpu.kernels.threads)."""

from __future__ import annotations

from jaxgpu.kernels import threads

from experiments.threads import Config


def run(k: int, cfg: Config) -> dict[str, float]:
    # speed-ups over one core are taken from the workers=1 record (experiments.analysis.derive.core_speedups):
    # a baseline kept in this process would be gone in a resumed run
    return threads.measure(k, cfg.matmul_n, cfg.elementwise_n, cfg.target_s)
