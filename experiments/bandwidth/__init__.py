"""bandwidth: STREAM copy/scale/add/triad as jitted JAX programs, against peers and the HBM datasheet.

On CPU it also answers why XLA's plain triad trails a C/torch triad: the records carry
the minor page faults per call (a fresh output buffer mapped page by page).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from jaxgpu.ground import devices, workload

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RoofParts, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    sweep: tuple[int, ...] = (1 << 22, 1 << 24, 1 << 26)  # triad sizes (elements) below the main one
    llc_multiple: int = 4  # main arrays are at least this many times the last-level cache ...
    max_main_bytes: int = 512 * 2**20  # ... capped here (quick: first touch is slow on small VMs)
    min_main_bytes: int = 256 * 2**20
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    target_s: float = 0.3


# 3 KB to 6 MB of triad: where XLA:CPU starts splitting a kernel over the cores (between 2 and 12 KB here, at tens
# of microseconds a kernel) and which cache level holds it
SMALL = (1 << 8, 1 << 9, 1 << 10, 1 << 13, 1 << 16, 1 << 19)

PROFILES = {
    ("tiny", "any"): Config(sweep=(1 << 16,), max_main_bytes=1 << 20, min_main_bytes=1 << 20, target_s=0.01),
    # quick: 128 MiB arrays (4x a 32 MB L3): a fresh output is first-touched every plain-jit call,
    # which at this VM's ~0.4 GB/s first-touch rate is what the quick profile's time goes on
    # the small sizes are the prediction model's: a kernel of a few KB to MB costs what its size costs here
    # (cache-resident, or split over the cores at a cost: jaxgpu.pricing.roofline's bandwidth curve)
    ("quick", "cpu"): Config(sweep=(*SMALL, 1 << 20, 1 << 22, 1 << 24), max_main_bytes=128 * 2**20,
                             min_main_bytes=128 * 2**20, target_s=0.2),
    ("full", "cpu"): Config(sweep=(*SMALL, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 27), max_main_bytes=4 * 2**30,
                            target_s=1.0),
    # 1 GiB arrays: 17x the 60 MB L2 the lent H200 reports (50 MB in Hopper's whitepaper)
    ("quick", "gpu"): Config(sweep=(1 << 22, 1 << 24), min_main_bytes=2**30, max_main_bytes=2**30, target_s=0.1),
    ("full", "gpu"): Config(sweep=(1 << 20, 1 << 22, 1 << 24, 1 << 26), min_main_bytes=2**31, max_main_bytes=2**31,
                            target_s=0.5),
}


def main_elements(cfg: Config, itemsize: int = 4) -> int:
    llc = devices.last_level_cache_bytes() or 0
    nbytes = min(max(cfg.llc_multiple * llc, cfg.min_main_bytes), cfg.max_main_bytes)
    return nbytes // itemsize


def _cost(kernel: str, variant: str, n: int, dtype: str, cfg: Config, ctx: RunContext, impl: str = "jax",
          draws: bool = False) -> Cost:
    itemsize = np.dtype(dtype).itemsize
    moved = workload.stream_bytes(kernel, n, itemsize)
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

    def add(params, fn, cost):
        out.append(Case(params, fn, cost))

    # a new size, dtype or layout draws three new arrays on the device (_arrays keeps one set)
    for s in [s for s in cfg.sweep if s < n]:
        add({"kernel": "triad", "impl": "jax", "variant": "jit", "n": s, "dtype": "float32"},
            functools.partial(_measure.stream, "triad", "jit", s, "float32", cfg, ctx),
            _cost("triad", "jit", s, "float32", cfg, ctx, draws=True))
    for dtype in cfg.dtypes:
        kernels = workload.KERNELS if dtype == "float32" else ("triad",)
        for i, k in enumerate(kernels):
            add({"kernel": k, "impl": "jax", "variant": "jit", "n": n, "dtype": dtype},
                functools.partial(_measure.stream, k, "jit", n, dtype, cfg, ctx), _cost(k, "jit", n, dtype, cfg, ctx,
                                                                                        draws=i == 0))
    add({"kernel": "triad", "impl": "jax", "variant": "loop", "n": n, "dtype": "float32"},
        functools.partial(_measure.stream, "triad", "loop", n, "float32", cfg, ctx),
        _cost("triad", "loop", n, "float32", cfg, ctx, draws=True))
    if ctx.n_devices > 1:
        add({"kernel": "triad", "impl": "jax", "variant": "sharded", "n": n, "dtype": "float32"},
            functools.partial(_measure.stream, "triad", "sharded", n, "float32", cfg, ctx),
            _cost("triad", "sharded", n, "float32", cfg, ctx, draws=True))
    if ctx.platform == "cpu":
        # the cause and the cure of XLA:CPU's slow plain-jit triad: the same triad in a fresh process
        # with glibc's malloc as it comes and with the tuned settings (jaxgpu.ground.devices.TUNED_MALLOC)
        for allocator in ("system", "tuned"):
            add({"kernel": "triad", "impl": "jax", "variant": "process", "allocator": allocator, "n": n,
                 "dtype": "float32"}, functools.partial(_measure.process, allocator, n, cfg, ctx),
                dataclasses.replace(_cost("triad", "jit", n, "float32", cfg, ctx, draws=True), fixed_s=PROCESS_START_S))
    peers = ["torch"] if devices.torch_available() else []
    if ctx.platform == "cpu":
        peers.insert(0, "numpy")
    for impl in peers:
        for k in ("copy", "triad"):
            add({"kernel": k, "impl": impl, "variant": "peer", "n": n, "dtype": "float32"},
                functools.partial(_measure.peer, impl, k, n, "float32", cfg, ctx), _cost(k, "peer", n, "float32", cfg,
                                                                                         ctx, impl))
    return out


def _roofs(recs: list) -> RoofParts:
    """The memory roof and the bandwidth by bytes.

    The roof is DRAM's as a kernel that computes sees it: the STREAM triad at the run's largest arrays (past the
    last-level cache; smaller sizes a large cache serves faster, and a plain copy can take a memcpy path no
    computing kernel gets). The curve is the fp32 kernels of every size, one program each. A 16-bit kernel is not
    on it: XLA:CPU widens each element to f32 and back, which costs more than its bytes (a bf16 triad's byte took
    1.3x an fp32 triad's in reports/cpu-reference, 2.4x in a quick run of 2026-12-05; on the curve it priced fp32
    kernels 2x off)."""
    jax_ = [r for r in recs if r.params.get("impl") == "jax"]
    triad = [r for r in jax_ if r.params.get("variant") != "process" and r.params.get("kernel") == "triad"
             and r.params.get("dtype") == "float32"]
    big = max((r.params["n"] for r in triad), default=None)
    curve = tuple((r.metrics["bytes_xla"], r.metrics["time_s_median"], r.key) for r in jax_
                  if r.params.get("variant") == "jit" and r.params.get("dtype", "float32") == "float32"
                  and "bytes_xla" in r.metrics)
    return RoofParts(bandwidth=tuple(r.metrics["gbytes_per_s"] * 1e9 for r in triad if r.params["n"] == big),
                     bandwidth_curve=curve)


EXPERIMENT = Experiment(
    name="bandwidth", gpu_part=1, benchmark_version=3,  # 3: the loop variant carries only the array it writes
    config=Config, profiles=PROFILES, cases=cases, info=_measure.info,
    # split over host devices that share the cores; a fresh process under each host allocator
    host_only=frozenset({"sharded", "process"}),
    description="STREAM copy/scale/add/triad GB/s: JAX variants (jit, loop, sharded) vs numpy/torch vs HBM peak",
    pricing=Pricing(roof="elementwise", kernel_level=True, roofs=_roofs,
                    causes={"sharded": "split over host devices that share the same cores",
                            "process": "a fresh process, its allocator mapping new pages every call"}))
