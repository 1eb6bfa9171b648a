"""bandwidth, measured: the STREAM kernels through JAX (plain jit, a compiled loop, sharded, a fresh
process per allocator) and its peers, each checked before its time is kept."""

from __future__ import annotations

import gc

import jax
import numpy as np

from jaxgpu.ground import devices
from jaxgpu.kernels.stream import (
    bench_stream,
    bench_stream_numpy,
    bench_stream_process,
    bench_stream_torch,
    last_level_cache_bytes,
    stream_arrays,
)

from experiments.bandwidth import Config
from experiments.contract import RunContext

_HELD: dict[tuple, list] = {}  # one set of arrays at a time, kept across the kernels that share it


def _release() -> None:
    _HELD.clear()
    gc.collect()
    devices.release_host_memory()


def _arrays(n: int, dtype: str, sharded: bool, platform: str):
    key = (n, dtype, sharded, platform)
    if key not in _HELD:
        # the old set goes before the new one is drawn (an lru_cache drops it after): under the tuned allocator
        # the heap never shrinks, and two sets of 2 GB arrays plus outputs outgrew a 24 GB host
        _release()
        _HELD[key] = _draw(n, dtype, sharded, platform)
        devices.release_host_memory()  # the draw's temporaries (as large again as the arrays)
    return _HELD[key]


def _draw(n: int, dtype: str, sharded: bool, platform: str):
    sharding = None
    if sharded:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        sharding = NamedSharding(Mesh(np.array(jax.devices(platform)), ("x",)), PartitionSpec("x"))
    elif platform:
        sharding = jax.sharding.SingleDeviceSharding(jax.devices(platform)[0])
    return stream_arrays(n, dtype, sharding)


def stream(kernel: str, variant: str, n: int, dtype: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    arrays = _arrays(n, dtype, variant == "sharded", ctx.platform)
    res = bench_stream(kernel, arrays, "loop" if variant == "loop" else "jit", target_s=cfg.target_s)
    return _with_peak(res.metrics(), ctx)


def process(allocator: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    _release()  # the worker makes its own arrays: free this process's first
    return _with_peak(bench_stream_process("triad", n, "float32", allocator, cfg.target_s), ctx)


def peer(impl: str, kernel: str, n: int, dtype: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    _release()  # the peers allocate their own arrays: free JAX's first
    if impl == "numpy":
        res = bench_stream_numpy(kernel, n, dtype, cfg.target_s)
    else:
        res = bench_stream_torch(kernel, n, dtype, "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s)
    return _with_peak(res.metrics(), ctx)


def _with_peak(m: dict[str, float], ctx: RunContext) -> dict[str, float]:
    bw = ctx.hardware.memory_bw_gbps if ctx.hardware else None
    if bw:
        m["peak_fraction"] = m["gbytes_per_s"] / bw
    return m


def info(ctx: RunContext) -> dict[str, float | str]:
    return {"llc_bytes": float(last_level_cache_bytes() or 0),
            "counting": "STREAM: bytes read + written per element (copy/scale 2 arrays, add/triad 3), median time"}
