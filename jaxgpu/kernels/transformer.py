"""A decoder-only transformer as plain JAX functions: GPT-2 and Llama shapes, layers scanned.

Parameters are a dict of arrays whose per-layer entries are stacked on a leading axis and run under one
``lax.scan``, so compile time does not grow with depth. GPT-2 blocks use LayerNorm with biases, GELU and
learned positions; Llama blocks RMSNorm, rotary positions, SwiGLU and grouped-query attention. Attention
is XLA's (scores materialised, then softmax): what ``jax.jit`` makes of it without a fused kernel.

``train_step`` is one optimizer step (AdamW, float32 master weights, ``compute`` dtype for the matrix
products), optionally over several micro-batches (gradient accumulation) and updating only a 1/N share
of the layers' weights (what one GPU of N updates under ZeRO-1 or FSDP; the collectives are not part of
it). ``decode_step`` generates one token against a KV cache. Both take ``jax.ShapeDtypeStruct``s from
``param_specs`` / ``cache_specs``, so a 70B step compiles without a byte allocated.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from jaxgpu.ground.workload import MODEL_AXIS


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_seq: int
    style: str  # "gpt2" or "llama"
    head_size: int | None = None  # a head's width where it is not d_model / heads (Gemma: 256 at d_model 3072)
    mlp: str = "swiglu"  # a llama-style block's gated MLP: "swiglu" (silu gate) or "geglu" (tanh-GELU gate, Gemma)
    tied: bool = False  # a llama-style output head that is the embedding (Gemma, Llama 3.2 1B); GPT-2's always is
    experts: int = 0  # a mixture of experts: each layer's MLP is this many expert MLPs and a router (0: dense)
    top_k: int = 2  # the experts each token is routed to (Mixtral: 2 of 8)
    window: int = 0  # sliding-window attention: each token attends to the last ``window`` tokens (0: all of them)

    @property
    def head_dim(self) -> int:
        return self.head_size or self.d_model // self.heads

    def params(self) -> int:
        """Weights, embeddings included."""
        return sum(math.prod(s.shape) for s in jax.tree.leaves(param_specs(self)))

    def active_params(self) -> int:
        """The weights one token's forward pass reads: a mixture of experts' ``top_k`` of its experts' MLPs."""
        if self.experts <= 1:
            return self.params()
        return self.params() - (self.experts - self.top_k) * 3 * self.d_model * self.ffn * self.layers


# A Hugging Face-style config.json: the fields a decoder's cost is read from, and the fields that leave it alone
# (positions' encoding, norms' epsilon, token ids, initialisation, dtype names, bookkeeping); any other field is named
HF_READ = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
           "intermediate_size", "vocab_size", "hidden_act", "sliding_window", "num_local_experts",
           "num_experts_per_tok", "tie_word_embeddings", "max_position_embeddings", "attention_bias", "mlp_bias",
           "model_type")
HF_COST_FREE = ("architectures", "rope_theta", "rope_scaling", "rms_norm_eps", "layer_norm_eps", "initializer_range",
                "torch_dtype", "bos_token_id", "eos_token_id", "pad_token_id", "use_cache", "transformers_version",
                "attention_dropout", "hidden_dropout", "pretraining_tp", "_name_or_path", "use_sliding_window",
                "max_window_layers", "partial_rotary_factor", "rope_type", "dtype")
# hidden_act as the gated MLP it names: silu (Llama, Mistral, Qwen), tanh-GELU (Gemma's gelu_pytorch_tanh)
_HF_ACT = {"silu": "swiglu", "swish": "swiglu", "gelu_pytorch_tanh": "geglu", "gelu_tanh": "geglu"}


