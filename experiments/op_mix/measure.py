"""op_mix, measured: the share of a train step's FLOPs (its HLO) and of its time (a program of its dots
alone against the whole step) that matrix products take."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxgpu.ground import data, stack, timing
from jaxgpu.kernels import mlp

from experiments.contract import RunContext
from experiments.op_mix import Config


def _shares(fn, args, target_s: float) -> dict[str, float]:
    lowered = jax.jit(fn).lower(*args)
    flops = stack.op_flops(lowered.as_text(dialect="hlo"))
    total = sum(flops.values())
    out = {f"{k}_flop_share": v / total for k, v in flops.items()}
    out["flops_parsed"] = total
    compiled, _ = timing.compile_timed(jax.jit(fn), *args)  # through the harness: the run keeps its plan
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


def mlp_step(width: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model = mlp.MLP(widths=(width, width, width))
    opt = optax.adamw(1e-3)
    state = jax.device_put(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim), ctx.device)
    x, y = (jax.device_put(a, ctx.device) for a in data.synthetic(cfg.mlp_batch, cfg.input_dim))
    step = mlp.make_train_step(model, opt, donate=False)
    return _shares(step, (state, x, y), cfg.target_s)


def block(cfg: Config, ctx: RunContext) -> dict[str, float]:
    d, heads, seq, batch = cfg.block
    block = mlp.TransformerBlock(d_model=d, heads=heads)
    x = jax.device_put(jax.random.normal(jax.random.key(1), (batch, seq, d)), ctx.device)
    params = jax.device_put(block.init(jax.random.key(0), x[:1]), ctx.device)

    def step(p, x):  # one SGD step on a regression loss: forward, backward, update
        loss, g = jax.value_and_grad(lambda q: jnp.mean(block.apply(q, x) ** 2))(p)
        return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g), loss

    return _shares(step, (params, x), cfg.target_s)


def plan(model: str, cfg: Config, ctx: RunContext, width: int = 0) -> dict[str, float]:
    """The FLOP shares of the step XLA:GPU compiles for the target, and the libraries it calls."""
    from jaxgpu.pricing import targets

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
