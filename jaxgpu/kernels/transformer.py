"""A decoder-only transformer's layers and steps as plain JAX functions, for any ``jaxgpu.ground.decoders.Decoder``.

Parameters are a dict of arrays whose per-layer entries are stacked on a leading axis and run under one
``lax.scan``, so compile time does not grow with depth. GPT-2 blocks use LayerNorm with biases, GELU and
learned positions; Llama blocks RMSNorm, rotary positions, SwiGLU and grouped-query attention. Attention
is XLA's (scores materialised, then softmax): what ``jax.jit`` makes of it without a fused kernel.

``train_step`` is one optimizer step (AdamW, float32 master weights, ``compute`` dtype for the matrix
products), optionally over several micro-batches (gradient accumulation) and updating only a 1/N share
of the layers' weights (what one GPU of N updates under ZeRO-1 or FSDP; the collectives are not part of
it). ``decode_step`` generates one token against a KV cache. Both take ``jax.ShapeDtypeStruct``s from
``param_specs`` / ``decode_specs``, so a 70B step compiles without a byte allocated. How the arrays are split
over GPUs is ``jaxgpu.kernels.sharding``'s.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import experts
from jaxgpu.kernels.checkpoints import remat, tag
from jaxgpu.kernels.fp8 import fp8_mm
from jaxgpu.kernels.sharding import MODEL, residual_layout, sequence_parallel
from jaxgpu.kernels.stored import STORED, frozen_mm, quantize, stored_specs, widened  # noqa: F401 (quantize: tf.quantize)


def param_specs(c: Decoder, dtype: Any = jnp.float32) -> dict:
    """The parameters' shapes (``Decoder.shapes``) in ``dtype``, nothing allocated."""
    return jax.tree.map(lambda shape: jax.ShapeDtypeStruct(shape, dtype), c.shapes(),
                        is_leaf=lambda x: isinstance(x, tuple))


def init(c: Decoder, key: jax.Array, dtype: Any = jnp.float32) -> dict:
    """Random parameters (normal, std 0.02; norms' gains 1, biases 0)."""
    specs = param_specs(c, dtype)
    leaves, tree = jax.tree.flatten(specs)
    keys = jax.random.split(key, len(leaves))
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(specs)[0]]

    def one(k, s, path):
        if "norm" in path or "ln" in path and "_g" in path:
            return jnp.ones(s.shape, s.dtype) if not path.endswith("_b']") else jnp.zeros(s.shape, s.dtype)
        if "b_" in path or path.endswith("_b']"):
            return jnp.zeros(s.shape, s.dtype)
        return (0.02 * jax.random.normal(k, s.shape, jnp.float32)).astype(s.dtype)

    return jax.tree.unflatten(tree, [one(k, s, p) for k, s, p in zip(keys, leaves, paths)])


# A norm keeps only its input for the backward pass (recomputed in the backward's own kernel, as llm.c's and Apex's
# fused layernorms keep x and two scalars a row): left to autodiff it saves four float32 copies of its input.
@functools.partial(jax.checkpoint, static_argnums=(3,))
def _norm(x, g, b, style: str):
    x32 = x.astype(jnp.float32)
    if style == "gpt2":
        mu = x32.mean(-1, keepdims=True)
        var = ((x32 - mu) ** 2).mean(-1, keepdims=True)
        y = (x32 - mu) * jax.lax.rsqrt(var + 1e-5) * g + b
    else:
        y = x32 * jax.lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-5) * g
    return y.astype(x.dtype)


