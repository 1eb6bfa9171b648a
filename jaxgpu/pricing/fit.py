"""Memory fit: how many bytes a model needs to train or serve, checked against XLA's own accounting.

MLP train step (the jitted Flax + Optax step of ``jaxgpu.kernels.mlp``, state donated)::

    bytes = state + batch + max(activation phase, gradient phase)

    state            = 4 P (fp32 parameters) + 4 P x (0 SGD | 1 momentum | 2 Adam) optimizer state
    batch            = B x d_in x 4 + B x 4 (fp32 inputs, int32 labels)
    activation phase = the largest live set of the backward pass, walked layer by layer from the top:
                       what the forward pass kept of the layers below (``keep`` bytes per element)
                       + the current layer's kept values (``keep_last`` for the top hidden layer)
                       + the gradient w.r.t. its output (4 B x w_i, the ReLU mask applied in place)
                       + the gradient arriving from the layer above (4 B x w_i+1)
                       + the compute-dtype copy of the inputs (``input_copy`` bytes per element)
                       + a copy of every weight the backward pass multiplies by (all but the
                         first layer; ``weight_copy`` bytes per element)
    gradient phase   = 8 x the largest weight matrix: its fp32 gradient and one temporary of
                       the same size (the step's zero-gradient count)

Which values the compiled program keeps is a property of the backend and the precision (the
``Lowering``), read off the buffer assignment of compiled train steps (``--xla_dump_to``):
on XLA:CPU an fp32 step keeps each hidden layer's pre- and post-activation (8 bytes per
element; the top layer's post-activation is recomputed, 4); bf16 keeps the rounded activation
in bf16 plus its fp32 round-trip copy that the fp32 dot reads (6), and fp16 keeps fp32
values only (8); both round-trip the inputs and weights through fp32 (4 bytes per element).
The ``memory_fit`` experiment re-checks the model against ``compiled.memory_analysis()``
(arguments + outputs + temporaries - aliased) on every run, on every backend.

Transformer (a ``jaxgpu.ground.decoders.Decoder``: L layers, width d, vocabulary V, a heads, sequence s, batch b):
parameters ``Decoder.formula_params`` (12 L d^2 + V d for the classic shapes); training with Adam keeps fp32
master weights, gradients and two moments (16 bytes/parameter) plus a low-precision weight copy (2 bytes) when
computing in bf16/fp16; activations s b d (34 + 5 a s / d) bytes per layer without recomputation
(Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
2022, eq. 1). Inference: the weights at the preset's width plus the KV cache
(2 L s b d x bytes per element).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxgpu.ground import decoders
from jaxgpu.ground import remat as remat_names
from jaxgpu.ground.decoders import Decoder
from jaxgpu.ground.workload import megatron_split

OPT_STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}
BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1, "fp64": 8}


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Predicted bytes by component; ``total`` is the peak."""

    params: int
    optimizer: int
    batch: int
    activations: int
    gradients: int

    @property
    def state(self) -> int:
        return self.params + self.optimizer

    @property
    def total(self) -> int:
        return self.state + self.batch + max(self.activations, self.gradients)


def mlp_param_count(input_dim: int, widths: Sequence[int], n_out: int) -> int:
    dims = [input_dim, *widths, n_out]
    return sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))


@dataclasses.dataclass(frozen=True)
class Lowering:
    """Bytes per element a compiled train step keeps, by kind of value (see the module docstring)."""

    keep: float
    keep_last: float
    input_copy: float
    weight_copy: float


# Read off XLA:CPU's buffer assignment (jax 0.10.2, Intel Xeon with AMX); other backends are
# checked against them by the memory_fit experiment.
LOWERINGS = {
    "fp32": Lowering(keep=8, keep_last=4, input_copy=0, weight_copy=4),
    "tf32": Lowering(keep=8, keep_last=4, input_copy=0, weight_copy=4),
    "bf16": Lowering(keep=6, keep_last=6, input_copy=4, weight_copy=4),
    "fp16": Lowering(keep=8, keep_last=8, input_copy=4, weight_copy=4),
}


