"""What a program should take on some hardware: a roofline bound from XLA's own count of its work.

``predict(fn, *args, on="H200 SXM")`` compiles ``fn`` for this machine, splits the optimised
program into its kernels (each fusion, library call or op of the entry computation), counts each
kernel's FLOPs (from the fused computation it calls) and bytes (its operands read once, its
result written once), and bounds its time on the hardware's roofs::

    lower = sum over kernels of max(FLOPs / compute roof, bytes / memory roof) + launches x overhead
    upper = sum over kernels of (FLOPs / compute roof + bytes / memory roof) + launches x overhead

Roofs are achievable figures, never bare datasheet peaks: measured in a run (its best matmul
rate and STREAM bandwidth: ``Roofs`` built by the report from records), or a datasheet peak
times a published achievable fraction (``roofs_for``). The counts are the CPU program's unless a
GPU plan is given (``jaxgpu.targets``): XLA:CPU and XLA:GPU fuse alike but not identically, so
a prediction for a GPU from a CPU program is an estimate of an estimate, and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxgpu import hardware
from jaxgpu.stack import Kernel, kernels  # noqa: F401 - part of this module's API

# Achievable shares of datasheet peaks, measured elsewhere: a bf16 matmul at 794.5 of 989 TFLOP/s on
# an H100 (stas00/ml-engineering's MAMF finder), a device-to-device copy at about 4.3 of 4.8 TB/s on the
# H200 this project is lent (the device tool's KINDS.md). Other GPUs are assumed to reach the same shares.
COMPUTE_FRACTION = 794.5 / 989.4
BANDWIDTH_FRACTION = 4.3 / 4.8
# Host time per kernel launch through JAX on a GPU (dispatch plus launch): a lead of about 10 us. A
# compiled loop's iteration on a GPU, which XLA:GPU drives from the host: 8.2 us (a 1e7-step lax.scan in
# 81.6 s, in a public JAX issue).
GPU_LAUNCH_S = 10e-6
GPU_LOOP_STEP_S = 8.2e-6


@dataclasses.dataclass(frozen=True)
class Roofs:
    """Achievable rates: FLOP/s per dtype key (``Hardware.tflops`` keys, and "elementwise" for fused
    non-matmul arithmetic), memory bytes/s, and seconds per kernel launch; where they come from."""

    name: str
    flops: dict[str, float]
    bandwidth: float
    overhead_s: float
    source: str
    loop_step_s: float = 0.0  # one iteration of a compiled loop (a scan's step)

    def compute(self, dtype: str) -> float | None:
        return self.flops.get(dtype) or self.flops.get("fp32")


def roofs_for(hw: hardware.Hardware, *, overhead_s: float = GPU_LAUNCH_S) -> Roofs:
    """A GPU's achievable roofs: its datasheet peaks times the shares measured on an H100 and an H200."""
    flops = {k: v * 1e12 * COMPUTE_FRACTION for k, v in hw.tflops.items() if v}
    flops["elementwise"] = hw.tflops["fp32"] * 1e12 * COMPUTE_FRACTION
    return Roofs(hw.name, flops, (hw.memory_bw_gbps or 0) * 1e9 * BANDWIDTH_FRACTION, overhead_s,
                 f"{hw.source} x {COMPUTE_FRACTION:.2f} (compute) and x {BANDWIDTH_FRACTION:.2f} (memory), "
                 "the shares an H100's bf16 matmul and an H200's copy reached", GPU_LOOP_STEP_S)


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Seconds a program should take on ``roofs``: ``lower_s`` (each kernel at its binding roof) and
    ``upper_s`` (compute and memory not overlapping), both with the launches' overhead."""

    roofs: str
    flops: float
    bytes: float
    compute_s: float
    memory_s: float
    lower_s: float
    upper_s: float
    kernels: int

    @property
    def bound(self) -> str:
        """Which roof binds the program as a whole: "compute" or "memory"."""
        return "compute" if self.compute_s >= self.memory_s else "memory"


def bound(flops: float, nbytes: float, roofs: Roofs, dtype: str = "fp32", kernels: int = 1,
          loop_steps: int = 0) -> Prediction:
    """The bound of work counted as one kernel (or ``kernels`` launches of it, and ``loop_steps`` iterations
    of a compiled loop): a record's XLA counts."""
    peak = roofs.compute(dtype)
    c = flops / peak if peak and flops else 0.0
    m = nbytes / roofs.bandwidth if roofs.bandwidth and nbytes else 0.0
    o = kernels * roofs.overhead_s + loop_steps * roofs.loop_step_s
    return Prediction(roofs.name, flops, nbytes, c, m, max(c, m) + o, c + m + o, kernels)


def bound_kernels(ks: list[Kernel], roofs: Roofs, dtype: str = "fp32") -> Prediction:
    """The bound of a program given kernel by kernel: dots at the dtype's roof, the rest elementwise."""
    c_total = m_total = lower = upper = 0.0
    for k in ks:
        peak = roofs.compute(dtype if k.is_dot else "elementwise")
        c = k.flops / peak if peak and k.flops else 0.0
        m = k.bytes / roofs.bandwidth if roofs.bandwidth else 0.0
        c_total, m_total = c_total + c, m_total + m
        lower, upper = lower + max(c, m), upper + c + m
    o = len(ks) * roofs.overhead_s
    return Prediction(roofs.name, sum(k.flops for k in ks), sum(k.bytes for k in ks), c_total, m_total, lower + o,
                      upper + o, len(ks))


def predict(fn: Callable, *args: Any, on: str | hardware.Hardware | Roofs = "H200 SXM",
            dtype: str = "fp32") -> Prediction:
    """Bounds the time of ``fn(*args)`` on ``on`` (a GPU of the hardware table, a ``Hardware`` or
    ``Roofs``), kernel by kernel, from this machine's compiled program (see the module docstring).

    Raises:
      KeyError: ``on`` names no GPU in the hardware table.
    """
    import jax

    if isinstance(on, str):
        hw = hardware.gpu_spec(on)
        if hw is None:
            raise KeyError(f"unknown hardware {on!r}; known: {', '.join(hardware.GPUS)}")
        on = hw
    roofs = on if isinstance(on, Roofs) else roofs_for(on)
    compiled = jax.jit(fn).lower(*args).compile()
    return bound_kernels(kernels(compiled.as_text()), roofs, dtype)
