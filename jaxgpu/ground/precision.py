"""Precision presets applied: a preset (``jaxgpu.ground.presets``) per call or in a scope, quantisation,
upcast detection, and the number formats themselves.

Presets apply per call (``matmul(a, b, "bf16")``) or in a scope (``with use("bf16"):``),
which calls that pass no preset follow; nothing global is left behind.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import stack
from jaxgpu.ground.presets import PRESETS, Format, Preset, formats  # noqa: F401 - the tables, re-exported here

_current: contextvars.ContextVar[str] = contextvars.ContextVar("jaxgpu_precision", default="fp32")


def get(preset: str | Preset | None = None) -> Preset:
    """The named preset, or the one in scope (``use``) when None.

    Raises:
      KeyError: unknown name; the message lists the known ones.
    """
    if isinstance(preset, Preset):
        return preset
    name = preset or _current.get()
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown precision preset {name!r}; known: {', '.join(PRESETS)}") from None


@contextlib.contextmanager
def use(preset: str) -> Iterator[Preset]:
    """Scope in which jaxgpu calls without an explicit preset use ``preset``; restored on exit, error or not."""
    p = get(preset)
    token = _current.set(p.name)
    try:
        if p.needs_x64:
            with enable_x64():
                yield p
        else:
            yield p
    finally:
        _current.reset(token)


def enable_x64():
    """Scoped float64: ``jax.enable_x64`` (jax >= 0.9) or the older ``jax.experimental`` one."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:
        from jax.experimental import enable_x64 as ctx
    return ctx(True)


def _lax_precision(p: Preset):
    return jax.lax.Precision(_SCOPE_NAMES[p.precision])


# Precision.HIGH ("tensorfloat32") runs as TF32 on XLA:GPU's cuBLAS path but as IEEE fp32 on its Triton
# GEMM path (which needs the algorithm asked for); the dot algorithm TF32_TF32_F32 asks for TF32 on both.
# XLA:CPU has no TF32 and refuses the algorithm ("not supported by dot_general on CPU"): there HIGH, which
# it runs as fp32, stands. jax.lax.platform_dependent picks per platform when the program is lowered; a
# program lowered for the CPU and a GPU at once (jax.export with both platforms) keeps both branches and
# is refused on the CPU's: lower a tf32 program for one platform at a time.
TF32_ALGORITHM = "TF32_TF32_F32"
# jax.default_matmul_precision's names for each preset precision
_SCOPE_NAMES = {"highest": "float32", "tensorfloat32": "tensorfloat32", "default": "bfloat16"}


def under_preset(preset: str | Preset, fn, *args):
    """``fn(*args)`` with the preset's matmul precision in scope for every product it traces (forward and,
    under ``jax.grad``, backward): on a GPU the tf32 preset asks for the TF32 algorithm (see above)."""
    p = get(preset)

    def scoped(name):
        def run(*a):
            with jax.default_matmul_precision(name):
                return fn(*a)
        return run

    if p.precision != "tensorfloat32":
        return scoped(_SCOPE_NAMES[p.precision])(*args)
    return jax.lax.platform_dependent(*args, cpu=scoped(_SCOPE_NAMES[p.precision]), default=scoped(TF32_ALGORITHM))


def _fmt_max(dtype) -> float:
    return float(jnp.finfo(dtype).max) if jnp.issubdtype(dtype, jnp.floating) else float(jnp.iinfo(dtype).max)


def quantize(x: jax.Array, preset: str | Preset, axis: int | None = None) -> tuple[jax.Array, jax.Array]:
    """Scales ``x`` into the preset's range and casts it: returns (q, scale) with x ≈ q * scale.

    int8 rounds to nearest and clips to ±127 (symmetric); fp8 casts after scaling the
    largest magnitude to the format's largest finite value. ``axis`` keeps one scale per
    slice along the other axis (per-channel), None one per tensor.
    """
    p = get(preset)
    dt = jnp.dtype(p.operand_dtype)
    amax = jnp.max(jnp.abs(x)) if axis is None else jnp.max(jnp.abs(x), axis=axis, keepdims=True)
    amax = jnp.where(amax == 0, 1.0, amax).astype(jnp.float32)
    if jnp.issubdtype(dt, jnp.integer):
        scale = amax / 127.0
        q = jnp.clip(jnp.round(x / scale), -127, 127).astype(dt)
    else:
        scale = amax / _fmt_max(dt)
        q = (x / scale).astype(dt)
    return q, scale


def prepare(a: jax.Array, b: jax.Array, preset: str | Preset | None = None):
    """Converts fp32 operands to the preset's storage: (a', b', scale_a, scale_b).

    Done once, outside any timed region, as stored weights are. Scales are None for
    unquantised presets; int8 scales are per row of ``a`` and per column of ``b``.
    """
    p = get(preset)
    if not p.quantized:
        return a.astype(p.operand_dtype), b.astype(p.operand_dtype), None, None
    if p.operand_dtype == "int8":
        qa, sa = quantize(a, p, axis=1)
        qb, sb = quantize(b, p, axis=0)
    else:
        qa, sa = quantize(a, p)
        qb, sb = quantize(b, p)
    return qa, qb, sa, sb


