"""LoRA and QLoRA: NF4 storage and the adapters' products against float64 numpy, the fine-tuning step, and what its
plan holds beside the full step's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground.decoders import NF4_BLOCK, Decoder, StepSettings
from jaxgpu.kernels import stored
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import planner

TINY = Decoder("tiny-lora", 2, 128, 4, 2, 256, 97, 64, "llama")


def _nf4_numpy(w: np.ndarray) -> np.ndarray:
    """NF4 as QLoRA defines it, in float64: each block of NF4_BLOCK inputs over its absmax, each value the nearest of
    the 16 levels, times the absmax again."""
    levels = np.asarray(stored.NF4_LEVELS, np.float64)
    n, m = w.shape
    blocks = w.astype(np.float64).reshape(n // NF4_BLOCK, NF4_BLOCK, m)
    absmax = np.abs(blocks).max(axis=1, keepdims=True)
    idx = np.abs((blocks / absmax)[..., None] - levels).argmin(axis=-1)
    return (levels[idx] * absmax).reshape(n, m)


def test_nf4_storage_is_qlora_s_and_widens_back_to_numpy_s_float64_values():
    """Two codes a byte, an absmax a block: a quarter of bf16's bytes and a little more; widened, each value is the
    float64 reference's level times its block's absmax, and within half the widest gap between levels of the input."""
    w = np.random.default_rng(0).standard_normal((256, 96)).astype(np.float32)
    packed, absmax = stored.quantize_nf4(jnp.asarray(w))
    assert packed.dtype == jnp.uint8 and packed.shape == (256, 48) and absmax.shape == (256 // NF4_BLOCK, 96)
    back = np.asarray(stored.widened(packed, absmax, jnp.float32), np.float64)
    ref = _nf4_numpy(w)
    np.testing.assert_allclose(back, ref, rtol=1e-6, atol=1e-7)
    gap = np.diff(stored.NF4_LEVELS).max() / 2
    assert np.all(np.abs(back - w) <= gap * np.repeat(np.abs(w.reshape(4, 64, 96)).max(1), 64, 0) + 1e-6)
    specs = tf.stored_specs({"wo": jax.ShapeDtypeStruct((2, 256, 96), jnp.bfloat16)}, "nf4")
    nbytes = sum(s.size * s.dtype.itemsize for s in specs.values())
    assert nbytes / (2 * 256 * 96 * 2) == pytest.approx((0.5 + 4 / NF4_BLOCK) / 2)


@pytest.mark.parametrize("base", ["bf16", "int8", "nf4"])
def test_the_adapters_forward_and_backward_match_float64_numpy(base):
    """y = h W + s (h A) B with W frozen (stored as ``base``): y and the gradients of h, A and B against float64
    numpy's closed forms (dA = s h^T (g B^T), dB = s (h A)^T g, dh = g W^T + s (g B^T) A^T); none reaches W."""
    rng = np.random.default_rng(1)
    h, w = rng.standard_normal((6, 128)), rng.standard_normal((128, 64)) * 0.1
    a, b, g = rng.standard_normal((128, 8)) * 0.1, rng.standard_normal((8, 64)) * 0.1, rng.standard_normal((6, 64))
    layer = {"wo": jnp.asarray(w, jnp.float32)}
    if base != "bf16":  # the frozen matrix stored narrow; the reference multiplies by its widened values
        q = tf.quantize({"layers": {"wo": jnp.asarray(w[None], jnp.float32)}}, base, jnp.float32)["layers"]
        layer = {"wo": q["wo"][0], "wo_scale": q["wo_scale"][0]}
        w = np.asarray(stored.widened(layer["wo"], layer["wo_scale"], jnp.float32), np.float64)
    s = tf.LORA_SCALE

    def y(h_, a_, b_):
        return tf._lin(h_, {**layer, "wo_lora_a": a_, "wo_lora_b": b_}, "wo")

    f32 = [jnp.asarray(x, jnp.float32) for x in (h, a, b)]
    out, pull = jax.vjp(y, *f32)
    dh, da, db = pull(jnp.asarray(g, jnp.float32))
    np.testing.assert_allclose(np.asarray(out), h @ w + s * (h @ a) @ b, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(da), s * h.T @ (g @ b.T), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(db), s * (h @ a).T @ g, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(dh), g @ w.T + s * (g @ b.T) @ a.T, rtol=2e-5, atol=2e-5)


def _adapters(settings, key=0, b_scale=0.0):
    """Adapters for TINY: A small and random, B zeros (LoRA's start) or random."""
    specs = tf.lora_specs(TINY, 4, 16, settings)[1]
    keys = iter(jax.random.split(jax.random.key(key), len(specs)))
    return {k: (0.02 if k.endswith("_a") else b_scale) * jax.random.normal(next(keys), s.shape, s.dtype)
            for k, s in specs.items()}