def from_hf_config(d: dict, name: str = "config") -> tuple[Config, list[str]]:
    """A decoder from a Hugging Face-style ``config.json`` (a dict): the Config and the fields it did not read
    (neither cost-bearing nor in ``HF_COST_FREE``), for the caller to name. A ``sliding_window`` (unless
    ``use_sliding_window`` is false) makes each token attend to the last that many.

    Raises:
      ValueError: a field the package cannot honour (an activation other than silu or tanh-GELU, biases in the
        attention or MLP), or a missing or bad one; the message names it.
    """
    need = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    missing = [k for k in need if not isinstance(d.get(k), int) or d[k] < 1]
    if missing:
        raise ValueError(f"{name}: needs {', '.join(missing)} (positive integers)")
    cannot = []
    experts, top_k = d.get("num_local_experts") or 0, d.get("num_experts_per_tok") or 2
    if experts > 1 and not 1 <= top_k <= experts:
        cannot.append(f"num_experts_per_tok ({top_k}): between 1 and num_local_experts ({experts})")
    window = d.get("sliding_window") if d.get("use_sliding_window", True) else None
    act = d.get("hidden_act", "silu")
    if act not in _HF_ACT:
        cannot.append(f"hidden_act ({act!r}): the gated MLPs built are silu and tanh-GELU")
    cannot += [f"{k} (true): biases are not built" for k in ("attention_bias", "mlp_bias") if d.get(k)]
    if cannot:
        raise ValueError(f"{name}: cannot honour " + "; ".join(cannot))
    heads = d["num_attention_heads"]
    kv = d.get("num_key_value_heads") or heads
    head_dim = d.get("head_dim")
    if heads % kv or (head_dim is None and d["hidden_size"] % heads):
        raise ValueError(f"{name}: num_attention_heads ({heads}) must split into num_key_value_heads ({kv}) and "
                         f"hidden_size into heads unless head_dim is given")
    c = Config(name, d["num_hidden_layers"], d["hidden_size"], heads, kv, d["intermediate_size"], d["vocab_size"],
               d.get("max_position_embeddings") or 8192, "llama",
               head_size=head_dim if head_dim and head_dim != d["hidden_size"] // heads else None,
               # absent, transformers takes the model class's own default: tied for Gemma, untied for Llama's kin
               mlp=_HF_ACT[act], tied=bool(d.get("tie_word_embeddings", str(d.get("model_type")).startswith("gemma"))),
               experts=experts if experts > 1 else 0, top_k=top_k, window=int(window or 0))
    return c, sorted(k for k in d if k not in HF_READ and k not in HF_COST_FREE)


