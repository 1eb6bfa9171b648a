"""matmul: fp32 GFLOP/s vs size for JAX and its peers, against the peak; the 2x2 worked example.

Tests claims C03 (the worked example, exactly, in every dtype) and feeds C06 (CPU vs
GPU speed-up vs size, from the merged report).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from jaxgpu import hardware, matmul

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = claims.for_experiment("matmul")
DESCRIPTION = "fp32 matmul GFLOP/s vs size, JAX vs numpy/torch, against the peak; the 2x2 example"

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


@functools.lru_cache(maxsize=1)
def _operands(m: int, k: int, n: int, seed: int):
    # Consecutive cases (one per impl) share one shape; maxsize=1 frees the last shape's arrays.
    return matmul.operands(m, k, n, seed=seed)


def _peak(impl: str, ctx: RunContext) -> float | None:
    hw = hardware.cpu_estimate() if impl == "numpy" or ctx.platform == "cpu" else ctx.hardware
    return hw.peak_flops("fp32") if hw else None


def _run_one(impl: str, m: int, k: int, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    sets = _operands(m, k, n, ctx.seed)
    if impl == "jax":
        res = matmul.bench_jax(sets, "fp32", ctx.device, cfg.target_s)
    elif impl == "numpy":
        res = matmul.bench_numpy(sets, cfg.target_s)
    else:
        res = matmul.bench_torch(sets, "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s)
    if not res.rel_error <= FP32_TOLERANCE:
        raise ArithmeticError(f"{impl} result off: rel_error {res.rel_error:.2e} > {FP32_TOLERANCE:.0e}; timing discarded")
    out = res.metrics()
    peak = _peak(impl, ctx)
    if peak:
        out["peak_fraction"] = res.gflops * 1e9 / peak
    return out


def _worked(dtype: str, ctx: RunContext) -> dict[str, float]:
    import numpy as np

    out = matmul.worked_example(dtype, ctx.device)
    err = float(np.max(np.abs(out - np.asarray(matmul.WORKED_C, dtype=np.float64))))
    return {"top_left": float(out[0, 0]), "max_abs_error": err, "exact": float(err == 0.0)}


def _cost(impl: str, m: int, k: int, n: int, cfg: Config, ctx: RunContext, draws: bool) -> Cost:
    sets = matmul.default_sets(m, k, n)
    common = dict(flops=2.0 * m * k * n, bytes=4.0 * (m * k + k * n + m * n), target_s=cfg.target_s,
                  host_flops=2.0 * len(matmul.reference_rows(m)) * k * n, host_bytes=4.0 * (sets * (m * k + k * n) + m * n),
                  rng_bytes=4.0 * sets * (m * k + k * n) if draws else 0.0)
    if impl == "numpy":
        return Cost(compiles=0, on_host=ctx.platform == "gpu", **common)
    return Cost(compiles=0, gemm_compiles=0 if impl == "torch" else 1, **common)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    impls = ["jax", *[p for p in cfg.peers if p != "torch" or matmul.torch_available()]]
    shapes = [("square", s, s, s) for s in cfg.sizes] + [("mlp", *s) for s in cfg.shapes]
    out = [Case({"case": "worked_example", "dtype": d}, functools.partial(_worked, d, ctx), Cost(min_iters=0), key=True)
           for d in cfg.worked_dtypes]
    largest = max(cfg.sizes)
    for kind, m, k, n in shapes:
        for i, impl in enumerate(impls):
            if impl == "numpy" and ctx.platform == "gpu" and max(m, k, n) > cfg.peer_max_n:
                continue
            params = {"shape": kind, "m": m, "k": k, "n": n, "dtype": "float32", "precision": "highest",
                      "impl": impl}
            out.append(Case(params, functools.partial(_run_one, impl, m, k, n, cfg, ctx),
                            _cost(impl, m, k, n, cfg, ctx, draws=i == 0), key=kind == "square" and n == largest))
    return out


def info(ctx: RunContext) -> dict[str, str]:
    """Which library each implementation's matmul ran through, read from the software itself."""
    import jax
    import jax.numpy as jnp

    hlo = matmul.jax_matmul("fp32").lower(jnp.ones((256, 256)), jnp.ones((256, 256))).compile().as_text()
    found = sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo))
                   | set(re.findall(r'"kind":"(__[a-z_]+)"', hlo)))
    out = {"jax_dot": ", ".join(found) or ("XLA dot emitter" if " dot(" in hlo else "?"),
           "jax_backend": jax.default_backend()}
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        if blas:
            b = blas[0]
            out["numpy_blas"] = f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')} kernel, " \
                                f"{b.get('num_threads')} threads)"
    except ImportError:
        pass
    if matmul.torch_available():
        import torch

        m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
        out["torch_blas"] = (m.group(1) if m else "?") + (", oneDNN" if torch.backends.mkldnn.is_available() else "")
    return out