def _rope(x, positions):
    """Rotary positions on the last axis of x [B, T, H, hd] (pairs split in halves, base 10000)."""
    hd = x.shape[-1]
    freq = 10000.0 ** (-jnp.arange(0, hd // 2, dtype=jnp.float32) * 2 / hd)
    ang = positions[:, :, None, None].astype(jnp.float32) * freq
    cos, sin = jnp.cos(ang).astype(x.dtype), jnp.sin(ang).astype(x.dtype)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


FLASH_SCOPE = "flash_attention"

# a LoRA adapter's output is scaled by alpha / rank: alpha = 2 x rank, as NeMo's (32 over 16) and torchtune's (16
# over 8) defaults set it (a constant: it changes no cost)
LORA_SCALE = 2.0


def _mm(a, b, matmul: str = "bf16"):
    """A matrix product as the step's settings run it: ``a @ b``, or ``fp8.fp8_mm``."""
    return fp8_mm(a, b) if matmul == "fp8" else a @ b


def _lin(h, w, name: str, matmul: str = "bf16"):
    """``h`` times the layer's matrix ``name`` as the step holds it: a product in the step's type (``_mm``), or of a
    frozen matrix stored narrow beside ``<name>_scale`` (``frozen_mm``); plus, where the step trains LoRA adapters on
    it (``<name>_lora_a``, ``<name>_lora_b``), (h A) B x ``LORA_SCALE``."""
    y = frozen_mm(h, w[name], w[name + "_scale"]) if name + "_scale" in w else _mm(h, w[name], matmul)
    if name + "_lora_a" in w:
        y = y + (h @ w[name + "_lora_a"]) @ w[name + "_lora_b"] * LORA_SCALE
    return y


class Causal(NamedTuple):
    """A causal mask left unbuilt (queries' positions [B, T], keys' [B, S], keys under ``within`` behind a query seen),
    built where used from positions carrying their sharding: a context-parallel GPU builds its own queries' rows."""
    q: Any; k: Any; within: Any  # noqa: E702 - three fields, one line
    def build(self) -> jax.Array:
        gap = self.q[:, :, None] - self.k[:, None, :]
        return (gap >= 0) & (gap < self.within)


def _attention(q, k, v, mask, flash: bool = False, query_block: int = 0):
    """q [B, T, H, hd], k/v [B, S, KV, hd]; heads grouped over the KV heads; softmax in float32; ``mask``
    [T, S] or [B, T, S]. ``flash``: the same arithmetic under the name ``FLASH_SCOPE``, which
    ``jaxgpu.pricing.roofline`` prices as one fused attention kernel (as FlashAttention or cuDNN run it);
    ``query_block`` (with flash): a block of that many queries at a time (``StepSettings.query_block``)."""
    if flash and query_block and q.shape[1] > query_block and q.shape[1] % query_block == 0:
        return _attention_in_blocks(q, k, v, mask, query_block)
    if flash:
        # as FlashAttention's backward pass does, the scores are recomputed from q and k rather than saved:
        # what the pass keeps for the backward is q, k and v (the scores never reach memory in the fused kernel)
        return jax.checkpoint(functools.partial(_attention_math, flash=True))(q, k, v, mask)
    return _attention_math(q, k, v, mask, False)


def _attention_in_blocks(q, k, v, mask, block: int):
    """``_attention`` with flash, ``block`` queries at a time: a scan whose body is checkpointed, so the backward pass
    recomputes one block's scores at a time as well, rather than keep every block's."""
    b, t, h, hd = q.shape
    n = t // block
    qs = q.reshape(b, n, block, h, hd).swapaxes(0, 1)
    lazy = isinstance(mask, Causal)  # each block builds its own rows from its queries' positions
    ms = (mask.q.reshape(b, n, block).swapaxes(0, 1) if lazy else mask.reshape(n, block, -1) if mask.ndim == 2
          else mask.reshape(b, n, block, -1).swapaxes(0, 1))
    rows = (lambda m: Causal(m, mask.k, mask.within)) if lazy else (lambda m: m)
    body = jax.checkpoint(lambda _, qm: (None, _attention_math(qm[0], k, v, rows(qm[1]), flash=True)))
    return jax.lax.scan(body, None, (qs, ms))[1].swapaxes(0, 1).reshape(b, t, -1)


def _windowed(q, k, v, window: int, flash: bool):
    """Sliding-window attention over blocks of ``window`` queries, each against its own block and the one before
    (2 x window keys, masked to the window): t x 2 window scores a head, not t^2, as a windowed kernel runs it."""
    b, t, h, hd = q.shape
    nb = t // window

    def blocks(a):
        a = a.reshape(b, nb, window, *a.shape[2:])
        before = jnp.concatenate([jnp.zeros_like(a[:, :1]), a[:, :-1]], axis=1)
        return jnp.concatenate([before, a], axis=2).reshape(b * nb, 2 * window, *a.shape[3:])
    i, j = jnp.arange(window)[:, None], jnp.arange(2 * window)[None, :] - window  # j: key offset from block start
    inside = (j <= i) & (i - j < window)
    first = inside & (j >= 0)  # the first block has no block before it
    mask = jnp.broadcast_to(jnp.where(jnp.arange(nb)[:, None, None] == 0, first, inside)[None],
                            (b, nb, window, 2 * window)).reshape(b * nb, window, 2 * window)
    out = _attention(q.reshape(b * nb, window, h, hd), blocks(k), blocks(v), mask, flash)
    return out.reshape(b, t, h * hd)


def _attention_math(q, k, v, mask, flash: bool):
    with jax.named_scope(FLASH_SCOPE if flash else "attention"):
        b, t, h, hd = q.shape
        kv = k.shape[2]
        q = q.reshape(b, t, kv, h // kv, hd)
        s = jnp.einsum("btgrd,bsgd->bgrts", q, k).astype(jnp.float32) / math.sqrt(hd)
        if isinstance(mask, Causal):
            mask = mask.build()
        m = mask[None, None, None] if mask.ndim == 2 else mask[:, None, None]
        s = jnp.where(m, s, -1e30)
        p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        return jnp.einsum("bgrts,bsgd->btgrd", p, v).reshape(b, t, h * hd)


# The MLP's activation keeps only its inputs (the products' outputs) for the backward pass, which recomputes the rest
# inside its own kernel, as llm.c's GELU backward and Transformer Engine's fused MLP do. Left to autodiff, a tanh GELU
# saves five tensors the size of the hidden layer (x, x^3, tanh, ...): GPT-2 350M at 64 x 1024 tokens a GPU held
# 158 GB on XLA:GPU's A100 plan, where llm.c trains it in 80.
_gelu_bias = jax.checkpoint(lambda z, b: jax.nn.gelu(z + b))
_swiglu = jax.checkpoint(lambda g, u: jax.nn.silu(g) * u)
# (not GeGLU: recomputed so, XLA:GPU 0.10's cuBLASLt GELU epilogue with an auxiliary output fails a RET_CHECK in its
# thunk emitter, so its gate keeps autodiff's residuals)
def _geglu(g, u):
    return jax.nn.gelu(g, approximate=True) * u


def _heads(qkv, c: Decoder):
    """q [B, T, H, hd], k and v [B, T, KV, hd] from the fused product's columns, laid out a KV head's group at a time
    (its query heads, its key, its value: Megatron's order). A tensor-parallel cut of the columns into contiguous
    pieces then gives each GPU whole groups; with q, k and v each contiguous, a GPU's piece held all of some heads'
    queries and none of their keys, and XLA moved them between GPUs at every layer."""
    b, t, _ = qkv.shape
    group = c.heads // c.kv_heads
    qkv = qkv.reshape(b, t, c.kv_heads, group + 2, c.head_dim)
    return (qkv[..., :group, :].reshape(b, t, c.heads, c.head_dim), qkv[..., group, :], qkv[..., group + 1, :])


def _block(c: Decoder, x, w, positions, mask, cache=None, index=None, flash=False, matmul="bf16", query_block=0,
           layout=None):
    """One layer on x [B, T, d]; with ``cache`` (k, v of [B, S, KV, hd]) the new keys are written at ``index``;
    ``matmul``: the products' type (``_mm``); ``query_block``: ``_attention``'s; ``layout``: the stream's
    constraint (``residual_layout``), whose ``kv`` (a sequence split over a context group) gathers the keys and
    values and whose ``experts`` sends a mixture's tokens to the GPUs holding their experts."""
    b, t, _ = x.shape
    hd = c.head_dim
    whole = getattr(layout, "whole", None) or (lambda a: a)
    cut = layout if hasattr(layout, "whole") else (lambda a: a)
    if c.style == "gpt2":
        h = whole(_norm(x, w["ln1_g"], w["ln1_b"], c.style))
        qkv = (tag(_lin(h, w, "w_qkv", matmul), "qkv_proj") + w["b_qkv"]).reshape(b, t, c.heads, 3, hd)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]
    else:
        h = whole(_norm(x, w["attn_norm"], None, c.style))
        q, k, v = _heads(tag(_lin(h, w, "wqkv", matmul), "qkv_proj"), c)
        q, k = _rope(q, positions), _rope(k, positions)
    # the names a framework's remat policy saves (jaxgpu.ground.remat.TAGS): identities in the compiled program
    q, k, v = tag(q, "query_proj"), tag(k, "key_proj"), tag(v, "value_proj")
    if cache is not None:
        ck, cv = cache
        k = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), (0, index, 0, 0))
        v = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), (0, index, 0, 0))
        cache = (k, v)
    if getattr(layout, "kv", None):  # context parallel: each GPU's queries against the whole sequence's keys
        k, v = layout.kv(k), layout.kv(v)
        if cache is None:  # the mask of its own queries' rows, not the whole sequence's (Causal)
            mask = Causal(layout(positions), layout.kv(positions), jnp.asarray(c.window or k.shape[1] + 1))
    if cache is None and c.window and t > c.window and t % c.window == 0:
        a = _windowed(q, k, v, c.window, flash)
    else:
        a = _attention(q, k, v, mask, flash, query_block)
    a = tag(a, "context")
    if c.style == "gpt2":
        x = x + cut(tag(_lin(a, w, "w_o", matmul) + w["b_o"], "out_proj"))
        h = whole(_norm(x, w["ln2_g"], w["ln2_b"], c.style))
        up = _gelu_bias(tag(_lin(h, w, "w_fc", matmul), "mlpwi"), w["b_fc"])
        x = x + cut(tag(_lin(up, w, "w_proj", matmul) + w["b_proj"], "mlpwo"))
    else:
        x = x + cut(tag(_lin(a, w, "wo", matmul), "out_proj"))
        h = whole(_norm(x, w["mlp_norm"], None, c.style))
        gated = _geglu if c.mlp == "geglu" else _swiglu
        if c.experts > 1:
            x = x + experts.moe(c, h, w, gated, getattr(layout, "experts", None))
        else:
            g, u = tag(_lin(h, w, "w_gate", matmul), "mlpwi_0"), tag(_lin(h, w, "w_up", matmul), "mlpwi_1")
            x = x + cut(tag(_lin(gated(g, u), w, "w_down", matmul), "mlpwo"))
    return x, cache


