"""The library's transformer: its layers against float64 numpy references written apart from it, and the same
gradients and steps whether the parameters are whole or split over host devices (fsdp, tensor parallel, both)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground import decoders
from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import experts, sharding
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import planner

from experiments.harness.settings import RunSettings

LLAMA = Decoder("test-llama", 2, 64, 4, 2, 128, 256, 64, "llama")


GPT2 = Decoder("test-gpt2", 2, 64, 4, 4, 256, 256, 64, "gpt2")


def _np_norm(x, g, b, style):
    if style == "gpt2":
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g


def _np_rope(x, pos):
    hd = x.shape[-1]
    freq = 10000.0 ** (-np.arange(0, hd // 2) * 2 / hd)
    ang = pos[:, :, None, None] * freq
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x1 * np.sin(ang) + x2 * np.cos(ang)], -1)


def _np_block(c, x, w, keep=None):
    """One decoder layer in float64 numpy, causal (``keep``: the [T, T] positions each query may see, a sliding
    window's), written from the models' papers rather than from tf._block."""
    b, t, d = x.shape
    hd = d // c.heads
    pos = np.broadcast_to(np.arange(t), (b, t)).astype(np.float64)
    if c.style == "gpt2":
        h = _np_norm(x, w["ln1_g"], w["ln1_b"], "gpt2")
        # the fused columns a head at a time, [q, k, v] each (Megatron's order)
        qkv = (h @ w["w_qkv"] + w["b_qkv"]).reshape(b, t, c.heads, 3, hd)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]
    else:
        h = _np_norm(x, w["attn_norm"], None, "llama")
        g = c.heads // c.kv_heads  # the fused columns a KV head's group at a time: its g queries, its key, its value
        qkv = (h @ w["wqkv"]).reshape(b, t, c.kv_heads, g + 2, hd)
        q = _np_rope(qkv[..., :g, :].reshape(b, t, c.heads, hd), pos)
        k = _np_rope(qkv[..., g, :], pos)
        v = qkv[..., g + 1, :]
        k, v = (np.repeat(a, g, axis=2) for a in (k, v))  # each KV head serves its group
    s = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(hd)
    s = np.where(np.tril(np.ones((t, t), bool)) if keep is None else keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    a = np.einsum("bhts,bshd->bthd", p, v).reshape(b, t, d)
    if c.style == "gpt2":
        x = x + a @ w["w_o"] + w["b_o"]
        h = _np_norm(x, w["ln2_g"], w["ln2_b"], "gpt2")
        u = h @ w["w_fc"] + w["b_fc"]
        gelu = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u**3)))
        return x + gelu @ w["w_proj"] + w["b_proj"]
    x = x + a @ w["wo"]
    h = _np_norm(x, w["mlp_norm"], None, "llama")
    g = h @ w["w_gate"]
    return x + (g / (1 + np.exp(-g)) * (h @ w["w_up"])) @ w["w_down"]


@pytest.mark.parametrize("c", [LLAMA, GPT2], ids=lambda c: c.style)
def test_one_layer_agrees_with_a_float64_reference(c):
    params = tf.init(c, jax.random.key(1))
    w = {k: v[0] for k, v in params["layers"].items()}
    for i, k in enumerate(sorted(w)):  # weights large enough that the layer changes x; norms and biases off
        noise = jax.random.normal(jax.random.key(10 + i), w[k].shape)  # their defaults, so they are tested too
        w[k] = w[k] + 0.1 * noise if w[k].ndim == 1 else 10 * w[k]
    x = jax.random.normal(jax.random.key(2), (2, 16, c.d_model), jnp.float32)
    b, t = x.shape[:2]
    positions = jnp.broadcast_to(jnp.arange(t), (b, t))
    got, _ = jax.jit(lambda x, w: tf._block(c, x, w, positions, jnp.tril(jnp.ones((t, t), bool))))(x, w)
    ref = _np_block(c, np.asarray(x, np.float64), {k: np.asarray(v, np.float64) for k, v in w.items()})
    change = ref - np.asarray(x, np.float64)  # what the layer adds to its input: the error is measured on it
    assert np.linalg.norm(change) > 0.3 * np.linalg.norm(ref)
    err = np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(change)
    assert err < 1e-5, err


def _mesh(n, how="fsdp"):
    return sharding.mesh_for(jax.devices()[:n], how, node=2)  # hsdp: two "nodes" of two


@pytest.mark.parametrize("how", ["fsdp", "tp", "fsdp+tp", "hsdp", "dp"])
@pytest.mark.parametrize("c", [LLAMA, GPT2], ids=lambda c: c.style)
def test_sharded_and_whole_gradients_agree(c, how):
    n = 4
    assert len(jax.devices()) >= n
    params = tf.init(c, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (8, 33), 0, c.vocab)
    whole = jax.jit(jax.value_and_grad(lambda p, t: tf.loss(c, p, t, compute=jnp.float32)))(params, tokens)
    mesh = _mesh(n, how)
    p_sh, t_sh = sharding.shard_specs(params, mesh, how), sharding.shard_specs(tokens, mesh, how, batch=True)
    loss = lambda p, t: tf.loss(c, p, t, compute=jnp.float32, layout=sharding.residual_layout(t_sh))
    split = jax.jit(jax.value_and_grad(loss), in_shardings=(p_sh, t_sh))(jax.device_put(params, p_sh),
                                                                          jax.device_put(tokens, t_sh))
    cut = [s for s in jax.tree.leaves(p_sh) if any(a is not None for a in s.spec)]
    assert len(cut) >= 4 if how != "dp" else not cut  # most weights really are split (dp: none)
    assert float(split[0]) == pytest.approx(float(whole[0]), rel=1e-5)
    for g1, g2 in zip(jax.tree.leaves(whole[1]), jax.tree.leaves(split[1])):
        np.testing.assert_allclose(np.asarray(g2), np.asarray(g1), rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("how, micro", [("fsdp", 1), ("fsdp+tp", 1), ("hsdp", 2), ("dp", 2), ("zero1", 2),
                                         ("zero1+tp", 2)])
def test_a_sharded_train_step_keeps_its_layout_and_matches_the_whole_one(how, micro):
    """Every mesh's step computes the whole step's: with micro-batches, DDP's and ZeRO-1's each GPU (zero1+tp's each
    tp group) summing its own gradients before the one reduction (``local_grads``), ZeRO-1's optimizer state cut as
    fsdp cuts it (zero1+tp's as fsdp+tp)."""
    c = dataclasses.replace(LLAMA, name="test-step")
    mesh = _mesh(4, "dp" if how == "zero1" else how)
    params = tf.init(c, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (8, 33), 0, c.vocab)
    step, opt = tf.train_step(c, compute=jnp.float32, micro_batches=micro)
    new, _, lv = step(params, opt.init(params), tokens)
    p_sh = sharding.shard_specs(params, mesh, "dp" if how == "zero1" else how)
    o_sh = sharding.shard_specs(opt.init(params), mesh, {"zero1": "fsdp", "zero1+tp": "fsdp+tp"}.get(how, how))
    t_sh = sharding.shard_specs(tokens, mesh, how, batch=True)
    sstep, _ = tf.train_step(c, compute=jnp.float32, sharding=(p_sh, o_sh, t_sh), micro_batches=micro,
                             local_grads=how in ("dp", "zero1", "zero1+tp"))
    snew, sopt, slv = sstep(jax.device_put(params, p_sh), jax.device_put(opt.init(params), o_sh),
                            jax.device_put(tokens, t_sh))
    assert float(slv) == pytest.approx(float(lv), rel=1e-5)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(snew)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    assert jax.tree.leaves(snew)[0].sharding.is_equivalent_to(jax.tree.leaves(p_sh)[0], 3)


def test_an_fsdp_tp_mesh_cuts_each_layer_both_ways_and_the_batch_over_its_groups():
    P = jax.sharding.PartitionSpec
    assert [sharding.tp_degree(n) for n in (1, 2, 4, 6, 7, 8, 12, 16)] == [1, 1, 2, 2, 1, 2, 2, 4]  # a group divides n
    mesh = _mesh(4, "fsdp+tp")
    assert dict(mesh.shape) == {sharding.AXIS: 2, sharding.MODEL: 2}
    layers = sharding.shard_specs(tf.param_specs(LLAMA), mesh, "fsdp+tp")["layers"]
    for name in ("wqkv", "wo", "w_gate", "w_up", "w_down"):  # Megatron's cut over a group, fsdp's over the groups
        assert sorted(map(str, layers[name].spec)) == sorted(["None", sharding.AXIS, sharding.MODEL]), name
    assert layers["wqkv"].spec[2] == sharding.MODEL and layers["wo"].spec[1] == sharding.MODEL  # columns, then rows
    tokens = jax.ShapeDtypeStruct((8, 33), jnp.int32)
    assert sharding.shard_specs(tokens, mesh, "fsdp+tp", batch=True).spec == P(sharding.AXIS, None)
    cache = jax.tree.leaves(sharding.shard_specs(tf.decode_specs(LLAMA, 4, 64)[1], mesh, "fsdp+tp"))[0]
    # [L, B, S, KV heads, hd]: by batch and by heads
    assert cache.spec == P(None, sharding.AXIS, None, sharding.MODEL, None)
    experts = sharding.shard_specs(tf.param_specs(MOE)["layers"], mesh, "fsdp+tp")
    assert all(experts[k].spec[1] == sharding.AXIS and sharding.MODEL in experts[k].spec
               for k in ("w_gate", "w_up", "w_down"))
    with pytest.raises(ValueError, match="do not split into tensor-parallel groups of 3"):
        sharding.mesh_for(jax.devices()[:4], "fsdp+tp", tp=3)
    with pytest.raises(ValueError, match="takes a mesh of axes"):
        sharding.shard_specs(tf.param_specs(LLAMA), _mesh(4), "fsdp+tp")
    # a batch the groups do not divide is split along its sequence, as the stream between layers is
    odd = jax.random.randint(jax.random.key(3), (3, 33), 0, LLAMA.vocab)
    t_sh = sharding.shard_specs(odd, mesh, "fsdp+tp", batch=True)
    assert t_sh.spec == P(None, None)  # 33 tokens: whole (the loss takes 32 of them, which split)
    layout = sharding.residual_layout(t_sh)
    assert layout(jnp.zeros((3, 32, 64))).sharding.spec == P(None, sharding.AXIS)  # the stream: by its sequence
    # a batch the groups divide: by its rows over the groups, by its sequence within a group (sequence parallel)
    assert layout(jnp.zeros((4, 32, 64))).sharding.spec == P(sharding.AXIS, sharding.MODEL)
    assert layout.whole(jnp.zeros((4, 32, 64))).sharding.spec == P(sharding.AXIS)  # a product's input: gathered
    params = tf.init(LLAMA, jax.random.key(0))
    whole = jax.value_and_grad(lambda p: tf.loss(LLAMA, p, odd, compute=jnp.float32))(params)
    p_sh = sharding.shard_specs(params, mesh, "fsdp+tp")
    split = jax.jit(jax.value_and_grad(lambda p, t: tf.loss(LLAMA, p, t, compute=jnp.float32, layout=layout)),
                    in_shardings=(p_sh, t_sh))(jax.device_put(params, p_sh), odd)
    assert float(split[0]) == pytest.approx(float(whole[0]), rel=1e-5)
    for g1, g2 in zip(jax.tree.leaves(whole[1]), jax.tree.leaves(split[1])):
        np.testing.assert_allclose(np.asarray(g2), np.asarray(g1), rtol=2e-4, atol=1e-6)


def test_prefill_and_decode_split_fsdp_tp_give_the_whole_steps_logits():
    c = LLAMA
    mesh = _mesh(4, "fsdp+tp")
    params = tf.init(c, jax.random.key(0))
    prompt = jax.random.randint(jax.random.key(1), (4, 16), 0, c.vocab)
    sh = (sharding.shard_specs(params, mesh, "fsdp+tp"), sharding.shard_specs(prompt, mesh, "fsdp+tp", batch=True))
    whole = tf.prefill_step(c, compute=jnp.float32)(params, prompt)
    split = tf.prefill_step(c, compute=jnp.float32, sharding=sh)(*map(jax.device_put, (params, prompt), sh))
    np.testing.assert_allclose(np.asarray(split), np.asarray(whole), rtol=1e-4, atol=1e-5)
    specs = tf.decode_specs(c, 4, 16, dtype=jnp.float32)
    cache = jax.tree.map(lambda s: jax.random.normal(jax.random.key(2), s.shape, s.dtype), specs[1])
    token, index = prompt[:, :1], jnp.int32(9)
    want, want_cache = tf.decode_step(c, compute=jnp.float32)(params, jax.tree.map(jnp.copy, cache), token, index)
    dsh = tuple(sharding.shard_specs(a, mesh, "fsdp+tp", batch=i >= 2)
                for i, a in enumerate((params, cache, token, index)))
    got, new = tf.decode_step(c, compute=jnp.float32, sharding=dsh)(
        *map(jax.device_put, (params, cache, token, index), dsh))
    assert float(jnp.abs(want).max()) > 0
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(want_cache)):  # the new keys and values, written alike
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_experiment_measures_the_smallest_and_compiles_every_size(tmp_path):
    from jaxgpu.pricing import targets
    from jaxgpu.records import results

    from experiments.harness import runner

    runner.run_study(RunSettings(("transformer",), profile="tiny", out=str(tmp_path / "cpu"), progress=False), "cpu",
                     log=lambda m: None)
    recs = {(x.params["mode"]): x for x in results.read_run(tmp_path / "cpu").records}
    assert {r.status for r in recs.values()} == {"ok"}, [r.reason for r in recs.values()]
    for mode in ("train", "serve"):
        m = recs[mode].metrics
        assert m["time_s_median"] > 0 and m["tokens_per_s"] > 0 and m["bytes_measured"] > m["params"] * 2
        assert m["flops_xla"] > 0  # the CPU check of the prediction model prices it
    if why := targets.unavailable():
        pytest.skip(why)
    runner.run_study(RunSettings(("transformer",), profile="tiny", out=str(tmp_path / "h200"), progress=False,
                                 compile_for="h200"), "cpu", log=lambda m: None)
    plans = {(x.params["model"], x.params["mode"], x.params["devices"]): x
             for x in results.read_run(tmp_path / "h200").records}
    assert set(plans) == {(m, mode, n) for m in ("gpt2-124m", "llama-1b") for mode in ("train", "serve")
                          for n in (1, 8)}
    for (_model, mode, n), x in plans.items():
        m = x.metrics
        assert x.status == "ok" and x.compiled and m["gpu_plan"] == 1.0
        assert m["bytes_compiled"] > 0 and m["predicted_step_s"] > 0 and 0 < m["predicted_mfu"] < 1
        assert [m[f"fits_{gb}gb"] for gb in (24, 40, 80, 141)] == sorted(m[f"fits_{gb}gb"] for gb in (24, 40, 80, 141))
        if n > 1 and mode == "train":  # fsdp gathers the weights and scatters the gradients
            assert m["all_gather_count"] > 0 and m["reduce_scatter_count"] + m.get("all_reduce_count", 0) > 0
    one, eight = plans[("llama-1b", "train", 1)].metrics, plans[("llama-1b", "train", 8)].metrics
    assert eight["bytes_compiled"] < one["bytes_compiled"] / 4  # split eight ways, less what every device keeps


GEGLU = Decoder("geglu-head96", 2, 256, 4, 2, 512, 1000, 512, "llama", head_size=96, mlp="geglu")


def test_a_geglu_decoder_with_its_own_head_size_trains_under_every_setting():
    import jax

    assert GEGLU.head_dim == 96 and GEGLU.params() > 0
    p = tf.init(GEGLU, jax.random.key(0))
    assert p["layers"]["wqkv"].shape == (2, 256, (4 + 2 * 2) * 96) and p["layers"]["wo"].shape == (2, 4 * 96, 256)
    tokens = jax.random.randint(jax.random.key(1), (2, 17), 0, 1000)
    losses = []
    for s in (StepSettings(flash=False), StepSettings(remat="dots_with_no_batch_dims_saveable"),
              StepSettings(scan=False), StepSettings(matmul="fp8"), StepSettings(accumulate=2)):
        step, opt = tf.train_step(GEGLU, settings=s)
        losses.append(float(step(p, opt.init(p), tokens)[2]))
    # remat, attention, the layer loop and micro-batches change how the step runs, not what it computes (two
    # micro-batches of one sequence average the same per-sequence losses); fp8 rounds the products
    for same in (losses[1], losses[2], losses[4]):
        assert same == pytest.approx(losses[0], rel=1e-4)
    assert abs(losses[3] / losses[0] - 1) < 0.05 and losses[3] != losses[0]


def test_an_fp8_step_runs_its_products_in_fp8_both_ways_in_xla_gpus_plan():
    """fp8 training's recipe: e4m3 operands forward, the gradient in e5m2 backward; XLA:GPU's plan of the step then
    holds fp8 GEMMs of both kinds (the attention and the vocabulary head stay bf16), and prices faster than bf16."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("fp8-probe", 2, 1024, 8, 8, 4096, 1000, 512, "llama")
    hw = hardware.GPUS["H100 SXM"]
    got = {}
    for mm in ("bf16", "fp8"):
        step, _ = tf.train_step(c, flash=True, settings=StepSettings(matmul=mm))
        ks, steps, name = roofline.plan_for(step, *tf.train_specs(c, 8, 512), on=hw)
        assert name == "xla:gpu h100"
        got[mm] = ({k.dtype for k in ks if k.is_dot}, roofline.price(ks, roofline.roofs_for(hw), loop_steps=steps))
    assert got["bf16"][0] == {"bf16"} and {"f8e4m3fn", "f8e5m2"} <= got["fp8"][0]
    # the products at the H100's fp8 rate, 1,403 TFLOP/s to bf16's 795 (their MAMF: 1.77x); the step gains less, its
    # memory traffic left (XLA 0.11's plan of the bf16 step moves less than 0.10's, its GEMMs reading each layer's
    # weights in place: 0.91x there, 0.83x on 0.10)
    assert got["fp8"][1].compute_s < 0.65 * got["bf16"][1].compute_s
    assert got["fp8"][1].estimate_s < 0.95 * got["bf16"][1].estimate_s


def test_the_settings_reach_every_block_and_mode():
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline, targets

    if why := targets.unavailable():
        pytest.skip(why)
    gpt2 = Decoder("gpt2-probe", 2, 512, 8, 8, 2048, 1000, 512, "gpt2")
    step, _ = tf.train_step(gpt2, flash=True, settings=StepSettings(matmul="fp8"))
    ks, _, _ = roofline.plan_for(step, *tf.train_specs(gpt2, 4, 256), on=hardware.GPUS["H100 SXM"])
    assert {"f8e4m3fn", "f8e5m2"} <= {k.dtype for k in ks if k.is_dot}  # a GPT-2 block's products too
    with pytest.raises(ValueError, match="a decode step's attention is XLA's"):
        planner.plan_model(GEGLU, "h100", mode="serve", settings=StepSettings(scan=False))
    served = planner.plan_model(GEGLU, "h100", mode="serve", batch=2, seq=256)
    assert "XLA attention" in served.settings and "unrolled layers" in served.settings
    two = planner.plan_model(GEGLU, "h100", batch=4, seq=256, devices=8, settings=StepSettings(nodes=2))
    half = planner.plan_model(GEGLU, "h100", batch=2, seq=256, devices=8)
    assert two.estimate_bytes == pytest.approx(half.estimate_bytes)  # the formula sees one node's batch too


@pytest.mark.parametrize("weights", ["int8", "fp8"])
def test_a_decode_step_with_quantised_weights_computes_what_bf16_does(weights):
    """Weight-only int8 or fp8 (a scale per output channel) reads the stored type and widens it for the product: the
    logits stay near the bf16 step's."""
    c = LLAMA
    p = tf.init(c, jax.random.key(0))
    token = jnp.array([[3], [7]], jnp.int32)
    out = {}
    for w in ("bf16", weights):
        params = tf.quantize(p, w) if w != "bf16" else jax.tree.map(lambda a: a.astype(jnp.bfloat16), p)
        specs = tf.decode_specs(c, 2, 16, w)
        assert jax.tree.map(lambda a: a.dtype, params) == jax.tree.map(lambda s: s.dtype, specs[0])
        cache = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), specs[1])
        out[w] = np.asarray(tf.decode_step(c, weights=w)(params, cache, token, jnp.int32(0))[0], np.float32)
    err = np.linalg.norm(out[weights] - out["bf16"]) / np.linalg.norm(out["bf16"])
    assert 0 < err < 0.1, err


