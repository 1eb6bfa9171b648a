"""Expert- and context-parallel groups: the step they split computes what the whole step does (on the CPU's host
devices), and their collectives on XLA:GPU's plan are the hand counts on small models; Mixtral 8x7B with ep 8 over 16
GPUs and a 128k-token step with cp price; what cannot be laid out says why."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import experts, programs, sharding
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import planner, targets

MOE = Decoder("ep-small", 2, 256, 4, 4, 512, 256, 256, "llama", experts=8, top_k=2)
DENSE = Decoder("cp-small", 2, 256, 4, 2, 512, 256, 4096, "llama")


def test_expert_parallel_routing_is_each_gpus_own_routing():
    """Over 4 host devices in expert groups of 2, each device's tokens are routed in buffers of their own (their own
    capacity), sent to the experts' devices and back: the same outputs and gradients as routing each device's rows
    alone with the whole mixture."""
    c = MOE
    mesh = sharding.mesh_for(jax.devices()[:4], "ep", group=2)
    w = jax.tree.map(lambda a: a[0], tf.init(c, jax.random.key(0))["layers"])
    h = jax.random.normal(jax.random.key(1), (8, 16, c.d_model))
    gated = lambda g, u: jax.nn.silu(g) * u

    def each_alone(w, h):  # a device's two rows, routed by the whole mixture on their own
        return jax.vmap(lambda x: experts.moe(c, x, w, gated))(h.reshape(4, 2, 16, -1)).reshape(h.shape)

    def split(w, h):
        return experts.moe(c, h, w, gated, mesh)

    specs = sharding.shard_specs({"layers": jax.tree.map(lambda a: a[None], w)}, mesh, "ep")["layers"]
    w_sh = jax.device_put(w, jax.tree.map(lambda s: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(
        *s.spec[1:])), specs))
    assert w_sh["w_gate"].sharding.spec[0] == sharding.EXPERT  # the experts really are split over a group
    got, want = jax.jit(split)(w_sh, h), jax.jit(each_alone)(w, h)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    g1 = jax.jit(jax.grad(lambda w, h: (split(w, h) ** 2).sum()))(w_sh, h)
    g2 = jax.jit(jax.grad(lambda w, h: (each_alone(w, h) ** 2).sum()))(w, h)
    for a, b in zip(jax.tree.leaves(g2), jax.tree.leaves(g1)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)


def test_a_context_parallel_step_matches_the_whole_step():
    """Each sequence split over context groups of 2 (of 4 host devices), a layer's keys and values gathered over the
    group: the loss and every gradient the whole step's."""
    c = DENSE
    mesh = sharding.mesh_for(jax.devices()[:4], "cp", group=2)
    params = tf.init(c, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (4, 64), 0, c.vocab)
    whole = jax.jit(jax.value_and_grad(lambda p, t: tf.loss(c, p, t, compute=jnp.float32)))(params, tokens)
    p_sh, t_sh = sharding.shard_specs(params, mesh, "cp"), sharding.shard_specs(tokens, mesh, "cp", batch=True)
    assert t_sh.spec == jax.sharding.PartitionSpec(sharding.AXIS, sharding.CONTEXT)
    loss = lambda p, t: tf.loss(c, p, t, compute=jnp.float32, layout=sharding.residual_layout(t_sh))
    split = jax.jit(jax.value_and_grad(loss), in_shardings=(p_sh, t_sh))(jax.device_put(params, p_sh),
                                                                          jax.device_put(tokens, t_sh))
    assert float(split[0]) == pytest.approx(float(whole[0]), rel=1e-5)
    for g1, g2 in zip(jax.tree.leaves(whole[1]), jax.tree.leaves(split[1])):
        np.testing.assert_allclose(np.asarray(g2), np.asarray(g1), rtol=2e-4, atol=1e-6)


