"""ZeRO-1 as Megatron's distributed optimizer runs it: what a zero1 or zero1+tp train step holds and does.

Megatron keeps the model's weights in bf16, whole on every data-parallel rank (their tp cut on each rank of a tp
group), accumulates each micro-batch's gradients into a float32 buffer as whole, and cuts only the optimizer's own
copies over the data-parallel ranks: the float32 main weights and AdamW's two moments. A step reduce-scatters the
gradient buffer (each rank receives the sum of its share), updates its share of the main weights, and all-gathers
the new weights in bf16. Its README (NVIDIA/Megatron-LM, "Distributed Optimizer"; docs/source/api-guide/
dist_optimizer.md at 50b073cc) counts the bytes a parameter: "bf16 param, fp32 grads | 18 | 6 + 12/d" (d: the
data-parallel size), against 10 whole + 8/d for float32 weights held whole with the moments cut, which is what
``transformer.train_step`` on a zero1 mesh holds. bf16 gradients reduced in float32: Megatron turns on
``accumulate_allreduce_grads_in_fp32`` whenever it trains in bf16, and NeMo's mixed-precision plugin reduces in
float32 by default.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import transformer as tf
from jaxgpu.kernels.sharding import MODEL, residual_layout, sequence_parallel


def specs(c: Decoder, batch: int, seq: int) -> tuple:
    """(weights, state, tokens) specs of ``train_step``'s step: the weights in bf16; the state the float32 main
    weights and AdamW's state of them; tokens ``seq + 1`` a row (the last predicted, never fed)."""
    import optax

    main = tf.param_specs(c, jnp.float32)
    state = jax.eval_shape(optax.adamw(3e-4, weight_decay=0.1).init, main)
    return tf.param_specs(c, jnp.bfloat16), (main, state), jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)


def train_step(c: Decoder, sharding: tuple, settings: StepSettings | None = None, *, compute: Any = jnp.bfloat16,
               lr: float = 3e-4, micro_batches: int = 1, cut_grads: bool = False):
    """A jitted ``step(weights, state, tokens) -> (weights', state', loss)`` (``specs``) placed by ``sharding``
    ((weights, state, tokens) shardings: the state's cut over the data-parallel groups, the weights whole across
    them): each group's gradients summed over its micro-batches in float32 where they are, reduced once a step
    into each rank's share, AdamW on that share of the main weights, the new weights gathered in bf16.
    ``cut_grads`` (ZeRO-2): each micro-batch's gradients reduced into each rank's share as they come, the sums
    held cut, not whole."""
    import optax

    opt = optax.adamw(lr, weight_decay=0.1)
    micro_batches = settings.accumulate if settings and settings.accumulate > 1 else micro_batches
    flash = bool(settings and settings.flash)
    w_sh, (m_sh, o_sh), t_sh = sharding
    layout = residual_layout(t_sh)
    inner = sequence_parallel(t_sh.mesh) if MODEL in t_sh.mesh.axis_names else None

    def step(weights, state, tokens):
        main, opt_state = state
        if cut_grads:
            lv, grads = tf._accumulated(lambda p, x: tf.loss(c, p, x, compute, flash, settings, layout), weights,
                                        tokens, micro_batches, m_sh, into=jnp.float32)
        elif micro_batches > 1:  # each group's rows of a micro-batch where the group is (Megatron's local sums)
            lv, grads = tf._accumulated_locally(lambda p, x: tf.loss(c, p, x, compute, flash, settings, inner),
                                                weights, tokens, micro_batches, t_sh, w_sh, into=jnp.float32)
        else:
            lv, grads = tf._accumulated(lambda p, x: tf.loss(c, p, x, compute, flash, settings, layout), weights,
                                        tokens, 1)
        # the reduce-scatter: each rank the float32 sum of its share of every gradient
        grads = jax.lax.with_sharding_constraint(jax.tree.map(lambda g: g.astype(jnp.float32), grads), m_sh)
        updates, opt_state = opt.update(grads, opt_state, main)
        main = optax.apply_updates(main, updates)
        return jax.tree.map(lambda m: m.astype(jnp.bfloat16), main), (main, opt_state), lv

    scalar = jax.sharding.NamedSharding(t_sh.mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=(w_sh, (m_sh, o_sh), scalar), donate_argnums=(0, 1))