def dot(a: jax.Array, b: jax.Array, scale_a=None, scale_b=None, preset: str | Preset | None = None) -> jax.Array:
    """``a @ b`` on operands already in the preset's storage, accumulated as the preset says.

    Returns fp32 (fp64 for fp64): the dequantised product for quantised presets.
    """
    p = get(preset)
    acc = jnp.dtype(p.accum_dtype)
    if p.precision == "tensorfloat32":  # the TF32 algorithm on a GPU, HIGH on the CPU (see TF32_ALGORITHM)
        algo = jax.lax.DotAlgorithmPreset[TF32_ALGORITHM]
        out = jax.lax.platform_dependent(
            a, b, cpu=lambda a, b: jax.lax.dot(a, b, precision=_lax_precision(p), preferred_element_type=acc),
            default=lambda a, b: jax.lax.dot(a, b, precision=algo, preferred_element_type=acc))
    else:
        out = jax.lax.dot(a, b, precision=_lax_precision(p), preferred_element_type=acc)
    if p.quantized:
        out = out.astype(jnp.float32) * scale_a * scale_b
    return out


def matmul(a: jax.Array, b: jax.Array, preset: str | Preset | None = None) -> jax.Array:
    """The whole path, jitted: convert or quantise fp32 ``a`` and ``b``, multiply, dequantise.

    The preset is resolved here, before tracing, and passed to the compiled program as a
    static argument: a preset in scope therefore never hides in a stale jit cache entry.
    (A caller who wraps this in their own ``jax.jit`` bakes in the scope of the first trace.)
    """
    return _matmul_jit(a, b, get(preset).name)


@functools.partial(jax.jit, static_argnames="name")
def _matmul_jit(a, b, name):
    p = PRESETS[name]
    return dot(*prepare(a, b, p), preset=p)


_SHORT = {"bfloat16": "bf16", "float16": "f16", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "int8": "s8"}


# the types a backend widens a narrow operand to before a product (their sizes: jaxgpu.ground.stack)
_WIDER = ("f16", "bf16", "f32", "s32")


def upcast_in_hlo(hlo_text: str, preset: str | Preset) -> str | None:
    """The wider type (``"f16"``, ``"bf16"``, ``"f32"``, ``"s32"``) the optimized HLO converts the
    preset's operands to before multiplying, or None where they are multiplied as stored.

    This is how a backend runs a format it has no kernel for: XLA:CPU widens fp16 and fp8 to
    fp32; XLA:GPU on Hopper takes fp8 e4m3 to cuBLASLt as is but widens e5m2 x e5m2 (which
    cuBLASLt refuses) to fp16. The record says so from the compiled program rather than from a
    belief about the backend.
    """
    short = _SHORT.get(get(preset).operand_dtype)
    if short is None:
        return None
    types = dict(re.findall(r"%?([\w.\-]+) = (\w+)\[", hlo_text))  # instruction -> element type
    types.update(re.findall(r"([\w.\-]+): (\w+)\[", hlo_text))  # computation parameters
    found = [res for res, operand in re.findall(r"= (\w+)\[[\d,]*\]\S* convert\(%?([\w.\-]+)\)", hlo_text)
             if res in _WIDER and res != short and types.get(operand) == short]
    return max(found, key=stack.ELEMENT_BYTES.get) if found else None


# ---------------------------------------------------------------- number formats


def accumulate(value: float, count: int, dtype: str, accum_dtype: str | None = None) -> float:
    """Adds ``value`` to itself ``count`` times, one add at a time in ``accum_dtype``.

    Values are stored in ``dtype``; a sequential ``lax.scan`` keeps XLA from reordering
    or widening the sum, so what comes back is what that accumulator really holds.
    """
    acc_dt = jnp.dtype(accum_dtype or dtype)
    xs = jnp.full((count,), value, dtype=jnp.dtype(dtype))

    def step(acc, x):
        return (acc + x.astype(acc_dt)).astype(acc_dt), None

    total, _ = jax.jit(lambda v: jax.lax.scan(step, jnp.zeros((), acc_dt), v))(xs)
    return float(total)


def round_trip(value: float, dtype: str) -> float:
    """``value`` stored in ``dtype`` on the device and read back (inf on overflow, 0 on underflow).

    The device program returns the narrow value itself and the host widens it: a program
    that converted to ``dtype`` and back would be ``x`` to an optimiser (XLA:GPU's
    SimplifyFPConversions removes such a chain), and would report fp16 holding 70000.
    """
    stored = _narrow(jnp.float32(value), jnp.dtype(dtype))
    return float(np.asarray(stored).astype(np.float32))


@functools.partial(jax.jit, static_argnums=1)
def _narrow(x, dtype):
    return x.astype(dtype)
