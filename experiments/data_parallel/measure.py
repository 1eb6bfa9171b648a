"""data_parallel, measured: the step over N devices three ways, checked against one device, and timed."""

from __future__ import annotations

import functools

import jax
import optax

from jaxgpu.ground import devices as dv
from jaxgpu.kernels import mlp, parallel
from jaxgpu.pricing import fit

from experiments.contract import RunContext
from experiments.data_parallel import TOLERANCE, Config


def _model(cfg: Config):
    return mlp.MLP(widths=cfg.widths), optax.adamw(1e-3)


@functools.lru_cache(maxsize=4)
def _state(cfg: Config):
    model, opt = _model(cfg)
    return jax.device_get(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))


def _batch(cfg: Config, n: int, seed: int = 0):
    from jaxgpu.ground import data

    return data.synthetic(n, cfg.input_dim, seed=seed)


def agreement(variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, opt = _model(cfg)
    devs = dv.devices_of(ctx.platform)[:k]
    parallel.check_divisible(cfg.global_batch, k)
    batches = [_batch(cfg, cfg.global_batch, seed=i) for i in range(cfg.steps)]
    ref = parallel.loss_trajectory(parallel.data_parallel(model, opt, "single", devs[:1]), _state(cfg), batches)
    got = parallel.loss_trajectory(parallel.data_parallel(model, opt, variant, devs), _state(cfg), batches)
    err = parallel.trajectory_error(ref, got)
    if err > TOLERANCE:
        raise ArithmeticError(f"{variant} over {k} devices drifted from the single-device losses by {err:.2e} "
                              f"(tolerance {TOLERANCE:g})")
    return {"rel_error": err, "loss": got[-1], "loss_single": ref[-1], "steps": float(cfg.steps),
            "lines_of_code": float(parallel.lines_of_code(variant))}


@functools.lru_cache(maxsize=16)
def _single_time(cfg: Config, batch: int, platform: str) -> float:
    model, opt = _model(cfg)
    dp = parallel.data_parallel(model, opt, "single", dv.devices_of(platform)[:1])
    return parallel.time_step(dp, _state(cfg), *_batch(cfg, batch), target_s=cfg.target_s).median_s


@functools.lru_cache(maxsize=16)
def _allreduce_time(cfg: Config, k: int, platform: str) -> float:
    if k == 1:
        return 0.0
    grad_bytes = 4 * fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    return parallel.bench_collective("all_reduce", dv.devices_of(platform)[:k], grad_bytes,
                                     cfg.target_s).timing.median_s


def scaling(mode: str, variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    model, opt = _model(cfg)
    batch = cfg.global_batch if mode == "strong" else cfg.per_device_batch * k
    parallel.check_divisible(batch, k)
    dp = parallel.data_parallel(model, opt, variant, dv.devices_of(ctx.platform)[:k])
    t = parallel.time_step(dp, _state(cfg), *_batch(cfg, batch), target_s=cfg.target_s)
    base = _single_time(cfg, cfg.global_batch if mode == "strong" else cfg.per_device_batch, ctx.platform)
    comm = _allreduce_time(cfg, k, ctx.platform)
    # Compute: strong scaling splits the same work k ways, weak scaling gives k devices k times
    # the work. GPUs are k separate processors; CPU host devices share the cores one device
    # already used in full, so there the compute does not divide at all.
    processors = k if ctx.platform == "gpu" else 1
    work = 1 if mode == "strong" else k
    predicted = base * work / processors + comm
    speedup = t.per_s(base) if mode == "strong" else t.per_s(base * k)
    return {**t.metrics(), "samples_per_s": t.per_s(batch), "speedup": speedup, "efficiency": speedup / k,
            "baseline_time_s": base, "allreduce_time_s": comm, "predicted_time_s": predicted, "batch": float(batch)}


def plan(variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """The collectives XLA:GPU puts in the data-parallel step over k target GPUs, and their bytes."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxgpu.pricing import targets

    model, opt = _model(cfg)
    devs = ctx.target_devices(k)
    mesh = parallel.make_mesh(devs)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))
    split = NamedSharding(mesh, P(parallel.DATA))
    dp = parallel.data_parallel(model, opt, variant, devs)
    plan = targets.compile_plan(dp.step, targets.specs_like(state, NamedSharding(mesh, P())),
                                targets.spec((cfg.global_batch, cfg.input_dim), "float32", split),
                                targets.spec((cfg.global_batch,), "int32", split))
    return {**plan.metrics(), "gradient_bytes": 4.0 * fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)}