def _hidden(c: Decoder, p: dict, tokens: jax.Array, flash: bool, s: StepSettings | None = None,
            layout: Callable | None = None) -> jax.Array:
    """The last layer's output [B, T, d] for token ids [B, T] (causal), ``p`` already in the compute dtype; ``s``:
    the step's remat policy, products and layer loop (``flash`` is its attention where ``s`` is None); ``layout``:
    ``residual_layout``'s constraint on the stream between layers, or None."""
    s = s or StepSettings(flash=flash)
    layout = layout or (lambda x: x)
    b, t = tokens.shape
    positions = jnp.broadcast_to(jnp.arange(t), (b, t))
    x = p["embed"][tokens]
    if c.style == "gpt2":
        x = x + p["pos"][:t]
    x = layout(x)
    mask = jnp.tril(jnp.ones((t, t), bool))
    if c.window:  # each token sees the last ``window`` (banded in _block where the sequence is whole blocks)
        mask = mask & (jnp.arange(t)[:, None] - jnp.arange(t)[None, :] < c.window)

    def layer(x, w):
        return layout(_block(c, x, w, positions, mask, flash=s.flash, matmul=s.matmul,
                             query_block=s.query_block, layout=layout)[0]), None

    layer = remat(layer, s.remat)  # each layer's backward recomputes what the policy does not save
    layers = p["layers"] if s.scan else unstack(p["layers"], c.layers)
    return _layers(layer, x, layers)


