"""The program of a decoder's step, as the planner compiles it: the jitted step, its argument specs and their
shardings on a mesh, for a mode (a train step under each mesh, a LoRA step, a prefill, a decode step) and the step's
settings. Nothing here prices: a plan compiled from these is cached under the fingerprint of this module and what it
imports (``jaxgpu.pricing.targets.plan_of``), so a change to how a step is priced keeps every cached plan.
"""

from __future__ import annotations

from typing import Any

from jaxgpu.ground.decoders import Decoder

# the meshes whose step is ZeRO's as Megatron's distributed optimizer runs it (``kernels.distributed_optimizer``), and
# the split of its optimizer's copies: the main weights and AdamW's moments cut over every GPU (tp's cut within a group)
DISTRIBUTED = {"zero1": "fsdp", "zero2": "fsdp", "zero1+tp": "fsdp+tp"}


def decoder_step(c: Decoder, mode: str, batch: int, seq: int, mesh: Any, how: str, s: Any) -> tuple:
    """(the step, its argument specs, their shardings) of ``mode`` ("train", "train_bf16", "prefill", "serve"), split
    ``how`` (``jaxgpu.pricing.feasible.split_of``) over ``mesh``; ``s``: the step's settings (``StepSettings``)."""
    import jax
    import jax.numpy as jnp

    from jaxgpu.kernels import distributed_optimizer, sharding
    from jaxgpu.kernels import transformer as tf

    if mode.startswith("train") and s.lora:  # the base frozen: its weights an argument of their own, no gradient
        specs = tf.lora_specs(c, batch, seq, s, dtype=jnp.bfloat16 if mode == "train_bf16" else jnp.float32)
        sh = tuple(sharding.shard_specs(a, mesh, how, batch=i == 3) for i, a in enumerate(specs))
        step, _ = tf.lora_step(c, s, sharding=sh)
    elif mode == "train" and how in DISTRIBUTED:  # ZeRO: bf16 weights whole, the optimizer's fp32 copies cut
        specs = distributed_optimizer.specs(c, batch, seq)
        sh = (sharding.shard_specs(specs[0], mesh, how), sharding.shard_specs(specs[1], mesh, DISTRIBUTED[how]),
              sharding.shard_specs(specs[2], mesh, how, batch=True))
        step = distributed_optimizer.train_step(c, sh, s, cut_grads=how == "zero2")
    elif mode.startswith("train"):
        specs = tf.train_specs(c, batch, seq, dtype=jnp.bfloat16 if mode == "train_bf16" else jnp.float32)
        # ZeRO: the weights whole (or tp's cuts whole), the optimizer's state cut
        state = DISTRIBUTED.get(how, how)
        sh = (sharding.shard_specs(specs[0], mesh, how), sharding.shard_specs(specs[1], mesh, state),
              sharding.shard_specs(specs[2], mesh, how, batch=True))
        # DDP and ZeRO-1 sum each GPU's micro-batches on the GPU and reduce once a step; ZeRO-2 reduces each
        # micro-batch's into its cut (left to itself, XLA's propagation reduces each micro-batch's under every mesh)
        held = sharding.shard_specs(specs[0], mesh, "fsdp") if how == "zero2" else None
        step, _ = tf.train_step(c, flash=s.flash, sharding=sh, settings=s, grads_sharding=held,
                                local_grads=how in ("dp", "zero1", "zero1+tp"))
    elif mode == "prefill":
        specs = (tf.param_specs(c, jnp.bfloat16), jax.ShapeDtypeStruct((batch, seq), jnp.int32))
        sh = (sharding.shard_specs(specs[0], mesh, how), sharding.shard_specs(specs[1], mesh, how, batch=True))
        step = tf.prefill_step(c, sharding=sh, settings=s)
    else:
        specs = tf.decode_specs(c, batch, seq, s.weights, unrolled=not s.scan)
        sh = (sharding.shard_specs(specs[0], mesh, how), sharding.shard_specs(specs[1], mesh, how),
              sharding.shard_specs(specs[2], mesh, how, batch=True),
              sharding.shard_specs(specs[3], mesh, how, batch=True))
        step = tf.decode_step(c, weights=s.weights, sharding=sh)
    return step, specs, sh


def built(devices: Any, c: Decoder, mode: str, batch: int, seq: int, how: str, s: Any, node: int) -> tuple:
    """(the step, its placed specs) on ``devices`` (compile-only GPUs, or this CPU's): the mesh ``how`` over them
    (``sharding.mesh_for``, nodes of ``node``; ep's or cp's groups from ``s``), the step on it (``decoder_step``)."""
    from jaxgpu.kernels import sharding

    mesh = sharding.mesh_for(devices, how, s.tp, node, group=s.ep if how == "ep" else s.cp)
    step, specs, sh = decoder_step(c, mode, batch, seq, mesh, how, s)
    return step, placed(specs, sh)


def placed(specs: Any, shardings: Any) -> list:
    """The step's argument specs with their shardings: what it is lowered for, nothing allocated."""
    import jax

    return [jax.tree.map(lambda a, h: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=h), sp, sh)
            for sp, sh in zip(specs, shardings)]
