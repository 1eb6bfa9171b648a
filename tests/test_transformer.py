"""The library's transformer: one layer against a float64 numpy reference written apart from it, and the same
gradients and train step whether the parameters are whole or split over host devices (fsdp and tensor parallel)."""

import dataclasses
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.kernels import transformer as tf

from experiments.harness.settings import RunSettings

LLAMA = tf.Config("test-llama", 2, 64, 4, 2, 128, 256, 64, "llama")
GPT2 = tf.Config("test-gpt2", 2, 64, 4, 4, 256, 256, 64, "gpt2")


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
        q, k, v = np.split(h @ w["w_qkv"] + w["b_qkv"], 3, -1)
        q, k, v = (a.reshape(b, t, c.heads, hd) for a in (q, k, v))
    else:
        h = _np_norm(x, w["attn_norm"], None, "llama")
        qkv = h @ w["wqkv"]
        q = _np_rope(qkv[..., : c.heads * hd].reshape(b, t, c.heads, hd), pos)
        k = _np_rope(qkv[..., c.heads * hd:(c.heads + c.kv_heads) * hd].reshape(b, t, c.kv_heads, hd), pos)
        v = qkv[..., (c.heads + c.kv_heads) * hd:].reshape(b, t, c.kv_heads, hd)
        k, v = (np.repeat(a, c.heads // c.kv_heads, axis=2) for a in (k, v))  # each KV head serves its group
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
    return tf.mesh_for(jax.devices()[:n], how)


@pytest.mark.parametrize("how", ["fsdp", "tp", "fsdp+tp"])
@pytest.mark.parametrize("c", [LLAMA, GPT2], ids=lambda c: c.style)
def test_sharded_and_whole_gradients_agree(c, how):
    n = 4
    assert len(jax.devices()) >= n
    params = tf.init(c, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (8, 33), 0, c.vocab)
    whole = jax.jit(jax.value_and_grad(lambda p, t: tf.loss(c, p, t, compute=jnp.float32)))(params, tokens)
    mesh = _mesh(n, how)
    loss = lambda p, t: tf.loss(c, p, t, compute=jnp.float32, layout=tf.residual_layout(mesh))
    p_sh, t_sh = tf.shard_specs(params, mesh, how), tf.shard_specs(tokens, mesh, how, batch=True)
    split = jax.jit(jax.value_and_grad(loss), in_shardings=(p_sh, t_sh))(jax.device_put(params, p_sh),
                                                                          jax.device_put(tokens, t_sh))
    cut = [s for s in jax.tree.leaves(p_sh) if any(a is not None for a in s.spec)]
    assert len(cut) >= 4  # most weights really are split
    assert float(split[0]) == pytest.approx(float(whole[0]), rel=1e-5)
    for g1, g2 in zip(jax.tree.leaves(whole[1]), jax.tree.leaves(split[1])):
        np.testing.assert_allclose(np.asarray(g2), np.asarray(g1), rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("how", ["fsdp", "fsdp+tp"])
def test_a_sharded_train_step_keeps_its_layout_and_matches_the_whole_one(how):
    c = dataclasses.replace(LLAMA, name="test-step")
    mesh = _mesh(4, how)
    params = tf.init(c, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (8, 33), 0, c.vocab)
    step, opt = tf.train_step(c, compute=jnp.float32)
    new, _, lv = step(params, opt.init(params), tokens)
    p_sh = tf.shard_specs(params, mesh, how)
    o_sh = tf.shard_specs(opt.init(params), mesh, how)
    t_sh = tf.shard_specs(tokens, mesh, how, batch=True)
    sstep, _ = tf.train_step(c, compute=jnp.float32, sharding=(p_sh, o_sh, t_sh))
    snew, sopt, slv = sstep(jax.device_put(params, p_sh), jax.device_put(opt.init(params), o_sh),
                            jax.device_put(tokens, t_sh))
    assert float(slv) == pytest.approx(float(lv), rel=1e-5)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(snew)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    assert jax.tree.leaves(snew)[0].sharding.is_equivalent_to(jax.tree.leaves(p_sh)[0], 3)


def test_an_fsdp_tp_mesh_cuts_each_layer_both_ways_and_the_batch_over_its_groups():
    P = jax.sharding.PartitionSpec
    assert [tf.tp_degree(n) for n in (1, 2, 4, 6, 7, 8, 12, 16)] == [1, 1, 2, 2, 1, 2, 2, 4]  # a group divides n
    mesh = _mesh(4, "fsdp+tp")
    assert dict(mesh.shape) == {tf.AXIS: 2, tf.MODEL: 2}
    layers = tf.shard_specs(tf.param_specs(LLAMA), mesh, "fsdp+tp")["layers"]
    for name in ("wqkv", "wo", "w_gate", "w_up", "w_down"):  # Megatron's cut over a group, fsdp's over the groups
        assert sorted(map(str, layers[name].spec)) == sorted(["None", tf.AXIS, tf.MODEL]), name
    assert layers["wqkv"].spec[2] == tf.MODEL and layers["wo"].spec[1] == tf.MODEL  # columns, then rows
    tokens = jax.ShapeDtypeStruct((8, 33), jnp.int32)
    assert tf.shard_specs(tokens, mesh, "fsdp+tp", batch=True).spec == P(tf.AXIS, None)
    cache = jax.tree.leaves(tf.shard_specs(tf.decode_specs(LLAMA, 4, 64)[1], mesh, "fsdp+tp"))[0]
    assert cache.spec == P(None, tf.AXIS, None, tf.MODEL, None)  # [L, B, S, KV heads, hd]: by batch and by heads
    experts = tf.shard_specs(tf.param_specs(MOE)["layers"], mesh, "fsdp+tp")
    assert all(experts[k].spec[1] == tf.AXIS and tf.MODEL in experts[k].spec for k in ("w_gate", "w_up", "w_down"))
    with pytest.raises(ValueError, match="do not split into tensor-parallel groups of 3"):
        tf.mesh_for(jax.devices()[:4], "fsdp+tp", tp=3)
    with pytest.raises(ValueError, match="takes a 2-D mesh"):
        tf.shard_specs(tf.param_specs(LLAMA), _mesh(4), "fsdp+tp")
    # a batch the groups do not divide is split along its sequence, as the stream between layers is
    odd = jax.random.randint(jax.random.key(3), (3, 33), 0, LLAMA.vocab)
    t_sh = tf.shard_specs(odd, mesh, "fsdp+tp", batch=True)
    assert t_sh.spec == P(None, None)  # 33 tokens: whole (the loss takes 32 of them, which split)
    layout = tf.residual_layout(mesh)
    assert layout(jnp.zeros((3, 32, 64))).sharding.spec == P(None, tf.AXIS)  # the stream: by its sequence
    assert layout(jnp.zeros((4, 32, 64))).sharding.spec == P(tf.AXIS)  # a batch the groups divide: by its rows
    params = tf.init(LLAMA, jax.random.key(0))
    whole = jax.value_and_grad(lambda p: tf.loss(LLAMA, p, odd, compute=jnp.float32))(params)
    p_sh = tf.shard_specs(params, mesh, "fsdp+tp")
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
    sh = (tf.shard_specs(params, mesh, "fsdp+tp"), tf.shard_specs(prompt, mesh, "fsdp+tp", batch=True))
    whole = tf.prefill_step(c, compute=jnp.float32)(params, prompt)
    split = tf.prefill_step(c, compute=jnp.float32, sharding=sh)(*map(jax.device_put, (params, prompt), sh))
    np.testing.assert_allclose(np.asarray(split), np.asarray(whole), rtol=1e-4, atol=1e-5)
    specs = tf.decode_specs(c, 4, 16, dtype=jnp.float32)
    cache = jax.tree.map(lambda s: jax.random.normal(jax.random.key(2), s.shape, s.dtype), specs[1])
    token, index = prompt[:, :1], jnp.int32(9)
    want, want_cache = tf.decode_step(c, compute=jnp.float32)(params, jax.tree.map(jnp.copy, cache), token, index)
    dsh = tuple(tf.shard_specs(a, mesh, "fsdp+tp", batch=i >= 2) for i, a in enumerate((params, cache, token, index)))
    got, new = tf.decode_step(c, compute=jnp.float32, sharding=dsh)(
        *map(jax.device_put, (params, cache, token, index), dsh))
    assert float(jnp.abs(want).max()) > 0
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(want_cache)):  # the new keys and values, written alike
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_a_collectives_group_is_read_off_the_plan_in_every_form_and_prices_its_share():
    from jaxgpu.ground import hardware, stack
    from jaxgpu.pricing import sizing

    assert stack.replica_group("x, replica_groups={{0,2,4,6},{1,3,5,7}}, to_apply=%r") == 4
    assert stack.replica_group("x, replica_groups=[4,2]<=[2,2,2]T(2,1,0), dimensions={0}") == 2
    assert stack.replica_group("replica_groups=mesh['axis_0'=1,'axis_2'=4,'axis_3'=2] {'axis_2'}, use") == 4
    assert stack.replica_group("replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a'}, dim") == 2
    assert stack.replica_group("replica_groups={}, to_apply=%r") == stack.replica_group("source_target_pairs=") == 0
    assert stack.replica_group("replica_groups=mesh['a'=2,'b'=4], dimensions={1}") == 0  # no axes named: not read
    k = stack.Kernel("all-reduce.1", 0.0, 1e6, False, 3, group=2)
    assert stack.Kernel.from_list(k.to_list()) == k
    hw = hardware.GPUS["H100 SXM"]
    pair = sizing._collectives([k], hw, 8)[3]["all-reduce"]
    every = sizing._collectives([dataclasses.replace(k, group=0)], hw, 8)[3]["all-reduce"]
    # an all-reduce moves (g - 1) / g of its bytes over a group of g: a pair's half, not all eight's 7/8
    assert pair == (3, pytest.approx(3e6 * 1 / 2)) and every == (3, pytest.approx(3e6 * 7 / 8))


def test_an_fsdp_tp_plan_holds_about_fsdps_bytes_and_runs_its_collectives_in_groups():
    """On a 2-D mesh of 8 (fsdp 4 x tp 2) XLA:GPU's plan of a train step holds about what the fsdp split holds and
    its collectives run within groups of 2 and of 4. Without ``residual_layout`` the stream between layers was
    split along d over the groups too and moved each layer: twice fsdp's bytes."""
    import re

    from jaxgpu.ground import hardware, stack
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 512, 8, 2, 1024, 4000, 2048, "llama")
    both = sizing.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=tf.StepSettings(mesh="fsdp+tp"))
    fsdp = sizing.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=tf.StepSettings(mesh="fsdp"))
    assert both.mesh == "fsdp 4 x tp 2" and fsdp.mesh == "fsdp" and both.plan == "xla:gpu h100"
    assert both.bytes_per_device < 1.25 * fsdp.bytes_per_device, (both.bytes_per_device, fsdp.bytes_per_device)
    four = sizing.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=tf.StepSettings(mesh="fsdp+tp", tp=4))
    assert four.mesh == "fsdp 2 x tp 4" and "fsdp+tp mesh (tp 4)" in four.settings
    devs, label = sizing._devices_for(hardware.GPUS["H100 SXM"], 8)
    mesh = tf.mesh_for(devs, "fsdp+tp")
    step, specs, sh, *_ = sizing._step(c, "train", 8, 256, mesh, "fsdp+tp", tf.StepSettings(mesh="fsdp+tp"))
    placed = [jax.tree.map(lambda s, h: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=h), a, b)
              for a, b in zip(specs, sh)]
    hlo = step.lower(*placed).compile().as_text()
    groups = {k.group for k in stack.kernels(hlo) if re.match(r"(all-reduce|all-gather|reduce-scatter)", k.name)}
    assert {2, 4} <= groups, groups


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