# Shapes from the models' published configs: GPT-2 (OpenAI's gpt2 / gpt2-medium / gpt2-large / gpt2-xl, vocabulary
# padded to 50304 as llm.c and nanoGPT do), Llama 2 7B/13B/70B and Llama 3.x 1B/8B (Meta's params.json).
CONFIGS = {c.name: c for c in (
    Config("gpt2-124m", 12, 768, 12, 12, 3072, 50304, 1024, "gpt2"),
    Config("gpt2-350m", 24, 1024, 16, 16, 4096, 50304, 1024, "gpt2"),
    Config("gpt2-774m", 36, 1280, 20, 20, 5120, 50304, 1024, "gpt2"),
    Config("gpt2-1.5b", 48, 1600, 25, 25, 6400, 50304, 1024, "gpt2"),
    Config("llama-1b", 16, 2048, 32, 8, 8192, 128256, 8192, "llama"),
    Config("llama-7b", 32, 4096, 32, 32, 11008, 32000, 4096, "llama"),
    Config("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, "llama"),
    Config("llama-13b", 40, 5120, 40, 40, 13824, 32000, 4096, "llama"),
    Config("llama-70b", 80, 8192, 64, 8, 28672, 32000, 4096, "llama"),
    # Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): 8 experts of Mistral 7B's MLP, 2 a token
    Config("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, "llama", experts=8, top_k=2),
)}


def _layer_shapes(c: Config) -> dict[str, tuple[int, ...]]:
    d, f, hd = c.d_model, c.ffn, c.head_dim
    if c.style == "gpt2":
        return {"ln1_g": (d,), "ln1_b": (d,), "w_qkv": (d, 3 * d), "b_qkv": (3 * d,), "w_o": (d, d), "b_o": (d,),
                "ln2_g": (d,), "ln2_b": (d,), "w_fc": (d, f), "b_fc": (f,), "w_proj": (f, d), "b_proj": (d,)}
    # queries, keys and values in one matrix, as gpt-fast and Megatron store them (XLA would otherwise
    # concatenate three matrices into one product on every call)
    out = {"attn_norm": (d,), "wqkv": (d, (c.heads + 2 * c.kv_heads) * hd), "wo": (c.heads * hd, d),
           "mlp_norm": (d,), "w_gate": (d, f), "w_up": (d, f), "w_down": (f, d)}
    if c.experts > 1:  # each expert its own gated MLP, and a router that scores the experts for each token
        e = c.experts
        out.update({"router": (d, e), "w_gate": (e, d, f), "w_up": (e, d, f), "w_down": (e, f, d)})
    return out


def param_specs(c: Config, dtype: Any = jnp.float32) -> dict:
    """The parameters' shapes and dtype, nothing allocated."""
    S = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)
    out = {"embed": S(c.vocab, c.d_model), "final_norm": S(c.d_model),
           "layers": {k: S(c.layers, *v) for k, v in _layer_shapes(c).items()}}
    if c.style == "gpt2":
        out["pos"], out["final_norm_b"] = S(c.max_seq, c.d_model), S(c.d_model)
    elif not c.tied:
        out["head"] = S(c.d_model, c.vocab)
    return out


def init(c: Config, key: jax.Array, dtype: Any = jnp.float32) -> dict:
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

# The policies of jax.checkpoint_policies that take no arguments, by name: what a run's remat setting names
# (MaxText's and Levanter's configs name the same ones: save the matrix products' outputs, or nothing)
REMAT_POLICIES = ("dots_saveable", "dots_with_no_batch_dims_saveable", "checkpoint_dots",
                  "checkpoint_dots_with_no_batch_dims", "nothing_saveable", "everything_saveable")
MATMULS = ("bf16", "fp8")
WEIGHTS = ("bf16", "int8", "fp8")  # a decode step's stored weights: int8 and fp8 with a scale per output channel
# how a step's GPUs split it: auto is fsdp to train, tensor parallel to serve; fsdp+tp is both, on a 2-D mesh
MESHES = ("auto", "fsdp", "tp", "fsdp+tp")
_STORED = {"int8": jnp.int8, "fp8": jnp.float8_e4m3fn}  # the narrow ones' types


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """How a step is run: what real training and serving runs set first.

    Attributes:
      remat: "none" (the backward pass keeps every activation it needs), or a policy of
        ``jax.checkpoint_policies`` by its name (``REMAT_POLICIES``), applied to each layer: ``dots_saveable`` keeps
        the matrix products' outputs and recomputes the rest, ``nothing_saveable`` recomputes each layer whole.
      flash: attention as one fused kernel (FlashAttention, cuDNN), else XLA's materialised scores.
      matmul: "bf16" or "fp8" matrix products (fp8: e4m3 operands, bf16 out; only on a card with fp8 matrix units).
      scan: the layers under one ``lax.scan`` (one compiled layer), else unrolled.
      nodes: nodes of the step's GPUs each, the batch split over them: one node's program is compiled and priced,
        the gradients' all-reduce between nodes added at the table's inter-node link bandwidth.
      accumulate: micro-batches a training step runs in turn (gradient accumulation), its gradients summed before
        the one update: the same tokens a step in less activation memory.
      weights: how a decode step stores its layers' matrices: "bf16", or "int8" / "fp8" (e4m3) with a scale per
        output channel, widened to bf16 for the product (weight-only quantisation: half the bytes read a token).
      mesh: how the GPUs split the step (``MESHES``): "fsdp" (every array cut along its largest dimension, the batch
        split, the weights gathered for each layer), "tp" (Megatron's column and row cuts, the batch whole),
        "fsdp+tp" (both, on a 2-D mesh: groups of ``tp`` GPUs cut each layer's products as tp does, and the
        groups split the batch and the rest of each array as fsdp does), or "auto": fsdp to train, tp to serve.
      tp: with the fsdp+tp mesh, the GPUs of a tensor-parallel group; 0: ``tp_degree``'s choice for the count.
      query_block: with flash, the attention run a block of this many queries at a time, each block's scores
        recomputed in the backward pass (0: all at once). The same arithmetic; what changes is what XLA's memory
        plan holds: a block's scores, not a layer's, nearer what a fused kernel holds (which holds none).
        ``jaxgpu.pricing.sizing.plan_model`` reads a long context's memory off such a twin of the step.
    """

    remat: str = "none"
    flash: bool = True
    matmul: str = "bf16"
    scan: bool = True
    nodes: int = 1
    accumulate: int = 1
    weights: str = "bf16"
    mesh: str = "auto"
    tp: int = 0
    query_block: int = 0

    def __post_init__(self):
        if self.mesh not in MESHES:
            raise KeyError(f"unknown mesh {self.mesh!r}; known: {', '.join(MESHES)}")
        if self.tp < 0 or (self.tp and self.mesh != "fsdp+tp"):
            raise ValueError(f"tp ({self.tp}) sizes the tensor-parallel groups of the fsdp+tp mesh; the mesh here is "
                             f"{self.mesh!r}" if self.tp > 0 else f"tp must be 0 (auto) or more, got {self.tp}")
        if self.remat != "none" and self.remat not in REMAT_POLICIES:
            raise KeyError(f"unknown remat policy {self.remat!r}; known: none, {', '.join(REMAT_POLICIES)}")
        if self.matmul not in MATMULS:
            raise KeyError(f"unknown matmul type {self.matmul!r}; known: {', '.join(MATMULS)}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if self.weights not in WEIGHTS:
            raise KeyError(f"unknown weight storage {self.weights!r}; known: {', '.join(WEIGHTS)}")
        if self.accumulate < 1:
            raise ValueError(f"accumulate must be at least 1 micro-batch, got {self.accumulate}")

    def words(self) -> str:
        """The settings in a phrase: "remat dots_saveable, flash attention, bf16, scanned, 1 node"."""
        return (f"remat {self.remat}, {'flash' if self.flash else 'XLA'} attention, {self.matmul} products, "
                f"{'scanned' if self.scan else 'unrolled'} layers, {self.nodes} node{'s' if self.nodes > 1 else ''}"
                + (f", {self.accumulate} micro-batches" if self.accumulate > 1 else "")
                + (f", {self.weights} weights" if self.weights != "bf16" else "")
                + (f", {self.mesh} mesh" if self.mesh != "auto" else "")
                + (f" (tp {self.tp})" if self.tp else "")
                + (f", attention in blocks of {self.query_block} queries" if self.query_block else ""))


def _mm(a, b, matmul: str = "bf16"):
    """A matrix product as the step's settings run it: ``a @ b``, or ``_fp8_mm``."""
    return _fp8_mm(a, b) if matmul == "fp8" else a @ b


@jax.custom_vjp
def _fp8_mm(a, b):
    """``a @ b`` as fp8 training runs it (Transformer Engine's recipe): e4m3 operands forward, and backward the
    gradient in e5m2 (its wider range) against the e4m3 operands, each product out in ``a``'s dtype: the forms
    XLA:GPU turns into fp8 GEMMs on a card with fp8 matrix units (without the custom backward, the gradient's
    products would meet a bf16 cotangent and run in bf16)."""
    return _fp8_mm_fwd(a, b)[0]


def _fp8_mm_fwd(a, b):
    a8, b8 = a.astype(jnp.float8_e4m3fn), b.astype(jnp.float8_e4m3fn)
    # the operands' own dtypes ride along as empty arrays (a residual must be an array)
    return jnp.matmul(a8, b8, preferred_element_type=a.dtype), (a8, b8, jnp.zeros(0, a.dtype), jnp.zeros(0, b.dtype))


def _fp8_mm_bwd(res, g):
    a8, b8, a_kind, b_kind = res
    g8 = g.astype(jnp.float8_e5m2)
    da = jnp.matmul(g8, b8.T, preferred_element_type=a_kind.dtype)
    db = jnp.einsum("...k,...n->kn", a8, g8, preferred_element_type=b_kind.dtype)
    return da, db


_fp8_mm.defvjp(_fp8_mm_fwd, _fp8_mm_bwd)


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
    ms = mask.reshape(n, block, -1) if mask.ndim == 2 else mask.reshape(b, n, block, -1).swapaxes(0, 1)
    body = jax.checkpoint(lambda _, qm: (None, _attention_math(qm[0], k, v, qm[1], flash=True)))
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


def _block(c: Config, x, w, positions, mask, cache=None, index=None, flash=False, matmul="bf16", query_block=0):
    """One layer on x [B, T, d]; with ``cache`` (k, v of [B, S, KV, hd]) the new keys are written at ``index``;
    ``matmul``: the products' type (``_mm``); ``query_block``: ``_attention``'s."""
    b, t, _ = x.shape
    hd = c.head_dim
    if c.style == "gpt2":
        h = _norm(x, w["ln1_g"], w["ln1_b"], c.style)
        qkv = _mm(h, w["w_qkv"], matmul) + w["b_qkv"]
        q, k, v = jnp.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(b, t, -1, hd) for a in (q, k, v))
    else:
        h = _norm(x, w["attn_norm"], None, c.style)
        q, k, v = jnp.split(_mm(h, w["wqkv"], matmul), [c.heads * hd, (c.heads + c.kv_heads) * hd], axis=-1)
        q = _rope(q.reshape(b, t, c.heads, hd), positions)
        k = _rope(k.reshape(b, t, c.kv_heads, hd), positions)
        v = v.reshape(b, t, c.kv_heads, hd)
    if cache is not None:
        ck, cv = cache
        k = jax.lax.dynamic_update_slice(ck, k.astype(ck.dtype), (0, index, 0, 0))
        v = jax.lax.dynamic_update_slice(cv, v.astype(cv.dtype), (0, index, 0, 0))
        cache = (k, v)
    if cache is None and c.window and t > c.window and t % c.window == 0:
        a = _windowed(q, k, v, c.window, flash)
    else:
        a = _attention(q, k, v, mask, flash, query_block)
    if c.style == "gpt2":
        x = x + (_mm(a, w["w_o"], matmul) + w["b_o"])
        h = _norm(x, w["ln2_g"], w["ln2_b"], c.style)
        x = x + (_mm(_gelu_bias(_mm(h, w["w_fc"], matmul), w["b_fc"]), w["w_proj"], matmul) + w["b_proj"])
    else:
        x = x + _mm(a, w["wo"], matmul)
        h = _norm(x, w["mlp_norm"], None, c.style)
        gated = _geglu if c.mlp == "geglu" else _swiglu
        if c.experts > 1:
            x = x + _moe(c, h, w, gated)
        else:
            x = x + _mm(gated(_mm(h, w["w_gate"], matmul), _mm(h, w["w_up"], matmul)), w["w_down"], matmul)
    return x, cache


# Each expert takes at most this share over its fair part of a batch's tokens (n x top_k / experts): the rest are
# dropped for that expert, as GShard and MaxText's dropping implementation set it
CAPACITY = 1.25


def _moe(c: Config, h, w, gated):
    """A mixture of experts on h [B, T, d]: the router's top_k experts a token, their gates a softmax over those
    k logits (Mixtral's); each expert's tokens gathered into its own buffer of ``CAPACITY`` x its fair share,
    its gated MLP run on its buffer alone (the FLOPs of k experts a token, not of all), the outputs scattered back
    weighted by the gates."""
    b, t, d = h.shape
    x = h.reshape(-1, d)
    n, e, k = x.shape[0], c.experts, c.top_k
    top, idx = jax.lax.top_k((x @ w["router"]).astype(jnp.float32), k)
    gate = jax.nn.softmax(top, axis=-1).astype(x.dtype).reshape(-1)
    expert = idx.reshape(-1)  # [n k]: token i's j-th expert at i k + j
    token = jnp.repeat(jnp.arange(n), k)
    rank = jnp.take_along_axis(jnp.cumsum(jax.nn.one_hot(expert, e, dtype=jnp.int32), axis=0) - 1,
                               expert[:, None], axis=1)[:, 0]  # the token's place in its expert's buffer
    cap = max(1, math.ceil(n * k / e * CAPACITY))
    slot = jnp.where(rank < cap, rank, cap)  # past the capacity: out of the buffer, dropped
    buf = jnp.zeros((e, cap, d), x.dtype).at[expert, slot].set(x[token], mode="drop")
    y = jnp.einsum("ecf,efd->ecd", gated(jnp.einsum("ecd,edf->ecf", buf, w["w_gate"]),
                                         jnp.einsum("ecd,edf->ecf", buf, w["w_up"])), w["w_down"])
    back = y.at[expert, slot].get(mode="fill", fill_value=0) * gate[:, None]
    return jnp.zeros((n, d), x.dtype).at[token].add(back).reshape(b, t, d)


def _hidden(c: Config, p: dict, tokens: jax.Array, flash: bool, s: StepSettings | None = None,
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
                             query_block=s.query_block)[0]), None

    if s.remat != "none":  # each layer's backward recomputes what the policy does not save
        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, s.remat))
    layers = p["layers"] if s.scan else unstack(p["layers"], c.layers)
    return _layers(layer, x, layers)


