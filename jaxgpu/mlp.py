"""A Flax MLP with Optax optimisers: jitted train and inference steps under a precision preset.

Flax Linen, not NNX: a Linen model is a pure function of its parameters, so the train
step is one ``jax.jit`` of a plain function with no per-call Python object graph to
walk, which matters at the small sizes this study runs on CPU. Parameters stay in fp32;
each layer computes in the preset's dtype (``Dense(dtype=...)``, fp32 accumulation); the
loss and softmax run in fp32. fp16 can use dynamic loss scaling (``LossScale``).

Usage::

    model = MLP(widths=(512, 512), n_out=10)
    state = init_state(model, optax.adamw(1e-3), jax.random.key(0), input_dim=64)
    step = make_train_step(model, optax.adamw(1e-3), preset="bf16")
    state, loss = step(state, x, y)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxgpu import precision

ACTIVATIONS = {"relu": nn.relu, "gelu": nn.gelu, "tanh": jnp.tanh}


class MLP(nn.Module):
    """Dense layers of ``widths`` with ``activation`` between them, then ``n_out`` logits."""

    widths: Sequence[int] = (256, 256)
    n_out: int = 10
    activation: str = "relu"
    dtype: Any = jnp.float32  # compute dtype; parameters are always fp32

    @nn.compact
    def __call__(self, x):
        act = ACTIVATIONS[self.activation]
        x = x.astype(self.dtype)
        for w in self.widths:
            x = act(nn.Dense(w, dtype=self.dtype, param_dtype=jnp.float32)(x))
        return nn.Dense(self.n_out, dtype=self.dtype, param_dtype=jnp.float32)(x).astype(jnp.float32)


def with_preset(model: MLP, preset: str | None) -> MLP:
    """The same model computing in the preset's operand dtype (fp32 for fp32/tf32)."""
    p = precision.get(preset)
    if p.quantized or p.needs_x64:
        raise ValueError(f"training runs fp32, tf32, bf16 or fp16, not {p.name}")
    return model.clone(dtype=jnp.dtype(p.operand_dtype))


@dataclasses.dataclass(frozen=True)
class LossScale:
    """Dynamic loss scaling for fp16: grow every ``period`` finite steps, halve and skip on inf/NaN."""

    initial: float = 2.0**15
    period: int = 200
    factor: float = 2.0


def init_state(model: MLP, optimizer: optax.GradientTransformation, key: jax.Array, input_dim: int,
               loss_scale: LossScale | None = None) -> dict:
    """Parameters, optimizer state and (with ``loss_scale``) the scale and its counter."""
    params = model.init(key, jnp.zeros((1, input_dim), jnp.float32))["params"]
    state = {"params": params, "opt": optimizer.init(params), "step": jnp.zeros((), jnp.int32)}
    if loss_scale is not None:
        state["scale"] = jnp.asarray(loss_scale.initial, jnp.float32)
        state["good_steps"] = jnp.zeros((), jnp.int32)
    return state


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def make_train_step(model: MLP, optimizer: optax.GradientTransformation, preset: str = "fp32",
                    loss_scale: LossScale | None = None, donate: bool = True):
    """A jitted ``(state, x, y) -> (state, metrics)``; the state is donated.

    metrics: ``loss`` and ``grad_zero_fraction`` (share of gradient entries that are
    exactly zero: underflow shows here) and, with loss scaling, ``scale`` and ``skipped``.
    """
    net = with_preset(model, preset)
    prec = precision.get(preset)

    def step(state, x, y):
        scale = state.get("scale", jnp.float32(1.0))

        def loss_fn(params):
            with jax.default_matmul_precision(_matmul_precision(prec)):
                loss = cross_entropy(net.apply({"params": params}, x), y)
            return loss * scale, loss

        grads, loss = jax.grad(loss_fn, has_aux=True)(state["params"])
        grads = jax.tree.map(lambda g: g / scale, grads)
        leaves = jax.tree.leaves(grads)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in leaves]))
        zeros = sum(jnp.sum(g == 0) for g in leaves) / sum(g.size for g in leaves)
        updates, opt = optimizer.update(grads, state["opt"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        new = dict(state, step=state["step"] + 1)
        metrics = {"loss": loss, "grad_zero_fraction": zeros}
        if loss_scale is None:
            new.update(params=params, opt=opt)
        else:
            keep = lambda new_t, old_t: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new_t, old_t)
            good = jnp.where(finite, state["good_steps"] + 1, 0)
            grow = good >= loss_scale.period
            new.update(params=keep(params, state["params"]), opt=keep(opt, state["opt"]),
                       scale=jnp.where(finite, jnp.where(grow, scale * loss_scale.factor, scale),
                                       scale / loss_scale.factor),
                       good_steps=jnp.where(grow, 0, good))
            metrics.update(scale=new["scale"], skipped=(~finite).astype(jnp.float32))
        return new, metrics

    return jax.jit(step, donate_argnums=(0,) if donate else ())


def make_infer_step(model: MLP, preset: str = "fp32"):
    """A jitted ``(params, x) -> logits`` (fp32 logits)."""
    net = with_preset(model, preset)
    prec = precision.get(preset)

    def infer(params, x):
        with jax.default_matmul_precision(_matmul_precision(prec)):
            return net.apply({"params": params}, x)

    return jax.jit(infer)


def _matmul_precision(p: precision.Preset) -> str:
    # jax.default_matmul_precision names: fp32 must be "float32" (HIGHEST), tf32 "tensorfloat32".
    return {"highest": "float32", "tensorfloat32": "tensorfloat32", "default": "bfloat16"}[p.precision]


def accuracy(model: MLP, params, x, y, preset: str = "fp32") -> float:
    """Share of ``x`` classified as ``y``."""
    logits = make_infer_step(model, preset)(params, x)
    return float(jnp.mean(jnp.argmax(logits, -1) == y))


def param_count(model: MLP, input_dim: int) -> int:
    dims = [input_dim, *model.widths, model.n_out]
    return sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))