def test_the_command_prices_a_described_decoder_as_the_library_does(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    dims = dict(layers=2, d_model=256, heads=8, kv_heads=2, ffn=512, vocab=1000)
    cmd = [sys.executable, "-m", "experiments.model", "--serve", "--batch", "2", "--seq", "256", "--devices", "1,2",
           "--gpus", "h200,a100", "--out", str(tmp_path / "plan")]
    cmd += [a for k, v in dims.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "H200 SXM" in proc.stdout and "A100 80GB" in proc.stdout and "predicted, not run" in proc.stdout
    got = json.loads((tmp_path / "plan.json").read_text())
    c = tf.Config("described", dims["layers"], dims["d_model"], dims["heads"], dims["kv_heads"], dims["ffn"],
                  dims["vocab"], 2048, "llama")
    want = [dataclasses.asdict(p) for p in sizing.model_on_gpus(c, train=False, batch=2, seq=256, devices=(1, 2),
                                                                gpus=["h200", "a100"])]
    assert len(got) == 4
    for g, w in zip(got, want):
        assert g["gpu"] == w["gpu"] and g["devices"] == w["devices"] and g["plan"] == w["plan"]
        for key in ("bytes_per_device", "seconds", "tokens_per_s", "mfu", "comm_s"):
            assert g[key] == pytest.approx(w[key], rel=1e-9), key
    assert (tmp_path / "plan.csv").read_text().startswith("gpu,devices,bytes_per_device")


def test_the_command_splits_a_step_fsdp_tp_as_the_library_does(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    cmd = [sys.executable, "-m", "experiments.model", "--train", "--batch", "4", "--seq", "128", "--devices", "4,8",
           "--gpus", "h100", "--mesh", "fsdp+tp", "--tp", "2", "--out", str(tmp_path / "plan"), "--layers", "2",
           "--d-model", "256", "--heads", "8", "--kv-heads", "2", "--ffn", "512", "--vocab", "1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr.startswith("written: "), proc.stderr
    assert "fsdp+tp mesh (tp 2)" in proc.stdout and "4 (fsdp 2 x tp 2)" in proc.stdout  # the grid at each count
    got = json.loads((tmp_path / "plan.json").read_text())
    assert [g["mesh"] for g in got] == ["fsdp 2 x tp 2", "fsdp 4 x tp 2"]
    assert (tmp_path / "plan.csv").read_text().splitlines()[1].endswith(",fsdp 2 x tp 2")
    c = tf.Config("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    want = sizing.plan_model(c, "h100", batch=4, seq=128, devices=8, settings=tf.StepSettings(mesh="fsdp+tp", tp=2))
    assert got[1]["bytes_per_device"] == want.bytes_per_device and got[1]["seconds"] == pytest.approx(want.seconds)


def test_a_model_is_named_in_any_case_and_punctuation():
    from jaxgpu.pricing import sizing

    for said in ("llama3-8b", "Llama3-8B", "LLAMA3_8B", "llama38b", "Llama 3 8B"):
        assert sizing._config(said).name == "llama3-8b", said
    assert sizing._config("GPT2-1.5B").name == "gpt2-1.5b" and sizing._config("llama-1B").name == "llama-1b"


def test_the_model_command_keeps_the_compilers_lines_off_the_terminal(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--model", "Llama3-8B", "--serve", "--gpus",
                           "h100", "--devices", "1", "--batch", "1", "--seq", "256"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("llama3-8b, one decode step"), proc.stderr
    assert proc.stderr == ""
    assert (tmp_path / "jaxgpu" / "compiler.log").exists()


@pytest.mark.parametrize("argv, said", [
    (["--model", "lama-7b"], "unknown model 'lama-7b'; did you mean 'llama-7b'?"),
    (["--layers", "2"], "name a model (--model llama-7b; --list shows them) or describe one"),
    (["--model", "llama-7b", "--devices", "0"], "--devices takes counts from 1 to 64"),
    (["--model", "llama-7b", "--gpus", "tpu"], "--gpus: unknown GPU 'tpu'"),
    (["--model", "llama-7b", "--batch", "0"], "--batch must be at least 1"),
    (["--model", "llama-7b", "--out", "/proc/nowhere/plan"], "--out: cannot create /proc/nowhere"),
    (["--model", "llama-7b", "--serve", "--bf16"], "--bf16 sets a train step's weights"),
    (["--model", "llama-7b", "--remat", "dots"], "--remat: unknown remat policy 'dots'"),
    (["--model", "llama-7b", "--nodes", "0"], "--nodes: nodes must be at least 1"),
    (["--model", "llama-7b", "--accumulate", "0"], "--accumulate: accumulate must be at least 1 micro-batch"),
    (["--model", "llama-7b", "--weights", "int8"], "int8 or fp8 weights are a decode step's storage (--serve)"),
    (["--model", "llama-7b", "--tokens", "0"], "--tokens takes a count of tokens such as 1e9, got 0"),
    (["--model", "llama-7b", "--price", "h100=2"], "--price prices the time to --tokens N; give --tokens too"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "h100=two"], "--price takes GPU=USD_PER_HOUR"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "tpu=2"], "--price: unknown GPU 'tpu'"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "h100=-1"], "a price per hour must be above 0"),
    (["--model", "llama-7b", "--accumulate", "3"], "a node's batch of 8 does not split into 3 micro-batches"),
    (["--model", "llama-7b", "--serve", "--tokens", "1e9", "--generate", "0"], "--generate takes the tokens"),
    (["--config", "/nonexistent/config.json"], "--config: cannot read /nonexistent/config.json"),
    (["--model", "llama-7b", "--config", "x.json"], "name one decoder: --model, --config PATH, or --layers"),
    (["--config", "/proc/self/status"], "--config: /proc/self/status is not JSON"),
    (["--model", "llama-7b", "--mesh", "dp"], "argument --mesh: invalid choice: 'dp'"),
    (["--model", "llama-7b", "--tp", "2"], "--tp sizes the tensor-parallel groups of the fsdp+tp mesh; give --mesh"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "-2"], "--tp takes the GPUs of a group, 1 or more, got -2"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "3"], "none of the default counts (1, 8) splits into"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "2", "--devices", "1,8"], "1 GPU does not split into"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "16", "--fit"], "none of the default counts (1, 2, 4, 8)"),
    (["--model", "llama-7b", "--mlp", "geglu"], "--head-dim and --mlp describe a decoder"),
    (["--layers", "2", "--d-model", "250", "--heads", "4", "--kv-heads", "2", "--ffn", "8", "--vocab", "9"],
     "must split into --heads (4) unless --head-dim is given"),
])
def test_the_command_refuses_bad_input_in_one_line(argv, said):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "experiments.model", *argv], capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("experiments.model")]
    assert proc.returncode == 2 and len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_mode_plans_and_pure_bf16_holds_less_than_mixed_precision():
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = {m: sizing.plan_model(c, "h200", mode=m, batch=4, seq=256, devices=2) for m in sizing.MODES}
    assert all(p.plan == "xla:gpu h200" and p.bytes_per_device > 0 and p.seconds > 0 for p in plans.values())
    assert plans["train_bf16"].bytes_per_device < plans["train"].bytes_per_device  # 2-byte weights and moments
    assert plans["prefill"].tokens_per_s > plans["serve"].tokens_per_s  # a prompt's tokens go through at once
    with pytest.raises(KeyError, match="unknown mode 'pretrain'"):
        sizing.plan_model(c, "h200", mode="pretrain")


