"""collectives, measured: each collective over the run's devices, its result checked, NCCL-tests' counting."""

from __future__ import annotations

from jaxgpu.ground import devices as dv
from jaxgpu.kernels import parallel

from experiments.collectives import Config
from experiments.contract import RunContext


def collective(name: str, nbytes: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    devs = dv.devices_of(ctx.platform)
    r = parallel.bench_collective(name, devs, nbytes, cfg.target_s)
    if r.rel_error > 1e-6:
        raise ArithmeticError(f"{name} returned wrong values (rel_error {r.rel_error:.2e})")
    return r.timing.metrics(gbytes_per_s=r.busbw / 1e9, algbw_gbytes_per_s=r.algbw / 1e9,
                            bus_factor=parallel.BUS_FACTOR[name](r.n_devices), rel_error=r.rel_error,
                            message_bytes=float(r.nbytes))