def _logits(c: Decoder, p: dict, x: jax.Array) -> jax.Array:
    x = _norm(x, p["final_norm"], p.get("final_norm_b"), c.style)
    head = p["embed"].T if c.style == "gpt2" or c.tied else p["head"]
    return (x @ head).astype(jnp.float32)


def forward(c: Decoder, params: dict, tokens: jax.Array, compute: Any = jnp.bfloat16, flash: bool = False,
            s: StepSettings | None = None, layout: Callable | None = None) -> jax.Array:
    """Logits [B, T, vocab] (float32) of a batch of token ids [B, T], products in ``compute``."""
    p = jax.tree.map(lambda a: a.astype(compute), params)
    return _logits(c, p, _hidden(c, p, tokens, flash, s, layout))


def _layers(layer, x, layers):
    """The layers in turn: a scan over a stacked dict, a Python loop over a list of dicts (unrolled)."""
    if isinstance(layers, dict):
        return jax.lax.scan(layer, x, layers)[0]
    for w in layers:
        x = layer(x, w)[0]
    return x


def loss(c: Decoder, params: dict, tokens: jax.Array, compute: Any = jnp.bfloat16, flash: bool = False,
         s: StepSettings | None = None, layout: Callable | None = None) -> jax.Array:
    """Next-token cross-entropy over the batch."""
    return _cross_entropy(forward(c, params, tokens[:, :-1], compute, flash, s, layout), tokens[:, 1:])