# ---- the settings real runs use (StepSettings) ----------------------------------------------------------------

def test_step_settings_refuse_what_no_run_sets():
    with pytest.raises(KeyError, match="unknown remat policy 'dots'; known: none, dots_saveable"):
        tf.StepSettings(remat="dots")
    with pytest.raises(KeyError, match="unknown matmul type 'int4'"):
        tf.StepSettings(matmul="int4")
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        tf.StepSettings(nodes=0)
    with pytest.raises(ValueError, match="accumulate must be at least 1 micro-batch"):
        tf.StepSettings(accumulate=0)
    assert tf.StepSettings().words() == "remat none, flash attention, bf16 products, scanned layers, 1 node"
    assert tf.StepSettings(accumulate=4).words().endswith(", 4 micro-batches")
    import jax

    assert all(callable(getattr(jax.checkpoint_policies, name)) for name in tf.REMAT_POLICIES)


_GEGLU = tf.Config("geglu-head96", 2, 256, 4, 2, 512, 1000, 512, "llama", head_size=96, mlp="geglu")


def test_a_geglu_decoder_with_its_own_head_size_trains_under_every_setting():
    import jax

    assert _GEGLU.head_dim == 96 and _GEGLU.params() > 0
    p = tf.init(_GEGLU, jax.random.key(0))
    assert p["layers"]["wqkv"].shape == (2, 256, (4 + 2 * 2) * 96) and p["layers"]["wo"].shape == (2, 4 * 96, 256)
    tokens = jax.random.randint(jax.random.key(1), (2, 17), 0, 1000)
    losses = []
    for s in (tf.StepSettings(flash=False), tf.StepSettings(remat="dots_with_no_batch_dims_saveable"),
              tf.StepSettings(scan=False), tf.StepSettings(matmul="fp8"), tf.StepSettings(accumulate=2)):
        step, opt = tf.train_step(_GEGLU, settings=s)
        losses.append(float(step(p, opt.init(p), tokens)[2]))
    # remat, attention, the layer loop and micro-batches change how the step runs, not what it computes (two
    # micro-batches of one sequence average the same per-sequence losses); fp8 rounds the products
    for same in (losses[1], losses[2], losses[4]):
        assert same == pytest.approx(losses[0], rel=1e-4)
    assert abs(losses[3] / losses[0] - 1) < 0.05 and losses[3] != losses[0]


