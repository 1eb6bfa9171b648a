"""A decoder-only transformer described once, without JAX: its shape, the named models, a Hugging Face
``config.json`` read into one, how a step of it is run (``StepSettings``), and the counts the formulas use.

Everything that builds (``jaxgpu.kernels.transformer``), splits (``jaxgpu.kernels.sharding``), plans
(``jaxgpu.pricing.planner``) or estimates (``jaxgpu.pricing.fit``) a decoder reads this one description; a
model is added by adding a ``Decoder`` to ``MODELS`` (docs/adding-a-model.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re

from jaxgpu.ground import remat

STYLES = ("gpt2", "llama")


@dataclasses.dataclass(frozen=True)
class Decoder:
    """A decoder's shape. GPT-2 blocks (``style="gpt2"``): LayerNorm with biases, a GELU MLP of two matrices,
    learned positions (``max_seq`` of them) and the embedding as the output head. Llama blocks: RMSNorm, rotary
    positions, a gated MLP of three matrices (``mlp``), grouped-query attention (``kv_heads``), an output head of
    its own unless ``tied``.

    Counts: ``params()`` every weight the built model holds (norms, biases and positions included);
    ``active_params()`` those one token's forward pass reads; ``formula_params()`` the matrices and embeddings the
    memory formula counts (``jaxgpu.pricing.fit``)."""

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

    def __post_init__(self):
        if self.style not in STYLES:
            raise ValueError(f"{self.name}: unknown style {self.style!r}; known: {', '.join(STYLES)}")
        sizes = {k: getattr(self, k) for k in ("layers", "d_model", "heads", "kv_heads", "ffn", "vocab", "max_seq")}
        bad = [k for k, v in sizes.items() if not isinstance(v, int) or v < 1]
        if bad:
            raise ValueError(f"{self.name}: {', '.join(bad)} must be positive integers")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: {self.heads} heads do not split into {self.kv_heads} key/value groups")

    @property
    def head_dim(self) -> int:
        return self.head_size or self.d_model // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def gated(self) -> bool:
        """Its MLP has a gate (three matrices): every llama-style block's."""
        return self.style == "llama"

    @property
    def tied_head(self) -> bool:
        """The output head is the embedding: GPT-2's always, a llama-style model's where ``tied``."""
        return self.style == "gpt2" or self.tied

    def layer_shapes(self) -> dict[str, tuple[int, ...]]:
        """One layer's arrays by name and shape (the kernels stack them on a leading layer axis)."""
        return _layer_shapes(self)

    def shapes(self) -> dict:
        """Every array of the model by name and shape: the embedding, the layers' stacks, norms, positions, head."""
        d = self.d_model
        out: dict = {"embed": (self.vocab, d), "final_norm": (d,),
                     "layers": {k: (self.layers, *v) for k, v in self.layer_shapes().items()}}
        if self.style == "gpt2":
            out["pos"], out["final_norm_b"] = (self.max_seq, d), (d,)
        elif not self.tied:
            out["head"] = (d, self.vocab)
        return out

    def params(self) -> int:
        """Weights, embeddings included: every array ``shapes`` names."""
        top = self.shapes()
        return (sum(math.prod(s) for k, s in top.items() if k != "layers")
                + sum(math.prod(s) for s in top["layers"].values()))

    def active_params(self) -> int:
        """The weights one token's forward pass reads: a mixture of experts' ``top_k`` of its experts' MLPs."""
        if self.experts <= 1:
            return self.params()
        return self.params() - (self.experts - self.top_k) * 3 * self.d_model * self.ffn * self.layers

    def adapter_shapes(self, rank: int, on: str = "all") -> dict[str, tuple[int, ...]]:
        """A LoRA step's adapters by name: for each matrix ``LORA_TARGETS[on]`` names, ``<name>_lora_a`` [L, in,
        rank] and ``<name>_lora_b`` [L, rank, out] (a mixture's experts are not adapted)."""
        out = {}
        for k, (n, m) in ((k, s) for k, s in self.layer_shapes().items() if k in LORA_TARGETS[on] and len(s) == 2):
            out[k + "_lora_a"], out[k + "_lora_b"] = (self.layers, n, rank), (self.layers, rank, m)
        return out

    def adapter_params(self, rank: int, on: str = "all") -> int:
        """The weights a LoRA step trains: its adapters' (``adapter_shapes``)."""
        return sum(math.prod(s) for s in self.adapter_shapes(rank, on).values())

    def formula_params(self) -> int:
        """The weights the memory formula counts: the attention's four matrices, the MLP's two or three (every
        expert's and the router), the embedding and an output head of its own; no norms, biases or positions.
        Of a GPT-2 shape whose MLP is 4 d wide: the classic 12 L d^2 + V d."""
        d = self.d_model
        attention = d * (2 * self.q_dim + 2 * self.kv_dim)  # q and o, k and v
        mlp = (3 if self.gated else 2) * d * self.ffn
        if self.experts > 1:
            mlp = self.experts * mlp + d * self.experts  # every expert's matrices and the router
        return self.layers * (attention + mlp) + self.vocab * d * (1 if self.tied_head else 2)


