"""Matrix multiplication: throughput in GFLOP/s (FLOPs = 2mnk), checked against numpy float64.

The JAX kernel is ``jnp.matmul`` under ``jax.jit`` with an explicit precision, so an
fp32 figure never silently runs as TF32 on an Ampere/Hopper GPU. Peers (numpy, torch)
are timed on the same inputs by the same harness. Inputs are random normal (never
zeros, which can run faster and hide unwritten outputs), rotated between timed
iterations where memory allows so a cache does not flatter small sizes.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu import timing

# One set of operands rotated through is enough to defeat a 50 MB GPU L2 at n >= 2048;
# smaller problems get more sets, within this many bytes in all.
_ROTATION_BYTES = 256 * 2**20
_MAX_SETS = 4
# Above this many output rows the float64 reference is computed on a sample of rows:
# an exact fp64 product at n=16384 would cost numpy minutes.
_REFERENCE_ROWS = 512

WORKED_A = ((1, 2), (3, 4))
WORKED_B = ((5, 6), (7, 8))
WORKED_C = ((19, 22), (43, 50))  # 1*5 + 2*7 = 19, the explainer's example


@dataclasses.dataclass(frozen=True)
class MatmulResult:
    """One timed matmul of (m x k) @ (k x n)."""

    impl: str
    m: int
    k: int
    n: int
    dtype: str
    precision: str | None
    timing: timing.Timing
    rel_error: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n

    @property
    def gflops(self) -> float:
        return self.flops / self.timing.median_s / 1e9

    def metrics(self) -> dict[str, float]:
        out = {**self.timing.metrics(), "gflops": self.gflops, "rel_error": self.rel_error}
        if self.timing.flops_xla is not None:
            out["flops_xla"] = self.timing.flops_xla
        return out


def _enable_x64():
    # Scoped x64: jax.enable_x64 is the context manager in jax >= 0.9; older releases
    # kept it in jax.experimental.
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:
        from jax.experimental import enable_x64 as ctx
    return ctx(True)


def worked_example(dtype: str = "float32", device: jax.Device | None = None) -> np.ndarray:
    """The explainer's 2x2 example computed on a JAX device in ``dtype``; returns the product.

    Operands are stored in ``dtype``; the product accumulates in int32 for integer types
    and in at least fp32 for floats (``preferred_element_type``), as real low-precision
    GEMMs do. float64 runs under a scoped ``enable_x64``.
    """
    def compute():
        dt = jnp.dtype(dtype)
        a = jax.device_put(jnp.asarray(np.asarray(WORKED_A), dtype=dt), device)
        b = jax.device_put(jnp.asarray(np.asarray(WORKED_B), dtype=dt), device)
        if jnp.issubdtype(dt, jnp.integer):
            acc = jnp.int32
        else:
            acc = jnp.float64 if dt == jnp.float64 else jnp.float32
        if a.dtype != dt:
            raise TypeError(f"{dtype} not available here (got {a.dtype})")
        out = jax.jit(lambda x, y: jax.lax.dot(x, y, precision=jax.lax.Precision.HIGHEST,
                                               preferred_element_type=acc))(a, b)
        return np.asarray(out).astype(np.float64)

    if dtype == "float64":
        with _enable_x64():
            return compute()
    return compute()


def operands(m: int, k: int, n: int, n_sets: int | None = None, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random normal fp32 operand pairs; ``n_sets`` defaults to what rotation allows."""
    if n_sets is None:
        per_set = 4 * (m * k + k * n)
        n_sets = int(max(1, min(_MAX_SETS, _ROTATION_BYTES // max(per_set, 1))))
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
            for _ in range(n_sets)]


def reference_rows(m: int) -> np.ndarray:
    """The output rows the float64 reference covers: all, or an even sample of large outputs."""
    if m <= _REFERENCE_ROWS:
        return np.arange(m)
    return np.linspace(0, m - 1, _REFERENCE_ROWS).astype(np.int64)


def rel_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref)
    if denom == 0:
        raise ValueError("reference is all zeros: nothing to check against")
    return float(np.linalg.norm(out - ref) / denom)


def check_against_reference(out, a: np.ndarray, b: np.ndarray) -> float:
    """rel_error of a product against numpy float64 on the same inputs (sampled rows if large)."""
    rows = reference_rows(a.shape[0])
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    out = np.asarray(out)[rows]
    if not np.all(np.isfinite(out)):
        return float("inf")
    return rel_error(out, ref)


_PRECISIONS = {"highest": jax.lax.Precision.HIGHEST, "high": jax.lax.Precision.HIGH,
               "default": jax.lax.Precision.DEFAULT}


def jax_matmul(precision: str = "highest"):
    """A jitted ``a @ b`` at the named XLA precision ("highest": true fp32 on every backend)."""
    prec = _PRECISIONS[precision]
    return jax.jit(lambda a, b: jnp.matmul(a, b, precision=prec))


def bench_jax(sets: list[tuple[np.ndarray, np.ndarray]], precision: str = "highest",
              device: jax.Device | None = None, target_s: float = 0.5) -> MatmulResult:
    """Times the JAX matmul on ``device`` over rotating operand sets."""
    dev_sets = [tuple(jax.device_put(x, device) for x in s) for s in sets]
    fn = jax_matmul(precision)
    out = fn(*dev_sets[0])
    err = check_against_reference(out, *sets[0])
    del out
    t = timing.time_jitted(fn, arg_sets=dev_sets, target_s=target_s)
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    return MatmulResult("jax", m, k, n, "float32", precision, t, err)


def bench_numpy(sets: list[tuple[np.ndarray, np.ndarray]], target_s: float = 0.5) -> MatmulResult:
    """Times numpy's BLAS fp32 matmul on the same operands."""
    err = check_against_reference(sets[0][0] @ sets[0][1], *sets[0])
    t = timing.time_host(np.matmul, arg_sets=sets, target_s=target_s)
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    return MatmulResult("numpy", m, k, n, "float32", None, t, err)


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def bench_torch(sets: list[tuple[np.ndarray, np.ndarray]], device: str = "cpu",
                target_s: float = 0.5) -> MatmulResult:
    """Times ``torch.matmul`` (fp32, TF32 off) on CPU or CUDA on the same operands."""
    import torch

    tsets = [tuple(torch.from_numpy(x).to(device) for x in s) for s in sets]
    sync = (lambda out: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda out: out)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # match precision=highest; restored below
    try:
        err = check_against_reference(torch.matmul(*tsets[0]).cpu().numpy(), *sets[0])
        t = timing.time_host(torch.matmul, arg_sets=tsets, sync=sync, target_s=target_s)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    return MatmulResult("torch", m, k, n, "float32", None, t, err)
