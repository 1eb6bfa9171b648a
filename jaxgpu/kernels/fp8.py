"""A matrix product as fp8 training runs it: ``fp8_mm(a, b)``, e4m3 operands forward and an e5m2 gradient backward.

Its own module so that the decoder's (``jaxgpu.kernels.transformer``) stays a decoder's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.custom_vjp
def fp8_mm(a, b):
    """``a @ b`` as fp8 training runs it (Transformer Engine's recipe): e4m3 operands forward, and backward the
    gradient in e5m2 (its wider range) against the e4m3 operands, each product out in ``a``'s dtype: the forms
    XLA:GPU turns into fp8 GEMMs on a card with fp8 matrix units (without the custom backward, the gradient's
    products would meet a bf16 cotangent and run in bf16)."""
    return _fwd(a, b)[0]


def _fwd(a, b):
    a8, b8 = a.astype(jnp.float8_e4m3fn), b.astype(jnp.float8_e4m3fn)
    # the operands' own dtypes ride along as empty arrays (a residual must be an array)
    return jnp.matmul(a8, b8, preferred_element_type=a.dtype), (a8, b8, jnp.zeros(0, a.dtype), jnp.zeros(0, b.dtype))


def _bwd(res, g):
    a8, b8, a_kind, b_kind = res
    g8 = g.astype(jnp.float8_e5m2)
    da = jnp.matmul(g8, b8.T, preferred_element_type=a_kind.dtype)
    db = jnp.einsum("...k,...n->kn", a8, g8, preferred_element_type=b_kind.dtype)
    return da, db


fp8_mm.defvjp(_fwd, _bwd)