@jax.checkpoint  # keeps the logits alone for the backward pass, not their log-softmax too (another B x T x vocab)
def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def train_step(c: Decoder, *, compute: Any = jnp.bfloat16, micro_batches: int = 1, shards: int = 1,
               lr: float = 3e-4, flash: bool = False, sharding: tuple | None = None,
               settings: StepSettings | None = None, grads_sharding: Any = None, local_grads: bool = False):
    """A jitted ``step(params, opt_state, tokens) -> (params', opt_state', loss)``: gradients over
    ``micro_batches`` slices of the batch (a scan), AdamW on ``update_share(params, shards)``; ``settings``: the
    step's remat policy, attention, products and layer loop (default: ``flash``'s attention, nothing else).

    ``sharding``: the (params, opt_state, tokens) shardings (``shard_specs``) the step takes and gives back,
    for a step split over a mesh of devices by ``jax.sharding`` (XLA inserts the collectives); ``grads_sharding``:
    where the gradients summed over micro-batches are held (ZeRO-2 cuts them as the optimizer's state), else XLA's
    choice; ``local_grads`` (with micro-batches, on a 1-D mesh whose GPUs hold the weights whole): each GPU sums its
    own gradients over its micro-batches and the GPUs reduce them once a step, as DDP and ZeRO-1 do."""
    import optax

    opt = optax.adamw(lr, weight_decay=0.1)

    micro_batches = settings.accumulate if settings and settings.accumulate > 1 else micro_batches
    layout = residual_layout(sharding[2] if sharding else None)

    def step(params, opt_state, tokens):
        if local_grads and micro_batches > 1:  # the batch's split is the vmapped axis: a group's own layout inside
            inner = sequence_parallel(sharding[2].mesh) if MODEL in sharding[2].mesh.axis_names else None
            lv, grads = _accumulated_locally(lambda p, x: loss(c, p, x, compute, flash, settings, inner), params,
                                             tokens, micro_batches, sharding[2], sharding[0])
        else:
            lv, grads = _accumulated(lambda p, x: loss(c, p, x, compute, flash, settings, layout), params, tokens,
                                     micro_batches, grads_sharding)
        mine, g_mine = update_share(params, shards), update_share(grads, shards)
        updates, opt_state = opt.update(g_mine, opt_state, mine)
        return optax.apply_updates(mine, updates), opt_state, lv

    if sharding is None:
        return jax.jit(step), opt
    p_sh, o_sh, t_sh = sharding
    scalar = jax.sharding.NamedSharding(t_sh.mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=(p_sh, o_sh, scalar), donate_argnums=(0, 1)), opt


def _accumulated(loss_of: Callable, params: Any, tokens: jax.Array, micro_batches: int, held: Any = None,
                 into: Any = None) -> tuple:
    """(the loss, the gradients of ``loss_of(params, tokens)``) averaged over ``micro_batches`` slices of the batch,
    taken in turn (a scan): the same tokens in a micro-batch's activation memory; ``held``: the shardings the
    gradients are summed in (each micro-batch's reduced into its shard, as ZeRO-2 does), else XLA's choice;
    ``into``: the sums' dtype, else the weights' (a micro-batch's reduced in the weights' dtype, then widened)."""
    def hold(g):
        g = jax.lax.with_sharding_constraint(g, held) if held is not None else g
        return jax.tree.map(lambda a: a.astype(into or a.dtype), g)

    # micro-batch m takes rows m, m + M, m + 2M, ...: each device's rows of a batch split over devices stay
    # on it (a reshape to [M, B / M] would hand each device's block to one micro-batch and move the rest)
    chunks = tokens.reshape(-1, micro_batches, tokens.shape[-1]).swapaxes(0, 1)

    def micro(acc, x):
        lv, g = jax.value_and_grad(lambda p: loss_of(p, x))(params)
        return jax.tree.map(jnp.add, acc, (lv, hold(g))), None

    zero = (jnp.zeros((), jnp.float32), hold(jax.tree.map(jnp.zeros_like, params)))
    (lv, grads), _ = jax.lax.scan(micro, zero, chunks) if micro_batches > 1 else (micro(zero, chunks[0])[0], 0)
    return lv / micro_batches, jax.tree.map(lambda g: g / micro_batches, grads)


