"""inference: latency and throughput vs batch size; the train step against the inference step (C16)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import optax

from jaxgpu import data, fit, mlp, timing

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = claims.for_experiment("inference")
DESCRIPTION = "MLP inference latency/throughput vs batch; train vs inference step: time, FLOPs, memory ratios"


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (1024, 1024, 1024)
    input_dim: int = 784
    batches: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
    compare_batch: int = 1024
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(widths=(64,), input_dim=32, batches=(1, 8), compare_batch=8, target_s=0.01),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(batches=tuple(2**i for i in range(0, 13)), target_s=0.5),
    ("quick", "gpu"): Config(batches=(1, 256, 8192), compare_batch=8192, target_s=0.1),
    ("full", "gpu"): Config(batches=tuple(4**i for i in range(7)) + (8192,), compare_batch=8192),
}


def _params(cfg: Config, ctx: RunContext):
    model = mlp.MLP(widths=cfg.widths)
    return model, jax.device_put(mlp.init_state(model, optax.adamw(1e-3), jax.random.key(0), cfg.input_dim),
                                 ctx.device)


def _infer(batch: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, state = _params(cfg, ctx)
    x = jax.device_put(data.synthetic(batch, cfg.input_dim)[0], ctx.device)
    t = timing.time_jitted(mlp.make_infer_step(model), state["params"], x, target_s=cfg.target_s)
    out = t.metrics(samples_per_s=t.per_s(batch))
    if t.flops_xla:
        out["gflops"] = t.per_s(t.flops_xla, 1e9)
    return out


def _compare(cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    infer = lambda b: Cost(compiles=0, gemm_compiles=1, flops=2.0 * b * p, bytes=4.0 * p, target_s=cfg.target_s, rng_bytes=4.0 * b * cfg.input_dim)
    out = [Case({"case": "batch", "batch": b}, functools.partial(_infer, b, cfg, ctx), infer(b)) for b in cfg.batches]
    b = cfg.compare_batch
    # an inference loop and a train-step loop, each timed, and the train step compiled twice
    both = dataclasses.replace(infer(b), step_compiles=2, flops=8.0 * b * p, bytes=20.0 * p, target_s=2 * cfg.target_s)
    out.append(Case({"case": "train_vs_infer", "batch": b}, functools.partial(_compare, cfg, ctx), both, key=True))
    return out
