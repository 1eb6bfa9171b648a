"""Models that are not decoders, in Flax: a Vision Transformer (Dosovitskiy et al. 2021) and a T5 v1.1
encoder-decoder (Raffel et al. 2020), as JAX-Toolbox's and T5X's published GPU runs train them. ``price_step``
(``jaxgpu.pricing.anystep``) prices a step of either, or of any model a user writes, on N GPUs.

Each is the model as its paper and the reference code define it (the sizes in ``VIT_SIZES`` and ``T5_SIZES``),
computing in bf16 with fp32 parameters; ``*_train_step`` gives an AdamW step of it, written as a user would write one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

# (width, layers, heads, MLP width, patch): the ViT paper's Table 1 and its patch sizes
VIT_SIZES = {"vit-b/16": (768, 12, 12, 3072, 16), "vit-l/16": (1024, 24, 16, 4096, 16),
             "vit-h/14": (1280, 32, 16, 5120, 14)}
# (width, layers each of encoder and decoder, heads, d_ff): the T5 v1.1 checkpoints' configs (d_kv 64, vocab 32,128)
T5_SIZES = {"t5-v1.1-small": (512, 8, 6, 1024), "t5-v1.1-base": (768, 12, 12, 2048),
            "t5-v1.1-large": (1024, 24, 16, 2816), "t5-v1.1-xl": (2048, 24, 32, 5120),
            "t5-v1.1-xxl": (4096, 24, 64, 10240)}
T5_VOCAB = 32128
BF16 = jnp.bfloat16


class _Block(nn.Module):
    """A pre-norm ViT block: LayerNorm, multi-head self-attention, LayerNorm, a GELU MLP."""

    heads: int
    mlp: int

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(dtype=BF16)(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, dtype=BF16)(h, h)
        h = nn.Dense(self.mlp, dtype=BF16)(nn.LayerNorm(dtype=BF16)(x))
        return x + nn.Dense(x.shape[-1], dtype=BF16)(nn.gelu(h))


class ViT(nn.Module):
    """A Vision Transformer classifier: ``patch`` x ``patch`` patches embedded by a strided convolution, a class
    token and learned positions, ``layers`` blocks, a LayerNorm and a linear head on the class token."""

    width: int = 768
    layers: int = 12
    heads: int = 12
    mlp: int = 3072
    patch: int = 16
    classes: int = 1000

    @nn.compact
    def __call__(self, images):
        x = nn.Conv(self.width, (self.patch, self.patch), strides=self.patch, dtype=BF16)(images)
        x = x.reshape(x.shape[0], -1, self.width)
        cls = self.param("cls", nn.initializers.zeros, (1, 1, self.width))
        x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, self.width)).astype(x.dtype), x], axis=1)
        x = x + self.param("pos", nn.initializers.normal(0.02), (1, x.shape[1], self.width)).astype(x.dtype)
        for _ in range(self.layers):
            x = _Block(self.heads, self.mlp)(x)
        return nn.Dense(self.classes, dtype=BF16)(nn.LayerNorm(dtype=BF16)(x[:, 0]))


def vit(name: str = "vit-b/16", classes: int = 1000) -> ViT:
    """A ViT of ``VIT_SIZES`` by name."""
    width, layers, heads, mlp, patch = VIT_SIZES[name.lower()]
    return ViT(width, layers, heads, mlp, patch, classes)


def _buckets(q: int, k: int, bidirectional: bool, n: int = 32, far: int = 128) -> jax.Array:
    """T5's relative-position buckets [q, k]: exact for near offsets, log-spaced to ``far``, one bucket beyond
    (the sign apart where ``bidirectional``), as the T5 paper's Mesh TensorFlow code defines them."""
    rel = jnp.arange(k)[None, :] - jnp.arange(q)[:, None]
    out = jnp.zeros_like(rel)
    if bidirectional:
        n //= 2
        out += (rel > 0) * n
        rel = jnp.abs(rel)
    else:
        rel = -jnp.minimum(rel, 0)
    exact = n // 2
    log = exact + (jnp.log(jnp.maximum(rel, 1) / exact) / math.log(far / exact) * (n - exact)).astype(jnp.int32)
    return out + jnp.where(rel < exact, rel, jnp.minimum(log, n - 1))


class _Attention(nn.Module):
    heads: int
    d_kv: int = 64

    @nn.compact
    def __call__(self, x, kv, bias):
        dense = lambda name: nn.DenseGeneral((self.heads, self.d_kv), use_bias=False, dtype=BF16, name=name)
        q, k, v = dense("q")(x), dense("k")(kv), dense("v")(kv)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) + bias  # T5 does not scale by sqrt(d)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores).astype(BF16), v)
        return nn.DenseGeneral(x.shape[-1], axis=(-2, -1), use_bias=False, dtype=BF16, name="o")(out)


