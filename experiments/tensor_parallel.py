"""tensor_parallel: the MLP split Megatron-style over a model axis; memory per device vs device count (C11).

For each model-axis size m (and one 2-D data x model mesh): the output of the split
inference step against the unsharded one (``rel_error``), the loss after ``steps`` split
train steps against the unsharded train step (``loss_rel_error``), the train step's
bytes per device from ``compiled.memory_analysis()`` (``bytes_measured``) next to
``jaxgpu.fit.mlp_train_tensor_parallel`` (``bytes_predicted``), and the step time with
its ``speedup`` over m = 1. On CPU host devices the time shows the cost of splitting,
not a speed-up (the devices share the same cores); the memory is what each device holds.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import optax

from jaxgpu import data, fit, mlp, parallel, results, timing
from jaxgpu import devices as dv

from experiments import claims
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = claims.for_experiment("tensor_parallel")
DESCRIPTION = "Megatron-style tensor-parallel MLP: same outputs, per-device memory (XLA) vs device count"
OUTPUT_TOLERANCE = 1e-5  # relative, logits of the split inference step vs unsharded
LOSS_TOLERANCE = 1e-4  # relative, loss after ``steps`` split train steps vs unsharded


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (1024, 1024, 1024)
    input_dim: int = 784
    batch: int = 256
    model_sizes: tuple[int, ...] = (1, 2, 4, 8)
    steps: int = 3
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(widths=(64, 64, 64), input_dim=32, batch=16, model_sizes=(1, 2, 4), steps=2,
                            target_s=0.01),
    ("quick", "cpu"): Config(widths=(512, 512, 512), batch=128, target_s=0.1),
    ("full", "cpu"): Config(widths=(2048, 2048, 2048), batch=512, target_s=0.5),
    ("quick", "gpu"): Config(widths=(4096, 4096, 4096), batch=2048, target_s=0.1),
    ("full", "gpu"): Config(widths=(8192, 8192, 8192), batch=4096, target_s=0.5),
}


@functools.lru_cache(maxsize=2)
def _setup(cfg: Config):
    model, opt = mlp.MLP(widths=cfg.widths), optax.adamw(1e-3)
    state = jax.device_get(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))
    batches = [data.synthetic(cfg.batch, cfg.input_dim, seed=i) for i in range(cfg.steps)]
    logits = np.asarray(jax.device_get(mlp.make_infer_step(model)(state["params"], batches[0][0])), np.float64)
    s = state
    step = mlp.make_train_step(model, opt, donate=False)
    for x, y in batches:
        s, m = step(s, x, y)
    return model, opt, state, batches, logits, float(m["loss"])


def _one(d: int, m: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, opt, state, batches, ref_logits, ref_loss = _setup(cfg)
    mesh = parallel.make_mesh(dv.devices_of(ctx.platform)[: d * m], (d, m), (parallel.DATA, parallel.MODEL))
    tp = parallel.tensor_parallel(model, opt, state, mesh)
    put_b = lambda a: jax.device_put(a, tp.batch_sharding)
    logits = np.asarray(tp.infer_step(jax.device_put(state["params"], tp.params_sharding), put_b(batches[0][0])),
                        np.float64)
    err = float(np.linalg.norm(logits - ref_logits) / np.linalg.norm(ref_logits))
    s = jax.device_put(state, tp.state_sharding)
    x0, y0 = put_b(batches[0][0]), put_b(batches[0][1])
    compiled, compile_s = timing.compile_timed(tp.train_step, s, x0, y0)
    measured = timing.memory_bytes(compiled)
    for x, y in batches:
        s, metrics = compiled(s, put_b(x), put_b(y))
    loss_err = abs(float(metrics["loss"]) - ref_loss) / abs(ref_loss)
    # fp32: the forward differs only in the order of the all-reduced partial sums; a few Adam
    # steps amplify that a little (seen: 2e-5 at 8 devices), hence the looser loss tolerance.
    if err > OUTPUT_TOLERANCE or loss_err > LOSS_TOLERANCE:
        raise ArithmeticError(f"the split MLP differs from the unsharded one (output {err:.1e}, loss {loss_err:.1e})")
    t, _ = timing.time_stateful(compiled, s, x0, y0, target_s=cfg.target_s)
    predicted = fit.mlp_train_tensor_parallel(cfg.input_dim, cfg.widths, 10, cfg.batch, m, "adam", d).total
    return {**t.metrics(), "compile_s": compile_s, "rel_error": err, "loss_rel_error": loss_err,
            "bytes_measured": float(measured), "bytes_predicted": float(predicted),
            "prediction_error": predicted / measured - 1, "samples_per_s": t.per_s(cfg.batch)}


def _one_device(ctx: RunContext):
    raise results.Unsupported(f"tensor parallel over 1 device splits nothing (this run has one {ctx.device_kind}); "
                              "run with --devices N on CPU, or on a machine with several GPUs")


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    sizes = [m for m in cfg.model_sizes if m <= ctx.n_devices]
    if len(sizes) < 2:
        return [Case({"data": 1, "model": 1}, functools.partial(_one_device, ctx), Cost.none(), key=True)]
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    # the unsharded reference (once), then per mesh: the split inference and train steps
    # compiled, ``steps`` steps checked, and the train step timed
    cost = Cost(compiles=1, step_compiles=1, flops=6.0 * cfg.batch * p, bytes=16.0 * p, target_s=cfg.target_s,
                calls=cfg.steps, host_bytes=16.0 * p)
    first = dataclasses.replace(cost, step_compiles=2, calls=2 * cfg.steps, rng_bytes=4.0 * cfg.batch * cfg.input_dim)
    out = [Case({"data": 1, "model": m}, functools.partial(_one, 1, m, cfg, ctx), first if i == 0 else cost, key=True)
           for i, m in enumerate(sizes)]
    if ctx.n_devices >= 4:
        out.append(Case({"data": 2, "model": 2}, functools.partial(_one, 2, 2, cfg, ctx), cost))
    return out


# ---------------------------------------------------------------- compiled for a GPU (--compile-for)


def _plan(d: int, m: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """Bytes per device of the split train step, from XLA:GPU's plan over d x m target GPUs."""
    from jaxgpu import targets

    model, opt = mlp.MLP(widths=cfg.widths), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))
    mesh = parallel.make_mesh(ctx.target_devices(d * m), (d, m), (parallel.DATA, parallel.MODEL))
    tp = parallel.tensor_parallel(model, opt, state, mesh)
    plan = targets.compile_plan(tp.train_step, targets.specs_like(state, tp.state_sharding),
                                targets.spec((cfg.batch, cfg.input_dim), "float32", tp.batch_sharding),
                                targets.spec((cfg.batch,), "int32", tp.batch_sharding))
    predicted = fit.mlp_train_tensor_parallel(cfg.input_dim, cfg.widths, 10, cfg.batch, m, "adam", d).total
    return {**plan.metrics(), "bytes_predicted": float(predicted), "prediction_error": predicted / plan.total_bytes - 1}


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    out = [Case({"case": "plan", "data": 1, "model": m}, functools.partial(_plan, 1, m, cfg, ctx), cost, key=True)
           for m in cfg.model_sizes if m <= ctx.n_devices]
    out.append(Case({"case": "plan", "data": 2, "model": 2}, functools.partial(_plan, 2, 2, cfg, ctx), cost))
    return out
