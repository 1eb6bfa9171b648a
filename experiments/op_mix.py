"""op_mix: is deep learning mostly matrix multiplication? FLOP and time shares of dot vs the rest (C02)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax

from jaxgpu import data, fit, mlp, stack, timing

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 2  # 2: bytes from XLA's cost analysis; dots at their own precision
CLAIMS = claims.for_experiment("op_mix")
DESCRIPTION = "share of FLOPs (parsed HLO) and of time (dots-only program vs whole step) in matmul"


@dataclasses.dataclass(frozen=True)
class Config:
    mlp_widths: tuple[int, ...] = (64, 256, 1024)
    mlp_batch: int = 512
    input_dim: int = 784
    block: tuple[int, int, int, int] = (256, 4, 128, 8)  # d_model, heads, sequence, batch
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(mlp_widths=(32,), mlp_batch=16, input_dim=16, block=(32, 2, 8, 2), target_s=0.01),
    ("quick", "cpu"): Config(mlp_widths=(64, 1024), target_s=0.1),
    ("full", "cpu"): Config(),
    ("quick", "gpu"): Config(mlp_widths=(8192,), mlp_batch=4096, block=(1024, 16, 1024, 8), target_s=0.1),
    ("full", "gpu"): Config(mlp_widths=(256, 1024, 4096, 8192), mlp_batch=4096, block=(1024, 16, 1024, 8)),
}


def _shares(fn, args, target_s: float) -> dict[str, float]:
    lowered = jax.jit(fn).lower(*args)
    flops = stack.op_flops(lowered.as_text(dialect="hlo"))
    total = sum(flops.values())
    out = {f"{k}_flop_share": v / total for k, v in flops.items()}
    out["flops_parsed"] = total
    compiled = lowered.compile()
    xla_flops, xla_bytes = timing.cost_analysis(compiled)
    if xla_flops:
        out["flops_xla"] = xla_flops
    if xla_bytes:
        out["bytes_xla"] = xla_bytes  # where the step sits under its roofline (C09)
    full = timing.time_compiled(compiled, [args], target_s=target_s)
    prog, dot_args = stack.dots_only(lowered.as_text(dialect="hlo"))
    dots = timing.time_jitted(prog, dot_args, target_s=target_s)
    out.update(time_s_median=full.median_s, dot_time_s=dots.median_s, dot_time_share=dots.median_s / full.median_s)
    return out


def _mlp(width: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model = mlp.MLP(widths=(width, width, width))
    opt = optax.adamw(1e-3)
    state = jax.device_put(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim), ctx.device)
    x, y = (jax.device_put(a, ctx.device) for a in data.synthetic(cfg.mlp_batch, cfg.input_dim))
    step = mlp.make_train_step(model, opt, donate=False)
    return _shares(step, (state, x, y), cfg.target_s)


def _block(cfg: Config, ctx: RunContext) -> dict[str, float]:
    d, heads, seq, batch = cfg.block
    block = mlp.TransformerBlock(d_model=d, heads=heads)
    x = jax.device_put(jax.random.normal(jax.random.key(1), (batch, seq, d)), ctx.device)
    params = jax.device_put(block.init(jax.random.key(0), x[:1]), ctx.device)

    def step(p, x):  # one SGD step on a regression loss: forward, backward, update
        loss, g = jax.value_and_grad(lambda q: jnp.mean(block.apply(q, x) ** 2))(p)
        return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g), loss

    return _shares(step, (params, x), cfg.target_s)


def _cost(flops: float, params: float, cfg: Config, key_bytes: float = 0.0) -> Cost:
    # the whole step and a program of only its dots: each compiled and timed
    # (parameters initialised op by op: a compile per op and shape)
    return Cost(compiles=20, gemm_compiles=1, step_compiles=1, flops=2 * flops, bytes=32.0 * params + key_bytes, target_s=2 * cfg.target_s,
                rng_bytes=4.0 * params)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = []
    for w in cfg.mlp_widths:
        p = fit.mlp_param_count(cfg.input_dim, (w, w, w), 10)
        out.append(Case({"model": "mlp", "width": w, "batch": cfg.mlp_batch}, functools.partial(_mlp, w, cfg, ctx),
                        _cost(6.0 * cfg.mlp_batch * p, p, cfg), key=w == max(cfg.mlp_widths)))
    d, h, s, b = cfg.block
    p = 12 * d * d
    out.append(Case({"model": "transformer_block", "width": d, "heads": h, "seq": s, "batch": b},
                    functools.partial(_block, cfg, ctx),
                    _cost(6.0 * b * s * p + 12.0 * b * s * s * d, p, cfg, key_bytes=4.0 * b * h * s * s * 3)))
    return out


# ---------------------------------------------------------------- compiled for a GPU (--compile-for)


def _plan(model: str, cfg: Config, ctx: RunContext, width: int = 0) -> dict[str, float]:
    """The FLOP shares of the step XLA:GPU compiles for the target, and the libraries it calls."""
    from jaxgpu import targets

    dev = ctx.target_devices(1)[0]
    if model == "mlp":
        net, opt = mlp.MLP(widths=(width, width, width)), optax.adamw(1e-3)
        state = jax.eval_shape(lambda: mlp.init_state(net, opt, jax.random.key(0), cfg.input_dim))
        args = (targets.specs_like(state, dev), targets.spec((cfg.mlp_batch, cfg.input_dim), "float32", dev),
                targets.spec((cfg.mlp_batch,), "int32", dev))
        plan = targets.compile_plan(mlp.make_train_step(net, opt, donate=False), *args)
    else:
        d, heads, seq, batch = cfg.block
        block = mlp.TransformerBlock(d_model=d, heads=heads)
        x = jax.ShapeDtypeStruct((batch, seq, d), jnp.float32)
        params = jax.eval_shape(lambda: block.init(jax.random.key(0), jnp.zeros((1, seq, d))))

        def step(p, x):
            loss, g = jax.value_and_grad(lambda q: jnp.mean(block.apply(q, x) ** 2))(p)
            return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g), loss

        plan = targets.compile_plan(step, targets.specs_like(params, dev), targets.spec(x.shape, x.dtype, dev))
    flops = stack.op_flops(plan.lowered_hlo)
    total = sum(flops.values())
    return {**plan.metrics(), **{f"{k}_flop_share": v / total for k, v in flops.items()}, "flops_parsed": total}


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    out = [Case({"case": "plan", "model": "mlp", "width": w, "batch": cfg.mlp_batch},
                functools.partial(_plan, "mlp", cfg, ctx, w), cost, key=True) for w in cfg.mlp_widths]
    d, h, s, b = cfg.block
    out.append(Case({"case": "plan", "model": "transformer_block", "width": d, "heads": h, "seq": s, "batch": b},
                    functools.partial(_plan, "transformer_block", cfg, ctx), cost))
    return out