def test_quantised_weights_halve_a_decode_step_s_weight_bytes():
    """--weights int8 (or fp8) for serving: the plan of a small decoder's decode step holds about half the bytes."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("wide-few", 4, 512, 8, 8, 2048, 256, 256, "llama")
    plans = {w: planner.plan_model(c, "h100", mode="serve", batch=1, seq=64, settings=StepSettings(
        flash=False, scan=False, weights=w)) for w in ("bf16", "int8", "fp8")}
    for w in ("int8", "fp8"):
        # the stored weights are half (their scales a little more), the plan a little over half: it also holds the
        # KV cache, the embedding and a widened matrix at a time
        spec = lambda w: sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(tf.decode_specs(c, 1, 64, w)[0]))
        assert 0.5 < spec(w) / spec("bf16") < 0.52
        assert 0.5 < plans[w].bytes_per_device / plans["bf16"].bytes_per_device < 0.65, w
        held = lambda p: p.memory_split["arguments"]  # the weights and the cache, as XLA's plan reports them
        assert 0.5 < held(plans[w]) / held(plans["bf16"]) < 0.6, w
        assert f"{w} weights" in plans[w].settings
    with pytest.raises(ValueError, match="a decode step's storage"):
        planner.plan_model(c, "h100", batch=2, seq=64, settings=StepSettings(weights="int8"))
    with pytest.raises(KeyError, match="unknown weight storage 'int4'"):
        StepSettings(weights="int4")


@pytest.mark.parametrize("mask_rank", [2, 3])
def test_attention_a_block_of_queries_at_a_time_is_the_same_attention(mask_rank):
    q = jax.random.normal(jax.random.key(0), (2, 32, 4, 16))
    k, v = (jax.random.normal(jax.random.key(i), (2, 32, 2, 16)) for i in (1, 2))
    mask = jnp.tril(jnp.ones((32, 32), bool))
    mask = mask if mask_rank == 2 else jnp.broadcast_to(mask, (2, 32, 32)) & (jax.random.uniform(
        jax.random.key(3), (2, 32, 32)) > 0.2) | jnp.eye(32, dtype=bool)
    whole = lambda q, k, v: tf._attention(q, k, v, mask, flash=True).sum()  # noqa: E731
    blocks = lambda q, k, v: tf._attention(q, k, v, mask, flash=True, query_block=8).sum()  # noqa: E731
    assert "scan" in str(jax.make_jaxpr(blocks)(q, k, v)) and "scan" not in str(jax.make_jaxpr(whole)(q, k, v))
    for a, b in zip(jax.grad(whole, (0, 1, 2))(q, k, v), jax.grad(blocks, (0, 1, 2))(q, k, v)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(tf._attention(q, k, v, mask, True, 8)),
                               np.asarray(tf._attention(q, k, v, mask, True)), rtol=1e-5, atol=1e-6)
    c = Decoder("t", 2, 64, 4, 2, 128, 256, 64, "llama")
    params, tokens = tf.init(c, jax.random.key(0)), jax.random.randint(jax.random.key(3), (2, 33), 0, c.vocab)
    run = lambda s: jax.jit(jax.value_and_grad(lambda p: tf.loss(c, p, tokens, compute=jnp.float32, s=s)))(params)  # noqa: E731
    (l1, g1), (l2, g2) = run(StepSettings()), run(StepSettings(query_block=8))
    assert float(l2) == pytest.approx(float(l1), rel=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-7)


# ---- a decoder described by a Hugging Face-style config.json --------------------------------------------------
TINY_HF = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu", "tie_word_embeddings": True,
           "max_position_embeddings": 64, "rope_theta": 10000.0, "model_type": "mistral", "sliding_window": 32}


def test_a_config_json_decoder_matches_a_float64_reference_with_its_head_tied():
    c, unread = decoders.from_hf_config(TINY_HF, "tiny")
    assert unread == [] and c.tied and c.kv_heads == 2 and "head" not in tf.param_specs(c)
    params = tf.init(c, jax.random.key(3))
    params = {**params, "layers": {k: v if v.ndim == 2 else 10 * v for k, v in params["layers"].items()}}
    tokens = jax.random.randint(jax.random.key(4), (2, 16), 0, c.vocab)
    got = np.asarray(jax.jit(tf.forward, static_argnums=(0, 3))(c, params, tokens, jnp.float32), np.float64)
    p64 = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    x = p64["embed"][np.asarray(tokens)]
    for i in range(c.layers):
        x = _np_block(c, x, {k: v[i] for k, v in p64["layers"].items()})
    ref = _np_norm(x, p64["final_norm"], None, "llama") @ p64["embed"].T  # the head is the embedding
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5


# ---- a mixture of experts ------------------------------------------------------------------------------------
MOE = Decoder("test-moe", 2, 64, 4, 2, 96, 256, 64, "llama", experts=4, top_k=2)


def _np_moe(c, x, w):
    """A mixture of experts in float64 numpy, token by token (Mixtral's routing): the router's top-k experts, their
    gates a softmax over those k logits, the gated experts' SwiGLU outputs summed."""
    out = np.zeros_like(x)
    for i, v in enumerate(x):
        logits = v @ w["router"]
        top = np.argsort(-logits)[: c.top_k]
        g = np.exp(logits[top] - logits[top].max())
        g /= g.sum()
        for gate, e in zip(g, top):
            a, u = v @ w["w_gate"][e], v @ w["w_up"][e]
            out[i] += gate * ((a / (1 + np.exp(-a)) * u) @ w["w_down"][e])
    return out


def test_a_mixture_of_experts_layer_agrees_with_a_float64_reference(monkeypatch):
    """Every token through its top-k experts, gated, when no expert's buffer overflows (capacity raised)."""
    monkeypatch.setattr(experts, "CAPACITY", float(MOE.experts))  # room for every token in every expert: none dropped
    w = {k: v[0] for k, v in tf.init(MOE, jax.random.key(5))["layers"].items()}
    w = {k: 10 * v if v.ndim > 1 else v for k, v in w.items()}
    h = jax.random.normal(jax.random.key(6), (2, 16, MOE.d_model), jnp.float32)
    got = jax.jit(lambda h, w: experts.moe(MOE, h, w, tf._swiglu))(h, w)
    ref = _np_moe(MOE, np.asarray(h, np.float64).reshape(-1, MOE.d_model),
                  {k: np.asarray(v, np.float64) for k, v in w.items()}).reshape(h.shape)
    assert np.linalg.norm(ref) > 0 and np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref) < 1e-5
    counts = np.bincount(np.argsort(-(np.asarray(h).reshape(-1, 64) @ np.asarray(w["router"])), 1)[:, :2].ravel(), None,
                         MOE.experts)
    assert counts.min() > 0  # every expert took tokens: each path was checked


