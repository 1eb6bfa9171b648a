"""Matrix multiplication: throughput in GFLOP/s (FLOPs = 2mnk), checked against numpy float64.

The JAX kernel is ``jax.lax.dot`` under ``jax.jit`` with the precision, operand dtype and
accumulation of a preset (``jaxgpu.ground.precision``), so an fp32 figure never silently runs as
TF32 on an Ampere/Hopper GPU. Peers (numpy, torch)
are timed on the same inputs by the same harness. Inputs are random normal (never
zeros, which can run faster and hide unwritten outputs), rotated between timed
iterations where memory allows so a cache does not flatter small sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time

import jax
import jax.numpy as jnp
import ml_dtypes  # noqa: F401 - registers bfloat16/float8 with numpy
import numpy as np

from jaxgpu.ground import devices, precision, timing
from jaxgpu.ground.devices import torch_available  # noqa: F401 - part of this module's API
from jaxgpu.ground.workload import default_sets, reference_rows  # noqa: F401 - part of this module's API
from jaxgpu.records.results import DoesNotFit, Unsupported

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
    preset: str = "fp32"
    upcast_to: str | None = None  # the wider type XLA converted the operands to before multiplying (HLO name)

    @property
    def upcast_to_fp32(self) -> bool:
        return self.upcast_to == "f32"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n

    @property
    def gflops(self) -> float:
        return self.timing.per_s(self.flops, 1e9)

    def metrics(self) -> dict[str, float]:
        out = self.timing.metrics(gflops=self.gflops, rel_error=self.rel_error,
                                  bytes_per_element=float(np.dtype(self.dtype).itemsize))
        if self.impl == "jax":
            out["upcast_to_fp32"] = float(self.upcast_to_fp32)
            out["upcast_bits"] = float({"f16": 16, "bf16": 16, "f32": 32, "s32": 32}.get(self.upcast_to or "", 0))
        if self.timing.flops_xla is not None:
            out["flops_xla"] = self.timing.flops_xla
        return out


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
        with precision.enable_x64():
            return compute()
    return compute()


def operands(m: int, k: int, n: int, n_sets: int | None = None, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random normal fp32 operand pairs; ``n_sets`` defaults to what rotation allows."""
    if n_sets is None:
        n_sets = default_sets(m, k, n)
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
            for _ in range(n_sets)]


def rel_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    denom = np.linalg.norm(ref)
    if denom == 0:
        raise ValueError("reference is all zeros: nothing to check against")
    return float(np.linalg.norm(out - ref) / denom)


def check_against_reference(out, a: np.ndarray, b: np.ndarray) -> float:
    """rel_error of a product against numpy float64 on the same inputs (sampled rows if large).

    The reference runs on one BLAS thread: OpenBLAS's worker threads spin for a while after a call (about
    a tenth of a second), on the very cores the timed program is about to use. Measured on a 2-core Xeon:
    a bf16 1024^3 matmul timed right after a 2-thread float64 reference ran a median 2.4-2.7 ms, after a
    1-thread one 1.6 ms, as with no reference at all (the study's 945 GFLOP/s beside a plain jit's 1420)."""
    rows = reference_rows(a.shape[0])
    with timing.single_blas_thread():
        ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    out = np.asarray(out)[rows]
    if not np.all(np.isfinite(out)):
        return float("inf")
    return rel_error(out, ref)


def bytes_needed(m: int, k: int, n: int, preset: str | precision.Preset = "fp32", n_sets: int = 1) -> int:
    """Device bytes a benchmark holds at once: the input sets as stored (plus one fp32
    staging copy of a pair), and the output with one staging copy."""
    p = precision.get(preset)
    wide = 8 if p.needs_x64 else 4
    return (m * k + k * n) * (p.bytes_per_element * n_sets + wide) + 2 * m * n * wide


def check_fits(m: int, k: int, n: int, preset: str | precision.Preset, n_sets: int,
               device: jax.Device | None = None) -> None:
    """Raises DoesNotFit, with bytes needed and available, before a case that cannot fit the device."""
    device = device or jax.devices()[0]
    available = devices.device_memory_bytes(device)
    needed = bytes_needed(m, k, n, preset, n_sets)
    if available and needed > available:
        raise DoesNotFit(f"{m}x{k}x{n} {precision.get(preset).name} needs {needed / 1e9:.1f} GB, "
                         f"{available / 1e9:.1f} GB available on {device.device_kind}")


def jax_matmul(preset: str = "fp32"):
    """A jitted low-level ``a @ b`` on operands already in the preset's storage (see ``precision.prepare``).

    For fp32 this is ``jnp.matmul`` at precision HIGHEST: true fp32 on every backend.
    """
    p = precision.get(preset)
    return jax.jit(lambda a, b, sa=None, sb=None: precision.dot(a, b, sa, sb, preset=p))


