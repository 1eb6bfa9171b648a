"""The roofline's arithmetic-intensity sweep: chains of FMAs, transcendentals and pows over one array, a matrix-vector
and a matrix-matrix product, each a point (FLOP per byte, FLOP/s) checked against numpy before it is timed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import timing


def fma_chain(k: int) -> Callable:
    """x -> k fused multiply-adds per element: 2k FLOPs per element, 8 bytes moved (fp32 in + out)."""
    def f(x):
        y = x
        for _ in range(k):  # unrolled: XLA fuses the chain into one loop over the array
            y = y * 0.999 + 0.001
        return y

    return f


def transcendental_chain(k: int) -> Callable:
    """x -> k softplus steps per element, y = log(1 + exp(y)): 2k transcendental ops (an exp, a log) and 3k of
    XLA's elementwise FLOPs per element, 8 bytes moved (fp32 in + out). Bounded: from [1, 2], 16 steps end below 5."""
    def f(x):
        y = x
        for _ in range(k):  # unrolled, as the FMA chain: one fused loop over the array
            y = jnp.log(1.0 + jnp.exp(y))
        return y

    return f


def power_chain(k: int) -> Callable:
    """x -> k steps per element of y = x ** (y / 2): k pows with an exponent that varies (no rewrite to a
    square root or a product can apply) and 2k of XLA's elementwise FLOPs per element, 8 bytes moved. Bounded:
    x in [1, 2] and y in [1, 2] keep y in [1, 2]."""
    def f(x):
        y = x
        for _ in range(k):
            y = jnp.power(x, y * 0.5)
        return y

    return f


@dataclasses.dataclass(frozen=True)
class RooflinePoint:
    kind: str  # "fma", "transcendental", "power", "matvec", "matmul"
    intensity: float  # FLOP per byte of DRAM traffic (minimum: each input read, each output written once)
    flops: float
    timing: timing.Timing
    transcendentals: float = 0.0  # of ``flops``, the transcendental ops ...
    powers: float = 0.0  # ... and of those, the pows

    @property
    def gflops(self) -> float:
        return self.timing.per_s(self.flops, 1e9)

    def metrics(self) -> dict[str, float]:
        extra = {"transcendentals_per_s": self.timing.per_s(self.transcendentals)} if self.transcendentals else {}
        if self.powers:
            extra = {"powers_per_s": self.timing.per_s(self.powers)}
        return self.timing.metrics(gflops=self.gflops, intensity_flop_per_byte=self.intensity,
                                   gbytes_per_s=self.timing.per_s(self.flops / self.intensity, 1e9), **extra)


def bench_fma(k: int, n: int, device=None, target_s: float = 0.3) -> RooflinePoint:
    """The elementwise FMA chain at intensity k/4 FLOP/byte, checked against numpy float64."""
    x = jax.device_put(jax.random.uniform(jax.random.key(1), (n,), jnp.float32, 1.0, 2.0), device)
    f = jax.jit(fma_chain(k))
    idx = np.arange(0, n, max(1, n // 4096))
    xs = np.asarray(x)[idx].astype(np.float64)
    ref = xs.copy()
    for _ in range(k):
        ref = ref * 0.999 + 0.001
    got = np.asarray(f(x))[idx]
    if not np.max(np.abs(got - ref) / np.abs(ref)) < 1e-4:
        raise ArithmeticError(f"fma chain k={k}: wrong result; timing discarded")
    t = timing.time_jitted(f, x, target_s=target_s, min_iters=3)
    return RooflinePoint("fma", 2 * k / 8, 2.0 * k * n, t)


def bench_transcendental(k: int, n: int, device=None, target_s: float = 0.3) -> RooflinePoint:
    """The exp/log chain (``transcendental_chain``), checked against numpy float64: the rate of the ops an
    elementwise FLOP count takes as one each (``transcendentals_per_s``), which a model prices apart."""
    x = jax.device_put(jax.random.uniform(jax.random.key(3), (n,), jnp.float32, 1.0, 2.0), device)
    f = jax.jit(transcendental_chain(k))
    idx = np.arange(0, n, max(1, n // 4096))
    ref = np.asarray(x)[idx].astype(np.float64)
    for _ in range(k):
        ref = np.log1p(np.exp(ref))
    got = np.asarray(f(x))[idx]
    if not np.max(np.abs(got - ref) / np.abs(ref)) < 1e-4:
        raise ArithmeticError(f"transcendental chain k={k}: wrong result; timing discarded")
    t = timing.time_jitted(f, x, target_s=target_s, min_iters=3)
    return RooflinePoint("transcendental", 3 * k / 8, 3.0 * k * n, t, transcendentals=2.0 * k * n)


def bench_power(k: int, n: int, device=None, target_s: float = 0.3) -> RooflinePoint:
    """The pow chain (``power_chain``), checked against numpy float64: pows per second (``powers_per_s``),
    which a model prices apart from exp and log."""
    x = jax.device_put(jax.random.uniform(jax.random.key(4), (n,), jnp.float32, 1.0, 2.0), device)
    f = jax.jit(power_chain(k))
    idx = np.arange(0, n, max(1, n // 4096))
    xs = np.asarray(x)[idx].astype(np.float64)
    ref = xs.copy()
    for _ in range(k):
        ref = np.power(xs, ref * 0.5)
    got = np.asarray(f(x))[idx]
    if not np.max(np.abs(got - ref) / np.abs(ref)) < 1e-4:
        raise ArithmeticError(f"pow chain k={k}: wrong result; timing discarded")
    t = timing.time_jitted(f, x, target_s=target_s, min_iters=3)
    return RooflinePoint("power", 2 * k / 8, 2.0 * k * n, t, transcendentals=1.0 * k * n, powers=1.0 * k * n)


def bench_matvec(n: int, device=None, target_s: float = 0.3) -> RooflinePoint:
    """y = A x in fp32: 2n^2 FLOPs over 4n^2 bytes of A, intensity 0.5 FLOP/byte."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((n, n), dtype=np.float32)
    v = rng.standard_normal(n, dtype=np.float32)
    ad, vd = jax.device_put(a, device), jax.device_put(v, device)
    f = jax.jit(lambda m, x: jnp.matmul(m, x, precision=jax.lax.Precision.HIGHEST))
    with timing.single_blas_thread():  # no BLAS threads left spinning on the timed program's cores
        ref = a[:256].astype(np.float64) @ v.astype(np.float64)
    got = np.asarray(f(ad, vd))[:256]
    if not np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5:
        raise ArithmeticError("matvec: wrong result; timing discarded")
    t = timing.time_jitted(f, ad, vd, target_s=target_s, min_iters=3)
    return RooflinePoint("matvec", 2.0 * n * n / (4.0 * (n * n + 2 * n)), 2.0 * n * n, t)


def matmul_point(n: int, device=None, target_s: float = 0.3) -> RooflinePoint:
    """fp32 matmul (HIGHEST): 2n^3 FLOPs over 12n^2 bytes, intensity n/6 FLOP/byte."""
    from jaxgpu.kernels import matmul

    r = matmul.bench_jax(matmul.operands(n, n, n, n_sets=1), "fp32", device, target_s)
    if r.rel_error > 1e-4:
        raise ArithmeticError("matmul: wrong result; timing discarded")
    return RooflinePoint("matmul", n / 6.0, r.flops, r.timing)