def _logits(c: Config, p: dict, x: jax.Array) -> jax.Array:
    x = _norm(x, p["final_norm"], p.get("final_norm_b"), c.style)
    head = p["embed"].T if c.style == "gpt2" or c.tied else p["head"]
    return (x @ head).astype(jnp.float32)


def forward(c: Config, params: dict, tokens: jax.Array, compute: Any = jnp.bfloat16, flash: bool = False,
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


def loss(c: Config, params: dict, tokens: jax.Array, compute: Any = jnp.bfloat16, flash: bool = False,
         s: StepSettings | None = None, layout: Callable | None = None) -> jax.Array:
    """Next-token cross-entropy over the batch."""
    return _cross_entropy(forward(c, params, tokens[:, :-1], compute, flash, s, layout), tokens[:, 1:])


@jax.checkpoint  # keeps the logits alone for the backward pass, not their log-softmax too (another B x T x vocab)
def _cross_entropy(logits, targets):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def train_step(c: Config, *, compute: Any = jnp.bfloat16, micro_batches: int = 1, shards: int = 1,
               lr: float = 3e-4, flash: bool = False, sharding: tuple | None = None,
               settings: StepSettings | None = None):
    """A jitted ``step(params, opt_state, tokens) -> (params', opt_state', loss)``: gradients over
    ``micro_batches`` slices of the batch (a scan), AdamW on ``update_share(params, shards)``; ``settings``: the
    step's remat policy, attention, products and layer loop (default: ``flash``'s attention, nothing else).

    ``sharding``: the (params, opt_state, tokens) shardings (``shard_specs``) the step takes and gives back,
    for a step split over a mesh of devices by ``jax.sharding`` (XLA inserts the collectives)."""
    import optax

    opt = optax.adamw(lr, weight_decay=0.1)

    micro_batches = settings.accumulate if settings and settings.accumulate > 1 else micro_batches
    layout = residual_layout(sharding[2].mesh if sharding else None)

    def step(params, opt_state, tokens):
        # micro-batch m takes rows m, m + M, m + 2M, ...: each device's rows of a batch split over devices stay
        # on it (a reshape to [M, B / M] would hand each device's block to one micro-batch and move the rest)
        chunks = tokens.reshape(-1, micro_batches, tokens.shape[-1]).swapaxes(0, 1)

        def micro(acc, x):
            lv, g = jax.value_and_grad(lambda p: loss(c, p, x, compute, flash, settings, layout))(params)
            return jax.tree.map(jnp.add, acc, (lv, g)), None

        zero = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, params))
        (lv, grads), _ = jax.lax.scan(micro, zero, chunks) if micro_batches > 1 else (micro(zero, chunks[0])[0], 0)
        grads = jax.tree.map(lambda g: g / micro_batches, grads)
        mine, g_mine = update_share(params, shards), update_share(grads, shards)
        updates, opt_state = opt.update(g_mine, opt_state, mine)
        return optax.apply_updates(mine, updates), opt_state, lv / micro_batches

    if sharding is None:
        return jax.jit(step), opt
    p_sh, o_sh, t_sh = sharding
    scalar = jax.sharding.NamedSharding(t_sh.mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=(p_sh, o_sh, scalar), donate_argnums=(0, 1)), opt


