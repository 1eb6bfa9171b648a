"""What a benchmark's calls do, counted before anything runs: imports no JAX.

A plan (``python -m experiments.run --dry-run``) prices every case from these counts on a
machine that may not have JAX at all; the kernels in ``jaxgpu.kernels.matmul``, ``jaxgpu.kernels.stream``,
``jaxgpu.kernels.serial`` and ``jaxgpu.kernels.parallel`` use the same ones, so what is planned and what runs
cannot drift apart.
"""

from __future__ import annotations

import numpy as np

# One set of operands rotated through is enough to defeat a GPU's L2 (60 MB on the lent H200) at n >= 2048;
# smaller problems get more sets, within this many bytes in all.
ROTATION_BYTES = 256 * 2**20
MAX_SETS = 4
# Above this many output rows the float64 reference is computed on a sample of rows:
# an exact fp64 product at n=16384 would cost numpy minutes.
REFERENCE_ROWS = 512

# STREAM: (arrays read, arrays written) per element.
KERNELS: dict[str, tuple[int, int]] = {"copy": (1, 1), "scale": (1, 1), "add": (2, 1), "triad": (2, 1)}

# The ways jaxgpu.kernels.serial computes N independent multiply-adds, and the serial recurrence.
SERIAL_VARIANTS = ("python_loop", "fori_loop", "vectorized", "vmap")
RECURRENCES = ("scan", "associative_scan", "closed_form")
# The ways jaxgpu.kernels.parallel runs one train step over several devices, and the collectives it times.
DP_VARIANTS = ("pmap", "jit_sharding", "shard_map")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "ppermute")
# The named axes of the meshes jaxgpu.kernels.parallel and jaxgpu.kernels.transformer split over: the batch's,
# and tensor parallelism's (a layer's products cut over it)
DATA_AXIS, MODEL_AXIS = "data", "model"


def default_sets(m: int, k: int, n: int) -> int:
    """How many operand sets ``jaxgpu.kernels.matmul.operands`` draws by default: as many as rotation allows."""
    return int(max(1, min(MAX_SETS, ROTATION_BYTES // max(4 * (m * k + k * n), 1))))


def reference_rows(m: int) -> np.ndarray:
    """The output rows the float64 reference covers: all, or an even sample of large outputs."""
    if m <= REFERENCE_ROWS:
        return np.arange(m)
    return np.linspace(0, m - 1, REFERENCE_ROWS).astype(np.int64)


def stream_bytes(kernel: str, n: int, itemsize: int) -> int:
    """Bytes a STREAM kernel moves over ``n`` elements, counted STREAM's way (each array once)."""
    reads, writes = KERNELS[kernel]
    return (reads + writes) * n * itemsize


def megatron_split(layer: int, in_dim: int, out_dim: int, model_size: int) -> str | None:
    """How tensor parallelism splits layer ``layer`` of an MLP over ``model_size`` devices:
    "column" (even layers: output features), "row" (odd layers: input features), or None
    (replicated) where that dimension does not divide evenly. ``jaxgpu.kernels.parallel`` and
    ``jaxgpu.pricing.fit`` follow it."""
    column = layer % 2 == 0
    if (out_dim if column else in_dim) % model_size:
        return None
    return "column" if column else "row"