def bench_jax(sets: list[tuple[np.ndarray, np.ndarray]], preset: str = "fp32", device: jax.Device | None = None,
              target_s: float = 0.5) -> MatmulResult:
    """Times the JAX matmul of a precision preset on ``device`` over rotating operand sets.

    fp32 operands are converted (or quantised) to the preset's storage once, outside the
    timed region, as stored weights are; the timed program is the low-precision product
    with its accumulation (and dequantising scale). ``rel_error`` is that whole path's
    error against numpy float64 on the original fp32 inputs.

    Raises:
      jaxgpu.records.results.Unsupported: the backend cannot compile this preset.
    """
    p = precision.get(preset)
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    check_fits(m, k, n, p, len(sets), device)
    scope = precision.enable_x64() if p.needs_x64 else contextlib.nullcontext()
    with scope:
        dtype = jnp.float64 if p.needs_x64 else jnp.float32
        dev_sets = []
        for a, b in sets:
            a_d, b_d = (jax.device_put(jnp.asarray(x, dtype=dtype), device) for x in (a, b))
            qa, qb, sa, sb = precision.prepare(a_d, b_d, p)
            dev_sets.append((qa, qb) if sa is None else (qa, qb, sa, sb))
        fn = jax_matmul(p)
        try:
            compiled, compile_s = timing.compile_timed(fn, *dev_sets[0])
        except Exception as err:  # noqa: BLE001 - a backend without the format says so at compile time
            raise Unsupported(f"{p.name} does not compile on {jax.default_backend()}: "
                              f"{(str(err).splitlines() or [''])[0][:200]}") from None
        out = compiled(*dev_sets[0])
        err = check_against_reference(out, *sets[0])
        upcast = precision.upcast_in_hlo(compiled.as_text(), p)
        del out
        t = timing.time_compiled(compiled, dev_sets, compile_s=compile_s, target_s=target_s)
    return MatmulResult("jax", m, k, n, p.operand_dtype, p.precision, t, err, p.name, upcast)


def bench_numpy(sets: list[tuple[np.ndarray, np.ndarray]], target_s: float = 0.5) -> MatmulResult:
    """Times numpy's BLAS fp32 matmul on the same operands."""
    err = check_against_reference(sets[0][0] @ sets[0][1], *sets[0])
    t = timing.time_host(np.matmul, arg_sets=sets, target_s=target_s)
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    return MatmulResult("numpy", m, k, n, "float32", None, t, err)


def bench_torch(sets: list[tuple[np.ndarray, np.ndarray]], device: str = "cpu", target_s: float = 0.5,
                dtype: str = "float32", budget_s: float = 60.0) -> MatmulResult:
    """Times ``torch.matmul`` (TF32 off for fp32) on CPU or CUDA on the same operands in ``dtype``.

    A CPU without a native kernel for ``dtype`` can be hundreds of times slower (seen: torch's
    bf16 matmul at under 1 GFLOP/s on an AVX2-dispatched build). A probe runs first, growing
    from 256^3 until one product takes a millisecond (below that a GPU shows its launch
    latency, not its rate) or reaches the case's size; if the timed runs would take longer
    than ``budget_s`` at the probed rate, the peer is reported unsupported with that rate
    rather than stalling the run.

    Raises:
      Unsupported: the probe predicts more than ``budget_s`` for the measurement.
    """
    import torch

    tdt = getattr(torch, dtype)
    sync = (lambda out: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda out: out)
    (m, k), n = sets[0][0].shape, sets[0][1].shape[1]
    per_flop = probe_seconds_per_flop(lambda s: sync(torch.matmul(*s)),
                                      lambda d: (torch.randn((d, d), device=device).to(tdt),) * 2, max(m, k, n))
    predicted = per_flop * 2 * m * k * n * 8  # the reference check, warm-up and at least 5 timed calls
    if predicted > budget_s:
        where = f"CPU capability {torch.backends.cpu.get_cpu_capability()}" if device == "cpu" else device
        raise Unsupported(f"torch {dtype} matmul runs at {1e-9 / per_flop:.3g} GFLOP/s here (no fast {dtype} "
                          f"kernel for {where}); {m}x{k}x{n} would take about {predicted:.0f} s")
    tsets = [tuple(torch.from_numpy(x).to(device=device, dtype=tdt) for x in s) for s in sets]
    with torch_ieee_fp32():  # match precision=highest
        err = check_against_reference(torch.matmul(*tsets[0]).float().cpu().numpy(), *sets[0])
        t = timing.time_host(torch.matmul, arg_sets=tsets, sync=sync, target_s=target_s)
    return MatmulResult("torch", m, k, n, dtype, None, t, err)


