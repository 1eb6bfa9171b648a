"""devices, measured: a device's figures from the hardware table and what JAX's allocator may use."""

from __future__ import annotations

from jaxgpu.ground import devices as dv
from jaxgpu.ground import hardware
from jaxgpu.records.results import Unsupported

from experiments.contract import RunContext


def describe(hw: hardware.Hardware, n_devices: int, allocator_bytes: int | None = None) -> dict[str, float]:
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


def device(ctx: RunContext) -> dict[str, float]:
    hw = ctx.hardware
    if hw is None:
        raise Unsupported(f"{ctx.device_kind} is not in jaxgpu.ground.hardware's table")
    return describe(hw, ctx.n_devices, dv.device_memory_bytes(ctx.device) if ctx.platform == "gpu" else None)


def host_cpu() -> dict[str, float]:
    return describe(hardware.cpu_estimate(), 1)
