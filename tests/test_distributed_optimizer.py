"""ZeRO as Megatron's distributed optimizer runs it (``jaxgpu.kernels.distributed_optimizer``): the step over host
devices computes the whole step's update, holds the bytes Megatron counts, and moves them as Megatron does."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import distributed_optimizer as dopt
from jaxgpu.kernels import sharding
from jaxgpu.kernels import transformer as tf

LLAMA = Decoder("test-dopt", 2, 64, 4, 2, 128, 256, 64, "llama")


def _placed(how, batch=8, seq=32):
    mesh = sharding.mesh_for(jax.devices()[:4], "dp" if how in ("zero1", "zero2") else how, node=4)
    specs = dopt.specs(LLAMA, batch, seq)
    cut = {"zero1+tp": "fsdp+tp"}.get(how, "fsdp")
    return specs, (sharding.shard_specs(specs[0], mesh, "dp" if how in ("zero1", "zero2") else how),
                   sharding.shard_specs(specs[1], mesh, cut),
                   sharding.shard_specs(specs[2], mesh, how, batch=True))


@pytest.mark.parametrize("how, micro", [("zero1", 2), ("zero1", 1), ("zero2", 2), ("zero1+tp", 2)])
def test_the_step_updates_the_main_weights_as_the_whole_step_does(how, micro):
    """bf16 weights, float32 main weights: the update is AdamW's on the float32 sum of the gradients of the bf16
    weights, whichever share of it each GPU computes; the new bf16 weights are the main weights rounded."""
    assert len(jax.devices()) >= 4
    main = tf.init(LLAMA, jax.random.key(0))
    main = jax.tree.map(lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), main)  # the weights' values exactly
    tokens = jax.random.randint(jax.random.key(3), (8, 33), 0, LLAMA.vocab)
    step, opt = tf.train_step(LLAMA, compute=jnp.float32, micro_batches=micro)
    want, _, want_loss = step(main, opt.init(main), tokens)

    _, sh = _placed(how)
    weights = jax.tree.map(lambda a: a.astype(jnp.bfloat16), main)
    s = StepSettings(accumulate=micro, mesh=how, tp=2 if how == "zero1+tp" else 0)
    dstep = dopt.train_step(LLAMA, sh, s, compute=jnp.float32, cut_grads=how == "zero2")
    new_w, (new_main, _), loss = dstep(jax.device_put(weights, sh[0]),
                                       jax.device_put((main, opt.init(main)), sh[1]), jax.device_put(tokens, sh[2]))
    assert float(loss) == pytest.approx(float(want_loss), rel=1e-5)
    # the gradients of bf16 weights are bf16: where one is near zero, the rounding and another order of the sums may
    # flip its sign, and AdamW's first update, lr x g / (|g| + eps), by 2 lr; every other weight as the float32 step's
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(new_main)):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=2 * 3e-4 * 1.01)
        assert np.mean(~np.isclose(b, a, rtol=1e-4, atol=1e-6)) < 0.01
    for w, m in zip(jax.tree.leaves(new_w), jax.tree.leaves(new_main)):
        assert w.dtype == jnp.bfloat16 and np.array_equal(np.asarray(w), np.asarray(m.astype(jnp.bfloat16)))
    # the weights whole across the data-parallel groups, the optimizer's copies cut over them
    assert jax.tree.leaves(new_w)[0].sharding.is_equivalent_to(jax.tree.leaves(sh[0])[0], 3)
    assert any(a is not None for s_ in jax.tree.leaves(sh[1][0]) for a in s_.spec)


def test_a_gpu_holds_megatrons_bytes_and_moves_its_collectives():
    """Megatron's README: "bf16 param, fp32 grads | 18 | 6 + 12/d" bytes a parameter. The step's arguments a GPU
    are the bf16 weights whole and 12/d of the rest; its collectives a reduce-scatter of float32 gradients and an
    all-gather of bf16 weights, not an all-reduce of the gradients."""
    from jaxgpu.pricing import planner

    c = dataclasses.replace(LLAMA, name="test-dopt-plan", layers=4, d_model=256, heads=4, kv_heads=4, ffn=1024,
                            vocab=2048)
    s = StepSettings(mesh="zero1", accumulate=2)
    p = planner.plan_model(c, "H100 SXM", mode="train", batch=16, seq=128, devices=8, settings=s)
    params, d = c.params(), 8
    args = p.memory_split["arguments"]
    assert args == pytest.approx(2 * params + 12 * params / d, rel=0.05)  # not 4 + 8/d: the fp32 weights whole
    kinds = p.collectives
    assert "reduce-scatter" in kinds and "all-gather" in kinds
    # the gradients reduced once a step in float32 (4 bytes a parameter), the weights gathered in bf16 (2)
    ring = (d - 1) / d  # the bytes a GPU sends of a ring's collective
    assert kinds["reduce-scatter"][1] == pytest.approx(4 * params * ring, rel=0.05)
    assert kinds["all-gather"][1] == pytest.approx(2 * params * ring, rel=0.05)
    assert sum(n for k, (_, n) in kinds.items() if k == "all-reduce") < 0.01 * params
    # the command's memory sentence names what this step holds between steps and the fp32 sum among its temporaries
    said = planner.formula_vs_plan(p)
    assert "(the bf16 weights, a cut of the fp32 weights and moments)" in said
    assert "of which the fp32 gradients' sum is" in said
