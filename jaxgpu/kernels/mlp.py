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

from jaxgpu.ground import precision

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
    # Op by op, not one jit: each op's compiled program is cached by shape across calls, so
    # the many inits of one study cost their compiles once (a fresh jit per call measured
    # twice as slow over the quick study).
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
    return jax.jit(train_step_fn(model, optimizer, preset, loss_scale), donate_argnums=(0,) if donate else ())


def train_step_fn(model: MLP, optimizer: optax.GradientTransformation, preset: str = "fp32",
                  loss_scale: LossScale | None = None, reduce=None, local=None):
    """The train step as a plain function, before ``jax.jit`` (see ``make_train_step``).

    ``reduce`` is applied to the local loss and gradients before the update: ``None`` on one
    device or under ``jit`` with shardings (XLA inserts the all-reduce itself), or
    ``lambda t: lax.pmean(t, axis)`` inside ``pmap`` / ``shard_map``. One step function
    serves every data-parallel variant of ``jaxgpu.kernels.parallel``. ``local`` is applied to the
    parameters the gradient is taken of (inside ``shard_map``: marking them device-varying, so
    that autodiff does not sum the gradients itself and ``reduce`` is the only reduction).
    """
    reduce = reduce or (lambda t: t)
    local = local or (lambda t: t)
    net = with_preset(model, preset)
    prec = precision.get(preset)

    def step(state, x, y):
        scale = state.get("scale", jnp.float32(1.0))

        def loss_fn(params):
            logits = precision.under_preset(prec, lambda p, x: net.apply({"params": p}, x), params, x)
            loss = cross_entropy(logits, y)
            return loss * scale, loss

        grads, loss = jax.grad(loss_fn, has_aux=True)(local(state["params"]))
        grads, loss = reduce((jax.tree.map(lambda g: g / scale, grads), loss))
        leaves = jax.tree.leaves(grads)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in leaves]))
        # counted in fp32: a model of billions of parameters overflows int32 counts
        zeros = sum(jnp.sum(g == 0, dtype=jnp.float32) for g in leaves) / float(sum(g.size for g in leaves))
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

    return step


def make_infer_step(model: MLP, preset: str = "fp32"):
    """A jitted ``(params, x) -> logits`` (fp32 logits)."""
    net = with_preset(model, preset)
    prec = precision.get(preset)

    def infer(params, x):
        return precision.under_preset(prec, lambda p, x: net.apply({"params": p}, x), params, x)

    return jax.jit(infer)


def accuracy(model: MLP, params, x, y, preset: str = "fp32") -> float:
    """Share of ``x`` classified as ``y``."""
    logits = make_infer_step(model, preset)(params, x)
    return float(jnp.mean(jnp.argmax(logits, -1) == y))


def param_count(model: MLP, input_dim: int) -> int:
    dims = [input_dim, *model.widths, model.n_out]
    return sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """One training run: the eval curve and the run's figures (seconds exclude compile unless named)."""

    preset: str
    curve: tuple[tuple[int, float, float, float], ...]  # (step, train loss, test accuracy, train seconds so far)
    compile_s: float
    train_s: float
    steps: int
    samples: int
    flops_per_step: float | None
    grad_zero_fraction: float
    nonfinite_steps: int
    skipped_steps: int
    final_scale: float | None
    target_accuracy: float
    bytes_per_step: float | None = None  # XLA's count, like flops_per_step: what a roofline bound starts from

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.train_s

    @property
    def final_accuracy(self) -> float:
        return self.curve[-1][2]

    @property
    def time_to_target_s(self) -> float | None:
        """Training seconds (compile excluded) until the test accuracy first reached the target."""
        return next((t for _, _, acc, t in self.curve if acc >= self.target_accuracy), None)


def train(model: MLP, optimizer: optax.GradientTransformation, data, *, preset: str = "fp32", epochs: int = 30,
          batch: int = 128, loss_scale: LossScale | None = None, target_accuracy: float = 0.95, seed: int = 0,
          device=None, until_target: bool = False) -> TrainResult:
    """Trains on ``data`` (a ``jaxgpu.ground.data.Dataset``), evaluating test accuracy after every epoch.

    ``until_target``: stop after the epoch whose evaluation first reaches ``target_accuracy``
    (``epochs`` is then the most it may take).

    Data sits on the device; each step takes a shuffled batch. Only the train steps are
    timed (each epoch blocked until ready); evaluation and compilation are kept apart.
    """

    import numpy as np

    from jaxgpu.ground import timing

    device = device or jax.devices()[0]
    state = jax.device_put(init_state(model, optimizer, jax.random.key(seed), data.input_dim, loss_scale), device)
    step = make_train_step(model, optimizer, preset, loss_scale)
    infer = make_infer_step(model, preset)
    xtr, ytr = jax.device_put(data.x_train, device), jax.device_put(data.y_train, device)
    xte, yte = jax.device_put(data.x_test, device), jax.device_put(data.y_test, device)
    n = data.x_train.shape[0]
    steps_per_epoch = n // batch
    rng = np.random.default_rng(seed)
    compiled, compile_s = timing.compile_timed(step, state, xtr[:batch], ytr[:batch])
    flops, nbytes = timing.cost_analysis(compiled)
    take = jax.jit(lambda x, y, idx: (x[idx], y[idx]))
    curve, zero_fracs, nonfinite, skipped, train_s, steps = [], [], 0, 0, 0.0, 0
    for _ in range(epochs):
        perm = jax.device_put(rng.permutation(n)[: steps_per_epoch * batch].reshape(steps_per_epoch, batch), device)
        batches = [take(xtr, ytr, perm[i]) for i in range(steps_per_epoch)]
        jax.block_until_ready(batches)

        def epoch(state, batches=batches):  # this epoch's batches, bound now
            metrics = []
            for xb, yb in batches:
                state, m = compiled(state, xb, yb)
                metrics.append(m)
            return state, metrics

        (state, metrics), dt = timing.clock(epoch, state)
        train_s += dt
        steps += steps_per_epoch
        ms = jax.device_get(metrics)
        losses = [float(m["loss"]) for m in ms]
        nonfinite += sum(not np.isfinite(v) for v in losses)
        skipped += int(sum(float(m.get("skipped", 0.0)) for m in ms))
        zero_fracs += [float(m["grad_zero_fraction"]) for m in ms]
        acc = float(jnp.mean(jnp.argmax(infer(state["params"], xte), -1) == yte))
        curve.append((steps, float(np.mean(losses)), acc, train_s))
        if until_target and acc >= target_accuracy:
            break
    return TrainResult(preset, tuple(curve), compile_s, train_s, steps, steps * batch, flops,
                       float(np.mean(zero_fracs)), nonfinite, skipped,
                       float(state["scale"]) if "scale" in state else None, target_accuracy, nbytes)