# ---- split over devices ---------------------------------------------------------------------------------------
# Three ways, through jax.sharding. On a one-axis mesh of N devices: "fsdp" (each array cut in N along its largest
# dimension N divides, the batch split N ways: the parameters, gradients and optimizer state of a train step
# spread as ZeRO-3 / FSDP spread them) and "tp" (Megatron's tensor parallelism: the products that open a block
# cut by columns, those that close it by rows, the vocabulary cut; norms and the batch whole). On a 2-D mesh
# (N / T groups of T): "fsdp+tp", the tp cut over each group's T devices and the fsdp cut over the groups, of the
# batch and of each array's largest dimension the tp cut left whole (MaxText's fsdp and tensor axes, and
# torchtitan's 2-D parallelism, split a model so).
AXIS = "devices"  # the one axis of a 1-D mesh; of a 2-D mesh, the fsdp (data) axis
MODEL = MODEL_AXIS  # a 2-D mesh's tensor-parallel axis
_COLUMNS = ("wqkv", "w_gate", "w_up", "w_qkv", "b_qkv", "w_fc", "b_fc", "head")  # cut along their last dimension
_ROWS = ("wo", "w_down", "w_o", "w_proj")  # cut along their input dimension (the one after the layer axis)


_EXPERTS = ("w_gate", "w_up", "w_down")  # a mixture of experts' matrices, [L, E, ...]: an expert to a device