# ---- sliding-window attention ---------------------------------------------------------------------------------
WINDOWED = dataclasses.replace(LLAMA, name="test-window", window=4)


def _np_forward(c, p64, tokens):
    """The whole decoder in float64 numpy with a sliding window (each token sees its last ``c.window``)."""
    b, t = tokens.shape
    x = p64["embed"][tokens]
    keep = np.tril(np.ones((t, t), bool)) & (np.arange(t)[:, None] - np.arange(t)[None, :] < (c.window or t))
    for i in range(c.layers):
        x = _np_block(c, x, {k: v[i] for k, v in p64["layers"].items()}, keep)
    return _np_norm(x, p64["final_norm"], None, "llama") @ p64["head"]


@pytest.mark.parametrize("t", [16, 10], ids=["banded", "masked"])  # 16: whole windows, banded; 10: masked
def test_sliding_window_attention_agrees_with_a_float64_reference(t):
    params = tf.init(WINDOWED, jax.random.key(7))
    params = {**params, "layers": {k: v if v.ndim == 2 else 10 * v for k, v in params["layers"].items()}}
    tokens = jax.random.randint(jax.random.key(8), (2, t), 0, WINDOWED.vocab)
    p64 = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    ref = _np_forward(WINDOWED, p64, np.asarray(tokens))
    for flash in (False, True):
        got = np.asarray(jax.jit(tf.forward, static_argnums=(0, 3, 4))(WINDOWED, params, tokens, jnp.float32, flash),
                         np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5, flash
    full = np.asarray(jax.jit(tf.forward, static_argnums=(0, 3))(LLAMA, params, tokens, jnp.float32))
    assert np.linalg.norm(full[:, -1] - ref[:, -1]) > 1e-3 * np.linalg.norm(ref[:, -1])  # the window changed them


def test_a_sliding_windows_decode_keeps_a_rolling_cache_of_the_window():
    """Decoding 12 tokens into a cache of the window's 4 gives the windowed forward pass's last logits."""
    params = tf.init(WINDOWED, jax.random.key(9))
    tokens = jax.random.randint(jax.random.key(10), (2, 12), 0, WINDOWED.vocab)
    specs = tf.decode_specs(WINDOWED, 2, 64, "bf16")
    assert specs[1][0].shape[2] == 4  # the cache holds the window, not the context
    cache = tuple(jnp.zeros(s.shape, jnp.float32) for s in specs[1])
    step = tf.decode_step(WINDOWED, jnp.float32)
    for i in range(12):
        logits, cache = step(params, cache, tokens[:, i:i + 1], jnp.int32(i))
    ref = jax.jit(tf.forward, static_argnums=(0, 3))(WINDOWED, params, tokens, jnp.float32)[:, -1]
    assert float(jnp.linalg.norm(logits[:, -1] - ref) / jnp.linalg.norm(ref)) < 1e-4
