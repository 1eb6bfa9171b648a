"""training, measured: MLPs trained per preset on digits, a time to target on the teacher task, and the
train step's throughput beside torch's, its dots timed alone."""

from __future__ import annotations

import functools

import jax
import optax

from jaxgpu.ground import data, precision, stack, timing
from jaxgpu.kernels import matmul, mlp

from experiments.contract import RunContext
from experiments.training import VARIANTS, Config


@functools.lru_cache(maxsize=1)
def _digits():
    return data.digits()


_TRAINED: dict = {}


def _trained(variant: str, cfg: Config, ctx: RunContext) -> mlp.TrainResult:
    # One training run serves its run record and every point of its curve.
    key = (variant, cfg, ctx.platform, ctx.seed)
    if key not in _TRAINED:
        _TRAINED.clear()
        _TRAINED[key] = _train(variant, cfg, ctx)
    return _TRAINED[key]


def _train(variant: str, cfg: Config, ctx: RunContext) -> mlp.TrainResult:
    preset, scaled = VARIANTS[variant]
    return mlp.train(mlp.MLP(widths=cfg.widths), optax.adamw(cfg.lr), _digits(), preset=preset, epochs=cfg.epochs,
                     batch=cfg.batch, loss_scale=mlp.LossScale() if scaled else None,
                     target_accuracy=cfg.target_accuracy, seed=ctx.seed, device=ctx.device)


def _peak(ctx: RunContext, preset: str) -> float | None:
    return ctx.hardware.peak_flops(precision.get(preset).hardware_dtype) if ctx.hardware else None


def run(variant: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    r = _trained(variant, cfg, ctx)
    out = {"samples_per_s": r.samples_per_s, "accuracy": r.final_accuracy, "loss": r.curve[-1][1],
           "train_s": r.train_s, "compile_s": r.compile_s, "steps": float(r.steps),
           "grad_zero_fraction": r.grad_zero_fraction, "nonfinite_steps": float(r.nonfinite_steps),
           "skipped_steps": float(r.skipped_steps)}
    if r.time_to_target_s is not None:
        out["time_s_to_target"] = r.time_to_target_s
        out["time_s_to_target_with_compile"] = r.time_to_target_s + r.compile_s
    if r.final_scale is not None:
        out["loss_scale_final"] = r.final_scale
    if r.flops_per_step:
        out["gflops"] = r.flops_per_step * r.steps / r.train_s / 1e9
        peak = _peak(ctx, VARIANTS[variant][0])
        if peak:
            out["mfu"] = out["gflops"] * 1e9 / peak
    if variant == "fp32":
        state_params = mlp.init_state(mlp.MLP(widths=cfg.widths), optax.adamw(cfg.lr), jax.random.key(0),
                                      _digits().input_dim)["params"]
        d = _digits()
        out.update({f"fp16_{k}": v for k, v in mlp.underflow_share(
            mlp.MLP(widths=cfg.widths), state_params, d.x_train[:512], d.y_train[:512]).items()})
    return out


@functools.lru_cache(maxsize=1)
def _teacher():
    return data.teacher()


def to_target(width: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """Seconds of training (compile apart) until a student of this width first reaches the target test
    accuracy on the teacher task; the run stops there."""
    r = mlp.train(mlp.MLP(widths=(width, width)), optax.adamw(cfg.lr), _teacher(), epochs=cfg.to_target_epochs,
                  batch=cfg.to_target_batch, target_accuracy=cfg.to_target_accuracy, seed=ctx.seed,
                  device=ctx.device, until_target=True)
    if r.time_to_target_s is None:
        raise ArithmeticError(f"width {width} did not reach {cfg.to_target_accuracy:.0%} in {cfg.to_target_epochs} "
                              f"epochs (best {max(c[2] for c in r.curve):.1%})")
    out = {"time_s_to_target": r.time_to_target_s, "time_s_to_target_with_compile": r.time_to_target_s + r.compile_s,
           "compile_s": r.compile_s, "epochs": float(len(r.curve)), "accuracy": r.final_accuracy,
           "samples_per_s": r.samples_per_s, "steps": float(r.steps)}
    # XLA's count of one step: the time to target is `steps` calls of it, which is what a prediction prices
    if r.flops_per_step and r.bytes_per_step:
        out.update(step_flops_xla=r.flops_per_step, step_bytes_xla=r.bytes_per_step)
    return out


def point(variant: str, i: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    step, loss, acc, t = _trained(variant, cfg, ctx).curve[i]
    return {"step": float(step), "loss": loss, "accuracy": acc, "train_s": t}


def _step_dots(widths, cfg: Config) -> str:
    """The HLO of the sweep's train step, whose dots both implementations are timed on alone."""
    import jax

    model, opt = mlp.MLP(widths=widths), optax.adamw(cfg.lr)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.sweep_input))
    x, y = data.synthetic(cfg.sweep_batch, cfg.sweep_input)
    return mlp.make_train_step(model, opt).lower(state, x, y).as_text(dialect="hlo")


def sweep(width: int, impl: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    widths = (width,) * cfg.sweep_depth
    hlo = _step_dots(widths, cfg)
    if impl == "torch":
        device = "cuda" if ctx.platform == "gpu" else "cpu"
        t = mlp.torch_step_throughput(widths, cfg.sweep_input, cfg.sweep_batch, target_s=cfg.target_s, device=device)
        dots = matmul.torch_dots(stack.dot_shapes(hlo), device, cfg.target_s)
        return t.metrics(samples_per_s=t.per_s(cfg.sweep_batch), dot_time_s=dots.median_s)
    t, flops = mlp.step_throughput(mlp.MLP(widths=widths), optax.adamw(cfg.lr), cfg.sweep_input, cfg.sweep_batch,
                                   "fp32", ctx.device, cfg.target_s)
    prog, dot_args = stack.dots_only(hlo)
    dots = timing.time_jitted(prog, jax.device_put(dot_args, ctx.device), target_s=cfg.target_s)
    out = t.metrics(samples_per_s=t.per_s(cfg.sweep_batch), dot_time_s=dots.median_s)
    if flops:
        out["gflops"] = t.per_s(flops, 1e9)
        peak = _peak(ctx, "fp32")
        if peak:
            out["mfu"] = out["gflops"] * 1e9 / peak
    return out