def test_a_causal_mask_left_unbuilt_is_the_built_one_in_blocks_of_queries_too():
    """tf.Causal, a context-parallel GPU's mask from positions: the attention it gives is the built mask's, whole and a
    block of queries at a time (each block building its own rows), with and without a window."""
    q = jax.random.normal(jax.random.key(0), (2, 16, 4, 8))
    k, v = (jax.random.normal(jax.random.key(i), (2, 16, 2, 8)) for i in (1, 2))
    pos = jnp.broadcast_to(jnp.arange(16), (2, 16))
    for within in (17, 5):
        lazy = tf.Causal(pos, pos, jnp.asarray(within))
        built = lazy.build()
        assert built.shape == (2, 16, 16) and bool(built[0, 3, 3]) and not bool(built[0, 3, 4])
        assert bool(built[0, 15, 0]) == (within > 15)
        want = tf._attention(q, k, v, built, flash=True)
        for block in (0, 4):
            got = tf._attention(q, k, v, lazy, flash=True, query_block=block)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def gpu():
    if why := targets.unavailable():
        pytest.skip(why)


def _kernels(c, settings, batch, seq, devices):
    """The collectives of the step's XLA:GPU plan, each a ``launches.Kernel``."""
    from jaxgpu.ground import hardware, launches
    from jaxgpu.pricing import sharded

    hw = hardware.find_gpu("h100")
    devs, label = sharded.devices_for(hw, devices)
    how = planner.split_of(settings, "train")
    mesh = sharding.mesh_for(devs, how, 0, hw.node, group=settings.ep if how == "ep" else settings.cp)
    step, specs, sh = programs.decoder_step(c, "train", batch, seq, mesh, how, settings)
    _, hlo, _ = sharded.compiled(sharded.program(step, sharded.placed(specs, sh)), label)
    return [k for k in launches.kernels(hlo) if k.name.startswith(("all-", "reduce-scatter", "collective"))]


def test_expert_parallel_moves_each_gpus_buffers_to_its_experts_and_back(gpu):
    """Mixture of 8 experts, top 2, over 16 GPUs in expert groups of 8: a GPU's 256 tokens fill buffers of
    ceil(256 x 2 / 8 x 1.25) = 80 slots an expert, [8, 80, 256] in bf16. Each layer sends them out and back in the
    forward pass and again in the backward: up to 4 all-to-alls a layer, 7/8 of a buffer each, within the group."""
    p = planner.plan_model(MOE, "h100", batch=16, seq=256, devices=16, settings=StepSettings(ep=8))
    assert p.mesh == "fsdp 2 x ep 8" and "experts over groups of 8" in p.settings
    count, moved = p.collectives["all-to-all"]
    buf = 8 * 80 * 256 * 2
    # each one moves 7/8 of a buffer; XLA 0.10 keeps all 8, XLA 0.11 merges one of the backward pass's away
    assert 2 * 2 <= count <= 2 * 4 and moved == pytest.approx(count * buf * 7 / 8, rel=0.01)
    a2a = [k for k in _kernels(MOE, StepSettings(ep=8), 16, 256, 16) if k.name.startswith("all-to-all")
           and "-done" not in k.name]
    assert a2a and all(k.group == 8 for k in a2a)


def test_context_parallel_gathers_each_layers_keys_and_values_over_its_group(gpu):
    """A 2-layer decoder, 2 sequences of 1024 over 8 GPUs in context groups of 4: a GPU's queries are 256 tokens of
    its sequence; each layer gathers K and V ([1, 1024, 2 heads, 64] in bf16 each) over the group in the forward
    pass, and the backward pass reduce-scatters their gradients: (C - 1) / C of them a GPU each way."""
    kv = 1 * 1024 * 2 * 64 * 2
    ks = _kernels(DENSE, StepSettings(cp=4), 2, 1024, 8)
    # a collective's bytes: its operand and result, S (1 + 1/4) of the S gathered (XLA may gather K and V in one)
    within = lambda op: sum(k.count * k.bytes * 4 / 5 for k in ks if k.name.startswith(op) and k.group == 4)
    assert within("all-gather") == pytest.approx(2 * 2 * kv), [(k.name, k.bytes, k.group, k.count) for k in ks]
    assert within("reduce-scatter") == pytest.approx(2 * 2 * kv)
    p = planner.plan_model(DENSE, "h100", batch=2, seq=1024, devices=8, settings=StepSettings(cp=4))
    assert p.mesh == "fsdp 2 x cp 4" and p.fits


