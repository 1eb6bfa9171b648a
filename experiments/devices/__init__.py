"""devices: what each backend is: cores or SMs, clock, lanes, memory, and parallel lanes computed."""

from __future__ import annotations

import dataclasses
import functools

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    pass


PROFILES = {(profile, "any"): Config() for profile in ("tiny", "quick", "full")}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = [Case({"device": ctx.device_kind, "role": "accelerator" if ctx.platform == "gpu" else "cpu"},
                functools.partial(_measure.device, ctx), Cost.none())]
    if ctx.platform == "gpu":  # the host CPU of the same machine, for the side-by-side
        out.append(Case({"device": "host cpu", "role": "cpu"}, _measure.host_cpu, Cost.none()))
    return out


EXPERIMENT = Experiment(
    name="devices", gpu_part=1, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    description="core/SM counts, clocks, SIMD or FP32 lanes, memory; parallel lanes = cores x lanes")
