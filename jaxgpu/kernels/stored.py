"""A step's weights stored narrow and widened for each product: int8 or fp8 with a scale a column (weight-only
quantisation of a decode step), or NF4 with an absmax a block (QLoRA's frozen base).

``stored_specs`` gives the stored arrays' shapes, ``quantize`` stores real weights so, ``widened`` brings them back
to a compute type, and ``frozen_mm`` is the product of a frozen stored matrix that keeps it stored for the backward
pass.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxgpu.ground.decoders import NF4_BLOCK

STORED = {"int8": jnp.int8, "fp8": jnp.float8_e4m3fn, "nf4": jnp.uint8}  # the narrow ones' types (NF4: 2 a byte)
# NF4's 16 levels, the quantiles of a normal distribution scaled to [-1, 1] with an exact zero (Dettmers et al. 2023,
# "QLoRA"; the values bitsandbytes' 4-bit kernels hold)
NF4_LEVELS = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
              -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
              0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
              0.7229568362236023, 1.0)


def widened(stored, scale, dtype: Any = jnp.bfloat16):
    """A matrix stored narrow, in ``dtype``: int8 or fp8 times its scale a column; NF4 (uint8, two codes a byte, the
    low nibble the even column) as its levels times its block's absmax (``scale`` [in / NF4_BLOCK, out])."""
    if stored.dtype == jnp.uint8:
        codes = jnp.stack([stored & 15, stored >> 4], axis=-1).reshape(*stored.shape[:-1], -1)
        block = stored.shape[-2] // scale.shape[-2]
        values = jnp.asarray(NF4_LEVELS, jnp.float32)[codes] * jnp.repeat(scale.astype(jnp.float32), block, axis=-2)
        return values.astype(dtype)
    return stored.astype(dtype) * scale.astype(dtype)


# A frozen matrix's product keeps the stored matrix for the backward pass and widens it again there, as QLoRA's
# kernels dequantize twice: left to autodiff, the backward would keep each layer's widened copy (the whole base in
# bf16 again, a 4-bit base's memory quadrupled). No gradient reaches the stored matrix or its scale.
@jax.custom_vjp
def frozen_mm(h, stored, scale):
    return h @ widened(stored, scale, h.dtype)


def _frozen_mm_fwd(h, stored, scale):
    return frozen_mm(h, stored, scale), (stored, scale, jnp.zeros(0, h.dtype))


def _frozen_mm_bwd(res, g):
    stored, scale, kind = res
    return (g @ widened(stored, scale, kind.dtype).T).astype(kind.dtype), None, None


frozen_mm.defvjp(_frozen_mm_fwd, _frozen_mm_bwd)


def _narrow(shape: tuple[int, ...], weights: str) -> bool:
    """Whether a layer array of ``shape`` [L, in, out] is stored narrow as ``weights``: a matrix (a mixture's experts
    and the vectors stay wide); for NF4, one whose inputs are whole blocks and whose columns pair into bytes."""
    return len(shape) == 3 and (weights != "nf4" or (shape[1] % NF4_BLOCK == 0 and shape[2] % 2 == 0))


def stored_specs(layers: dict, weights: str, dtype: Any = jnp.bfloat16) -> dict:
    """A layer stack's specs with each matrix stored as ``weights``: int8 or fp8 beside a ``<name>_scale`` of
    [L, out] in ``dtype``; NF4 as [L, in, out / 2] bytes beside a float32 absmax [L, in / NF4_BLOCK, out]."""
    if weights not in STORED:
        return layers
    out = {}
    for k, s in layers.items():
        if not _narrow(s.shape, weights):
            out[k] = s
        elif weights == "nf4":
            out[k] = jax.ShapeDtypeStruct((*s.shape[:2], s.shape[2] // 2), jnp.uint8)
            out[k + "_scale"] = jax.ShapeDtypeStruct((s.shape[0], s.shape[1] // NF4_BLOCK, s.shape[2]), jnp.float32)
        else:
            out[k] = jax.ShapeDtypeStruct(s.shape, STORED[weights])
            out[k + "_scale"] = jax.ShapeDtypeStruct((s.shape[0], s.shape[2]), dtype)
    return out


def quantize_nf4(w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A matrix [.., in, out] in NF4: (its codes two a byte [.., in, out / 2], uint8, the low nibble the even column;
    each block of ``NF4_BLOCK`` inputs' absmax [.., in / NF4_BLOCK, out], float32), each value's code the level
    nearest it over its block's absmax."""
    w = w.astype(jnp.float32)
    blocks = w.reshape(*w.shape[:-2], w.shape[-2] // NF4_BLOCK, NF4_BLOCK, w.shape[-1])
    absmax = jnp.maximum(jnp.abs(blocks).max(axis=-2), 1e-12)
    normed = (blocks / absmax[..., None, :]).reshape(w.shape)
    codes = jnp.argmin(jnp.abs(normed[..., None] - jnp.asarray(NF4_LEVELS, jnp.float32)), axis=-1).astype(jnp.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4), absmax


def quantize(params: dict, weights: str, dtype: Any = jnp.bfloat16) -> dict:
    """``params`` with each layer matrix stored as ``stored_specs`` says for ``weights`` ("int8", "fp8" or "nf4"):
    int8 and fp8 over a per-output-channel scale (its largest magnitude onto the type's largest finite value),
    rounded into the type, beside ``<name>_scale``; NF4 as ``quantize_nf4``."""
    stored = STORED[weights]
    top = 127.0 if weights == "int8" else float(jnp.finfo(stored).max) if weights == "fp8" else 1.0
    layers = {}
    for k, w in params["layers"].items():
        if not _narrow(w.shape, weights):
            layers[k] = w.astype(dtype)
            continue
        if weights == "nf4":
            layers[k], layers[k + "_scale"] = quantize_nf4(w)
            continue
        scale = jnp.maximum(jnp.abs(w.astype(jnp.float32)).max(axis=1), 1e-12) / top  # [L, out]
        q = w.astype(jnp.float32) / scale[:, None, :]
        layers[k] = (jnp.round(q) if weights == "int8" else q).astype(stored)
        layers[k + "_scale"] = scale.astype(dtype)
    return {**jax.tree.map(lambda a: a.astype(dtype), {k: v for k, v in params.items() if k != "layers"}),
            "layers": layers}