def test_the_settings_price_through_the_public_api():
    import jaxgpu
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    base = jaxgpu.plan_model(_GEGLU, "h100", batch=4, seq=256, devices=8)
    assert base.settings.startswith("remat none") and base.internode_s == 0 and base.nodes == 1
    fp8 = jaxgpu.plan_model(_GEGLU, "h100", batch=4, seq=256, devices=8, settings=tf.StepSettings(matmul="fp8"))
    assert fp8.seconds > 0 and "fp8 products" in fp8.settings
    two = jaxgpu.plan_model(_GEGLU, "h100", batch=4, seq=256, devices=8, settings=tf.StepSettings(nodes=2))
    assert two.nodes == 2 and two.internode_s > 0 and two.comm_s >= two.internode_s
    # each node runs half the batch: the step's own share is the smaller, the tokens per step the same
    assert two.tokens_per_s * two.seconds == pytest.approx(base.tokens_per_s * base.seconds)
    unrolled = jaxgpu.plan_model(_GEGLU, "h100", batch=4, seq=256, devices=1, settings=tf.StepSettings(scan=False))
    assert unrolled.seconds > 0
    rows = sizing.model_on_gpus(_GEGLU, batch=4, seq=256, devices=(8,), gpus=["h100", "a100", "l4"],
                                settings=tf.StepSettings(matmul="fp8", nodes=2))
    said = {r.gpu: getattr(r, "reason", "") for r in rows}
    assert said["H100 SXM"] == "" and "no fp8 matrix units" in said["A100 80GB"] and "no network" in said["L4"]
    with pytest.raises(ValueError, match="a training step's settings"):
        jaxgpu.plan_model(_GEGLU, "h100", mode="serve", settings=tf.StepSettings(remat="dots_saveable"))
    with pytest.raises(ValueError, match="does not split over 3 nodes"):
        jaxgpu.plan_model(_GEGLU, "h100", batch=4, settings=tf.StepSettings(nodes=3))
    with pytest.raises(ValueError, match="batch of 2 does not split into 4 micro-batches"):
        jaxgpu.plan_model(_GEGLU, "h100", batch=4, settings=tf.StepSettings(nodes=2, accumulate=4))
    # micro-batches: the same tokens a step in less memory (each micro-batch's activations, not the batch's)
    # a batch of 64 on 8 GPUs: each micro-batch two rows a GPU (a micro-batch of fewer rows than the GPUs splitting
    # it, XLA 0.11 holds whole on each: its SPMD partitioner's "involuntary full rematerialization")
    whole = jaxgpu.plan_model(_GEGLU, "h100", batch=64, seq=256, devices=8)
    four = jaxgpu.plan_model(_GEGLU, "h100", batch=64, seq=256, devices=8, settings=tf.StepSettings(accumulate=4))
    assert four.bytes_per_device < whole.bytes_per_device
    assert four.tokens_per_s * four.seconds == pytest.approx(64 * 256)
    assert four.memory_split["temporaries"] < 0.6 * whole.memory_split["temporaries"]  # as XLA's plan reports them
    assert "4 micro-batches" in four.settings


@pytest.mark.slow
def test_llama_7b_fits_8_h100s_at_16_x_4096_when_the_weights_products_are_saved():
    """The published 7B runs trained at 16 x 4096 on 8 H100s with activation checkpointing that keeps the matmul
    outputs: the plan of that step fits; without remat it says what it would need (more: 58 GB a GPU, within JAX's
    60 GB share of an H100 since the activations keep only the products' inputs, where it was 90 GB); and
    recomputing everything is not what it needs."""
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    plans = {r: sizing.plan_model("llama-7b", "h100", batch=16, seq=4096, devices=8, settings=tf.StepSettings(remat=r))
             for r in ("none", "dots_with_no_batch_dims_saveable", "nothing_saveable")}
    saved = plans["dots_with_no_batch_dims_saveable"]
    assert plans["none"].bytes_per_device > 1.1 * saved.bytes_per_device  # it says what it would need
    assert saved.fits and saved.bytes_per_device > plans["nothing_saveable"].bytes_per_device
    assert saved.seconds < plans["nothing_saveable"].seconds  # recomputing less costs less


def test_the_model_command_prices_a_decode_step_as_the_published_set_does(monkeypatch):
    """XLA:GPU's plan of a scanned decode (jax 0.10) copies each layer's weights out of the stack (its dynamic-slice
    fusions): the published serving runs hold each layer apart, and so do plan_model's decode steps by default, so
    the command and the validation set price the same program. (jax 0.11's plan reads each layer's weights from the
    stack in place, its GEMMs inside the dynamic-slice fusions, and prices the scanned step near the unrolled one.)"""
    from jaxgpu.ground import stack
    from jaxgpu.pricing import published, roofline, sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    case = next(c for c in published.CASES if c.id == "torchao-llama2-7b-decode-a100")
    fn, args = published.program(case)
    checked = roofline.predict(fn, *args, on="A100 80GB").estimate_s
    plan = sizing.plan_model("llama-7b", "A100 80GB", train=False, batch=1, seq=case.program[3], devices=1)
    assert "unrolled layers" in plan.settings and plan.plan == "xla:gpu a100"
    assert plan.seconds == pytest.approx(checked, rel=0.10)
    compile_plan, hlos = targets.compile_plan, []

    def kept(*args, **kwargs):
        plan = compile_plan(*args, **kwargs)
        hlos.append(plan.hlo)
        return plan

    monkeypatch.setattr(targets, "compile_plan", kept)
    scanned = sizing.plan_model("llama-7b", "A100 80GB", train=False, batch=1, seq=case.program[3], devices=1,
                                settings=tf.StepSettings(scan=True, flash=False))
    # the weights a layer's products read, and how: copied out of the stack by a kernel of their own, or in place
    ks = stack.kernels(hlos[-1])
    copies = sum(k.bytes * k.count for k in ks if not k.is_dot and "dynamic_slice" in k.name)
    if copies > 10e9:  # 13.5 GB of weights, read and written again: the copies of every layer's weights
        assert scanned.seconds > 2 * plan.seconds
    else:
        assert any(k.is_dot and "dynamic_slice" in k.name for k in ks)  # the GEMMs slice the stack themselves
        assert scanned.seconds == pytest.approx(plan.seconds, rel=0.2)


def test_async_collectives_run_under_the_compute_and_only_the_rest_is_added():
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    p = sizing.plan_model(_GEGLU, "h100", batch=8, seq=256, devices=8)
    assert p.overlapped_s > 0  # the fsdp step's all-gathers and reduce-scatters are async pairs in XLA:GPU's plan
    assert p.lower_s <= p.seconds <= p.upper_s
    # the bound without the schedule's overlap prices every collective whole
    assert p.upper_s - p.seconds >= p.overlapped_s * (1 - 1e-9)
    one = sizing.plan_model(_GEGLU, "h100", batch=8, seq=256, devices=1)
    assert one.overlapped_s == 0 and one.comm_s == 0


@pytest.mark.slow
def test_a_published_jax_7b_step_on_8_h100s_is_priced_within_15_percent():
    """NVIDIA/JAX-Toolbox @db096881 rosetta/rosetta/projects/maxtext/README.md: MaxText Llama-2 7B, 8 H100 80G SXM,
    BF16, sequence 4096, 2 sequences a GPU (global 16), FSDP 8, remat policy minimal_flash, scan off: "0.721" s a
    step. minimal_flash keeps the weights' products, as dots_with_no_batch_dims_saveable does."""
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    p = sizing.plan_model("llama-7b", "h100", batch=16, seq=4096, devices=8,
                          settings=tf.StepSettings(remat="dots_with_no_batch_dims_saveable", scan=False))
    assert p.seconds / 0.721 - 1 == pytest.approx(0, abs=0.15), p.seconds
    assert p.upper_s > 0.721 * 1.15  # without the schedule's overlap it would miss


