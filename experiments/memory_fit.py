"""memory_fit: what a model needs in memory, predicted and checked against XLA; what fits on 24-141 GB (C10)."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax

from jaxgpu import devices, fit, mlp, timing
from jaxgpu.results import DoesNotFit

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 2  # 2: the backward-walk estimator (fit.Lowering)
CLAIMS = claims.for_experiment("memory_fit")
DESCRIPTION = "memory estimate of MLP/transformer training and inference vs XLA's memory analysis; what fits where"

# Measured before the other experiments of a run: a device's peak memory can only be read
# while its high-water mark is still low (see device_peak_bytes).
RUN_FIRST = True


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[tuple[int, ...], ...] = ((256, 256), (1024, 1024), (2048,), (512, 512, 512, 512))
    batches: tuple[int, ...] = (32, 256, 1024)
    presets: tuple[str, ...] = ("fp32", "bf16")
    input_dim: int = 784
    too_big: tuple[int, ...] = (65536, 65536, 65536, 65536)  # about 210 GB with AdamW: fits on no GPU listed
    # Shapes none of the estimator's byte counts (fit.LOWERINGS) were read from: its out-of-sample test.
    held_out: tuple[tuple[int, ...], ...] = ((384, 768, 192), (3072,))
    held_out_batches: tuple[int, ...] = (64, 512)


_FULL = Config(widths=((256, 256), (1024, 1024), (2048,), (512, 512, 512, 512), (4096, 4096), (128, 1024, 128),
                       (2048, 512, 512)), batches=(32, 256, 1024, 4096), presets=("fp32", "bf16", "fp16"),
               held_out=((384, 768, 192), (3072,), (640, 640, 640), (96, 2560)), held_out_batches=(64, 512, 2048))
PROFILES = {
    ("tiny", "any"): Config(widths=((64, 64),), batches=(16,), presets=("fp32",), input_dim=32, held_out=((48, 96),),
                            held_out_batches=(16,)),
    ("quick", "cpu"): Config(widths=((256, 256), (1024, 1024), (512, 512, 512, 512), (128, 1024, 128)),
                             batches=(32, 1024)),
    ("full", "cpu"): _FULL,
    # each config is an XLA:GPU compile of a train step (seconds, with autotuning) and one step
    # (no held-out shapes: the byte counts were read off XLA:CPU; a GPU's own plan is their test there)
    ("quick", "gpu"): Config(widths=((1024, 1024), (4096, 4096), (128, 1024, 128)), batches=(256, 4096), held_out=()),
    ("full", "gpu"): dataclasses.replace(_FULL, held_out=()),
}


def _validate(widths, batch, preset, cfg: Config, ctx: RunContext) -> dict[str, float]:
    est = fit.mlp_train(cfg.input_dim, widths, 10, batch, "adamw", preset)
    available = devices.device_memory_bytes(ctx.device)
    if available and est.total > available:
        raise DoesNotFit(f"predicted {est.total / 2**30:.1f} GiB, {available / 2**30:.1f} GiB available")
    model = mlp.MLP(widths=widths, n_out=10)
    opt = optax.adamw(1e-3)
    in_use_before = _stats(ctx.device).get("bytes_in_use", 0)
    state = jax.device_put(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim), ctx.device)
    step = mlp.make_train_step(model, opt, preset)
    x = jax.device_put(jnp.ones((batch, cfg.input_dim), jnp.float32), ctx.device)
    y = jax.device_put(jnp.zeros((batch,), jnp.int32), ctx.device)
    compiled = step.lower(state, x, y).compile()
    measured = timing.memory_bytes(compiled)
    out = {"bytes_predicted": float(est.total), "bytes_measured": float(measured),
           "prediction_error": est.total / measured - 1, "params": float(est.params / 4),
           "temp_bytes_measured": float(compiled.memory_analysis().temp_size_in_bytes), "activation_phase_bytes": float(est.activations),
           "gradient_phase_bytes": float(est.gradients),
           **{f"lowering_{k}": float(v) for k, v in dataclasses.asdict(fit.LOWERINGS[preset]).items()}}
    if ctx.platform == "gpu":
        peak = device_peak_bytes(ctx.device, lambda: jax.block_until_ready(step(state, x, y)), in_use_before)
        if peak is not None:
            out["peak_bytes"] = float(peak)
    return out


def _stats(device) -> dict:
    try:
        return device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - not every backend has them (CPU: None)
        return {}


def device_peak_bytes(device, run, in_use_before: int) -> int | None:
    """The device memory ``run()`` took at its peak, above ``in_use_before`` (bytes in use before
    its inputs were made), from the allocator's statistics; None where they cannot tell.

    The allocator keeps one high-water mark for the whole process, and JAX offers no way to
    reset it: a step whose peak stays below an earlier one (a large matmul before it) leaves
    the mark where it was, and that mark says nothing about the step. Only a step that
    raises the mark is measured.
    """
    mark = _stats(device).get("peak_bytes_in_use")
    run()
    after = _stats(device).get("peak_bytes_in_use")
    if mark is None or after is None or after <= mark:
        return None
    return after - in_use_before


def _too_big(cfg: Config, ctx: RunContext) -> dict[str, float]:
    est = fit.mlp_train(cfg.input_dim, cfg.too_big, 10, 1024, "adamw", "fp32")
    available = devices.device_memory_bytes(ctx.device) or 0
    if est.total > available:
        raise DoesNotFit(f"predicted {est.total / 2**30:.0f} GiB, {available / 2**30:.1f} GiB available; not compiled")
    return {"bytes_predicted": float(est.total)}


def _overallocate(ctx: RunContext) -> dict[str, float]:
    available = devices.device_memory_bytes(ctx.device) or 0
    want = int(available * 1.1)
    if ctx.platform == "cpu":
        raise DoesNotFit(f"needs {want / 2**30:.1f} GiB, {available / 2**30:.1f} GiB of host memory available: predicted, not "
                         "attempted on CPU (the OS would kill the process rather than refuse the allocation)")
    try:
        x = jax.device_put(jnp.zeros((want // 4,), jnp.float32), ctx.device)
        x.block_until_ready()
    except Exception as err:  # noqa: BLE001 - the allocator's refusal is the measurement
        raise DoesNotFit(f"needs {want / 2**30:.1f} GiB, {available / 2**30:.1f} GiB available: "
                         f"{(str(err).splitlines() or [''])[0][:160]}") from None
    del x
    return {"bytes_measured": float(want)}


def _table(t: fit.Transformer, preset: str, mode: str) -> dict[str, float]:
    if mode == "train":
        parts = fit.transformer_train(t, preset)
        state = parts["state"]
    else:
        parts = fit.transformer_inference(t, preset)
        state = parts["weights"]
    total = sum(parts.values())
    out = {"params": float(t.params), "bytes_predicted": float(total), "state_bytes": float(state)}
    for gb in fit.GPU_MEMORY_GB:
        out[f"fits_{gb}gb"] = float(fit.fits(total, gb))
    return out


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    val = [(widths, batch, preset, False) for widths in cfg.widths for batch in cfg.batches for preset in cfg.presets]
    val += [(widths, batch, preset, True) for widths in cfg.held_out for batch in cfg.held_out_batches
            for preset in cfg.presets]
    # smallest first: on a GPU each step then raises the allocator's high-water mark, which is
    # the only way its peak can be read (see device_peak_bytes)
    val.sort(key=lambda v: fit.mlp_train(cfg.input_dim, v[0], 10, v[1], "adamw", v[2]).total)
    out, seen = [], set()
    for i, (widths, batch, preset, held_out) in enumerate(val):
        params = fit.mlp_param_count(cfg.input_dim, widths, 10)
        # the first config of a set of widths initialises its parameters op by op: a compile per op and shape
        p = {"case": "mlp_train", "widths": list(widths), "batch": batch, "preset": preset, "optimizer": "adamw"}
        out.append(Case({**p, "held_out": True} if held_out else p,
                        functools.partial(_validate, widths, batch, preset, cfg, ctx),
                        Cost(compiles=2 if widths in seen else 25, step_compiles=1, flops=6.0 * batch * params,
                             min_iters=0, warmup=0, calls=int(ctx.platform == "gpu"), host_bytes=16.0 * params),
                        key=i == 0))
        seen.add(widths)
    out.append(Case({"case": "mlp_train", "widths": list(cfg.too_big), "batch": 1024, "preset": "fp32",
                     "optimizer": "adamw"}, functools.partial(_too_big, cfg, ctx), Cost.none()))
    out.append(Case({"case": "allocate_past_memory"}, functools.partial(_overallocate, ctx), Cost(min_iters=0)))
    for t in fit.TRANSFORMERS:
        for preset in ("fp32", "bf16", "fp16"):
            out.append(Case({"case": "transformer", "model": t.name, "preset": preset, "mode": "train"},
                            functools.partial(_table, t, preset, "train"), Cost.none(), key=True))
        for preset in ("fp32", "bf16", "fp8_e4m3", "int8"):
            out.append(Case({"case": "transformer", "model": t.name, "preset": preset, "mode": "inference"},
                            functools.partial(_table, t, preset, "inference"), Cost.none(), key=True))
    return out


# ---------------------------------------------------------------- compiled for a GPU (--compile-for)


def _plan(widths, batch, preset, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """The estimate against XLA:GPU's own memory plan of the train step, and where that plan fits."""
    from jaxgpu import targets

    dev = ctx.target_devices(1)[0]
    model, opt = mlp.MLP(widths=widths, n_out=10), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))
    plan = targets.compile_plan(mlp.make_train_step(model, opt, preset), targets.specs_like(state, dev),
                                targets.spec((batch, cfg.input_dim), "float32", dev), targets.spec((batch,), "int32", dev))
    est = fit.mlp_train(cfg.input_dim, widths, 10, batch, "adamw", preset).total
    out = {**plan.metrics(), "bytes_predicted": float(est), "prediction_error": est / plan.total_bytes - 1}
    for gb in fit.GPU_MEMORY_GB:
        out[f"fits_{gb}gb"] = float(fit.fits(plan.total_bytes, gb))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    configs = [(w, b, p) for w in cfg.widths for b in cfg.batches for p in cfg.presets]
    configs.append((cfg.too_big, 1024, "fp32"))  # about 210 GB: XLA:GPU's plan says where it fits, on no device
    return [Case({"case": "plan", "widths": list(w), "batch": b, "preset": p, "optimizer": "adamw"},
                 functools.partial(_plan, w, b, p, cfg, ctx), Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0,
                                                                   calls=0), key=i == 0 or w == cfg.too_big)
            for i, (w, b, p) in enumerate(configs)]
