"""distributed, measured: one data-parallel job over N processes against the same job in one process."""

from __future__ import annotations

import numpy as np

from jaxgpu.kernels import distributed

from experiments.contract import RunContext
from experiments.distributed import TOLERANCE, Config, worker_platform


def job(processes: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    plat = worker_platform(ctx, processes)
    many = distributed.launch(processes, cfg.spec, platform=plat, timeout_s=cfg.timeout_s, die_after=cfg.die_after)
    # the single-process run is launched the same way: the same worker, platform and start-up
    one = distributed.launch(1, cfg.spec, platform=plat, timeout_s=cfg.timeout_s)
    ref, got = np.asarray(one.losses), np.asarray(many.losses)
    err = float(np.max(np.abs(got - ref) / np.abs(ref)))
    if err > TOLERANCE:
        raise ArithmeticError(f"{processes} processes drifted from one process by {err:.2e} (tolerance {TOLERANCE:g})")
    steps = len(many.losses)
    return {"rel_error": err, "loss": float(got[-1]), "time_s_median": max(many.train_s) / steps,
            "single_process_step_s": one.train_s[0] / steps, "compile_s": max(many.compile_s),
            "wall_s": many.wall_s, "single_process_wall_s": one.wall_s,
            "speedup": (one.train_s[0] / steps) / (max(many.train_s) / steps)}
