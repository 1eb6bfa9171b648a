"""compiler, measured: each program op by op and jitted, its compile apart, its HLO before and after XLA."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import stack, timing
from jaxgpu.kernels import matmul

from experiments.compiler import N_CHAIN_OPS, TOLERANCE, Config
from experiments.contract import RunContext


def gelu_chain(x):
    """A tanh-GELU written out op by op: nine elementwise ops XLA can fuse into one loop."""
    inner = 0.7978845608 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + jnp.tanh(inner))


def mlp_layer(x, w, b):
    return jax.nn.gelu(x @ w + b)


def _programs(cfg: Config, ctx: RunContext):
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal(cfg.chain_n, dtype=np.float32), ctx.device)
    b_, i_, o_ = cfg.layer
    layer_args = tuple(jax.device_put(rng.standard_normal(s, dtype=np.float32), ctx.device)
                       for s in ((b_, i_), (i_, o_), (o_,)))
    return {"gelu_chain": (gelu_chain, (x,)), "mlp_layer": (mlp_layer, layer_args)}


def _tanh_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))  # jax.nn.gelu's default form


def _errors(name: str, args, outputs: dict) -> dict[str, float]:
    """Relative error of each output against the program in numpy float64 on the same inputs
    (the layer on a sample of its rows: a float64 product at 4096^3 would take the host minutes)."""
    a = [np.asarray(x, np.float64) for x in args]
    if name == "gelu_chain":
        rows, want = slice(None), _tanh_gelu(a[0])
    else:
        rows = matmul.reference_rows(a[0].shape[0])
        with timing.single_blas_thread():  # no BLAS threads left spinning on the timed program's cores
            want = _tanh_gelu(a[0][rows] @ a[1] + a[2])
    return {how: float(np.linalg.norm(np.asarray(out, np.float64)[rows] - want) / np.linalg.norm(want))
            for how, out in outputs.items()}


def program(name: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    fn, args = _programs(cfg, ctx)[name]
    jitted = jax.jit(fn)
    lowered = jitted.lower(*args)
    # compiled first, so that no earlier call's cached executable hides the cost
    compiled, compile_s = timing.compile_timed(lowered)
    errors = _errors(name, args, {"jit": compiled(*args), "op-by-op": fn(*args)})
    if max(errors.values()) > TOLERANCE[name]:
        raise ArithmeticError(f"{name}: off against float64 (relative error {errors}); timing discarded")
    # Op by op: every jnp call dispatches its own compiled kernel (cached after the first call).
    t_eager = timing.time_host(fn, *args, sync=jax.block_until_ready, target_s=cfg.target_s, min_iters=5)
    t_jit = timing.time_compiled(compiled, [args], compile_s=compile_s, target_s=cfg.target_s)
    pre, post = lowered.as_text(dialect="hlo"), compiled.as_text()
    before, after = stack.count_ops(pre), stack.count_ops(post)
    _, fused_bytes = timing.cost_analysis(compiled)
    saved = t_eager.median_s - t_jit.median_s
    out = {"rel_error": errors["jit"], "eager_rel_error": errors["op-by-op"], "time_s_median": t_jit.median_s,
           "eager_time_s": t_eager.median_s, "speedup": t_eager.median_s / t_jit.median_s,
           "compile_s": compile_s, "instructions_before": float(before["entry_ops"]),
           "instructions_after": float(after["entry_ops"]), "fusions_after": float(after["fusions"]),
           "unfused_bytes": stack.unfused_bytes(pre), "library_calls": float(len(stack.library_calls(post)))}
    if saved > 0:
        out["runs_to_amortise_compile"] = compile_s / saved
    if name == "gelu_chain":
        out["dispatch_s_per_op"] = max(saved, 0.0) / N_CHAIN_OPS
    if fused_bytes:
        out["fused_bytes"] = fused_bytes
    return out


def info(ctx: RunContext) -> dict[str, str]:
    cfg = Config(chain_n=1 << 10, layer=(8, 16, 16))
    out = {}
    for name, (fn, args) in _programs(cfg, ctx).items():
        post = jax.jit(fn).lower(*args).compile().as_text()
        out[name] = ", ".join(stack.library_calls(post)) or "none (XLA's own emitted loops)"
    return out


def attachments(ctx: RunContext, out_dir: Path) -> list[str]:
    """Writes the lowering chain of each program under out_dir/attachments/compiler; returns the paths."""
    cfg = Config(chain_n=1 << 10, layer=(8, 16, 16))
    written = []
    for name, (fn, args) in _programs(cfg, ctx).items():
        d = out_dir / "attachments" / "compiler" / f"{ctx.platform}-{name}"
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in stack.lowering_chain(fn, *args).items():
            (d / fname).write_text(text, encoding="utf-8")
            written.append(str((d / fname).relative_to(out_dir)))
    return written


def plan(name: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """XLA:GPU's plan of one program: fusions, the kernels left, the library calls."""
    from jaxgpu.pricing import targets

    dev = ctx.target_devices(1)[0]
    b, i, o = cfg.layer
    shapes = {"gelu_chain": [(cfg.chain_n,)], "mlp_layer": [(b, i), (i, o), (o,)]}[name]
    fn = {"gelu_chain": gelu_chain, "mlp_layer": mlp_layer}[name]
    plan = targets.compile_plan(fn, *[targets.spec(s, "float32", dev) for s in shapes])
    before, after = stack.count_ops(plan.lowered_hlo), stack.count_ops(plan.hlo)
    return {**plan.metrics(), "instructions_before": float(before["entry_ops"]),
            "instructions_after": float(after["entry_ops"]), "fusions_after": float(after["fusions"]),
            "unfused_bytes": stack.unfused_bytes(plan.lowered_hlo),
            "library_calls": float(sum(stack.library_counts(plan.hlo).values()))}
