"""transfer: host<->device copy bandwidth vs size against on-device copy, and the cost of non-resident data.

On a CPU backend "host" and "device" are the same RAM: device_put and np.array are
memcpy-like copies inside one memory, so the figure is a copy cost, not a bus.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = tuple(2**p for p in (20, 22, 24, 26))  # bytes
    batch: int = 512
    widths: tuple[int, ...] = (1024, 1024)
    input_dim: int = 784
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(sizes=(2**16, 2**20), batch=32, widths=(32,), input_dim=16, target_s=0.01),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(sizes=tuple(2**p for p in range(16, 31, 2)), target_s=0.5),
    ("quick", "gpu"): Config(sizes=(2**20, 2**24, 2**28), batch=8192, widths=(4096, 4096), target_s=0.1),
    ("full", "gpu"): Config(sizes=tuple(2**p for p in range(20, 31, 2)), batch=8192, widths=(4096, 4096)),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = []
    for nbytes in cfg.sizes:
        draw = dict(rng_bytes=float(nbytes), host_bytes=2.0 * nbytes)
        # host<->device copies are host work here; a device-to-host copy is timed from a
        # fresh device array, made off the clock before each call (as long again)
        out.append(Case({"direction": "host_to_device", "bytes": nbytes},
                        functools.partial(_measure.transfer, "host_to_device", nbytes, cfg, ctx),
                        Cost(compiles=0, bytes=nbytes, on_host=True, target_s=cfg.target_s, min_iters=3, **draw)))
        out.append(Case({"direction": "device_to_host", "bytes": nbytes},
                        functools.partial(_measure.transfer, "device_to_host", nbytes, cfg, ctx),
                        Cost(compiles=1, bytes=2.0 * nbytes, on_host=True, target_s=2 * cfg.target_s, min_iters=3,
                             **draw)))
        out.append(Case({"direction": "on_device_copy", "bytes": nbytes},
                        functools.partial(_measure.copy_on_device, nbytes, ctx, cfg.target_s),
                        Cost(compiles=2, bytes=2.0 * nbytes, target_s=cfg.target_s, min_iters=3, warmup=1,
                             device_rng_bytes=3.0 * nbytes)))
    params = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    for feed in ("resident", "host_fed"):
        out.append(Case({"case": "mlp_step", "feed": feed, "batch": cfg.batch},
                        functools.partial(_measure.mlp_step, feed, cfg, ctx),
                        Cost(compiles=0, step_compiles=1, flops=6.0 * cfg.batch * params, bytes=16.0 * params,
                             target_s=cfg.target_s, host_bytes=cfg.batch * cfg.input_dim * 4.0 * (feed == "host_fed"))))
    return out


EXPERIMENT = Experiment(
    name="transfer", gpu_part=1, benchmark_version=3,  # 3: device-to-host times one copy
    config=Config, profiles=PROFILES, cases=cases,
    description="host->device / device->host GB/s vs size vs on-device copy; MLP step with host-fed vs resident batch")