def test_an_fp8_step_runs_its_products_in_fp8_both_ways_in_xla_gpus_plan():
    """fp8 training's recipe: e4m3 operands forward, the gradient in e5m2 backward; XLA:GPU's plan of the step then
    holds fp8 GEMMs of both kinds (the attention and the vocabulary head stay bf16), and prices faster than bf16."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("fp8-probe", 2, 1024, 8, 8, 4096, 1000, 512, "llama")
    hw = hardware.GPUS["H100 SXM"]
    got = {}
    for mm in ("bf16", "fp8"):
        step, _ = tf.train_step(c, flash=True, settings=tf.StepSettings(matmul=mm))
        ks, steps, name = roofline.plan_for(step, *tf.train_specs(c, 8, 512), on=hw)
        assert name == "xla:gpu h100"
        got[mm] = ({k.dtype for k in ks if k.is_dot}, roofline.price(ks, roofline.roofs_for(hw), loop_steps=steps))
    assert got["bf16"][0] == {"bf16"} and {"f8e4m3fn", "f8e5m2"} <= got["fp8"][0]
    # the products at twice the rate; the step gains less, its memory traffic left (XLA 0.11's plan of the bf16 step
    # moves less than 0.10's, its GEMMs reading each layer's weights in place: 0.91x there, 0.83x on 0.10)
    assert got["fp8"][1].compute_s < 0.6 * got["bf16"][1].compute_s
    assert got["fp8"][1].estimate_s < 0.95 * got["bf16"][1].estimate_s


# One collective of each kind over 8 devices, as XLA:GPU prints its asynchronous start in each JAX version: the
# result type lists the inputs beside the results, or does not, differently by kind and version (jax 0.10.2's
# cuda12 plugin and 0.11.2's cuda13 plugin, read off their plans of the same programs).
_STARTS = {
    "all-gather": ["(f32[32,512]{1,0}, f32[256,512]{1,0})"],
    "reduce-scatter": ["((f32[256,512]{1,0}), f32[32,512]{1,0})"],
    "all-to-all": ["((f32[256,512]{1,0}), f32[256,512]{1,0})"],
    "collective-permute": ["(f32[256,512]{1,0}, f32[256,512]{1,0})"],
    "all-reduce": ["f32[256,512]{1,0}", "((f32[256,512]{1,0}), f32[256,512]{1,0})"],  # 0.10.2, 0.11.2
}
_INPUTS = {"all-gather": "f32[32,512]{1,0}", "reduce-scatter": "f32[256,512]{1,0}"}


def _program(op: str, result: str, start: bool) -> str:
    operand = _INPUTS.get(op, "f32[256,512]{1,0}")
    done = result.rsplit(", ", 1)[-1].rstrip(")") if result.startswith("(") else result
    call = (f"  %{op}-start.1 = {result} {op}-start(%p), replica_groups=[1,8]<=[8]\n"
            f"  ROOT %{op}-done.1 = {done} {op}-done(%{op}-start.1)" if start
            else f"  ROOT %{op}.1 = {done} {op}(%p), replica_groups=[1,8]<=[8]")
    head = f"HloModule m, num_partitions=8\n\nENTRY %main (p: {operand}) -> {done} {{\n  %p = {operand} parameter(0)\n"
    return f"{head}{call}\n}}\n"


@pytest.mark.parametrize("op", sorted(_STARTS))
def test_an_async_collective_moves_what_a_synchronous_one_of_its_size_moves(op):
    """A -start's result may hold its inputs beside its results (XLA:GPU's plan, by kind and JAX version): its
    bytes are its results' and inputs', as a synchronous collective's are, and it is priced alike, hidden."""
    from jaxgpu.ground import hardware, stack
    from jaxgpu.pricing import sizing

    hw = hardware.GPUS["H100 SXM"]
    sync_hlo = _program(op, _STARTS[op][0], start=False)
    (sync,) = stack.kernels(sync_hlo)
    _, alone, _, once = sizing._collectives([sync], hw, 8)
    for result in _STARTS[op]:
        hlo = _program(op, result, start=True)
        ks = stack.kernels(hlo)
        started = [k for k in ks if k.name.startswith(f"{op}-start")]
        assert started and started[0].bytes == sync.bytes, (op, result, [(k.name, k.bytes) for k in ks], sync.bytes)
        assert stack.collectives(hlo) == stack.collectives(sync_hlo), (op, result)
        hidden, exposed, rest, counts = sizing._collectives(ks, hw, 8)
        assert alone > 0 and hidden == pytest.approx(alone) and exposed == 0 and counts[op] == pytest.approx(once[op])
        assert all(not k.name.startswith(op) for k in rest)


def test_the_settings_reach_every_block_and_mode():
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline, sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    gpt2 = tf.Config("gpt2-probe", 2, 512, 8, 8, 2048, 1000, 512, "gpt2")
    step, _ = tf.train_step(gpt2, flash=True, settings=tf.StepSettings(matmul="fp8"))
    ks, _, _ = roofline.plan_for(step, *tf.train_specs(gpt2, 4, 256), on=hardware.GPUS["H100 SXM"])
    assert {"f8e4m3fn", "f8e5m2"} <= {k.dtype for k in ks if k.is_dot}  # a GPT-2 block's products too
    with pytest.raises(ValueError, match="a decode step's attention is XLA's"):
        sizing.plan_model(_GEGLU, "h100", mode="serve", settings=tf.StepSettings(scan=False))
    served = sizing.plan_model(_GEGLU, "h100", mode="serve", batch=2, seq=256)
    assert "XLA attention" in served.settings and "unrolled layers" in served.settings
    two = sizing.plan_model(_GEGLU, "h100", batch=4, seq=256, devices=8, settings=tf.StepSettings(nodes=2))
    half = sizing.plan_model(_GEGLU, "h100", batch=2, seq=256, devices=8)
    assert two.estimate_bytes == pytest.approx(half.estimate_bytes)  # the formula sees one node's batch too