@pytest.mark.parametrize("base", ["bf16", "nf4"])
def test_a_lora_step_starts_at_the_base_s_loss_trains_the_adapters_alone_and_lowers_the_loss(base):
    """B = 0: the adapted model is the base (its loss the full step's own on the same weights); steps on one batch
    lower the loss, change A and B and hand back no base weight."""
    s = StepSettings(lora=4, weights=base, accumulate=2)
    params = tf.init(TINY, jax.random.key(0))
    frozen = tf.quantize(params, base) if base != "bf16" else jax.tree.map(lambda a: a.astype(jnp.bfloat16), params)
    assert jax.tree.structure(frozen) == jax.tree.structure(tf.lora_specs(TINY, 4, 16, s)[0])
    tokens = jax.random.randint(jax.random.key(1), (4, 17), 0, TINY.vocab)
    step, opt = tf.lora_step(TINY, s, lr=1e-2)
    adapters = _adapters(s)
    state = opt.init(adapters)
    first_b = np.asarray(adapters["wqkv_lora_b"])  # the step donates its adapters
    losses = []
    for _ in range(5):
        adapters, state, lv = step(frozen, adapters, state, tokens)
        losses.append(float(lv))
    base_loss = float(tf.loss(TINY, jax.tree.map(lambda a: a.astype(jnp.float32), frozen) if base == "bf16"
                              else params, tokens))
    assert losses[0] == pytest.approx(base_loss, rel=0.05 if base == "nf4" else 1e-3)
    assert losses[-1] < losses[0] - 0.05
    assert set(adapters) == set(TINY.adapter_shapes(4)) and not np.allclose(adapters["wqkv_lora_b"], first_b)


def test_lora_targets_and_the_adapters_count():
    """Every matrix of a layer, or the attention's: A [L, in, r] and B [L, r, out] beside each."""
    shapes = TINY.adapter_shapes(8)
    assert set(shapes) == {f"{m}_lora_{p}" for m in ("wqkv", "wo", "w_gate", "w_up", "w_down") for p in "ab"}
    assert shapes["w_down_lora_a"] == (2, 256, 8) and shapes["wqkv_lora_b"] == (2, 8, 128 + 2 * 2 * 32)
    assert set(TINY.adapter_shapes(8, "attention")) == {"wqkv_lora_a", "wqkv_lora_b", "wo_lora_a", "wo_lora_b"}
    assert TINY.adapter_params(8) == sum(int(np.prod(v)) for v in shapes.values())
    with pytest.raises(ValueError, match="QLoRA"):
        StepSettings(weights="nf4")
    with pytest.raises(KeyError, match="LoRA targets"):
        StepSettings(lora=8, lora_on="mlp")


def test_a_7b_lora_fine_tune_holds_under_60_percent_of_the_full_step_and_qlora_less_still():
    """Llama-2 7B on one H100, a batch of 4 x 1,024: XLA's plan of the LoRA step holds at most 60% of the full
    step's bytes (no gradients or AdamW state for the base), an NF4 base less again; the base's bytes between steps
    as counted by hand (bf16: 2 bytes a weight; NF4: half a byte and a float32 absmax a block), the formula beside the
    plan within a sixth; the step is cheaper than the full one (no gradients of the frozen weights)."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    plans = {k: planner.plan_model("llama-7b", "h100", batch=4, seq=1024, settings=StepSettings(**kw))
             for k, kw in (("full", {}), ("lora", {"lora": 16}), ("qlora", {"lora": 16, "weights": "nf4"}))}
    full, lora, qlora = (plans[k] for k in ("full", "lora", "qlora"))
    assert lora.bytes_per_device <= 0.6 * full.bytes_per_device
    assert qlora.bytes_per_device < lora.bytes_per_device - 5e9
    c = planner.decoders.find("llama-7b")
    matrices = c.layers * sum(np.prod(s) for s in c.layer_shapes().values() if len(s) == 2)
    rest = c.params() - matrices
    adapters = 12 * c.adapter_params(16)  # fp32 weights and two moments, between steps
    for p, per_weight in ((lora, 2.0), (qlora, 0.5 + 4 / NF4_BLOCK)):
        held = p.memory_split["arguments"]
        assert held == pytest.approx(matrices * per_weight + 2 * rest + adapters, rel=0.01)
        assert p.estimate_bytes == pytest.approx(p.bytes_per_device, rel=1 / 6)
        assert p.seconds < full.seconds and "LoRA rank 16 on all matrices" in p.settings
    assert "nf4 base weights" in qlora.settings


def test_lora_refuses_what_it_does_not_build():
    """Serving with adapters, a mixture of experts, fp8 products: one line each, never a half-built step."""
    moe = Decoder("tiny-moe", 2, 128, 4, 2, 256, 97, 64, "llama", experts=4, top_k=2)
    for model, mode, kw, said in ((TINY, "serve", {"lora": 8, "flash": False}, "training step"),
                                  (moe, "train", {"lora": 8}, "mixture"),
                                  (TINY, "train", {"lora": 8, "matmul": "fp8"}, "fp8")):
        with pytest.raises(ValueError, match=said):
            planner.plan_model(model, "h100", mode=mode, batch=2, seq=64, settings=StepSettings(**kw))


def test_the_model_command_prices_a_qlora_step_and_says_how():
    """``--lora R --weights nf4``: the settings said in the header, the formula's frozen weights and adapters beside
    XLA's plan in the line under the table."""
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--layers", "2", "--d-model", "128", "--heads",
                           "4", "--kv-heads", "2", "--ffn", "256", "--vocab", "128", "--train", "--lora", "4",
                           "--weights", "nf4", "--batch", "4", "--seq", "64", "--devices", "1", "--gpus", "h100"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "LoRA rank 4 on all matrices, nf4 base weights" in proc.stdout
    assert "of frozen weights" in proc.stdout and "of adapters with their gradients" in proc.stdout