def torch_dots(specs: list[dict], device: str = "cpu", target_s: float = 0.3) -> timing.Timing:
    """Times ``torch.matmul`` over the same products as a JAX program's dots (``stack.dot_shapes`` of its
    HLO: shapes and contracted dimensions; fp32, TF32 off), all of them per timed call.

    Set beside the JAX program's own dots-only time, it tells whether a step's gap to torch is
    in the matrix products or in the rest of the step.

    Raises:
      Unsupported: a dot with batch dimensions or more than two dimensions (not an MLP's).
    """
    import torch

    g = torch.Generator().manual_seed(0)
    pairs = []
    for s in specs:
        (lc, rc), (lb, rb) = s["dims"]
        if lb or rb or len(s["lhs"]) != 2 or len(s["rhs"]) != 2:
            raise Unsupported(f"torch_dots: a dot of shapes {s['lhs']} x {s['rhs']} is not a plain matrix product")
        lhs = torch.randn(*s["lhs"], generator=g).to(device)
        rhs = torch.randn(*s["rhs"], generator=g).to(device)
        pairs.append((lhs.t() if lc == [0] else lhs, rhs.t() if rc == [1] else rhs))  # contract lhs's 1, rhs's 0
    sync = (lambda out: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda out: out)
    with torch_ieee_fp32():
        return timing.time_host(lambda: [torch.matmul(a, b) for a, b in pairs], sync=sync, target_s=target_s)


@contextlib.contextmanager
def torch_ieee_fp32():
    """torch's fp32 CUDA matmuls as IEEE fp32 (no TF32) inside, as they were after: ``fp32_precision = "ieee"``
    where torch has it (2.9+; ``allow_tf32`` is deprecated there), else ``allow_tf32 = False``."""
    import torch

    cuda = torch.backends.cuda.matmul
    name, off = ("fp32_precision", "ieee") if hasattr(cuda, "fp32_precision") else ("allow_tf32", False)
    saved = getattr(cuda, name)
    setattr(cuda, name, off)
    try:
        yield
    finally:
        setattr(cuda, name, saved)


def probe_seconds_per_flop(run, make, largest: int, start: int = 256, min_s: float = 1e-3) -> float:
    """Seconds per FLOP of ``run(make(d))``, a d x d x d product, for the smallest d from ``start``
    (doubling, at most ``largest``) at which one product takes ``min_s``: a rate, not a latency."""
    d = start
    while True:
        operands_ = make(d)
        run(operands_)  # warm: first-call set-up is not the rate
        t0 = time.perf_counter()
        run(operands_)
        dt = time.perf_counter() - t0
        if dt >= min_s or d >= largest:
            return dt / (2.0 * d**3)
        d = min(2 * d, largest)


@dataclasses.dataclass(frozen=True)
class MamfResult:
    """Maximum achievable matmul FLOP/s: the best shape found by a time-bounded search."""

    preset: str
    best: MatmulResult
    shapes_tried: int
    search_s: float


def mamf_search(preset: str, base: int, budget_s: float, device: jax.Device | None = None, step: int = 256,
                span: int = 2, target_s: float = 0.1, seed: int = 0) -> MamfResult:
    """Searches M, N, K in ``base ± span*step`` (steps of ``step``) for the highest throughput.

    Shapes are tried in a seeded random order until ``budget_s`` is spent on shapes after the first
    (which always runs; drawing the operand pool and the first shape's compile and autotuning are
    not the search's and do not count). Inputs rotate as in ``bench_jax``, so a GPU's L2 does not
    flatter the figure; every shape's result is checked against float64 (on sampled
    rows) before its time counts. The practice of stas00/ml-engineering's mamf-finder.
    """
    dims = [base + i * step for i in range(-span, span + 1) if base + i * step > 0]
    shapes = [(m, k, n) for m in dims for k in dims for n in dims]
    random.Random(seed).shuffle(shapes)
    shapes.insert(0, shapes.pop(shapes.index((base, base, base))))
    t0 = time.perf_counter()
    # One pool of random operands at the largest shape, sliced per shape: drawing fresh
    # arrays of 8k x 8k for every shape would spend the budget in the random generator.
    top = max(dims)
    pool = operands(top, top, top, seed=seed)
    best, tried, clock = None, 0, None
    for m, k, n in shapes:
        if tried and time.perf_counter() - clock > budget_s:
            break
        sets = [(np.ascontiguousarray(a[:m, :k]), np.ascontiguousarray(b[:k, :n])) for a, b in pool]
        res = bench_jax(sets, preset, device, target_s)
        tried += 1
        if tried == 1:
            # the budget is the search's: it starts once the pool is drawn and the first shape has run, whose
            # compile starts the backend's GEMM machinery (and on a GPU autotunes) for the shapes after it
            clock = time.perf_counter()
        if res.rel_error <= precision.get(preset).tolerance and (best is None or res.gflops > best.gflops):
            best = res
    if best is None:
        raise ArithmeticError(f"mamf {preset}: no shape gave a result within tolerance")
    return MamfResult(preset, best, tried, time.perf_counter() - t0)
