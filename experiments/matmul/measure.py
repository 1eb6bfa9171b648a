"""matmul, measured: JAX's fp32 matmul and its peers timed on the same operands, and the worked example."""

from __future__ import annotations

import functools
import re

from jaxgpu.ground import hardware
from jaxgpu.kernels import matmul

from experiments.contract import RunContext
from experiments.matmul import FP32_TOLERANCE, Config


@functools.lru_cache(maxsize=1)
def _operands(m: int, k: int, n: int, seed: int):
    # Consecutive cases (one per impl) share one shape; maxsize=1 frees the last shape's arrays.
    return matmul.operands(m, k, n, seed=seed)


def _peak(impl: str, ctx: RunContext) -> float | None:
    hw = hardware.cpu_estimate() if impl == "numpy" or ctx.platform == "cpu" else ctx.hardware
    return hw.peak_flops("fp32") if hw else None


def run_one(impl: str, m: int, k: int, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    sets = _operands(m, k, n, ctx.seed)
    if impl == "jax":
        res = matmul.bench_jax(sets, "fp32", ctx.device, cfg.target_s)
    elif impl == "numpy":
        res = matmul.bench_numpy(sets, cfg.target_s)
    else:
        res = matmul.bench_torch(sets, "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s)
    if not res.rel_error <= FP32_TOLERANCE:
        raise ArithmeticError(f"{impl} result off: rel_error {res.rel_error:.2e} > {FP32_TOLERANCE:.0e}; "
                              "timing discarded")
    out = res.metrics()
    peak = _peak(impl, ctx)
    if peak:
        out["peak_fraction"] = res.gflops * 1e9 / peak
    return out


def worked(dtype: str, ctx: RunContext) -> dict[str, float]:
    import numpy as np

    out = matmul.worked_example(dtype, ctx.device)
    err = float(np.max(np.abs(out - np.asarray(matmul.WORKED_C, dtype=np.float64))))
    return {"top_left": float(out[0, 0]), "max_abs_error": err, "exact": float(err == 0.0)}


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