def _is_experts(name: str, shape: tuple[int, ...]) -> bool:
    return name in _EXPERTS and len(shape) == 4


def _is_cache(name: str, shape: tuple[int, ...]) -> bool:
    """A KV cache's array ([L, B, S, KV heads, hd], or [B, S, KV heads, hd] a layer): unnamed, in a list or tuple."""
    return not name and len(shape) >= 4


def residual_layout(mesh: jax.sharding.Mesh | None) -> Callable | None:
    """On an fsdp+tp mesh, a constraint on the residual stream [B, T, d] between layers: the batch over the groups,
    each group's devices holding their rows whole (Megatron's layout, in which a group's products cut by columns
    and rows need one all-reduce each half block). None on a 1-D mesh, where XLA propagates the arrays' cuts
    well: on the 2-D one, left to itself, it split the stream along d over the groups too and moved it each layer
    (Llama 7B on 8 H100s, fsdp 4 x tp 2, a train step of 8 x 2k: 49 GB a GPU against fsdp's 24 GB)."""
    if mesh is None or MODEL not in mesh.axis_names:
        return None
    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding

    def put(x):  # the batch over the groups; a batch too small to split, its sequence (attention gathers K and V)
        n = mesh.shape[AXIS]
        spec = P(AXIS) if x.shape[0] % n == 0 else P(None, AXIS) if x.shape[1] % n == 0 else P()
        return jax.lax.with_sharding_constraint(x, NS(mesh, spec))

    return put


def tp_degree(devices: int) -> int:
    """The tensor-parallel group an fsdp+tp mesh of ``devices`` takes when none is named: the largest power of
    two that divides ``devices`` and whose square is at most it (2 of 4, 6 or 8, 4 of 16, 1 of an odd count): the
    squarest mesh, its model axis no longer than its fsdp axis, as a tp group's all-reduces of activations grow
    with it and fsdp's gathers do not."""
    t = 1
    while (2 * t) ** 2 <= devices and devices % (2 * t) == 0:
        t *= 2
    return t


