"""bandwidth: STREAM copy/scale/add/triad as jitted JAX programs, against peers and the HBM datasheet (C09).

On CPU it also answers why XLA's plain triad trails a C/torch triad: the records carry
the minor page faults per call (a fresh output buffer mapped page by page).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np

from jaxgpu import matmul, memory

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 2  # 2: the run under the tuned allocator, and both allocators side by side
CLAIMS = claims.for_experiment("bandwidth")
DESCRIPTION = "STREAM copy/scale/add/triad GB/s: JAX variants (jit, loop, sharded) vs numpy/torch vs HBM peak"


@dataclasses.dataclass(frozen=True)
class Config:
    sweep: tuple[int, ...] = (1 << 22, 1 << 24, 1 << 26)  # triad sizes (elements) below the main one
    llc_multiple: int = 4  # main arrays are at least this many times the last-level cache ...
    max_main_bytes: int = 512 * 2**20  # ... capped here (quick: first touch is slow on small VMs)
    min_main_bytes: int = 256 * 2**20
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    target_s: float = 0.3


PROFILES = {
    ("tiny", "any"): Config(sweep=(1 << 16,), max_main_bytes=1 << 20, min_main_bytes=1 << 20, target_s=0.01),
    # quick: 128 MiB arrays (4x a 32 MB L3): a fresh output is first-touched every plain-jit call,
    # which at this VM's ~0.4 GB/s first-touch rate is what the quick profile's time goes on
    ("quick", "cpu"): Config(sweep=(1 << 22, 1 << 24), max_main_bytes=128 * 2**20, min_main_bytes=128 * 2**20,
                             target_s=0.2),
    ("full", "cpu"): Config(sweep=(1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 27), max_main_bytes=4 * 2**30,
                            target_s=1.0),
    # 1 GiB arrays: 20x the H200's 50 MB L2
    ("quick", "gpu"): Config(sweep=(1 << 22, 1 << 24), min_main_bytes=2**30, max_main_bytes=2**30, target_s=0.1),
    ("full", "gpu"): Config(sweep=(1 << 20, 1 << 22, 1 << 24, 1 << 26), min_main_bytes=2**31, max_main_bytes=2**31,
                            target_s=0.5),
}


def main_elements(cfg: Config, itemsize: int = 4) -> int:
    llc = memory.last_level_cache_bytes() or 0
    nbytes = min(max(cfg.llc_multiple * llc, cfg.min_main_bytes), cfg.max_main_bytes)
    return nbytes // itemsize


@functools.lru_cache(maxsize=1)
def _arrays(n: int, dtype: str, sharded: bool, platform: str):
    sharding = None
    if sharded:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        sharding = NamedSharding(Mesh(np.array(jax.devices(platform)), ("x",)), PartitionSpec("x"))
    elif platform:
        sharding = jax.sharding.SingleDeviceSharding(jax.devices(platform)[0])
    return memory.stream_arrays(n, dtype, sharding)


def _jax(kernel: str, variant: str, n: int, dtype: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    arrays = _arrays(n, dtype, variant == "sharded", ctx.platform)
    res = memory.bench_stream(kernel, arrays, "loop" if variant == "loop" else "jit", target_s=cfg.target_s)
    return _with_peak(res.metrics(), ctx)


def _process(allocator: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    _arrays.cache_clear()  # the worker makes its own arrays: free this process's first
    return _with_peak(memory.bench_stream_process("triad", n, "float32", allocator, cfg.target_s), ctx)


def _peer(impl: str, kernel: str, n: int, dtype: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    _arrays.cache_clear()  # the peers allocate their own arrays: free JAX's first
    if impl == "numpy":
        res = memory.bench_stream_numpy(kernel, n, dtype, cfg.target_s)
    else:
        res = memory.bench_stream_torch(kernel, n, dtype, "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s)
    return _with_peak(res.metrics(), ctx)


def _with_peak(m: dict[str, float], ctx: RunContext) -> dict[str, float]:
    bw = ctx.hardware.memory_bw_gbps if ctx.hardware else None
    if bw:
        m["peak_fraction"] = m["gbytes_per_s"] / bw
    return m


def _cost(kernel: str, variant: str, n: int, dtype: str, cfg: Config, ctx: RunContext, impl: str = "jax",
          draws: bool = False) -> Cost:
    itemsize = np.dtype(dtype).itemsize
    moved = memory.stream_bytes(kernel, n, itemsize)
    steps = 10 if variant == "loop" else 1  # bench_stream's loop_iters
    if impl != "jax":  # the peers draw their own arrays and write into a preallocated output
        return Cost(compiles=0, bytes=moved, on_host=impl == "numpy" and ctx.platform == "gpu", target_s=cfg.target_s,
                    min_iters=3, warmup=1, rng_bytes=12.0 * n)
    # three arrays made on the device (first touch), a compile, a sampled check
    return Cost(compiles=3, bytes=moved * steps, target_s=cfg.target_s, min_iters=3, warmup=1, calls=1,
                host_bytes=2**20, device_rng_bytes=3.0 * n * itemsize if draws else 0.0)


# A worker process: Python and JAX starting (about 2.5 s here).
PROCESS_START_S = 2.5


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    n = main_elements(cfg)
    out = []

    def add(params, fn, cost, key=False):
        out.append(Case(params, fn, cost, key))

    # a new size, dtype or layout draws three new arrays on the device (_arrays keeps one set)
    for s in [s for s in cfg.sweep if s < n]:
        add({"kernel": "triad", "impl": "jax", "variant": "jit", "n": s, "dtype": "float32"},
            functools.partial(_jax, "triad", "jit", s, "float32", cfg, ctx),
            _cost("triad", "jit", s, "float32", cfg, ctx, draws=True))
    for dtype in cfg.dtypes:
        kernels = memory.KERNELS if dtype == "float32" else ("triad",)
        for i, k in enumerate(kernels):
            add({"kernel": k, "impl": "jax", "variant": "jit", "n": n, "dtype": dtype},
                functools.partial(_jax, k, "jit", n, dtype, cfg, ctx), _cost(k, "jit", n, dtype, cfg, ctx, draws=i == 0),
                key=k == "triad" and dtype == "float32")
    add({"kernel": "triad", "impl": "jax", "variant": "loop", "n": n, "dtype": "float32"},
        functools.partial(_jax, "triad", "loop", n, "float32", cfg, ctx),
        _cost("triad", "loop", n, "float32", cfg, ctx, draws=True))
    if ctx.n_devices > 1:
        add({"kernel": "triad", "impl": "jax", "variant": "sharded", "n": n, "dtype": "float32"},
            functools.partial(_jax, "triad", "sharded", n, "float32", cfg, ctx),
            _cost("triad", "sharded", n, "float32", cfg, ctx, draws=True))
    if ctx.platform == "cpu":
        # the cause and the cure of XLA:CPU's slow plain-jit triad: the same triad in a fresh process
        # with glibc's malloc as it comes and with the tuned settings (jaxgpu.devices.TUNED_MALLOC)
        for allocator in ("system", "tuned"):
            add({"kernel": "triad", "impl": "jax", "variant": "process", "allocator": allocator, "n": n,
                 "dtype": "float32"}, functools.partial(_process, allocator, n, cfg, ctx),
                dataclasses.replace(_cost("triad", "jit", n, "float32", cfg, ctx, draws=True), fixed_s=PROCESS_START_S),
                key=True)
    peers = ["torch"] if matmul.torch_available() else []
    if ctx.platform == "cpu":
        peers.insert(0, "numpy")
    for impl in peers:
        for k in ("copy", "triad"):
            add({"kernel": k, "impl": impl, "variant": "peer", "n": n, "dtype": "float32"},
                functools.partial(_peer, impl, k, n, "float32", cfg, ctx), _cost(k, "peer", n, "float32", cfg, ctx, impl),
                key=k == "triad")
    return out


def info(ctx: RunContext) -> dict[str, float | str]:
    return {"llc_bytes": float(memory.last_level_cache_bytes() or 0),
            "counting": "STREAM: bytes read + written per element (copy/scale 2 arrays, add/triad 3), median time"}
