"""devices: what each backend is: cores or SMs, clock, lanes, memory, and parallel lanes computed (C01)."""

from __future__ import annotations

import dataclasses

from jaxgpu import devices as dv
from jaxgpu import hardware
from jaxgpu import report as rp

from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = ("C01",)
DESCRIPTION = "core/SM counts, clocks, SIMD or FP32 lanes, memory; parallel lanes = cores x lanes"


@dataclasses.dataclass(frozen=True)
class Config:
    pass


PROFILES = {(profile, "any"): Config() for profile in ("tiny", "quick", "full")}


def _describe(hw: hardware.Hardware, n_devices: int, allocator_bytes: int | None = None) -> dict[str, float]:
    """The device's figures from the hardware table (a GPU's datasheet, a CPU's estimate and its RAM).

    ``allocator_bytes``: what JAX's allocator may use on the device, recorded apart, since a
    GPU client reserves a share of the memory (75% by default), not the whole of it."""
    lanes = hw.lanes_per_core or 0
    out = {"cores": float(hw.cores), "lanes_per_core": float(lanes), "parallel_lanes": float(hw.cores * lanes),
           "n_devices": float(n_devices), "peak_fp32_tflops": hw.tflops["fp32"], "estimate": float(hw.estimate)}
    if hw.clock_ghz:
        out["clock_ghz"] = hw.clock_ghz
    if hw.memory_gb:
        out["memory_gb"] = hw.memory_gb
    if allocator_bytes:
        out["allocator_limit_gb"] = allocator_bytes / 1e9
    if hw.memory_bw_gbps:
        out["memory_bw_gbps"] = hw.memory_bw_gbps
    return out


def _device(ctx: RunContext) -> dict[str, float]:
    hw = ctx.hardware
    if hw is None:
        from jaxgpu.results import Unsupported

        raise Unsupported(f"{ctx.device_kind} is not in jaxgpu.hardware's table")
    return _describe(hw, ctx.n_devices, dv.device_memory_bytes(ctx.device) if ctx.platform == "gpu" else None)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = [Case({"device": ctx.device_kind, "role": "accelerator" if ctx.platform == "gpu" else "cpu"},
                lambda: _device(ctx), Cost.none(), key=True)]
    if ctx.platform == "gpu":  # the host CPU of the same machine, for the side-by-side
        out.append(Case({"device": "host cpu", "role": "cpu"}, lambda: _describe(hardware.cpu_estimate(), 1),
                        Cost.none(), key=True))
    return out


def section(pairs: list[rp.Pair]) -> rp.Section:

    sec = rp.Section("What each backend is: cores, lanes, memory", "devices", CLAIMS)
    good = rp.ok(pairs)
    seen, rows, bars = set(), [], []
    for run, x in good:
        key = (x.params["device"], run.env.get("cpu_model") if x.params["role"] == "cpu" else "")
        if key in seen:
            continue
        seen.add(key)
        m = x.metrics
        name = x.params["device"] if x.params["device"] != "cpu" and x.params["device"] != "host cpu" else \
            f"{run.env.get('cpu_model', 'CPU')} ({int(m['cores'])} cores)"
        rows.append([name, int(m["cores"]), rp.fmt(m.get("clock_ghz")), int(m["lanes_per_core"]), int(m["parallel_lanes"]),
                     rp.fmt(m.get("memory_gb")), rp.fmt(m.get("memory_bw_gbps")), rp.fmt(m["peak_fp32_tflops"]),
                     "estimate" if m["estimate"] else "datasheet"])
        bars.append((name[:28], m["parallel_lanes"]))
    sec.tables.append(rp.Table(["device", "cores / SMs", "clock GHz", "fp32 lanes per core", "parallel lanes",
                                "memory GB", "bandwidth GB/s", "fp32 TFLOP/s", "source"], rows,
                               "Parallel lanes = cores x fp32 lanes (SIMD width on a CPU, FP32 units per SM on a GPU)"))
    if bars:
        fig = rp.Figure(figsize=(6.5, 3.0), dpi=100)
        ax = fig.add_subplot()
        ax.barh([b[0] for b in bars], [b[1] for b in bars])
        ax.set_xscale("log")
        ax.set_xlabel("parallel fp32 lanes")
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        cpu = [r for r in rows if r[-1] == "estimate"]
        gpu = [r for r in rows if r[-1] == "datasheet"]
        text = "; ".join(f"{r[0]}: {r[1]} cores x {r[3]} lanes = {r[4]} lanes" for r in rows)
        if cpu and gpu:
            text += f". The GPU has {gpu[0][4] / cpu[0][4]:.0f}x the CPU's parallel lanes."
        sec.plots.append(rp.Plot("devices", fig, text + "."))
    return sec
