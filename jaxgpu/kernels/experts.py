"""A mixture of experts' layer (Mixtral's routing: the router's top-k experts a token, gated by a softmax over their
logits), each expert run on a buffer of its own tokens, as GShard and MaxText's dropping implementation run it; and
the same layer expert parallel, each GPU's tokens sent to the GPUs that hold their experts and back. The decoder's
block (``jaxgpu.kernels.transformer``) calls ``moe``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from jaxgpu.ground.decoders import Decoder

# Each expert takes at most this share over its fair part of a batch's tokens (n x top_k / experts): the rest are
# dropped for that expert, as GShard and MaxText's dropping implementation set it
CAPACITY = 1.25


def moe(c: Decoder, h, w, gated, experts: Any = None):
    """A mixture of experts on h [B, T, d]: the router's top_k experts a token, their gates a softmax over those
    k logits (Mixtral's); each expert's tokens gathered into its own buffer of ``CAPACITY`` x its fair share,
    its gated MLP run on its buffer alone (the FLOPs of k experts a token, not of all), the outputs scattered back
    weighted by the gates. ``experts``: an ep mesh (``residual_layout``'s), over which ``_moe_ep`` runs it."""
    if experts is not None:
        return _moe_ep(c, h, w, gated, experts)
    b, t, d = h.shape
    buf, where = _dispatch(c, h.reshape(-1, d), w["router"])
    return _combine(_experts_mlp(buf, w["w_gate"], w["w_up"], w["w_down"], gated), where, c.top_k).reshape(b, t, d)


def _experts_mlp(buf, gate, up, down, gated):
    """Each expert's gated MLP on its own buffer: buf [E, C, d], the matrices [E, d, f] and [E, f, d]."""
    return jnp.einsum("ecf,efd->ecd", gated(jnp.einsum("ecd,edf->ecf", buf, gate),
                                            jnp.einsum("ecd,edf->ecf", buf, up)), down)


def _moe_ep(c: Decoder, h, w, gated, mesh):
    """``moe`` expert parallel over ``mesh`` (AXIS x EXPERT, ``sharding.mesh_for(.., "ep")``), in ``shard_map``:
    each GPU routes its own tokens into buffers for every expert, an all-to-all within its expert group sends each
    expert's buffers to the GPU that holds it (E / ep experts a GPU), which gathers its experts' matrices over the
    fsdp groups (their gradients reduce-scattered back, as fsdp's) and runs them, and an all-to-all returns the
    outputs to be combined where their tokens are."""
    from jaxgpu.kernels import parallel, sharding

    P = jax.sharding.PartitionSpec
    names = ("w_gate", "w_up", "w_down")
    specs = [sharding.expert_spec(w[k].shape, mesh) for k in names]

    def local(x, router, *mats):
        b, t, d = x.shape
        mats = [jax.lax.all_gather(m, sharding.AXIS, axis=i, tiled=True) if i is not None else m
                for m, i in ((m, next((j for j, a in enumerate(sp) if a == sharding.AXIS), None))
                             for m, sp in zip(mats, specs))]
        buf, where = _dispatch(c, x.reshape(-1, d), router)  # [E, C, d]
        buf = jax.lax.all_to_all(buf, sharding.EXPERT, 0, 1, tiled=True)  # [E / ep, ep C, d]: this GPU's experts
        y = jax.lax.all_to_all(_experts_mlp(buf, *mats, gated), sharding.EXPERT, 1, 0, tiled=True)
        return _combine(y, where, c.top_k).reshape(b, t, d)

    every = P((sharding.AXIS, sharding.EXPERT))
    return parallel.shard_map(local, mesh=mesh, in_specs=(every, P(), *specs), out_specs=every)(
        h, w["router"], *(w[k] for k in names))


def _dispatch(c: Decoder, x, router) -> tuple:
    """(the experts' buffers [E, C, d] of tokens x [n, d], where each routed copy went: expert, slot, token, gate)."""
    n, d = x.shape
    e, k = c.experts, c.top_k
    top, idx = jax.lax.top_k((x @ router).astype(jnp.float32), k)
    gate = jax.nn.softmax(top, axis=-1).astype(x.dtype).reshape(-1)
    expert = idx.reshape(-1)  # [n k]: token i's j-th expert at i k + j
    token = jnp.repeat(jnp.arange(n), k)
    rank = jnp.take_along_axis(jnp.cumsum(jax.nn.one_hot(expert, e, dtype=jnp.int32), axis=0) - 1,
                               expert[:, None], axis=1)[:, 0]  # the token's place in its expert's buffer
    cap = max(1, math.ceil(n * k / e * CAPACITY))
    slot = jnp.where(rank < cap, rank, cap)  # past the capacity: out of the buffer, dropped
    buf = jnp.zeros((e, cap, d), x.dtype).at[expert, slot].set(x[token], mode="drop")
    return buf, (expert, slot, token, gate)


def _combine(y, where, k: int) -> jax.Array:
    """The experts' outputs [E, C, d] back to their tokens [n, d], weighted by the gates (a dropped copy adds 0);
    ``k``: the experts a token."""
    expert, slot, token, gate = where
    back = y.at[expert, slot].get(mode="fill", fill_value=0) * gate[:, None]
    return jnp.zeros((token.shape[0] // k, y.shape[-1]), y.dtype).at[token].add(back)