def _accumulated_locally(loss_of: Callable, params: Any, tokens: jax.Array, micro_batches: int,
                         split: jax.sharding.NamedSharding, held: Any = None, into: Any = None) -> tuple:
    """``_accumulated`` as DDP and ZeRO-1 accumulate over a batch ``split`` over the mesh's data axis: each GPU's (or
    tp group's) gradient of its own rows summed over its micro-batches where it is (an axis of one row a group: a
    whole gradient each, or its tp cut where ``held``, the params' shardings, cut it; no collective), then over the
    groups once a step, where ``_accumulated`` leaves XLA to reduce every micro-batch's; ``into``: the sums' dtype
    (Megatron's float32 buffer for bf16 weights), else the weights'."""
    axes = split.spec[0] if isinstance(split.spec[0], tuple) else (split.spec[0],)
    n = math.prod(split.mesh.shape[a] for a in axes)
    P = jax.sharding.PartitionSpec

    def per_gpu(a, h=None):
        inner = tuple(h.spec) + (None,) * (a.ndim - 1 - len(h.spec)) if h is not None else (None,) * (a.ndim - 1)
        return jax.lax.with_sharding_constraint(a, jax.sharding.NamedSharding(split.mesh, P(split.spec[0], *inner)))

    chunks = tokens.reshape(-1, micro_batches, tokens.shape[-1]).swapaxes(0, 1)  # as _accumulated cuts them

    def micro(acc, x):
        lv, g = jax.vmap(jax.value_and_grad(loss_of), in_axes=(None, 0))(params, per_gpu(x.reshape(n, -1, x.shape[-1])))
        g = jax.tree.map(lambda a: a.astype(into or a.dtype), g)
        return jax.tree.map(jnp.add, acc, (lv.sum(), _each(per_gpu, g, held))), None

    zero = (jnp.zeros((), jnp.float32), _each(lambda p, h=None: per_gpu(jnp.zeros((n, *p.shape), into or p.dtype), h),
                                              params, held))
    (lv, grads), _ = jax.lax.scan(micro, zero, chunks)
    return lv / (micro_batches * n), jax.tree.map(lambda g: g.sum(0) / (micro_batches * n), grads)


def _each(f: Callable, tree: Any, held: Any) -> Any:
    """``f(leaf, its sharding)`` over ``tree``, or ``f(leaf)`` where no shardings are given."""
    return jax.tree.map(f, tree, held) if held is not None else jax.tree.map(f, tree)


def lora_step(c: Decoder, settings: StepSettings, *, compute: Any = jnp.bfloat16, lr: float = 1e-4,
              sharding: tuple | None = None):
    """A jitted ``step(frozen, adapters, opt_state, tokens) -> (adapters', opt_state', loss)`` of LoRA fine-tuning
    (``settings.lora``): the base ``frozen`` (bf16, its layer matrices stored as ``settings.weights``: QLoRA's NF4
    or int8, widened for each product) takes no gradient; the adapters (``lora_specs``) are trained with AdamW,
    over ``settings.accumulate`` micro-batches. ``sharding``: the four arguments' shardings (``shard_specs``)."""
    import optax

    opt = optax.adamw(lr, weight_decay=0.0)
    layout = residual_layout(sharding[3] if sharding else None)

    def step(frozen, adapters, opt_state, tokens):
        base = {k: (v if k == "layers" else v.astype(compute)) for k, v in frozen.items()}

        def loss_of(a, x):
            p = {**base, "layers": {**base["layers"], **jax.tree.map(lambda v: v.astype(compute), a)}}
            return _cross_entropy(_logits(c, p, _hidden(c, p, x[:, :-1], settings.flash, settings, layout)), x[:, 1:])

        lv, grads = _accumulated(loss_of, adapters, tokens, settings.accumulate)
        updates, opt_state = opt.update(grads, opt_state, adapters)
        return optax.apply_updates(adapters, updates), opt_state, lv

    if sharding is None:
        return jax.jit(step, donate_argnums=(1, 2)), opt
    f_sh, a_sh, o_sh, t_sh = sharding
    scalar = jax.sharding.NamedSharding(t_sh.mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=(a_sh, o_sh, scalar), donate_argnums=(1, 2)), opt