def mlp_train(input_dim: int, widths: Sequence[int], n_out: int, batch: int, optimizer: str = "adam",
              preset: str = "fp32", lowering: Lowering | None = None) -> MemoryEstimate:
    """Bytes of one jitted MLP train step (see the module docstring for the model).

    ``lowering``: what the backend keeps per element; ``LOWERINGS[preset]`` (XLA:CPU) by default.
    """
    if optimizer not in OPT_STATE_COPIES:
        raise KeyError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPT_STATE_COPIES)}")
    if lowering is None:
        if preset not in LOWERINGS:
            raise KeyError(f"no lowering known for preset {preset!r}; known: {', '.join(LOWERINGS)}")
        lowering = LOWERINGS[preset]
    low, b = lowering, batch
    p = mlp_param_count(input_dim, widths, n_out)
    dims = [input_dim, *widths, n_out]
    weights = [a * c for a, c in zip(dims[:-1], dims[1:])]
    backward = 0.0
    for i in range(len(widths), 0, -1):  # hidden layer i, the top one first
        below = low.keep * b * sum(widths[:i - 1])
        own = (low.keep if i < len(widths) else low.keep_last) * b * widths[i - 1]
        backward = max(backward, below + own + 4 * b * widths[i - 1] + 4 * b * dims[i + 1])
    acts = backward + low.input_copy * b * input_dim + low.weight_copy * sum(weights[1:])
    return MemoryEstimate(params=4 * p, optimizer=4 * p * OPT_STATE_COPIES[optimizer],
                          batch=b * input_dim * 4 + b * 4, activations=int(acts), gradients=8 * max(weights))


