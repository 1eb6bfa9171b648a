"""training: a Flax + Optax MLP on the digits set per precision preset; throughput and MFU vs width (C07, C13, C16).

Per preset: the loss/accuracy curve, samples/s, time to the target test accuracy (compile
excluded and included), achieved FLOP/s from XLA's cost analysis of the compiled step and
MFU against the hardware table. fp16 runs with and without dynamic loss scaling; what
goes wrong without it is measured (zero gradients, non-finite steps, and the share of
real fp32 gradients that fp16 would flush to zero), not asserted.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import optax

from jaxgpu import data, fit, matmul, mlp, precision, stack, timing

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 2  # 2: the torch peer does the same work (AdamW, the zero count); dots timed apart; C07's task
CLAIMS = claims.for_experiment("training")
DESCRIPTION = "MLP training on digits per preset (curves, time to 95%, MFU); train-step throughput vs width vs torch"

# (name, precision preset, loss scaling)
VARIANTS = {"fp32": ("fp32", False), "tf32": ("tf32", False), "bf16": ("bf16", False),
            "fp16_scaled": ("fp16", True), "fp16": ("fp16", False)}


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (256, 256)
    epochs: int = 30
    batch: int = 128
    lr: float = 1e-3
    target_accuracy: float = 0.95
    sweep_widths: tuple[int, ...] = (256, 512, 1024)
    sweep_batch: int = 1024
    sweep_depth: int = 3
    sweep_input: int = 784
    target_s: float = 0.3
    # C07, time to a target on a task that takes time: students of these widths (two hidden
    # layers) learning data.teacher's labels to this test accuracy, for at most so many epochs
    to_target_widths: tuple[int, ...] = (256,)
    to_target_accuracy: float = 0.93
    to_target_epochs: int = 20
    to_target_batch: int = 256


PROFILES = {
    ("tiny", "any"): Config(widths=(64,), epochs=3, sweep_widths=(64,), sweep_batch=64, target_s=0.01,
                            to_target_widths=(32,), to_target_accuracy=0.5, to_target_epochs=2),
    ("quick", "cpu"): Config(epochs=20, sweep_widths=(256, 1024), target_s=0.2),
    # tens of seconds to the target at width 4096 on two cores
    ("full", "cpu"): Config(epochs=60, sweep_widths=(256, 512, 1024, 2048, 4096), target_s=1.0,
                            to_target_widths=(256, 1024, 4096)),
    ("quick", "gpu"): Config(epochs=20, sweep_widths=(1024, 8192), sweep_batch=8192, target_s=0.1,
                             to_target_widths=(256, 4096)),
    ("full", "gpu"): Config(sweep_widths=(256, 1024, 2048, 4096, 8192), sweep_batch=8192,
                            to_target_widths=(256, 1024, 4096)),
}


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


def _run(variant: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def _to_target(width: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def _point(variant: str, i: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    step, loss, acc, t = _trained(variant, cfg, ctx).curve[i]
    return {"step": float(step), "loss": loss, "accuracy": acc, "train_s": t}


def _step_dots(widths, cfg: Config) -> str:
    """The HLO of the sweep's train step, whose dots both implementations are timed on alone."""
    import jax

    model, opt = mlp.MLP(widths=widths), optax.adamw(cfg.lr)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.sweep_input))
    x, y = data.synthetic(cfg.sweep_batch, cfg.sweep_input)
    return mlp.make_train_step(model, opt).lower(state, x, y).as_text(dialect="hlo")


def _sweep(width: int, impl: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def _costs(cfg: Config) -> tuple[Cost, Cost, Cost]:
    """(a training run, a throughput step, a torch step): the digits set has 1437 training images."""
    steps = 1437 // cfg.batch * cfg.epochs
    params = fit.mlp_param_count(64, cfg.widths, 10)
    # per step: the step, its batch gather and one metrics fetch; per epoch an evaluation
    run = Cost(compiles=6, step_compiles=2, flops=6.0 * cfg.batch * params, dispatches=3, min_iters=0, warmup=0,
               calls=steps + 2 * cfg.epochs)
    widths = max(cfg.sweep_widths)
    big = fit.mlp_param_count(cfg.sweep_input, (widths,) * cfg.sweep_depth, 10)
    sweep = Cost(compiles=0, step_compiles=1, flops=6.0 * cfg.sweep_batch * big, bytes=16.0 * big,
                 target_s=cfg.target_s)
    return run, sweep, dataclasses.replace(sweep, step_compiles=0)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    run_cost, _, _ = _costs(cfg)
    out = []
    for v in VARIANTS:
        # fp32 also measures what fp16 would flush to zero: gradients taken op by op
        cost = dataclasses.replace(run_cost, compiles=run_cost.compiles + 20) if v == "fp32" else run_cost
        out.append(Case({"case": "run", "variant": v, "widths": list(cfg.widths), "batch": cfg.batch},
                        functools.partial(_run, v, cfg, ctx), cost, key=v == "fp32"))
        for i in range(cfg.epochs):
            out.append(Case({"case": "curve", "variant": v, "epoch": i + 1}, functools.partial(_point, v, i, cfg, ctx),
                            Cost.none(), key=v == "fp32"))
    for w in cfg.to_target_widths:
        p = fit.mlp_param_count(64, (w, w), 10)
        steps = 16384 // cfg.to_target_batch * 3  # three epochs, about what the students take
        out.append(Case({"case": "to_target", "width": w, "batch": cfg.to_target_batch,
                         "target": cfg.to_target_accuracy}, functools.partial(_to_target, w, cfg, ctx),
                        Cost(compiles=4, step_compiles=2, flops=6.0 * cfg.to_target_batch * p, dispatches=3,
                             min_iters=0, warmup=0, calls=steps, rng_bytes=4.0 * 3 * 20480 * 64),
                        key=w == max(cfg.to_target_widths)))
    impls = ["jax"] + (["torch"] if matmul.torch_available() else [])
    for w in cfg.sweep_widths:
        _, jax_cost, torch_cost = _costs(dataclasses.replace(cfg, sweep_widths=(w,)))
        for impl in impls:
            out.append(Case({"case": "throughput", "width": w, "depth": cfg.sweep_depth, "batch": cfg.sweep_batch,
                             "impl": impl}, functools.partial(_sweep, w, impl, cfg, ctx),
                            jax_cost if impl == "jax" else torch_cost))
    return out