def test_a_model_is_named_in_any_case():
    from jaxgpu.pricing import sizing

    assert sizing._config("LLaMA3-8B") is tf.CONFIGS["llama3-8b"] and sizing._config(_GEGLU) is _GEGLU
    with pytest.raises(KeyError, match="unknown model 'llama3-8'; did you mean 'llama3-8b'"):
        sizing._config("llama3-8")


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
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("wide-few", 4, 512, 8, 8, 2048, 256, 256, "llama")
    plans = {w: sizing.plan_model(c, "h100", mode="serve", batch=1, seq=64, settings=tf.StepSettings(
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
        sizing.plan_model(c, "h100", batch=2, seq=64, settings=tf.StepSettings(weights="int8"))
    with pytest.raises(KeyError, match="unknown weight storage 'int4'"):
        tf.StepSettings(weights="int4")


def test_a_quantised_decode_is_priced_on_the_plan_xla_would_pick():
    """int8 weights: XLA's autotuner picks the Triton GEMM that widens them inside the product, where cuBLAS's plan
    needs a kernel that writes a wide copy first; plan_model prices both and keeps the cheaper, as predict does."""
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("two-wide", 2, 4096, 32, 32, 11008, 256, 256, "llama")  # its weights' bytes bind a decode step
    plans = {w: sizing.plan_model(c, "a100", mode="serve", batch=1, seq=64, settings=tf.StepSettings(
        flash=False, scan=False, weights=w)) for w in ("bf16", "int8")}
    assert plans["int8"].plan == "xla:gpu a100, triton gemm" and plans["bf16"].plan == "xla:gpu a100"
    # fewer bytes read, the widening inside the product (on the 7B: 6.8 ms against 8.8, as the published int8 runs)
    assert plans["int8"].seconds < 0.85 * plans["bf16"].seconds


def test_the_time_to_n_tokens_is_steps_at_the_predicted_step_time(tmp_path):
    """--tokens: training's steps of batch x seq tokens (all nodes' at once), a decode's tokens at its tokens/s;
    GPU-hours over every GPU; a user's price per hour; the band the committed check's median error of the kind."""
    from types import SimpleNamespace

    from experiments import model

    train = SimpleNamespace(mode="train", batch=16, seq=4096, seconds=0.7, devices=8, nodes=2, tokens_per_s=0.0)
    k = model.to_tokens(train, 16 * 4096 * 1000, price=2.0)
    assert k["to_tokens_s"] == pytest.approx(700) and k["gpu_hours"] == pytest.approx(700 * 16 / 3600)
    assert k["cost_usd"] == pytest.approx(2 * 700 * 16 / 3600)
    serve = SimpleNamespace(mode="serve", batch=8, seq=2048, seconds=0.01, devices=1, nodes=1, tokens_per_s=800.0)
    assert model.to_tokens(serve, 8000)["to_tokens_s"] == pytest.approx(10) and "cost_usd" not in model.to_tokens(
        serve, 8000)
    # each sequence's prompt once: 8000 tokens, 100 a sequence, 8 sequences a prefill of 0.5 s: 10 prefills
    k = model.to_tokens(serve, 8000, prefill=SimpleNamespace(seconds=0.5), generate=100)
    assert k["to_tokens_s"] == pytest.approx(10 + 5) and k["prefill_s"] == pytest.approx(5)
    assert model._duration(42) == "42 s" and model._duration(3 * 3600) == "3 h" and model._duration(5 * 86400) == \
        "5 days"
    checked = model.band("train")  # the committed check: all 17 published training steps
    assert checked is not None and checked[1] >= 12 and 0 < checked[0] < 0.15
    assert model.band("serve")[1] >= 6 and model.band("train", tmp_path) is None  # no check in that folder


# ---- the formula beside the compiler's plan -------------------------------------------------------------------
def test_the_formula_counts_each_named_configs_parameters_within_1_percent():
    """Grouped-query attention, the MLP's width, a gated MLP's third matrix and an untied output head counted:
    Llama-3 8B's 8.03 B parameters, where 12 L d^2 + V d says 6.97 B (13% low)."""
    from jaxgpu.pricing import fit, sizing

    for c in tf.CONFIGS.values():
        assert sizing._fit_shape(c).params == pytest.approx(c.params(), rel=0.01), c.name
    c = tf.CONFIGS["llama3-8b"]
    classic = fit.Transformer(c.name, c.layers, c.d_model, c.heads, c.vocab).params
    assert classic < 0.9 * c.params() and 8.02e9 < sizing._fit_shape(c).params < 8.04e9
    kv = fit.transformer_inference(sizing._fit_shape(c), "bf16", 2048, 8)["kv_cache"]
    assert kv == 2 * 32 * 2048 * 8 * (8 * 128) * 2  # 8 key/value heads of 128, not the model's width


@pytest.mark.slow
def test_formula_and_plan_agree_within_15_percent_on_every_named_configs_serve_step():
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    for name in tf.CONFIGS:
        p = sizing.plan_model(name, "H100 SXM", train=False, batch=8, seq=1024, devices=1)
        assert p.estimate_bytes == pytest.approx(p.bytes_per_device, rel=0.15), name
        assert set(p.memory_split) == set(sizing.MEMORY_PARTS) and set(p.estimate_parts) == {"weights", "kv_cache"}
        said = sizing.formula_vs_plan(p)
        assert said.startswith("the formula counts") and "XLA's plan holds" in said, said


def test_a_prefills_formula_counts_one_layers_values_and_the_plan_holds_the_scores_beside_them(monkeypatch):
    """A prompt's layers run in turn: the formula counts the weights and one layer's values. XLA's plan of a flash
    prefill as written holds about one layer's float32 scores more (the program computes them whole), which the
    sentence names; the plan of its twin that runs the attention a block of queries at a time holds a block's, and
    is the one read where the scores come to a twentieth of the plan. The time is the step's own either way."""
    from jaxgpu.pricing import fit, sizing, targets

    t = fit.Transformer("t", 2, 256, 8, 1000, kv_heads=2, ffn=512, gated=True)
    one = fit.transformer_prefill(t, "bf16", 1024, 4)
    assert one["weights"] == 2 * t.params
    assert one["activations"] == 4 * 1024 * 2 * (3 * 256 + 2 * 256 + 2 * 64 + 3 * 512)
    assert fit.transformer_prefill(t, "bf16", 1024, 4, flash=False)["activations"] == (
        one["activations"] + 4 * 4 * 8 * 1024 * 1024)  # float32 scores
    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    with monkeypatch.context() as m:
        m.setattr(sizing, "SCORES_SHARE", float("inf"))  # the step as written
        for seq in (256, 2048):
            p = sizing.plan_model(c, "h100", mode="prefill", batch=4, seq=seq, devices=1)
            assert set(p.estimate_parts) == {"weights", "activations"} and p.scores_bytes == 4 * 8 * seq * seq * 4
            extra = p.memory_split["temporaries"] - p.estimate_parts["activations"]
            assert extra > 0.7 * p.scores_bytes, (seq, extra, p.scores_bytes)
            assert p.query_block == 0
        # at 2,048 tokens the scores are most of it (at 256, XLA 0.11's plan holds 21 MB of its own beside 8 MB of
        # them, 0.10's none): the excess is about a layer's scores, and the sentence names them
        assert extra < 1.2 * p.scores_bytes and "attention scores" in sizing.formula_vs_plan(p)
    blocked = sizing.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1)
    # the largest block of 2,048 whose scores (537 MB a layer) a GPU holds in about 256 MB: 512 queries
    assert blocked.query_block == 512 and blocked.seconds == p.seconds and blocked.written_bytes == p.bytes_per_device
    block_scores = p.scores_bytes * blocked.query_block / 2048  # what a block holds at once, not a layer's
    assert blocked.bytes_per_device < p.bytes_per_device - p.scores_bytes + 2 * block_scores
    said = sizing.formula_vs_plan(blocked)
    assert f"run {blocked.query_block} queries at a time" in said and "by about a block's attention scores" in said
    off = sizing.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1,
                            settings=tf.StepSettings(flash=False))
    assert off.scores_bytes == 0 and off.query_block == 0 and "attention scores" not in sizing.formula_vs_plan(off)
    assert off.estimate_bytes == pytest.approx(off.bytes_per_device, rel=0.15)  # without flash both count them
    asked = sizing.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1,
                              settings=tf.StepSettings(query_block=256))  # blocks the user set: no twin, a block's
    assert asked.query_block == 256 and asked.written_bytes == 0 and asked.scores_bytes == p.scores_bytes / 8