def lora_specs(c: Decoder, batch: int, seq: int, settings: StepSettings, dtype: Any = jnp.float32) -> tuple:
    """(frozen, adapters, opt_state, tokens) specs for ``lora_step``: the base in bf16 with its layer matrices
    stored as ``settings.weights`` (``stored_specs``), the adapters (``Decoder.adapter_shapes``) in ``dtype``, AdamW's
    state for the adapters alone."""
    import optax

    frozen = param_specs(c, jnp.bfloat16)
    frozen = {**frozen, "layers": stored_specs(frozen["layers"], settings.weights)}
    adapters = jax.tree.map(lambda shape: jax.ShapeDtypeStruct(shape, dtype), c.adapter_shapes(settings.lora,
                            settings.lora_on), is_leaf=lambda x: isinstance(x, tuple))
    state = jax.eval_shape(optax.adamw(1e-4, weight_decay=0.0).init, adapters)
    return frozen, adapters, state, jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)


# ---- split over devices ---------------------------------------------------------------------------------------
# Three ways, through jax.sharding. On a one-axis mesh of N devices: "fsdp" (each array cut in N along its largest
# dimension N divides, the batch split N ways: the parameters, gradients and optimizer state of a train step
# spread as ZeRO-3 / FSDP spread them) and "tp" (Megatron's tensor parallelism: the products that open a block
# cut by columns, those that close it by rows, the vocabulary cut; norms and the batch whole). On a 2-D mesh
# (N / T groups of T): "fsdp+tp", the tp cut over each group's T devices and the fsdp cut over the groups, of the
# batch and of each array's largest dimension the tp cut left whole (MaxText's fsdp and tensor axes, and
# torchtitan's 2-D parallelism, split a model so).

