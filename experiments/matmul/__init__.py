"""matmul: fp32 GFLOP/s vs size for JAX and its peers, against the peak; the 2x2 worked example.

The worked example is checked exactly, in every dtype; the sweep gives the CPU-vs-GPU speed-up by size in a
merged report. Which claims read it is the claims' to say (``python -m experiments.run --list``).
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import devices, workload

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RoofParts, RunContext

_measure = Deferred(f"{__name__}.measure")

# fp32 at precision=highest accumulates rounding like a sum of k terms; 1e-4 leaves room
# for k = 16384 while still catching a silent TF32 (about 1e-3) or a wrong kernel.
FP32_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)
    # Real MLP layer shapes (m=batch, k=in, n=out).
    shapes: tuple[tuple[int, int, int], ...] = ((256, 4096, 4096), (1024, 784, 1024))
    peers: tuple[str, ...] = ("numpy", "torch")
    peer_max_n: int = 1 << 30  # numpy beside a GPU is slow at large sizes: capped there
    target_s: float = 0.3
    worked_dtypes: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "int8")


PROFILES = {
    ("tiny", "any"): Config(sizes=(64, 128), shapes=((32, 64, 48),), target_s=0.02),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(sizes=(64, 128, 256, 512, 1024, 2048, 4096),
                            shapes=((1024, 4096, 4096), (1024, 784, 1024)), target_s=1.0),
    # quick on a GPU fits the lent machine's window: sizes either side of the CPU's, and
    # numpy (on the host) only where the CPU run has it too
    ("quick", "gpu"): Config(sizes=(256, 1024, 4096, 8192), shapes=((8192, 784, 1024),), peer_max_n=1024,
                             target_s=0.1),
    ("full", "gpu"): Config(sizes=tuple(2**i for i in range(6, 15)),
                            shapes=((8192, 8192, 8192), (4096, 4096, 16384), (8192, 784, 1024)), peer_max_n=4096,
                            target_s=1.0),
}


# importing torch, as the info hook does where torch is installed: a lead, not yet measured on the GPU machine (a CUDA
# build loads its libraries as it imports); the first GPU run's run.json timing checks it
TORCH_IMPORT_S = 3.0


def _cost(impl: str, m: int, k: int, n: int, cfg: Config, ctx: RunContext, draws: bool) -> Cost:
    sets = workload.default_sets(m, k, n)
    common = dict(flops=2.0 * m * k * n, bytes=4.0 * (m * k + k * n + m * n), target_s=cfg.target_s,
                  host_flops=2.0 * len(workload.reference_rows(m)) * k * n,
                  host_bytes=4.0 * (sets * (m * k + k * n) + m * n),
                  rng_bytes=4.0 * sets * (m * k + k * n) if draws else 0.0)
    if impl == "numpy":
        return Cost(compiles=0, on_host=ctx.platform == "gpu", **common)
    return Cost(compiles=0, gemm_compiles=0 if impl == "torch" else 1, **common)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    impls = ["jax", *[p for p in cfg.peers if p != "torch" or devices.torch_available()]]
    shapes = [("square", s, s, s) for s in cfg.sizes] + [("mlp", *s) for s in cfg.shapes]
    out = [Case({"case": "worked_example", "dtype": d}, functools.partial(_measure.worked, d, ctx), Cost(min_iters=0))
           for d in cfg.worked_dtypes]
    for kind, m, k, n in shapes:
        for i, impl in enumerate(impls):
            if impl == "numpy" and ctx.platform == "gpu" and max(m, k, n) > cfg.peer_max_n:
                continue
            params = {"shape": kind, "m": m, "k": k, "n": n, "dtype": "float32", "precision": "highest",
                      "impl": impl}
            out.append(Case(params, functools.partial(_measure.run_one, impl, m, k, n, cfg, ctx),
                            _cost(impl, m, k, n, cfg, ctx, draws=i == 0)))
    return out


def _roofs(recs: list) -> RoofParts:
    """The fp32 product roof: the sweep's best JAX rate, and its rate by size."""
    timed = [r for r in recs if r.params.get("impl", "jax") == "jax" and "gflops" in r.metrics]
    return RoofParts(rates={"fp32": tuple(r.metrics["gflops"] * 1e9 for r in timed if r.params.get("impl") == "jax")},
                     gemm_curve={"fp32": tuple((r.metrics["flops_xla"], r.metrics["gflops"] * 1e9, r.key)
                                               for r in timed if "flops_xla" in r.metrics)})


EXPERIMENT = Experiment(
    # 2: float64 references on one BLAS thread (OpenBLAS's spinning threads slowed the timed product)
    name="matmul", gpu_part=1, benchmark_version=2,
    config=Config, profiles=PROFILES, cases=cases, info=_measure.info,
    # the hook compiles one product and imports torch where it is there (its CUDA build: seconds)
    info_cost=Cost(compiles=0, gemm_compiles=1, fixed_s=TORCH_IMPORT_S, min_iters=0, warmup=0, calls=0),
    description="fp32 matmul GFLOP/s vs size, JAX vs numpy/torch, against the peak; the 2x2 example",
    pricing=Pricing(kernel_level=True, roofs=_roofs))