def test_mixtral_with_ep_8_over_16_gpus_and_a_128k_token_step_with_cp_price(gpu):
    """The issue's cases: Mixtral 8x7B, 16 sequences of 4096 over 16 H100s in expert groups of 8; Llama-3 8B, two
    sequences of 131,072 tokens over 8 H100s in context groups of 4. Both price; expert parallelism moves tokens, not
    the experts' weights, so it all-gathers far fewer bytes than fsdp alone."""
    s = StepSettings(remat="nothing_saveable")
    ep = planner.plan_model("mixtral-8x7b", "h100", batch=16, seq=4096, devices=16,
                            settings=StepSettings(remat="nothing_saveable", ep=8))
    fsdp = planner.plan_model("mixtral-8x7b", "h100", batch=16, seq=4096, devices=16, settings=s)
    # forward and backward, and the recomputed forward's dispatch (XLA 0.10 keeps its combine too: 6 a layer)
    assert ep.fits and 32 * 5 <= ep.collectives["all-to-all"][0] <= 32 * 6
    assert ep.collectives["all-gather"][1] < 0.5 * fsdp.collectives["all-gather"][1]
    cp = planner.plan_model("llama3-8b", "h100", batch=2, seq=131072, devices=8,
                            settings=StepSettings(remat="nothing_saveable", cp=4))
    assert cp.mesh == "fsdp 2 x cp 4" and cp.seconds > 0 and "all-gather" in cp.collectives
    # a GPU's queries are a quarter of its sequence: a layer's scores a GPU, cut by the group
    assert cp.scores_bytes == pytest.approx(4 * 32 * 131072 * 131072 / 4, rel=0.01)


@pytest.mark.slow
def test_a_context_parallel_gpu_holds_its_own_queries_mask_not_the_sequences(gpu):
    """Llama-3 8B on 8 H100s, each layer recomputed, 32,768 tokens a GPU either way: one 262,144-token sequence over
    a context group of 8 holds about what four of 65,536 over groups of 2 do (the mask built from each GPU's own
    queries' positions, tf.Causal); a [T, T] mask of the whole sequence had held 2.8x the temporaries."""
    two, eight = (planner.plan_model("llama3-8b", "h100", batch=batch, seq=seq, devices=8,
                                     settings=StepSettings(remat="nothing_saveable", cp=cp))
                  for cp, batch, seq in ((2, 4, 65536), (8, 1, 262144)))
    assert eight.bytes_per_device <= 1.3 * two.bytes_per_device, (eight.bytes_per_device, two.bytes_per_device)


@pytest.mark.parametrize("model, settings, batch, seq, devices, words", [
    (DENSE, StepSettings(ep=2), 8, 256, 8, "this model has none"),
    (MOE, StepSettings(ep=3), 24, 256, 6, "8 experts do not split"),
    (MOE, StepSettings(ep=8), 8, 256, 16, "do not split over 16 GPUs"),
    (DENSE, StepSettings(cp=4), 8, 1002, 8, "do not split so"),
    (DENSE, StepSettings(cp=3), 8, 960, 8, "do not split into cp groups of 3"),
])
def test_groups_that_cannot_be_laid_out_say_why(model, settings, batch, seq, devices, words):
    with pytest.raises(ValueError, match=words):
        planner.plan_model(model, "h100", batch=batch, seq=seq, devices=devices, settings=settings)
    with pytest.raises(ValueError, match="one of them at a time"):
        StepSettings(ep=2, cp=2)
    with pytest.raises(ValueError, match="not the tp mesh"):
        StepSettings(cp=2, mesh="tp")


def test_the_model_command_takes_ep_and_cp_and_refuses_them_where_they_cannot_split(gpu):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "experiments.model", "--layers", "2", "--d-model", "128", "--heads", "4",
           "--kv-heads", "2", "--ffn", "256", "--vocab", "128", "--batch", "8", "--seq", "256", "--gpus", "h100"]
    proc = subprocess.run(cmd + ["--cp", "4", "--fit"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "sequences over groups of 4" in proc.stdout and "cp 4)" in proc.stdout
    for bad, words in ((["--ep", "2"], "this model has none"), (["--cp", "2", "--serve"], "decode step"),
                       (["--cp", "2", "--ep", "2"], "one of them at a time")):
        proc = subprocess.run(cmd + bad, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