def update_share(tree: dict, shards: int) -> dict:
    """The weights one of ``shards`` devices updates: the first 1/shards of the layer stack (and, unsharded,
    the embeddings and norms)."""
    if shards <= 1:
        return tree
    n = max(1, -(-jax.tree.leaves(tree["layers"])[0].shape[0] // shards))
    return {"layers": jax.tree.map(lambda a: a[:n], tree["layers"])}


def train_specs(c: Decoder, batch: int, seq: int, shards: int = 1, dtype: Any = jnp.float32) -> tuple:
    """(params, opt_state, tokens) specs for ``train_step``'s step; ``dtype``: the weights' (and so the AdamW
    moments') storage: float32 master weights, or bfloat16 for pure-bf16 training."""
    import optax

    params = param_specs(c, dtype)
    opt = optax.adamw(3e-4, weight_decay=0.1)
    state = jax.eval_shape(lambda p: opt.init(update_share(p, shards)), params)
    return params, state, jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)


def prefill_step(c: Decoder, compute: Any = jnp.bfloat16, sharding: tuple | None = None,
                 settings: StepSettings | None = None):
    """A jitted ``step(params, tokens) -> logits`` of a prompt [B, T]: every layer over every token (what fills a
    KV cache), the vocabulary head for the last position only (the next token's logits)."""
    settings = settings or StepSettings()
    layout = residual_layout(sharding[1] if sharding else None)

    def step(params, tokens):
        p = jax.tree.map(lambda a: a.astype(compute), params)
        return _logits(c, p, _hidden(c, p, tokens, flash=settings.flash, s=settings, layout=layout)[:, -1])

    if sharding is None:
        return jax.jit(step)
    whole = jax.sharding.NamedSharding(jax.tree.leaves(sharding[0])[0].mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=whole)


def decode_step(c: Decoder, compute: Any = jnp.bfloat16, weights: str = "bf16", sharding: tuple | None = None):
    """A jitted ``step(params, cache, token, index) -> (logits, cache')``: one token for each of B sequences
    against a KV cache (k, v: [L, B, S, KV, hd]) holding ``index`` tokens; attention over the whole cache,
    masked. ``weights="int8"`` or ``"fp8"``: the layers' matrices are stored so with a per-output-channel scale,
    widened to ``compute`` for the product (weight-only quantisation; the step itself reads the stored type)."""

    def step(params, cache, token, index):
        p = {k: (v if k == "layers" else v.astype(compute)) for k, v in params.items()}
        b = token.shape[0]
        s = (cache[0][0].shape[1] if isinstance(cache[0], list) else cache[0].shape[2])
        positions = jnp.full((b, 1), index)
        x = p["embed"][token]
        if c.style == "gpt2":
            x = x + jax.lax.dynamic_slice_in_dim(p["pos"], index, 1)[None]
        mask = jnp.broadcast_to(jnp.arange(s)[None, None, :] <= index, (b, 1, s))
        # a sliding window's cache holds the last ``window`` tokens and is written round: slot index mod its size
        slot = index % s if c.window else index

        def layer(x, wc):
            w, ck, cv = wc
            w = {k: _widen(v, w, k, compute) for k, v in w.items() if not k.endswith("_scale")}
            # no residual_layout here: with one token a sequence, XLA:GPU's plan on an fsdp+tp mesh keeps every
            # weight where it lies and all-reduces the small activations (Llama 7B, 8 H100s, fsdp 4 x tp 2, batch 8:
            # 2.8 GB a GPU and 3.5 ms); held to the batch split it gathered the weights each token (5.1 GB, 11 ms)
            x, (ck, cv) = _block(c, x, w, positions, mask, (ck, cv), slot)
            return x, (ck, cv)

        if isinstance(p["layers"], dict):
            x, (ks, vs) = jax.lax.scan(layer, x, (p["layers"], cache[0], cache[1]))
        else:  # unrolled: each layer's weights are their own buffers (a scan copies its slice out of the stack)
            new = []
            for w, ck, cv in zip(p["layers"], cache[0], cache[1]):
                x, kv = layer(x, (w, ck, cv))
                new.append(kv)
            ks, vs = [kv[0] for kv in new], [kv[1] for kv in new]
        x = _norm(x, p["final_norm"], p.get("final_norm_b"), c.style)
        head = p["embed"].T if c.style == "gpt2" or c.tied else p["head"]
        return (x @ head).astype(jnp.float32), (ks, vs)

    if sharding is None:
        return jax.jit(step, donate_argnums=(1,))
    whole = jax.sharding.NamedSharding(jax.tree.leaves(sharding[0])[0].mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=(whole, sharding[1]), donate_argnums=(1,))


def _widen(v, w, name, compute):
    if v.dtype in STORED.values():
        return widened(v, w[name + "_scale"], compute)
    return v.astype(compute)


def decode_specs(c: Decoder, batch: int, context: int, weights: str = "bf16", dtype: Any = jnp.bfloat16,
                 unrolled: bool = False) -> tuple:
    """(params, cache, token, index) specs for ``decode_step``: weights stored in ``dtype`` (or int8 or fp8 matrices
    with per-channel scales), the cache in ``dtype`` for ``context`` tokens; ``unrolled``: one entry per
    layer (lists) instead of stacks."""
    params = param_specs(c, dtype)
    params = {**params, "layers": stored_specs(params["layers"], weights, dtype)}
    if c.window:  # a rolling cache of the window's tokens
        context = min(context, c.window)
    kv = jax.ShapeDtypeStruct((c.layers, batch, context, c.kv_heads, c.head_dim), dtype)
    cache = (kv, kv)
    if unrolled:
        params = {**params, "layers": unstack(params["layers"], c.layers)}
        one = jax.ShapeDtypeStruct(kv.shape[1:], dtype)
        cache = ([one] * c.layers, [one] * c.layers)
    return params, cache, jax.ShapeDtypeStruct((batch, 1), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32)


def unstack(layers: dict, n: int) -> list[dict]:
    """A stacked layer dict (arrays or specs) as a list of per-layer dicts."""
    def one(a, i):
        return jax.ShapeDtypeStruct(a.shape[1:], a.dtype) if isinstance(a, jax.ShapeDtypeStruct) else a[i]
    return [jax.tree.map(functools.partial(one, i=i), layers) for i in range(n)]


# Names that moved in December 2026, found where they were with a warning: the description of a decoder to
# jaxgpu.ground.decoders, the mesh rules to jaxgpu.kernels.sharding
_MOVED = {"Config": ("decoders", "Decoder"), "CONFIGS": ("decoders", "MODELS"),
          **{n: ("decoders", n) for n in ("from_hf_config", "HF_READ", "HF_COST_FREE", "StepSettings",
                                          "REMAT_POLICIES", "MATMULS", "WEIGHTS", "MESHES")},
          **{n: ("sharding", n) for n in ("AXIS", "MODEL", "mesh_for", "tp_degree", "shard_specs", "residual_layout")}}


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from jaxgpu.ground import decoders
    from jaxgpu.kernels import sharding

    module, attr = _MOVED[name]
    warnings.warn(f"jaxgpu.kernels.transformer.{name} is now jaxgpu.{'ground' if module == 'decoders' else 'kernels'}"
                  f".{module}.{attr}", DeprecationWarning, stacklevel=2)
    return getattr({"decoders": decoders, "sharding": sharding}[module], attr)
