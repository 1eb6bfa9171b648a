"""inference, measured: the inference step per batch, and a train step against an inference step."""

from __future__ import annotations

import jax
import optax

from jaxgpu.ground import data, timing
from jaxgpu.kernels import mlp

from experiments.contract import RunContext
from experiments.inference import Config


def _params(cfg: Config, ctx: RunContext):
    model = mlp.MLP(widths=cfg.widths)
    return model, jax.device_put(mlp.init_state(model, optax.adamw(1e-3), jax.random.key(0), cfg.input_dim),
                                 ctx.device)


def infer(batch: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, state = _params(cfg, ctx)
    x = jax.device_put(data.synthetic(batch, cfg.input_dim)[0], ctx.device)
    t = timing.time_jitted(mlp.make_infer_step(model), state["params"], x, target_s=cfg.target_s)
    out = t.metrics(samples_per_s=t.per_s(batch))
    if t.flops_xla:
        out["gflops"] = t.per_s(t.flops_xla, 1e9)
    return out


def compare(cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, state = _params(cfg, ctx)
    b = cfg.compare_batch
    x, y = (jax.device_put(a, ctx.device) for a in data.synthetic(b, cfg.input_dim))
    inf_c, _ = timing.compile_timed(mlp.make_infer_step(model), state["params"], x)
    t_inf = timing.time_compiled(inf_c, [(state["params"], x)], target_s=cfg.target_s)
    t_train, train_flops = mlp.step_throughput(model, optax.adamw(1e-3), cfg.input_dim, b, "fp32", ctx.device,
                                               cfg.target_s)
    train_c, _ = timing.compile_timed(mlp.make_train_step(model, optax.adamw(1e-3)), state, x, y)
    out = {"train_time_s": t_train.median_s, "infer_time_s": t_inf.median_s,
           "time_ratio": t_train.median_s / t_inf.median_s, "train_bytes": float(timing.memory_bytes(train_c)),
           "infer_bytes": float(timing.memory_bytes(inf_c))}
    out["memory_ratio"] = out["train_bytes"] / out["infer_bytes"]
    if train_flops and t_inf.flops_xla:
        out["flops_ratio"] = train_flops / t_inf.flops_xla
    return out