def test_a_layers_scores_a_gpu_are_cut_only_by_the_axes_that_cut_the_attention():
    from jaxgpu.pricing import fit, sizing

    assert [fit.keys_seen(s, w) for s, w in ((8192, 0), (32768, 1024), (8192, 8192), (3000, 1024))] == [
        8192, 2048, 8192, 3000]  # banded only over whole windows past one
    flash = tf.StepSettings()
    c = tf.CONFIGS["gpt2-1.5b"]  # 25 heads: tp over 8 GPUs keeps the attention whole on each
    whole = 4.0 * 25 * 1024 * 1024 * 32
    assert sizing._scores_bytes(c, "prefill", 32, 1024, flash, "tp", {tf.AXIS: 8}) == whole
    assert sizing._scores_bytes(c, "prefill", 32, 1024, flash, "fsdp", {tf.AXIS: 8}) == whole / 8
    assert sizing._scores_bytes(c, "prefill", 4, 1024, flash, "fsdp", {tf.AXIS: 8}) == whole / 32 * 4  # not split
    llama = tf.CONFIGS["llama-7b"]  # 32 heads: tp cuts them; fsdp+tp's groups cut a batch of 1 by its queries
    one = 4.0 * 32 * 4096 * 4096
    assert sizing._scores_bytes(llama, "prefill", 1, 4096, flash, "tp", {tf.AXIS: 8}) == one / 8
    assert sizing._scores_bytes(llama, "prefill", 1, 4096, flash, "fsdp+tp", {tf.AXIS: 4, tf.MODEL: 2}) == one / 8
    assert sizing._scores_bytes(llama, "train", 8, 4096, dataclasses.replace(flash, accumulate=2), "fsdp",
                                {tf.AXIS: 8}) == 4 * one / 1  # 4 sequences a micro-batch do not split over 8
    assert sizing._scores_bytes(llama, "prefill", 1, 4096, dataclasses.replace(flash, query_block=512), "fsdp",
                                {tf.AXIS: 1}) == one / 8  # a block's
    assert sizing._scores_bytes(llama, "serve", 8, 4096, tf.StepSettings(flash=False, scan=False), "tp", {}) == 0


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
    c = tf.Config("t", 2, 64, 4, 2, 128, 256, 64, "llama")
    params, tokens = tf.init(c, jax.random.key(0)), jax.random.randint(jax.random.key(3), (2, 33), 0, c.vocab)
    run = lambda s: jax.jit(jax.value_and_grad(lambda p: tf.loss(c, p, tokens, compute=jnp.float32, s=s)))(params)  # noqa: E731
    (l1, g1), (l2, g2) = run(tf.StepSettings()), run(tf.StepSettings(query_block=8))
    assert float(l2) == pytest.approx(float(l1), rel=1e-6)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-7)


def test_the_formula_and_its_difference_from_the_plan_are_printed_beside_it():
    from jaxgpu.pricing import sizing, targets

    from experiments import model

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = sizing.model_on_gpus(c, train=True, batch=4, seq=256, devices=(1,), gpus=["h100"])
    rows = model.table(plans)
    assert rows[0][2:4] == ["per GPU", "formula"]
    p = plans[0]
    assert p.estimate_bytes == pytest.approx(sum(p.estimate_parts.values()))
    assert p.bytes_per_device == pytest.approx(p.memory_split["arguments"] + p.memory_split["outputs"]
                                               + p.memory_split["temporaries"] - p.memory_split["aliased"])
    lines = model.formula_lines(plans)
    assert len(lines) == 1 and lines[0].startswith("per GPU on 1 H100 SXM: the formula counts")
    assert "gradients and the copy" in lines[0]


def test_a_sequence_longer_than_learned_positions_is_refused_in_words():
    from jaxgpu.pricing import sizing

    with pytest.raises(ValueError, match="gpt2-124m has 1,024 learned positions"):
        sizing.plan_model("gpt2-124m", "h100", train=True, seq=2048)


def test_fit_finds_the_fewest_gpus_whose_plan_holds_the_step_or_says_more_than(monkeypatch):
    """``fewest`` agrees with compiling every count: the smallest whose XLA plan fits; past the last, the plan of
    the most, not fitting ("more than 8")."""
    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 512, 8, 2, 1024, 4000, 2048, "llama")
    every = {n: sizing.plan_model(c, "h100", train=True, batch=8, seq=256, devices=n).bytes_per_device
             for n in sizing.NODE}
    assert every[1] > every[2] > every[4]
    cap = (every[2] + every[4]) / 2  # between two and four GPUs' shares: four is the fewest
    monkeypatch.setattr(sizing, "USABLE_FRACTION", cap / 80e9)
    fsdp = tf.StepSettings(mesh="fsdp")
    p = sizing.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp)
    assert p.fits and p.devices == 4
    monkeypatch.setattr(sizing, "USABLE_FRACTION", min(every.values()) / 2 / 80e9)
    p = sizing.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp)
    assert not p.fits and p.devices == 8
    assert sizing.fewest(c, "h100", train=True, batch=8, seq=256, counts=(1, 2), settings=fsdp).devices == 2
    # the mesh left to the mode: tp is tried on fewer GPUs too, and kept only where it holds the step on fewer
    tp2 = sizing.plan_model(c, "h100", train=True, batch=8, seq=256, devices=2,
                            settings=tf.StepSettings(mesh="tp")).bytes_per_device
    # on two GPUs, which split holds less is XLA's plan's to say (tp on jax 0.10, fsdp on 0.11); with the card
    # between the two, two GPUs hold the step on that one, and only there
    monkeypatch.setattr(sizing, "USABLE_FRACTION", (tp2 + every[2]) / 2 / 80e9)
    assert sizing.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp).devices == (4 if tp2 < every[2] else 2)
    p = sizing.fewest(c, "h100", train=True, batch=8, seq=256)
    assert p.fits and p.devices == 2 and p.mesh == ("tp" if tp2 < every[2] else "fsdp")
    # fsdp+tp, on four GPUs and more, where the mode's own came near there: kept where it alone holds the step
    both4, tp4 = (sizing.plan_model(c, "h100", train=True, batch=8, seq=256, devices=4,
                                    settings=tf.StepSettings(mesh=m)).bytes_per_device for m in ("fsdp+tp", "tp"))
    assert both4 < min(every[4], tp4)  # this decoder's activations, cut by tp within each pair, hold less
    monkeypatch.setattr(sizing, "USABLE_FRACTION", (both4 + min(every[4], tp4)) / 2 / 80e9)
    p = sizing.fewest(c, "h100", train=True, batch=8, seq=256)
    assert p.fits and p.devices == 4 and p.mesh == "fsdp 2 x tp 2"
    assert sizing.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp).devices == 8
    # where no count holds it on the mode's own mesh, the others are tried on the most too: a batch of 4 does not
    # split over 8 GPUs under fsdp, but does over fsdp+tp's 4 pairs
    fsdp8, both8 = (sizing.plan_model(c, "h100", train=True, batch=4, seq=512, devices=8,
                                      settings=tf.StepSettings(mesh=m)).bytes_per_device for m in ("fsdp", "fsdp+tp"))
    assert both8 < fsdp8
    monkeypatch.setattr(sizing, "USABLE_FRACTION", (both8 + fsdp8) / 2 / 80e9)
    p = sizing.fewest(c, "h100", train=True, batch=4, seq=512)
    assert p.fits and p.devices == 8 and p.mesh == "fsdp 4 x tp 2"


def test_the_fit_option_prints_the_fewest_per_gpu(tmp_path):
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "experiments.model", "--train", "--fit", "--gpus", "h100,l4", "--batch", "4",
           "--seq", "256", "--tokens", "1e9", "--layers", "2", "--d-model", "256", "--heads", "8", "--kv-heads", "2",
           "--ffn", "512", "--vocab", "1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "per GPU the fewest of 1, 2, 4, 8 that hold it" in proc.stdout
    import re

    rows = [re.split(r"\s{2,}", ln) for ln in proc.stdout.splitlines() if ln.startswith(("H100 SXM", "L4 "))]
    assert [r[:2] for r in rows] == [["H100 SXM", "1 (fsdp)"], ["L4", "1 (fsdp)"]], rows  # small: one holds it


