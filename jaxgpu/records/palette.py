"""One colour per meaning, across every figure of a report.

A machine (this CPU, each GPU) owns its colour: no other meaning is drawn in it. How a figure was had is its
line: measured solid, predicted dashed; a bar compiled for a GPU that did not run it is hatched. Where a figure
compares machines, the thing compared on each (an implementation, a precision, a collective) is its marker;
where it shows one machine, the thing compared takes a colour of its own from ``VARIANTS``, the same in every
figure (a meaning keeps one colour; two figures of different families may reuse a colour for different things,
one figure never does).

Every artist a figure draws from here carries its meaning as its gid ("machine:H200", "variant:bf16",
"reference:ideal"), so a test can read every figure of a report and check the rule. Imports no JAX and no
matplotlib.
"""

from __future__ import annotations

import zlib

from jaxgpu.ground import hardware
from jaxgpu.records.results import Run


def _gpu_keys() -> dict[str, str]:
    """Each colour of the hardware table's GPUs (``Hardware.colour``) under its machine key: the first word of the
    first card that wears it ("H200" for the H200 SXM and the H200 NVL, one processor)."""
    out: dict[str, str] = {}
    for hw in hardware.GPUS.values():
        if hw.colour and hw.colour not in out.values():
            out[hw.name.split()[0]] = hw.colour
    return out


# a machine's colour: CPUs in blues, each GPU in the hue its table entry gives it (Okabe-Ito and ColorBrewer Dark2
# hues, which stay apart for the common colour-vision deficiencies and in grey print)
MACHINES = {
    "Intel": "#1f5fa8",      # blue
    "AMD": "#56b4e9",        # sky blue
    "CPU": "#4d6d8f",        # slate: another CPU
    **_gpu_keys(),
    "GPU": "#a6761d",        # ochre: another GPU
}
# the things compared on one machine: none is a machine's colour
VARIANTS = ("#cc79a7", "#e6ab02", "#66a61e", "#b2182b", "#404096", "#8c6d31", "#7f7f7f", "#e7298a", "#1b7837")
# names that must not share a colour within the figures they meet in, fixed (the rest are hashed onto VARIANTS)
_FIXED = {
    # implementations
    "jax": 0, "jit": 0, "op by op": 1, "torch": 2, "python_loop": 3, "fori_loop": 4, "vectorized": 5,
    "vmap": 2, "pmap": 3, "jit_sharding": 4, "shard_map": 5,
    # precisions
    "fp32": 0, "tf32": 1, "bf16": 2, "fp16_scaled": 3, "fp16": 4, "fp8": 5, "int8": 6,
    # collectives
    "all-reduce": 0, "all-gather": 1, "reduce-scatter": 2, "all-to-all": 3, "ppermute": 4,
    # what a step is for, and the two halves of a figure
    "train": 3, "serve": 4, "throughput": 0, "latency": 3, "matmul": 4, "elementwise": 1,
    "host to device": 0, "device to host": 1, "on device copy": 2,
    "share of FLOPs": 4, "share of time": 3, "XLA": 4, "estimate": 1,
    "XLA:GPU plan": 4, "CPU plan": 3, "first price": 1,
    # a step's memory and time by kind (the model command's figure)
    "held between steps": 0, "temporaries": 3, "matrix products": 4, "fused attention": 2, "other kernels": 1,
    "collectives": 5,
    # the triad's ways
    "JAX triad (jit)": 0, "numpy": 1, "JAX sharded": 2, "JAX loop": 3, "JAX process (system malloc)": 5,
    "JAX process (tuned malloc)": 6,
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
REFERENCE = "#333333"  # ideal lines, peaks, "predicted = published": a reference, never a machine


def machine(run: Run) -> str:
    """The key of the machine a run stands for: the GPU it ran on, was compiled for or predicted on; else its
    CPU's maker."""
    gpu = run.env.get("backend") == "gpu" or run.compiled or run.predicted
    return key_of(f"{run.env.get('device_kind', '')} {run.machine}" if gpu else str(run.env.get("cpu_model", "")),
                  gpu)


def key_of(name: str, gpu: bool) -> str:
    """The machine key a device's name says ("NVIDIA H200" -> "H200"; "Intel(R) Xeon(R) ..." -> "Intel")."""
    if gpu:
        hw = hardware.gpu_spec(name)
        keys = {c: k for k, c in MACHINES.items()}
        return keys.get(hw.colour, "GPU") if hw and hw.colour else "GPU"
    return next((key for key in ("Intel", "AMD") if key.lower() in name.lower()), "CPU")


def machine_color(key: str) -> str:
    return MACHINES.get(key, MACHINES["CPU"])


def _slot(name: str) -> int:
    key = name.strip()
    return _FIXED[key] if key in _FIXED else zlib.crc32(key.encode()) % len(VARIANTS)


def variant_color(name: str) -> str:
    """The colour of a thing compared on one machine: the same for the same name in every figure."""
    return VARIANTS[_slot(name) % len(VARIANTS)]


def marker(name: str) -> str:
    """The marker of a thing compared across machines: the same for the same name in every figure."""
    return MARKERS[_slot(name) % len(MARKERS)]


def tag(artists, meaning: str) -> None:
    """Marks what an artist's colour means ("machine:H200", "variant:bf16", "reference:ideal"), for the test
    that reads a report's figures; a container (bars) marks each of its patches."""
    for a in getattr(artists, "patches", None) or (artists if isinstance(artists, (list, tuple)) else [artists]):
        a.set_gid(meaning)


def colour_of(machine_key: str | None, variant: str | None, machines: int) -> tuple[str, str]:
    """(colour, gid) of a series: by its machine where the figure compares ``machines`` > 1 of them (or it has
    no variant), else by its variant; a series of neither is a reference."""
    if machine_key and (machines > 1 or not variant):
        return machine_color(machine_key), f"machine:{machine_key}"
    if variant:
        return variant_color(variant), f"variant:{variant}"
    return REFERENCE, "reference"