def underflow_share(model: MLP, params, x, y) -> dict[str, float]:
    """Of the non-zero fp32 gradient entries at ``params``, the share fp16 would flush to zero or make subnormal.

    fp16's smallest subnormal is 2^-24 (values below half of it round to 0) and its smallest
    normal 2^-14: this is the underflow that loss scaling exists to prevent, measured on real
    gradients rather than asserted.
    """
    grads = jax.grad(lambda p: cross_entropy(model.apply({"params": p}, x), y))(params)
    g = jnp.abs(jnp.concatenate([v.ravel() for v in jax.tree.leaves(grads)]))
    nz = g[g > 0]
    return {"to_zero_fraction": float(jnp.mean(nz < 2.0**-25)),
            "subnormal_fraction": float(jnp.mean((nz >= 2.0**-25) & (nz < 2.0**-14))),
            "grad_abs_median": float(jnp.median(nz))}


def step_throughput(model: MLP, optimizer: optax.GradientTransformation, input_dim: int, batch: int,
                    preset: str = "fp32", device=None, target_s: float = 0.3, host_fed: bool = False):
    """Times the jitted train step on synthetic data: (Timing, XLA FLOPs per step).

    ``host_fed``: the batch stays a numpy array and is copied to the device in every call,
    as data that is not resident must be.
    """
    from jaxgpu.ground import data, timing

    device = device or jax.devices()[0]
    host_x, host_y = data.synthetic(batch, input_dim, model.n_out)
    x, y = (jax.device_put(a, device) for a in (host_x, host_y))
    state = jax.device_put(init_state(model, optimizer, jax.random.key(0), input_dim), device)
    compiled, compile_s = timing.compile_timed(make_train_step(model, optimizer, preset), state, x, y)
    flops, nbytes = timing.cost_analysis(compiled)
    feed = (host_x, host_y) if host_fed else (x, y)
    t, last = timing.time_stateful(compiled, state, *feed, target_s=target_s)
    if not bool(jnp.isfinite(last["loss"])):
        raise ArithmeticError("train step produced a non-finite loss")
    return dataclasses.replace(t, compile_s=compile_s, flops_xla=flops, bytes_xla=nbytes), flops


def torch_step_throughput(widths: Sequence[int], input_dim: int, batch: int, n_out: int = 10,
                          target_s: float = 0.3, device: str = "cpu"):
    """The same MLP and the same step as a PyTorch peer; returns its Timing.

    The same work as ``make_train_step`` with ``optax.adamw(1e-3)``: Linear + ReLU layers, fp32
    cross-entropy, AdamW with optax's defaults (weight decay 1e-4, not torch's 1e-2), and the
    step's reduction over every gradient (the share of exact zeros; without loss scaling the
    JAX step's finiteness check is dead code that XLA removes, so it is not done here either).
    """
    import numpy as np
    import torch

    from jaxgpu.ground import data, timing

    dims = [input_dim, *widths]
    layers = []
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers, torch.nn.Linear(dims[-1], n_out)).to(device)
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)
    total = float(sum(p.numel() for p in params))
    xs, ys = data.synthetic(batch, input_dim, n_out)
    x, y = torch.from_numpy(xs).to(device), torch.from_numpy(ys.astype(np.int64)).to(device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def call():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        grads = [p.grad for p in params]
        zeros = sum((g == 0).sum() for g in grads) / total
        opt.step()
        return loss, zeros

    sync = (lambda _: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda _: None)
    t = timing.time_host(call, sync=sync, target_s=target_s, min_iters=5)
    if not np.isfinite(float(call()[0].detach())):
        raise ArithmeticError("torch step produced a non-finite loss")
    return t


class TransformerBlock(nn.Module):
    """One pre-norm transformer block (self-attention + MLP), for the op-mix comparison."""

    d_model: int = 256
    heads: int = 4
    mlp_ratio: int = 4

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h)
        h = nn.LayerNorm()(x)
        h = nn.Dense(self.d_model * self.mlp_ratio)(h)
        return x + nn.Dense(self.d_model)(nn.gelu(h))
