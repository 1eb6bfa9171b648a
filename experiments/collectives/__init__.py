"""collectives: all-reduce, all-gather, reduce-scatter, all-to-all and ppermute vs message size.

Each collective runs inside ``shard_map`` over a ``data`` mesh of the run's devices, is
checked against numpy, and is timed. ``gbytes_per_s`` is the bus bandwidth and
``algbw_gbytes_per_s`` the algorithm bandwidth, both as NCCL-tests define them
(``jaxgpu.kernels.parallel.BUS_FACTOR``; ``params.bytes`` is NCCL-tests' size). On CPU host
devices a "collective" is memory copies between buffers of one process on shared cores:
the figure is what XLA's CPU runtime does, not an interconnect. A collective over one
device moves nothing and is recorded as ``unsupported`` with that reason, not as a bandwidth.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import workload

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext, one_device_case

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = tuple(64 ** i * 4096 for i in range(3))  # 4 KiB, 256 KiB, 16 MiB
    collectives: tuple[str, ...] = workload.COLLECTIVES
    target_s: float = 0.05


PROFILES = {
    ("tiny", "any"): Config(sizes=(4096, 65536), target_s=0.01),
    ("quick", "cpu"): Config(),
    # to 64 MiB: at 256 MiB the float64 reference check of 8 host devices' buffers alone
    # would take ~12 GiB of this 24 GiB machine
    ("full", "cpu"): Config(sizes=tuple(4 ** i * 4096 for i in range(8)), target_s=0.3),
    ("quick", "gpu"): Config(sizes=tuple(16 ** i * 4096 for i in range(4)), target_s=0.05),  # to 16 MiB
    ("full", "gpu"): Config(sizes=tuple(4 ** i * 4096 for i in range(9)), target_s=0.3),  # to 256 MiB
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    if ctx.n_devices < 2:
        return [one_device_case({"collective": c, "devices": 1}, f"{c} over 1 device moves no data", ctx)
                for c in cfg.collectives]
    k = ctx.n_devices
    # the float64 reference of every device's buffer is host work
    cost = lambda b: Cost(bytes=2.0 * b * k, target_s=cfg.target_s, host_bytes=64.0 * b * k, calls=2)
    return [Case({"collective": c, "bytes": b, "devices": k}, functools.partial(_measure.collective, c, b, cfg, ctx),
                 cost(b)) for c in cfg.collectives for b in cfg.sizes]


EXPERIMENT = Experiment(
    name="collectives", gpu_part=3, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    multi_device=True,
    description="all-reduce / all-gather / reduce-scatter / all-to-all / ppermute: algbw and busbw vs size",
    # a collective's time is links and latency, not FLOPs and DRAM: not a roofline's business
    pricing=Pricing(modelled=False))
