"""Memory fit: how many bytes a model needs to train or serve, checked against XLA's own accounting.

MLP train step (the jitted Flax + Optax step of ``jaxgpu.mlp``, state donated)::

    bytes = state + batch + max(activation phase, gradient phase)

    state            = 4 P (fp32 parameters) + 4 P x (0 SGD | 1 momentum | 2 Adam) optimizer state
    batch            = B x d_in x 4 + B x 4 (fp32 inputs, int32 labels)
    activation phase = B x sum(widths) x (8 + 2 if bf16/fp16)   every hidden output kept for the
                       backward pass in fp32 plus one working buffer of the same size, plus the
                       compute-dtype copy (+ 4 more where the backend upcasts that dtype to fp32);
                       + B x d_in x 2 for a low-precision input copy
    gradient phase   = 4 P (every parameter gradient, fp32) + the largest weight matrix x 4 for a
                       stateful optimizer's update temporary

XLA reuses buffers by liveness, so the peak is the larger phase, not their sum. The
structure is physical; which buffers XLA keeps was read off ``compiled.memory_analysis()``
(arguments + outputs + temporaries - aliased) on XLA:CPU. The ``memory_fit`` experiment
re-checks it on every run, on every backend.

Transformer (decoder-only, L layers, width d, vocabulary V, a heads, sequence s, batch b):
parameters 12 L d^2 + V d; training with Adam keeps fp32 master weights, gradients and two
moments (16 bytes/parameter) plus a low-precision weight copy (2 bytes) when computing in
bf16/fp16; activations s b d (34 + 5 a s / d) bytes per layer without recomputation
(Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
2022, eq. 1). Inference: the weights at the preset's width plus the KV cache
(2 L s b d x bytes per element).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

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


def mlp_train(input_dim: int, widths: Sequence[int], n_out: int, batch: int, optimizer: str = "adam",
              preset: str = "fp32", upcast: bool = False) -> MemoryEstimate:
    """Bytes of one jitted MLP train step (see the module docstring for the formula).

    ``upcast``: the backend converts the preset's operands to fp32 before multiplying (XLA:CPU
    does for fp16; ``jaxgpu.precision.upcast_in_hlo`` tells), which keeps one more fp32
    copy of every activation.
    """
    if optimizer not in OPT_STATE_COPIES:
        raise KeyError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPT_STATE_COPIES)}")
    p = mlp_param_count(input_dim, widths, n_out)
    lowp = BYTES[preset] == 2
    dims = [input_dim, *widths, n_out]
    largest_weight = max(a * b for a, b in zip(dims[:-1], dims[1:]))
    acts = batch * sum(widths) * (8 + 2 * lowp + 4 * (lowp and upcast)) + lowp * batch * input_dim * 2
    grads = 4 * p + (OPT_STATE_COPIES[optimizer] > 0) * 4 * largest_weight
    return MemoryEstimate(params=4 * p, optimizer=4 * p * OPT_STATE_COPIES[optimizer],
                          batch=batch * input_dim * 4 + batch * 4, activations=acts, gradients=grads)


def megatron_split(layer: int, in_dim: int, out_dim: int, model_size: int) -> str | None:
    """How tensor parallelism splits layer ``layer`` of an MLP over ``model_size`` devices:
    "column" (even layers: output features), "row" (odd layers: input features), or None
    (replicated) where that dimension does not divide evenly. ``jaxgpu.parallel`` follows it."""
    column = layer % 2 == 0
    if (out_dim if column else in_dim) % model_size:
        return None
    return "column" if column else "row"


def mlp_train_tensor_parallel(input_dim: int, widths: Sequence[int], n_out: int, batch: int, model_size: int,
                              optimizer: str = "adam", data_size: int = 1) -> MemoryEstimate:
    """Bytes per device of the MLP train step split Megatron-style over ``model_size`` devices
    (and its batch over ``data_size``): every split matrix, its gradient and optimizer state
    divide by ``model_size``; a column layer's output is split, a row layer's is whole (after
    its all-reduce); the batch divides by ``data_size``. Same phases as ``mlp_train``."""
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


@dataclasses.dataclass(frozen=True)
class Transformer:
    name: str
    layers: int
    d_model: int
    heads: int
    vocab: int = 32000

    @property
    def params(self) -> int:
        return 12 * self.layers * self.d_model**2 + self.vocab * self.d_model


# Llama-style shapes with about the named parameter counts.
TRANSFORMERS = (
    Transformer("1B", 22, 2048, 16),
    Transformer("7B", 32, 4096, 32),
    Transformer("13B", 40, 5120, 40),
    Transformer("70B", 80, 8192, 64),
)
GPU_MEMORY_GB = (24, 40, 80, 141)


def transformer_train(t: Transformer, preset: str = "bf16", seq: int = 2048, batch: int = 1) -> dict[str, int]:
    """Bytes to train with Adam: state (master weights, grads, moments, compute copy) and activations."""
    per_param = 16 + (2 if BYTES[preset] == 2 else 0)
    acts = t.layers * seq * batch * t.d_model * (34 + 5 * t.heads * seq // t.d_model)
    if BYTES[preset] == 4:
        acts *= 2  # the formula counts 2-byte activations
    return {"state": t.params * per_param, "activations": acts}


def transformer_inference(t: Transformer, preset: str = "bf16", seq: int = 2048, batch: int = 1) -> dict[str, int]:
    """Bytes to serve: weights at the preset's width and the KV cache (kept in bf16 for 8-bit weights)."""
    b = BYTES[preset]
    return {"weights": t.params * b, "kv_cache": 2 * t.layers * seq * batch * t.d_model * max(b, 2)}


def fits(nbytes: int, gb: float) -> bool:
    return nbytes <= gb * 1e9
