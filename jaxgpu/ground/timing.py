"""The timing harness: compile apart, warm up, block on every output, many repeats.

JAX dispatches asynchronously, so a host clock read right after a call measures the
dispatch, not the work. Every timed iteration here ends with ``jax.block_until_ready``
on every output leaf (or a caller-given ``sync`` for torch and friends). Compilation is
done once up front through ``lower().compile()`` and timed on its own. The repeat count
grows until the measured time reaches ``target_s``, and the result keeps every sample so
the median and the spread are both reported.

Usage::

    t = time_jitted(jax.jit(jnp.matmul), a, b)
    t.median_s, t.compile_s, t.flops_xla
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one timed computation, in seconds."""

    times_s: tuple[float, ...]
    compile_s: float | None = None
    flops_xla: float | None = None  # the compiled program's work (``work_counts``)
    bytes_xla: float | None = None
    counts_from: str | None = None  # "xla" (its cost analysis) or "hlo" (counted from the program's kernels)

    @property
    def n_iters(self) -> int:
        return len(self.times_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    def quantile_s(self, q: float) -> float:
        """The q-quantile of the samples (linear interpolation)."""
        xs = sorted(self.times_s)
        pos = q * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    def per_s(self, quantity: float, unit: float = 1.0) -> float:
        """``quantity`` (FLOPs, bytes, samples) per second at the median time, in ``unit``s (1e9: giga)."""
        return quantity / self.median_s / unit

    def metrics(self, **extra: float) -> dict[str, float]:
        """The contract's timing metrics (docs/results.md), plus the quartiles and ``extra``."""
        out = {"time_s_median": self.median_s, "time_s_min": self.min_s, "time_s_max": self.max_s,
               "time_s_q25": self.quantile_s(0.25), "time_s_q75": self.quantile_s(0.75),
               "n_iters": float(self.n_iters)}
        if self.compile_s is not None:
            out["compile_s"] = self.compile_s
        # XLA's own count of the program's work: what a roofline prediction of this time starts from
        if self.flops_xla is not None:
            out["flops_xla"] = self.flops_xla
        if self.bytes_xla is not None:
            out["bytes_xla"] = self.bytes_xla
        if self.counts_from is not None:  # which count the figures above are: a GPU's library GEMMs need the HLO's
            out["counts_from_hlo"] = float(self.counts_from == "hlo")
        return {**out, **extra}


def _block(out: Any) -> Any:
    return jax.block_until_ready(out)


def repeat(call: Callable[..., Any], sync: Callable[[Any], Any] = _block, *, target_s: float = 0.5,
           min_iters: int = 5, max_iters: int = 10_000, warmup: int = 2,
           prepare: Callable[[int], Any] | None = None) -> tuple[float, ...]:
    """Times ``call(i)`` (i = iteration index) until ``target_s`` of samples are collected.

    Each sample is one call followed by ``sync`` on its result, on the host clock. With
    ``prepare``, each iteration first makes ``prepared = prepare(i)`` off the clock (synced
    too) and times ``call(i, prepared)``: for work that must start from fresh state each
    time, such as a device array whose host copy must not already be cached.
    Returns the samples in seconds; at least ``min_iters``, at most ``max_iters``.
    """
    if min_iters < 1 or max_iters < min_iters:
        raise ValueError(f"need 1 <= min_iters <= max_iters, got {min_iters}, {max_iters}")

    def once(i: int) -> float:
        if prepare is None:
            t0 = perf()
            sync(call(i))
            return perf() - t0
        ready = prepare(i)
        _block(ready)
        t0 = perf()
        sync(call(i, ready))
        return perf() - t0

    perf = time.perf_counter
    for i in range(warmup):
        once(i)
    times: list[float] = []
    total = 0.0
    i = 0
    while i < max_iters and (i < min_iters or total < target_s):
        dt = once(warmup + i)
        times.append(dt)
        total += dt
        i += 1
    return tuple(times)


def cost_analysis(compiled: Any) -> tuple[float | None, float | None]:
    """(flops, bytes accessed) of a compiled program (``work_counts``), or Nones where neither count can be had."""
    flops, nbytes, _ = work_counts(compiled)
    return flops, nbytes


def work_counts(compiled: Any) -> tuple[float | None, float | None, str | None]:
    """(flops, bytes, where they came from) of a compiled program: "xla" (XLA's cost analysis) where it sees the
    whole program, else "hlo" (``jaxgpu.ground.launches.program_counts`` over the optimized program's kernels).

    XLA's cost analysis on a GPU counts every library GEMM (a cuBLAS custom call) as -1 FLOPs and -1 bytes,
    and a plugin may not offer it at all: such a count, or one with a negative part, is not used."""
    from jaxgpu.ground import launches, stack

    flops = nbytes = None
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        cost = None
    if isinstance(cost, (list, tuple)):  # older jax returned one dict per computation
        cost = cost[0] if cost else {}
    if cost:
        flops, nbytes = cost.get("flops"), cost.get("bytes accessed")
    try:
        hlo = compiled.as_text()
    except Exception:  # noqa: BLE001 - a compiled object without text: XLA's figures or none
        hlo = ""
    blind = flops is None or nbytes is None or flops < 0 or nbytes < 0 or stack.has_library_gemm(hlo)
    if not blind:
        return float(flops), float(nbytes), "xla"
    if hlo:
        f, b = launches.program_counts(hlo)
        return (f if f > 0 else None), (b if b > 0 else None), "hlo"
    return None, None, None


def memory_bytes(compiled: Any) -> int:
    """Bytes a compiled program holds, from XLA's memory analysis: arguments + outputs +
    temporaries - aliased (donated inputs reused for outputs). Per device for an SPMD program."""
    m = compiled.memory_analysis()
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def clock(fn: Callable, *args: Any, sync: Callable[[Any], Any] = _block) -> tuple[Any, float]:
    """One call of ``fn(*args)`` on the host clock, waited for with ``sync``: (its result, seconds).

    For work timed once rather than repeated: a training epoch, a distributed step, a compile.
    """
    t0 = time.perf_counter()
    out = sync(fn(*args))
    return out, time.perf_counter() - t0


@dataclasses.dataclass(frozen=True)
class Program:
    """A program compiled while ``collecting_programs`` was open: the jitted function (None when a ``Lowered``
    was compiled), its arguments' shapes and the compiled program. The runner keeps the one whose work a
    record counts (``work_counts``) and stores its plan beside the record (``jaxgpu.pricing.plans``)."""

    fn: Callable | None
    specs: tuple
    compiled: Any


_PROGRAMS: contextvars.ContextVar[list[Program] | None] = contextvars.ContextVar("jaxgpu_programs", default=None)


@contextlib.contextmanager
def collecting_programs():
    """Inside, every program ``compile_timed`` compiles is appended to the list this yields."""
    programs: list[Program] = []
    token = _PROGRAMS.set(programs)
    try:
        yield programs
    finally:
        _PROGRAMS.reset(token)


def compile_timed(fn: Callable, *args: Any) -> tuple[Any, float]:
    """Lowers and compiles ``fn`` (jitted if it is not, or already a ``Lowered``) for ``args``;
    returns (compiled, seconds of the compile alone)."""
    jitted = None if hasattr(fn, "compile") else (fn if hasattr(fn, "lower") else jax.jit(fn))
    lowered = fn if jitted is None else jitted.lower(*args)
    compiled, seconds = clock(lowered.compile, sync=lambda c: c)
    programs = _PROGRAMS.get()
    if programs is not None:
        specs = tuple(jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") else a,
                                   list(args)))
        programs.append(Program(jitted, specs, compiled))
    return compiled, seconds