def mlp_train_tensor_parallel(input_dim: int, widths: Sequence[int], n_out: int, batch: int, model_size: int,
                              optimizer: str = "adam", data_size: int = 1) -> MemoryEstimate:
    """Bytes per device of the MLP train step split Megatron-style over ``model_size`` devices
    (and its batch over ``data_size``): every split matrix, its gradient and optimizer state
    divide by ``model_size``; a column layer's output is split, a row layer's is whole (after
    its all-reduce); the batch divides by ``data_size``. Two phases as in ``mlp_train``, with
    8 bytes per element of every hidden output and 4 P plus the largest split weight's update
    temporary in the gradient phase."""
    if optimizer not in OPT_STATE_COPIES:
        raise KeyError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPT_STATE_COPIES)}")
    dims = [input_dim, *widths, n_out]
    b = batch // data_size
    per_device = acts = largest = 0
    for i, (a, c) in enumerate(zip(dims[:-1], dims[1:])):
        split = megatron_split(i, a, c, model_size)
        div = model_size if split else 1
        per_device += a * c // div + (c // model_size if split == "column" else c)
        largest = max(largest, a * c // div)
        if i < len(widths):
            acts += b * (c // model_size if split == "column" else c) * 8
    grads = 4 * per_device + (OPT_STATE_COPIES[optimizer] > 0) * 4 * largest
    return MemoryEstimate(params=4 * per_device, optimizer=4 * per_device * OPT_STATE_COPIES[optimizer],
                          batch=b * input_dim * 4 + b * 4, activations=acts, gradients=grads)


def mlp_inference(input_dim: int, widths: Sequence[int], n_out: int, batch: int, preset: str = "fp32") -> int:
    """Bytes to serve an MLP: fp32 parameters, the input and the two widest live activations."""
    p = mlp_param_count(input_dim, widths, n_out)
    dims = sorted([input_dim, *widths, n_out])
    return 4 * p + batch * input_dim * 4 + batch * (dims[-1] + dims[-2]) * BYTES.get(preset, 4)


# the classic shapes (jaxgpu.ground.decoders) whose table memory_fit reports
CLASSIC = ("1B", "7B", "13B", "70B")


def classic() -> tuple[Decoder, ...]:
    """The classic shapes (``CLASSIC``), as ``jaxgpu.ground.decoders.MODELS`` holds them."""
    return tuple(decoders.MODELS[n] for n in CLASSIC)


GPU_MEMORY_GB = (24, 40, 80, 141)


def transformer_train(t: Decoder, preset: str = "bf16", seq: int = 2048, batch: int = 1,
                      flash: bool = False, remat: str = "none") -> dict[str, int]:
    """Bytes to train with Adam: state (master weights, grads, moments, compute copy) and activations.

    Activations per layer, Korthikanti et al.'s count in 2-byte values (34 s b d + 5 a s^2 b for their block),
    with the block's own widths: the attention keeps its input, q, k, v, the output projection's input and a
    dropout mask (2 d + 4 q + 4 kv + d bytes a token), the MLP its input, its first matrices' outputs and the
    activation's (2 d + (8 if gated else 4) f + d), the norms 4 d; the attention scores 5 a s^2 b, none with
    ``flash`` (a fused kernel keeps no scores). ``remat``, a policy of ``decoders.REMAT_POLICIES`` applied to each
    layer, keeps less: ``nothing_saveable`` each layer's input alone (2 d a token: Korthikanti et al.'s full
    recomputation, 2 s b d a layer), the dots policies the matrix products' outputs with the layer's input (q, k,
    v, the output projection's and the MLP's first matrices', 2 bytes each, not its second's, which no backward pass
    needs; ``dots_saveable`` the attention's score product too, unless ``flash``), a framework's policy
    (``jaxgpu.ground.remat.POLICIES``) its base's and the tensors it names; either way one layer's whole count more
    while the backward pass recomputes it."""
    per_param = 16 + (2 if BYTES[preset] == 2 else 0)
    d, f = t.d_model, t.ffn
    experts = t.top_k if t.experts > 1 else 1
    # a mixture of experts keeps its MLP's values for each of the top_k experts a token went through
    per_token = 10 * d + 4 * t.q_dim + 4 * t.kv_dim + (8 if t.gated else 4) * f * experts
    keys = decoders.keys_seen(seq, t.window)
    scores = 0 if flash else 5 * t.heads * seq * keys * batch
    whole = seq * batch * per_token + scores  # one layer's count, no remat
    if remat in ("none", "everything_saveable"):
        acts = t.layers * whole
    elif remat == "nothing_saveable":
        acts = t.layers * seq * batch * 2 * d + whole
    elif remat in decoders.REMAT_POLICIES or remat_names.check(remat):
        framework = remat_names.check(remat)
        base = framework.base if framework else remat
        if base in ("none", "everything_saveable"):
            return transformer_train(t, preset, seq, batch, flash, base)
        dots = base not in ("", "nothing_saveable")  # the dots policies: the products' outputs and the layer's input
        kept = 2 * d + (2 * (d + t.q_dim + 2 * t.kv_dim + (2 if t.gated else 1) * f * experts) if dots else 0)
        named = _named_bytes(t, experts)
        kept += sum(named[n] for n in (framework.names if framework else ()) if not (dots and n in _DOT_NAMES))
        batched = base in ("dots_saveable", "checkpoint_dots") and not flash  # q k^T has batch dims
        acts = t.layers * (seq * batch * kept + (2 * t.heads * seq * keys * batch if batched else 0)) + whole
    else:
        raise ValueError(f"unknown remat policy {remat!r}; known: none, {', '.join(decoders.REMAT_POLICIES)}, or a "
                         "framework's (jaxgpu.ground.remat.POLICIES)")
    if BYTES[preset] == 4:
        acts *= 2  # the formula counts 2-byte activations
    return {"state": t.formula_params() * per_param, "activations": acts}


# the tensors a framework's policy saves by name (jaxgpu.ground.remat.TAGS), 2-byte values a token; those a dots policy
# saves already (the weights' products) are not counted twice. The MLP's output is kept by none: no backward pass
# needs it (the next layer's input is kept anyway; JAX's list of a step's residuals has none, tests/test_remat.py)
_DOT_NAMES = ("qkv_proj", "out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")


def _named_bytes(t: Decoder, experts: int) -> dict[str, int]:
    f = t.ffn * experts
    return {"qkv_proj": 2 * (t.q_dim + 2 * t.kv_dim), "query_proj": 2 * t.q_dim, "key_proj": 2 * t.kv_dim,
            "value_proj": 2 * t.kv_dim, "context": 2 * t.q_dim, "out_proj": 2 * t.d_model,
            "mlpwi_0": 2 * f if t.gated else 0, "mlpwi_1": 2 * f if t.gated else 0, "mlpwi": 0 if t.gated else 2 * f,
            "mlpwo": 0}


# bytes a weight of a LoRA step's frozen base is stored in: bf16; int8 (its scale a column left out); NF4, two a byte
# with a float32 absmax a block of NF4_BLOCK (QLoRA without its double quantisation of the absmax)
BASE_BYTES = {"bf16": 2.0, "int8": 1.0, "nf4": 0.5 + 4 / decoders.NF4_BLOCK}


def transformer_lora(t: Decoder, seq: int = 2048, batch: int = 1, flash: bool = False, rank: int = 16,
                     on: str = "all", weights: str = "bf16", remat: str = "none") -> dict[str, float]:
    """Bytes to fine-tune with LoRA: the frozen base (its layers' matrices in ``BASE_BYTES[weights]``, the embeddings
    in bf16), the adapters' state as a trained weight's (18 bytes: fp32 weights, gradients and two moments, a bf16
    copy), and the activations of ``transformer_train`` (the backward pass still carries every layer's gradient
    through the frozen matrices; the adapters' own rank-wide values are left out)."""
    full = transformer_train(t, "bf16", seq, batch, flash, remat)
    embeddings = t.vocab * t.d_model * (1 if t.tied_head else 2)
    base = (t.formula_params() - embeddings) * BASE_BYTES[weights] + 2 * embeddings
    return {"weights": base, "state": 18 * t.adapter_params(rank, on), "activations": full["activations"]}


def transformer_prefill(t: Decoder, preset: str = "bf16", seq: int = 2048, batch: int = 1,
                        flash: bool = True) -> dict[str, int]:
    """Bytes to run a ``seq``-token prompt through every layer: the weights, and one layer's values at a time (the
    layers run in turn; nothing is kept for a backward pass): its input and normed input, q, k and v, the
    attention's output and projection, the MLP's first matrices' outputs and the activation's (each of the top_k
    experts' for a mixture), in 2-byte values; without ``flash`` the scores too, in float32 (the softmax and the
    product that reads it fuse, on XLA:GPU's plan: no second copy; a fused attention kernel holds none)."""
    d, f = t.d_model, t.ffn
    per_token = 2 * (3 * d + 2 * t.q_dim + 2 * t.kv_dim + (3 if t.gated else 2) * f * (t.top_k if t.experts > 1 else 1))
    scores = 0 if flash else 4 * t.heads * seq * decoders.keys_seen(seq, t.window)
    return {"weights": t.formula_params() * BYTES[preset], "activations": batch * (seq * per_token + scores)}


def transformer_inference(t: Decoder, preset: str = "bf16", seq: int = 2048, batch: int = 1) -> dict[str, int]:
    """Bytes to serve: weights at the preset's width and the KV cache (its key/value heads' width a token, kept in
    bf16 for 8-bit weights)."""
    b = BYTES[preset]
    kept = min(seq, t.window) if t.window else seq  # a sliding window's cache keeps its last tokens
    return {"weights": t.formula_params() * b, "kv_cache": 2 * t.layers * kept * batch * t.kv_dim * max(b, 2)}


def fits(nbytes: int, gb: float) -> bool:
    return nbytes <= gb * 1e9


def __getattr__(name: str):
    # moved in December 2026: one description of a decoder (jaxgpu.ground.decoders), its classic shapes named there
    if name == "TRANSFORMERS":
        import warnings

        warnings.warn("jaxgpu.pricing.fit.TRANSFORMERS is now the classic shapes of jaxgpu.ground.decoders.MODELS "
                      "(fit.CLASSIC names them)", DeprecationWarning, stacklevel=2)
        return classic()
    if name == "Transformer":
        raise AttributeError("jaxgpu.pricing.fit.Transformer is gone: a decoder is a jaxgpu.ground.decoders.Decoder "
                             "(the one description; see docs/api.md)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