def mesh_for(devices: Sequence[Any], how: str = "fsdp", tp: int = 0) -> jax.sharding.Mesh:
    """The mesh ``shard_specs`` splits a step ``how`` over (``parallel.make_mesh``): one axis (``AXIS``) for "fsdp"
    or "tp"; for "fsdp+tp", the devices in groups of ``tp`` (0: ``tp_degree``) along ``MODEL``, the groups along
    ``AXIS``."""
    from jaxgpu.kernels import parallel

    devs = list(devices)
    if how != "fsdp+tp":
        return parallel.make_mesh(devs, axes=(AXIS,))
    t = tp or tp_degree(len(devs))
    if len(devs) % t:
        raise ValueError(f"{len(devs)} devices do not split into tensor-parallel groups of {t}")
    return parallel.make_mesh(devs, (len(devs) // t, t), (AXIS, MODEL))


def _fsdp_spec(shape: tuple[int, ...], n: int, axis: str = AXIS, taken: tuple = ()) -> jax.sharding.PartitionSpec:
    P = jax.sharding.PartitionSpec
    dims = sorted((i for i in range(len(shape)) if i not in taken), key=lambda i: -shape[i])
    cut = next((i for i in dims if shape[i] % n == 0 and shape[i] >= n), None)
    return P(*[axis if i == cut else None for i in range(len(shape))])


def _tp_cut(name: str, shape: tuple[int, ...], n: int) -> int | None:
    """The dimension tensor parallelism cuts an array named ``name`` along, or None where it keeps it whole."""
    cut = None
    if name in _COLUMNS or name.startswith(tuple(c + "_" for c in _COLUMNS)):
        cut = len(shape) - 1
    elif name in _ROWS:
        cut = len(shape) - 2
    elif name == "embed":
        cut = 0
    return None if cut is None or shape[cut] % n else cut


def _tp_spec(name: str, shape: tuple[int, ...], n: int) -> jax.sharding.PartitionSpec:
    cut = _tp_cut(name, shape, n)
    return jax.sharding.PartitionSpec(*[AXIS if i == cut else None for i in range(len(shape))])


def _two_d_spec(name: str, shape: tuple[int, ...], data: int, model: int, batch: bool) -> jax.sharding.PartitionSpec:
    """An array's cut on the fsdp+tp mesh: tp's along ``MODEL`` (a KV cache [.., B, S, KV heads, hd] by its heads),
    then along ``AXIS`` the batch of a batch or a cache, a mixture's experts, else fsdp's largest dimension left."""
    def whole_if(i, n):
        return i if i is not None and 0 <= i < len(shape) and shape[i] % n == 0 and shape[i] >= n else None

    cache = _is_cache(name, shape)
    cut = None if batch else whole_if(len(shape) - 2, model) if cache else _tp_cut(name, shape, model)
    if batch or cache:
        split = whole_if(0 if batch else len(shape) - 4, data)
    elif _is_experts(name, shape):
        split = whole_if(1, data)
    else:
        split = None
    spec = [MODEL if i == cut else None for i in range(len(shape))]
    if split is not None and split != cut:
        spec[split] = AXIS
        return jax.sharding.PartitionSpec(*spec)
    fsdp = _fsdp_spec(shape, data, AXIS, () if cut is None else (cut,))
    return jax.sharding.PartitionSpec(*[a or b for a, b in zip(fsdp, spec)])


def shard_specs(tree: Any, mesh: jax.sharding.Mesh, how: str = "fsdp", batch: bool = False) -> Any:
    """``NamedSharding``s for every array of ``tree`` (parameters, optimizer state, a KV cache: arrays or specs)
    on ``mesh`` (``mesh_for``), split ``how`` ("fsdp", "tp", or "fsdp+tp" on a 2-D mesh); ``batch``: the tree is
    a batch (tokens), split along its first dimension under fsdp (whole where the devices do not divide it), whole
    under tp, and under fsdp+tp over the groups, along its sequence where they do not divide the batch."""
    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    if (how == "fsdp+tp") != (MODEL in mesh.axis_names):
        raise ValueError(f"a {how} split takes a {'2-D' if how == 'fsdp+tp' else '1-D'} mesh (mesh_for), "
                         f"got axes {mesh.axis_names}")
    n = mesh.devices.size

    def one(path, a):
        shape = tuple(a.shape)
        if not shape or n == 1:
            return NS(mesh, P())
        keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
        name = next((k for k in reversed(keys) if isinstance(k, str)), "")
        if how == "fsdp+tp":
            return NS(mesh, _two_d_spec(name, shape, mesh.shape[AXIS], mesh.shape[MODEL], batch))
        if batch:
            return NS(mesh, P(AXIS) if how == "fsdp" and shape[0] % n == 0 else P())
        if _is_experts(name, shape) and shape[1] % n == 0:  # [L, E, ...]: experts split over devices
            return NS(mesh, P(None, AXIS, None, None))
        if how == "fsdp":
            return NS(mesh, _fsdp_spec(shape, n))
        if _is_cache(name, shape) and shape[-2] % n == 0:  # a KV cache [.., S, KV heads, hd]: by heads
            return NS(mesh, P(*[AXIS if i == len(shape) - 2 else None for i in range(len(shape))]))
        return NS(mesh, _tp_spec(name, shape, n))

    return jax.tree_util.tree_map_with_path(one, tree)


def update_share(tree: dict, shards: int) -> dict:
    """The weights one of ``shards`` devices updates: the first 1/shards of the layer stack (and, unsharded,
    the embeddings and norms)."""
    if shards <= 1:
        return tree
    n = max(1, -(-jax.tree.leaves(tree["layers"])[0].shape[0] // shards))
    return {"layers": jax.tree.map(lambda a: a[:n], tree["layers"])}


def train_specs(c: Config, batch: int, seq: int, shards: int = 1, dtype: Any = jnp.float32) -> tuple:
    """(params, opt_state, tokens) specs for ``train_step``'s step; ``dtype``: the weights' (and so the AdamW
    moments') storage: float32 master weights, or bfloat16 for pure-bf16 training."""
    import optax

    params = param_specs(c, dtype)
    opt = optax.adamw(3e-4, weight_decay=0.1)
    state = jax.eval_shape(lambda p: opt.init(update_share(p, shards)), params)
    return params, state, jax.ShapeDtypeStruct((batch, seq + 1), jnp.int32)


def prefill_step(c: Config, compute: Any = jnp.bfloat16, sharding: tuple | None = None,
                 settings: StepSettings | None = None):
    """A jitted ``step(params, tokens) -> logits`` of a prompt [B, T]: every layer over every token (what fills a
    KV cache), the vocabulary head for the last position only (the next token's logits)."""
    settings = settings or StepSettings()
    layout = residual_layout(sharding[1].mesh if sharding else None)

    def step(params, tokens):
        p = jax.tree.map(lambda a: a.astype(compute), params)
        return _logits(c, p, _hidden(c, p, tokens, flash=settings.flash, s=settings, layout=layout)[:, -1])

    if sharding is None:
        return jax.jit(step)
    whole = jax.sharding.NamedSharding(jax.tree.leaves(sharding[0])[0].mesh, jax.sharding.PartitionSpec())
    return jax.jit(step, in_shardings=sharding, out_shardings=whole)


def decode_step(c: Config, compute: Any = jnp.bfloat16, weights: str = "bf16", sharding: tuple | None = None):
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
    if v.dtype in _STORED.values():
        return v.astype(compute) * w[name + "_scale"].astype(compute)
    return v.astype(compute)


def quantize(params: dict, weights: str, dtype: Any = jnp.bfloat16) -> dict:
    """``params`` with each layer matrix stored as ``decode_specs`` says for ``weights`` ("int8" or "fp8"): the
    matrix over a per-output-channel scale (its largest magnitude onto the type's largest finite value), rounded
    into the type, beside ``<name>_scale``."""
    stored = _STORED[weights]
    top = 127.0 if weights == "int8" else float(jnp.finfo(stored).max)
    layers = {}
    for k, w in params["layers"].items():
        if w.ndim != 3:
            layers[k] = w.astype(dtype)
            continue
        scale = jnp.maximum(jnp.abs(w.astype(jnp.float32)).max(axis=1), 1e-12) / top  # [L, out]
        q = w.astype(jnp.float32) / scale[:, None, :]
        layers[k] = (jnp.round(q) if weights == "int8" else q).astype(stored)
        layers[k + "_scale"] = scale.astype(dtype)
    return {**jax.tree.map(lambda a: a.astype(dtype), {k: v for k, v in params.items() if k != "layers"}),
            "layers": layers}


def decode_specs(c: Config, batch: int, context: int, weights: str = "bf16", dtype: Any = jnp.bfloat16,
                 unrolled: bool = False) -> tuple:
    """(params, cache, token, index) specs for ``decode_step``: weights stored in ``dtype`` (or int8 or fp8 matrices
    with per-channel scales), the cache in ``dtype`` for ``context`` tokens; ``unrolled``: one entry per
    layer (lists) instead of stacks."""
    params = param_specs(c, dtype)
    if weights in _STORED:
        stored = _STORED[weights]
        layers = {}
        for k, s in params["layers"].items():
            if len(s.shape) == 3:
                layers[k] = jax.ShapeDtypeStruct(s.shape, stored)
                layers[k + "_scale"] = jax.ShapeDtypeStruct((s.shape[0], s.shape[2]), dtype)
            else:
                layers[k] = s
        params = {**params, "layers": layers}
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