def time_jitted(fn: Callable, *args: Any, arg_sets: Sequence[tuple] | None = None, target_s: float = 0.5,
                min_iters: int = 5, max_iters: int = 10_000, warmup: int = 2) -> Timing:
    """Times a JAX computation: compile time apart, then run time of the compiled program.

    Args:
      fn: a function or ``jax.jit`` wrapped function.
      *args: the inputs (used for compiling, and for timing when ``arg_sets`` is None).
      arg_sets: several input tuples of the same shapes, used in rotation so that
        caches do not flatter problems smaller than the cache.
      target_s: keep repeating until this much time has been measured.

    Returns:
      A ``Timing`` with every sample, the compile time and the program's work (``work_counts``).
    """
    sets = list(arg_sets) if arg_sets else [args]
    compiled, compile_s = compile_timed(fn, *sets[0])
    return time_compiled(compiled, sets, compile_s=compile_s, target_s=target_s, min_iters=min_iters,
                         max_iters=max_iters, warmup=warmup)


def time_compiled(compiled: Any, arg_sets: Sequence[tuple], *, compile_s: float | None = None,
                  target_s: float = 0.5, min_iters: int = 5, max_iters: int = 10_000, warmup: int = 2) -> Timing:
    """Times an already compiled program (from ``compile_timed``) over rotating input sets."""
    sets = list(arg_sets)
    flops, nbytes, source = work_counts(compiled)
    k = len(sets)
    times = repeat(lambda i: compiled(*sets[i % k]), target_s=target_s, min_iters=min_iters,
                   max_iters=max_iters, warmup=warmup)
    return Timing(times, compile_s, flops, nbytes, source)