class _T5Layer(nn.Module):
    """A T5 v1.1 layer: RMS-normed self-attention (with cross-attention in the decoder) and a gated-GELU MLP."""

    heads: int
    d_ff: int
    decoder: bool = False

    @nn.compact
    def __call__(self, x, bias, memory=None):
        norm = lambda: nn.RMSNorm(dtype=BF16)
        h = norm()(x)
        x = x + _Attention(self.heads)(h, h, bias)
        if self.decoder:
            h = norm()(x)
            x = x + _Attention(self.heads)(h, memory, 0.0)
        h = norm()(x)
        gate = nn.gelu(nn.Dense(self.d_ff, use_bias=False, dtype=BF16)(h), approximate=True)
        return x + nn.Dense(x.shape[-1], use_bias=False, dtype=BF16)(gate * nn.Dense(self.d_ff, use_bias=False,
                                                                                     dtype=BF16)(h))


class T5(nn.Module):
    """A T5 v1.1 encoder-decoder: a shared embedding, ``layers`` encoder and ``layers`` decoder layers with learned
    relative-position biases, an output head of its own. Called on (inputs, decoder inputs), gives the logits."""

    width: int = 768  # d_model
    layers: int = 12
    heads: int = 12
    d_ff: int = 2048
    vocab: int = T5_VOCAB

    @nn.compact
    def __call__(self, inputs, targets_in):
        embed = nn.Embed(self.vocab, self.width, dtype=BF16)
        bias = lambda q, k, both, name: nn.Embed(32, self.heads, name=name)(_buckets(q, k, both)).transpose(2, 0, 1)
        x = embed(inputs)
        enc_bias = bias(inputs.shape[1], inputs.shape[1], True, "encoder_bias")
        for _ in range(self.layers):
            x = _T5Layer(self.heads, self.d_ff)(x, enc_bias)
        memory = nn.RMSNorm(dtype=BF16)(x)
        t = targets_in.shape[1]
        causal = jnp.where(jnp.tril(jnp.ones((t, t), bool)), 0.0, -1e9)
        dec_bias = bias(t, t, False, "decoder_bias") + causal
        y = embed(targets_in)
        for _ in range(self.layers):
            y = _T5Layer(self.heads, self.d_ff, decoder=True)(y, dec_bias, memory)
        return nn.Dense(self.vocab, use_bias=False, dtype=BF16)(nn.RMSNorm(dtype=BF16)(y))


def t5(name: str = "t5-v1.1-base") -> T5:
    """A T5 v1.1 of ``T5_SIZES`` by name."""
    d, layers, heads, d_ff = T5_SIZES[name.lower()]
    return T5(d, layers, heads, d_ff)


@dataclasses.dataclass(frozen=True)
class Step:
    """A model's AdamW train step and the shapes it takes: ``step(params, opt_state, *batch)`` returns the new
    params and state; ``specs`` the params', state's and batch's ``jax.ShapeDtypeStruct``s (nothing allocated)."""

    step: Any
    specs: tuple


def vit_train_step(model: ViT, batch: int, image: int = 224, lr: float = 1e-3) -> Step:
    """An AdamW step of ``model`` on ``batch`` RGB images of ``image`` pixels a side (bf16) and their labels."""
    images = jax.ShapeDtypeStruct((batch, image, image, 3), BF16)
    labels = jax.ShapeDtypeStruct((batch,), jnp.int32)
    opt = optax.adamw(lr)

    def step(params, opt_state, images, labels):
        def loss(p):
            logits = model.apply(p, images).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        grads = jax.grad(loss)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params = jax.eval_shape(model.init, jax.random.key(0), images)
    return Step(step, (params, jax.eval_shape(opt.init, params), images, labels))


def t5_train_step(model: T5, batch: int, inputs: int = 512, targets: int = 128, lr: float = 1e-3) -> Step:
    """An AdamW step of ``model`` on ``batch`` pairs of ``inputs`` and ``targets`` tokens (teacher forcing: the
    decoder reads the targets shifted right)."""
    src = jax.ShapeDtypeStruct((batch, inputs), jnp.int32)
    tgt = jax.ShapeDtypeStruct((batch, targets), jnp.int32)
    opt = optax.adamw(lr)

    def step(params, opt_state, src, tgt):
        def loss(p):
            shifted = jnp.pad(tgt[:, :-1], ((0, 0), (1, 0)))
            logits = model.apply(p, src, shifted).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, tgt).mean()

        grads = jax.grad(loss)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params = jax.eval_shape(model.init, jax.random.key(0), src, tgt)
    return Step(step, (params, jax.eval_shape(opt.init, params), src, tgt))