def test_a_figure_per_answer_memory_by_kind_against_each_card_and_time_by_kernel_kind(tmp_path):
    """The model command's figure (--out PATH writes PATH.png), by the report's palette rules; each bar's parts sum
    to the plan's bytes and its predicted device time."""
    from jaxgpu.pricing import sizing, targets
    from jaxgpu.records import figures

    from tests import test_palette

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = sizing.model_on_gpus(c, train=True, batch=4, seq=256, devices=(1, 2), gpus=["h100", "a100"])
    for p in plans:
        # each kind priced alone: within a tenth of the step priced whole (a tiny step's launches weigh most)
        assert set(p.time_split) == set(sizing.KINDS) and sum(p.time_split.values()) == pytest.approx(p.seconds,
                                                                                                       rel=0.1)
        assert p.capacity == pytest.approx(0.75 * {"H100 SXM": 80, "A100 80GB": 80}[p.gpu] * 1e9)
    fig = figures.step_figure(plans, "a described decoder")
    fig.draw_without_rendering()
    plot = [figures.Plot("step", fig, "")]
    test_palette.check_colours(plot)
    test_palette.check_legends(plot)
    test_palette.check_labels(plot)
    bars = [b for b in fig.axes[0].patches if b.get_gid() == "variant:held between steps"]
    assert len(bars) == 4


# ---- a decoder described by a Hugging Face-style config.json --------------------------------------------------
TINY_HF = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 256, "hidden_act": "silu", "tie_word_embeddings": True,
           "max_position_embeddings": 64, "rope_theta": 10000.0, "model_type": "mistral", "sliding_window": 32}


def test_a_config_json_decoder_matches_a_float64_reference_with_its_head_tied():
    c, unread = tf.from_hf_config(TINY_HF, "tiny")
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


@pytest.mark.parametrize("change, said", [
    ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok (9): between 1 and"),
    ({"hidden_act": "relu"}, "hidden_act ('relu')"),
    ({"attention_bias": True}, "attention_bias (true): biases are not built"),
    ({"vocab_size": None}, "needs vocab_size"),
])
def test_a_config_field_that_cannot_be_honoured_is_named(change, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        tf.from_hf_config({**TINY_HF, **change}, "tiny")
    assert tf.from_hf_config(TINY_HF, "tiny")[0].window == 32  # each token sees the last 32
    assert tf.from_hf_config({**TINY_HF, "use_sliding_window": False}, "tiny")[0].window == 0
    c, unread = tf.from_hf_config({**TINY_HF, "tie_word_embeddings": None, "router_z_loss": 1.0}, "t")
    assert unread == ["router_z_loss"]  # named back, not silently dropped
    gemma, _ = tf.from_hf_config({**TINY_HF, "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh",
                                  "head_dim": 32, "tie_word_embeddings": False}, "g")
    assert gemma.tied is False and gemma.mlp == "geglu" and gemma.head_dim == 32  # said false: untied
    assert tf.from_hf_config({k: v for k, v in TINY_HF.items() if k != "tie_word_embeddings"} | {"model_type": "gemma"},
                             "g")[0].tied  # absent: Gemma's class ties


def test_the_command_plans_a_config_json_for_training_and_serving(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**TINY_HF, "foo": 1}))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for mode in ("--train", "--serve"):
        proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), mode, "--gpus", "h100",
                               "--devices", "1", "--batch", "2", "--seq", "16"], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("tiny, one ") and "xla:gpu h100" in proc.stdout
        assert "fields not read, which the plan does not reflect: foo" in proc.stdout
    path.write_text(json.dumps({**TINY_HF, "hidden_act": "relu"}))
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), "--seq", "64"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "hidden_act ('relu')" in proc.stderr


# ---- a mixture of experts ------------------------------------------------------------------------------------
MOE = tf.Config("test-moe", 2, 64, 4, 2, 96, 256, 64, "llama", experts=4, top_k=2)


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
    monkeypatch.setattr(tf, "CAPACITY", float(MOE.experts))  # room for every token in every expert: none dropped
    w = {k: v[0] for k, v in tf.init(MOE, jax.random.key(5))["layers"].items()}
    w = {k: 10 * v if v.ndim > 1 else v for k, v in w.items()}
    h = jax.random.normal(jax.random.key(6), (2, 16, MOE.d_model), jnp.float32)
    got = jax.jit(lambda h, w: tf._moe(MOE, h, w, tf._swiglu))(h, w)
    ref = _np_moe(MOE, np.asarray(h, np.float64).reshape(-1, MOE.d_model),
                  {k: np.asarray(v, np.float64) for k, v in w.items()}).reshape(h.shape)
    assert np.linalg.norm(ref) > 0 and np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref) < 1e-5
    counts = np.bincount(np.argsort(-(np.asarray(h).reshape(-1, 64) @ np.asarray(w["router"])), 1)[:, :2].ravel(), None,
                         MOE.experts)
    assert counts.min() > 0  # every expert took tokens: each path was checked


def test_mixtral_is_counted_as_published_and_its_experts_split_over_the_gpus():
    """Mixtral 8x7B: 46.7 B parameters, 12.9 B read a token (its model card); the formula counts both within 1%;
    on 8 GPUs each holds its own expert's matrices (experts split over devices)."""
    from jaxgpu.pricing import sizing

    c = tf.CONFIGS["mixtral-8x7b"]
    assert 46.6e9 < c.params() < 46.8e9 and 12.8e9 < c.active_params() < 13.0e9
    assert sizing._fit_shape(c).params == pytest.approx(c.params(), rel=0.01)
    mesh = _mesh(4)
    for how in ("fsdp", "tp"):
        specs = tf.shard_specs(tf.param_specs(MOE)["layers"], mesh, how)
        assert all(specs[k].spec[1] == tf.AXIS for k in ("w_gate", "w_up", "w_down")), (how, specs)


def test_a_mixtral_shaped_moe_trains_and_serves_on_xla_gpus_plan_its_experts_split(tmp_path):
    """A small Mixtral-shaped decoder (4 experts, 2 a token) through a train step and a decode step, on 1 and 4
    GPUs: XLA:GPU plans both; split over 4 each GPU holds its own expert, and the model FLOPs count the top-k
    experts' weights only. The same through a config.json and the command."""
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import sizing, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = tf.Config("moe", 2, 256, 8, 2, 384, 1000, 2048, "llama", experts=4, top_k=2)
    for mode in ("train", "serve"):
        one, four = (sizing.plan_model(c, "h100", mode=mode, batch=8, seq=256, devices=n) for n in (1, 4))
        assert one.plan == four.plan == "xla:gpu h100" and four.bytes_per_device < one.bytes_per_device
        assert one.mfu == pytest.approx(one.tokens_per_s * (6 if mode == "train" else 2) * c.active_params()
                                        / 989.4e12, rel=1e-6)
    with pytest.raises(ValueError, match="int8 or fp8 experts are not built"):
        sizing.plan_model(c, "h100", mode="serve", settings=tf.StepSettings(flash=False, scan=False, weights="int8"))
    path = tmp_path / "moe" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**TINY_HF, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}))
    assert tf.from_hf_config(json.loads(path.read_text()), "moe")[0].experts == 4
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for mode in ("--train", "--serve"):
        proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), mode, "--gpus", "h100",
                               "--devices", "1,4", "--batch", "4", "--seq", "16"], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0 and proc.stderr == "" and "xla:gpu h100" in proc.stdout, proc.stderr


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