def _layer_shapes(c: Decoder) -> dict[str, tuple[int, ...]]:
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


def from_hf_config(d: dict, name: str = "config") -> tuple[Decoder, list[str]]:
    """A decoder from a Hugging Face-style ``config.json`` (a dict): the Decoder and the fields it did not read
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
    c = Decoder(name, d["num_hidden_layers"], d["hidden_size"], heads, kv, d["intermediate_size"], d["vocab_size"],
                d.get("max_position_embeddings") or 8192, "llama",
                head_size=head_dim if head_dim and head_dim != d["hidden_size"] // heads else None,
                # absent, transformers takes the model class's own default: tied for Gemma, untied for Llama's kin
                mlp=_HF_ACT[act], tied=bool(d.get("tie_word_embeddings", str(d.get("model_type")).startswith("gemma"))),
                experts=experts if experts > 1 else 0, top_k=top_k, window=int(window or 0))
    return c, sorted(k for k in d if k not in HF_READ and k not in HF_COST_FREE)




# Shapes from the models' published configs: GPT-2 (OpenAI's gpt2 / gpt2-medium / gpt2-large / gpt2-xl, vocabulary
# padded to 50304 as llm.c and nanoGPT do), Llama 2 7B/13B/70B and Llama 3.x 1B/8B (Meta's params.json).
MODELS = {c.name: c for c in (
    Decoder("gpt2-124m", 12, 768, 12, 12, 3072, 50304, 1024, "gpt2"),
    Decoder("gpt2-350m", 24, 1024, 16, 16, 4096, 50304, 1024, "gpt2"),
    Decoder("gpt2-774m", 36, 1280, 20, 20, 5120, 50304, 1024, "gpt2"),
    Decoder("gpt2-1.5b", 48, 1600, 25, 25, 6400, 50304, 1024, "gpt2"),
    Decoder("llama-1b", 16, 2048, 32, 8, 8192, 128256, 8192, "llama"),
    Decoder("llama-7b", 32, 4096, 32, 32, 11008, 32000, 4096, "llama"),
    Decoder("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, "llama"),
    Decoder("llama-13b", 40, 5120, 40, 40, 13824, 32000, 4096, "llama"),
    Decoder("llama-70b", 80, 8192, 64, 8, 28672, 32000, 4096, "llama"),
    # Llama-3.1 70B (meta-llama/Llama-3.1-70B config.json): Llama-2 70B's layers, a 128,256-token vocabulary, 131,072
    # positions
    Decoder("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 131072, "llama"),
    # Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): 8 experts of Mistral 7B's MLP, 2 a token
    Decoder("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, "llama", experts=8, top_k=2),
    # Mistral 7B (mistralai/Mistral-7B-v0.1 config.json): Llama's block with grouped-query attention and a sliding
    # window of 4,096 tokens
    Decoder(name="mistral-7b", layers=32, d_model=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000,
            max_seq=32768, style="llama", window=4096),
    # Published runs' decoders (jaxgpu.pricing.published). paxml @b397693f paxml/contrib/gpu/scripts_gpu/configs.py:
    # 12 layers, 768 wide, 12 heads, 3072 hidden, vocabulary 50304, 2048 positions, GELU, learned positions, biases
    Decoder("pax-gpt-126m", 12, 768, 12, 12, 3072, 50304, 2048, "gpt2"),
    # the same file's 5B (24 layers, 4096 wide, 32 heads, 16384 hidden, the 126M's vocabulary) and NeMo's GPT3-5B
    # (NeMo-Framework-Launcher conf/training/gpt3/5b.yaml: the same shape, GPT-2's vocabulary padded to 128s)
    Decoder("gpt3-5b", 24, 4096, 32, 32, 16384, 50304, 2048, "gpt2"),
    # NeMo's GPT3 20B and 175B (NeMo-Framework-Launcher @056a90e launcher_scripts/conf/training/gpt3/20b.yaml and
    # 175b.yaml: 44 layers 6144 wide with 48 heads, 96 layers 12288 wide with 96 heads, an MLP 4 d wide, 2048 positions)
    Decoder("gpt3-20b", 44, 6144, 48, 48, 24576, 50304, 2048, "gpt2"),
    Decoder("gpt3-175b", 96, 12288, 96, 96, 49152, 50304, 2048, "gpt2"),
    # The memory formula's classic shapes (memory_fit's table): GPT-style blocks, an MLP 4 d wide, one embedding
    # shared with the head, a 32k vocabulary: 12 L d^2 + V d, about the parameters their names say
    Decoder("1B", 22, 2048, 16, 16, 8192, 32000, 2048, "gpt2"),
    Decoder("7B", 32, 4096, 32, 32, 16384, 32000, 2048, "gpt2"),
    Decoder("13B", 40, 5120, 40, 40, 20480, 32000, 2048, "gpt2"),
    Decoder("70B", 80, 8192, 64, 64, 32768, 32000, 2048, "gpt2"),
)}


def _squeezed(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower())


def find(model: str | Decoder) -> Decoder:
    """The decoder ``model`` names, in any case and punctuation ("Llama3-8B", "llama38b": llama3-8b), or a
    ``Decoder`` as it is.

    Raises:
      KeyError: no model of ``MODELS`` has the name; the message suggests the nearest.
    """
    if isinstance(model, Decoder):
        return model
    by_squeezed = {_squeezed(k): k for k in MODELS}
    if isinstance(model, str) and _squeezed(model) in by_squeezed:
        return MODELS[by_squeezed[_squeezed(model)]]
    near = difflib.get_close_matches(str(model).lower(), list(MODELS), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise KeyError(f"unknown model {model!r}; {hint}known: {', '.join(MODELS)}")


def keys_seen(seq: int, window: int = 0) -> int:
    """The keys a query's scores are computed against: every token's, or with a sliding ``window`` over a sequence of
    whole windows (past one), its block's and the one before (jaxgpu.kernels.transformer runs them banded; other
    lengths are masked, their scores whole)."""
    return 2 * window if window and seq > window and seq % window == 0 else seq


# The policies of jax.checkpoint_policies that take no arguments, by name: what a run's remat setting names
# (MaxText's and Levanter's configs name the same ones: save the matrix products' outputs, or nothing)
REMAT_POLICIES = ("dots_saveable", "dots_with_no_batch_dims_saveable", "checkpoint_dots",
                  "checkpoint_dots_with_no_batch_dims", "nothing_saveable", "everything_saveable")
MATMULS = ("bf16", "fp8")
# stored weights: a decode step's int8 and fp8 with a scale per output channel; a LoRA step's frozen base in int8, or
# in NF4 (QLoRA's 4-bit NormalFloat: 16 levels, two to a byte, an absmax scale a block of NF4_BLOCK inputs)
WEIGHTS = ("bf16", "int8", "fp8", "nf4")
NF4_BLOCK = 64  # QLoRA's block (Dettmers et al. 2023, bitsandbytes' default for 4-bit weights)
# the matrices a LoRA step adapts (StepSettings.lora_on): every matrix of a layer, as NeMo's default targets
# (linear_qkv, linear_proj, linear_fc1, linear_fc2) and QLoRA's paper (all linear layers); or the attention's alone
LORA_TARGETS = {"all": ("wqkv", "wo", "w_gate", "w_up", "w_down", "w_qkv", "w_o", "w_fc", "w_proj"),
                "attention": ("wqkv", "wo", "w_qkv", "w_o")}
# how a step's GPUs split it: auto is fsdp to train, tensor parallel to serve; fsdp+tp is both, on a 2-D mesh; hsdp
# is fsdp within each node and the nodes replicas of each other; dp keeps everything whole on every GPU (DDP), zero1
# and zero2 too but for the optimizer's state (and zero2 the gradients) cut as fsdp cuts them (ZeRO stages 1 and 2);
# zero1+tp is Megatron's layout: tp groups within a node, the groups data parallel with AdamW's state cut over all
MESHES = ("auto", "fsdp", "tp", "fsdp+tp", "hsdp", "dp", "zero1", "zero2", "zero1+tp")
# a pipeline's schedules (StepSettings.schedule): GPipe runs every micro-batch's forward pass, then every backward
# pass; 1F1B (PipeDream-Flush, Megatron's) starts a micro-batch's backward pass as soon as it can, and with virtual
# stages a GPU holds several chunks of layers (Megatron's interleaved 1F1B)
SCHEDULES = ("1f1b", "gpipe")
# how a run hides its async collectives under compute: as XLA's schedule of the plan orders them (a JAX run: the
# plan is its program), or as a framework that buckets its own does (PyTorch's DDP and FSDP, Megatron's optimizer)
OVERLAPS = ("plan", "framework")


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """How a step is run: what real training and serving runs set first.

    Attributes:
      remat: "none" (the backward pass keeps every activation it needs), a policy of ``jax.checkpoint_policies``
        by its name (``REMAT_POLICIES``), applied to each layer: ``dots_saveable`` keeps the matrix products' outputs
        and recomputes the rest, ``nothing_saveable`` recomputes each layer whole; or a framework's policy by its
        framework's name (``jaxgpu.ground.remat.POLICIES``: "maxtext:minimal_flash", "pax:SAVE_QKV_OUT_PROJ",
        "megatron:selective", ...), defined as the framework defines it.
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
        split, the weights gathered for each layer: ZeRO-3), "tp" (Megatron's column and row cuts, the batch whole),
        "fsdp+tp" (both, on a 2-D mesh: groups of ``tp`` GPUs cut each layer's products as tp does, and the
        groups split the batch and the rest of each array as fsdp does), "hsdp" (fsdp over each node's GPUs, the
        nodes replicas that all-reduce their gradients), "dp" (every array whole on every GPU, the batch split:
        DDP), "zero1" / "zero2" (dp with AdamW's state, and for zero2 the gradients summed over micro-batches,
        cut as fsdp cuts them), "zero1+tp" (Megatron's: groups of ``tp`` GPUs cut each layer's products as tp does,
        the groups data parallel, each holding the weights' tp cuts whole, AdamW's state cut over every GPU and
        the gradients reduced once a step: a distributed optimizer), or "auto": fsdp to train, tp to serve. Past
        one node, a mesh spans every GPU.
      tp: with the fsdp+tp or zero1+tp mesh, the GPUs of a tensor-parallel group; 0: ``tp_degree``'s choice.
      query_block: with flash, the attention run a block of this many queries at a time, each block's scores
        recomputed in the backward pass (0: all at once). The same arithmetic; what changes is what XLA's memory
        plan holds: a block's scores, not a layer's, nearer what a fused kernel holds (which holds none).
        ``jaxgpu.pricing.planner.plan_model`` reads a long context's memory off such a twin of the step.
      lora: a training step's adapter rank (LoRA): the base weights frozen (no gradients, no optimizer state), a
        pair of rank-``lora`` matrices beside each adapted one trained with AdamW; 0: every weight trained. With it,
        ``weights`` stores the frozen base: "bf16", or "int8" / "nf4" (QLoRA), widened for each product.
      lora_on: the matrices adapted (``LORA_TARGETS``): "all" of a layer's, or the "attention"'s.
      pp: a training step's pipeline stages: the layers in ``pp`` stages of consecutive layers, each stage on
        devices / ``pp`` GPUs (split by ``mesh`` among them), the ``accumulate`` micro-batches flowing through them.
      vp: virtual stages a GPU (interleaved 1F1B): each GPU holds ``vp`` chunks of layers, ``pp`` x ``vp`` chunks
        in turn, a smaller bubble for more sends between stages (1: not interleaved).
      schedule: the pipeline's order of forward and backward passes (``SCHEDULES``): "1f1b" or "gpipe".
      ep: a mixture's expert-parallel groups: the GPUs in groups of ``ep`` that hold the experts between them (each
        GPU E / ``ep`` experts, cut fsdp over the groups), each GPU's tokens sent to its experts' GPUs and back (an
        all-to-all each way a layer); the rest of the step fsdp over every GPU (1: none).
      cp: context-parallel groups: each sequence split over ``cp`` GPUs, a layer's keys and values gathered over
        the group (a ring's bytes); the rest fsdp over every GPU, the batch over the groups (1: none).
      overlap: how the async collectives hide under compute (``OVERLAPS``): "plan", only where XLA's schedule puts
        compute between a collective's start and its done (a JAX run's own order); "framework", under the step's
        whole compute, up to its length (PyTorch's DDP buckets and FSDP prefetch, Megatron's distributed optimizer:
        orders a JAX plan does not show).
      xla: the run's XLA flags that change its plan, as (flag, value) pairs without the dashes (the latency-hiding
        scheduler, the collectives' combine sizes, pipelined gathers): compiled with them; (): XLA's defaults.
      network: each GPU's network port to other nodes in the run's cluster, Gb/s each way (a cloud VM's NICs shared
        among its GPUs: ``hardware.with_network``); 0: the card's table, NVIDIA's DGX (one port a GPU).
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
    lora: int = 0
    lora_on: str = "all"
    pp: int = 1
    vp: int = 1
    schedule: str = "1f1b"
    ep: int = 1
    cp: int = 1
    overlap: str = "plan"
    xla: tuple = ()
    network: float = 0.0

    def __post_init__(self):
        if not 0 <= self.network < float("inf"):
            raise ValueError(f"a network port is 0 (the card's table) or more Gb/s, got {self.network}")
        if self.overlap not in OVERLAPS:
            raise KeyError(f"unknown overlap {self.overlap!r}; known: {', '.join(OVERLAPS)}")
        if any(not (isinstance(f, tuple) and len(f) == 2 and str(f[0]).startswith("xla_")) for f in self.xla):
            raise ValueError(f"xla flags are (name, value) pairs, each name xla_...: got {self.xla!r}")
        if self.mesh not in MESHES:
            raise KeyError(f"unknown mesh {self.mesh!r}; known: {', '.join(MESHES)}")
        if self.tp < 0 or (self.tp and self.mesh not in ("fsdp+tp", "zero1+tp")):
            raise ValueError(f"tp ({self.tp}) sizes the tensor-parallel groups of the fsdp+tp mesh; the mesh here is "
                             f"{self.mesh!r}" if self.tp > 0 else f"tp must be 0 (auto) or more, got {self.tp}")
        framework = remat.check(self.remat)  # a framework's name, defined as it defines it (KeyError: refused)
        if self.remat != "none" and self.remat not in REMAT_POLICIES and framework is None:
            raise KeyError(f"unknown remat policy {self.remat!r}; known: none, {', '.join(REMAT_POLICIES)}, or a "
                           "framework's (maxtext:, pax:, megatron:, nemo:, torchtitan:; jaxgpu.ground.remat.POLICIES)"
                           + (f"; did you mean {remat.suggest(self.remat)}?" if remat.suggest(self.remat) else ""))
        if framework and framework.needs_flash and not self.flash:
            raise ValueError(f"remat {self.remat!r} recomputes the attention core, which this program does as a fused "
                             "kernel: flash attention")
        if self.matmul not in MATMULS:
            raise KeyError(f"unknown matmul type {self.matmul!r}; known: {', '.join(MATMULS)}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {self.nodes}")
        if self.weights not in WEIGHTS:
            raise KeyError(f"unknown weight storage {self.weights!r}; known: {', '.join(WEIGHTS)}")
        if self.accumulate < 1:
            raise ValueError(f"accumulate must be at least 1 micro-batch, got {self.accumulate}")
        if self.lora < 0:
            raise ValueError(f"a LoRA rank must be 1 or more (0: no adapters), got {self.lora}")
        if self.lora_on not in LORA_TARGETS:
            raise KeyError(f"unknown LoRA targets {self.lora_on!r}; known: {', '.join(LORA_TARGETS)}")
        if self.weights == "nf4" and not self.lora:
            raise ValueError("nf4 weights are QLoRA's frozen base: a step with LoRA adapters (lora > 0)")
        if self.schedule not in SCHEDULES:
            raise KeyError(f"unknown pipeline schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if self.pp < 1 or self.vp < 1:
            raise ValueError(f"pipeline stages and virtual stages are 1 or more, got pp {self.pp}, vp {self.vp}")
        if self.ep < 1 or self.cp < 1 or self.ep > 1 and self.cp > 1:
            raise ValueError(f"expert- and context-parallel groups are 1 or more, one of them at a time; got ep "
                             f"{self.ep}, cp {self.cp}")
        if (self.ep > 1 or self.cp > 1) and self.mesh not in ("auto", "fsdp"):
            raise ValueError(f"ep and cp groups split a step with fsdp over their groups, not the {self.mesh} mesh")
        if self.vp > 1 and (self.pp == 1 or self.schedule != "1f1b"):
            raise ValueError("virtual stages interleave a 1F1B pipeline's chunks: they take pp > 1 and the 1f1b "
                             "schedule")

    def words(self) -> str:
        """The settings in a phrase: "remat dots_saveable, flash attention, bf16 products, scanned layers"."""
        # the earlier nodes setting said only where set: a mesh over several nodes counts them in its devices
        return (f"remat {self.remat}, {'flash' if self.flash else 'XLA'} attention, {self.matmul} products, "
                f"{'scanned' if self.scan else 'unrolled'} layers"
                + (f", {self.nodes} nodes" if self.nodes > 1 else "")
                + (f", {self.accumulate} micro-batches" if self.accumulate > 1 else "")
                + (f", LoRA rank {self.lora} on {self.lora_on} matrices" if self.lora else "")
                + (f", {self.weights} {'base ' if self.lora else ''}weights" if self.weights != "bf16" else "")
                + (f", {self.mesh} mesh" if self.mesh != "auto" else "")
                + (f" (tp {self.tp})" if self.tp else "")
                + (f", attention in blocks of {self.query_block} queries" if self.query_block else "")
                + (f", experts over groups of {self.ep}" if self.ep > 1 else "")
                + (f", sequences over groups of {self.cp}" if self.cp > 1 else "")
                + (f", {self.pp} pipeline stages ({self.schedule}"
                   + (f", {self.vp} virtual stages a GPU)" if self.vp > 1 else ")") if self.pp > 1 else "")
                + (", collectives hidden as its framework buckets them" if self.overlap == "framework" else "")
                + (f", the run's {len(self.xla)} XLA flag{'s' if len(self.xla) > 1 else ''}" if self.xla else "")
                + (f", a {self.network:g} Gb/s network port a GPU" if self.network else ""))