def time_host(fn: Callable, *args: Any, arg_sets: Sequence[tuple] | None = None,
              sync: Callable[[Any], Any] = lambda out: out, target_s: float = 0.5, min_iters: int = 5,
              max_iters: int = 10_000, warmup: int = 2, fresh: Callable[[int], tuple] | None = None) -> Timing:
    """Times a non-JAX callable (numpy, torch) the same way; ``sync`` waits for async work.

    ``fresh(i)``: the arguments of iteration i, made off the clock before each timed call.
    """
    if fresh is not None:
        return Timing(repeat(lambda i, a: fn(*a), sync, target_s=target_s, min_iters=min_iters, max_iters=max_iters,
                             warmup=warmup, prepare=fresh))
    sets = list(arg_sets) if arg_sets else [args]
    k = len(sets)
    return Timing(repeat(lambda i: fn(*sets[i % k]), sync, target_s=target_s, min_iters=min_iters,
                         max_iters=max_iters, warmup=warmup))


def time_stateful(compiled: Callable, state: Any, *args: Any, target_s: float = 0.3,
                  min_iters: int = 5, sync: Callable[[Any], Any] = _block) -> tuple[Timing, Any]:
    """Times ``state, out = compiled(state, *args)`` in a loop, each call taking the state the
    previous one returned (a donated state cannot be passed twice). Each call is waited for whole, the
    new state with its ``out``: a step's small output can be ready while its state (the parameter
    update) is still being written. Returns the Timing and the ``out`` of one more call, for the caller
    to check."""
    holder = [state]

    def call():
        holder[0], out = compiled(holder[0], *args)
        return holder[0], out

    t = time_host(call, sync=sync, target_s=target_s, min_iters=min_iters)
    return t, call()[1]


def profiler_trace(trace_dir: str | None):
    """A context that writes a ``jax.profiler`` trace of what runs inside it to ``trace_dir`` (Perfetto or
    TensorBoard/XProf), or does nothing when ``trace_dir`` is None."""
    import contextlib

    if trace_dir is None:
        return contextlib.nullcontext()
    return jax.profiler.trace(str(trace_dir), create_perfetto_trace=True)


@contextlib.contextmanager
def single_blas_thread():
    """numpy's BLAS on one thread inside, as it was after: for a reference computed next to a timed program.

    OpenBLAS's worker threads spin for about a tenth of a second after each call, on the cores the timed
    program is about to use (``jaxgpu.kernels.matmul.check_against_reference`` has the figures)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a dependency; without it the reference keeps numpy's threads
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
