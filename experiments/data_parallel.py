"""data_parallel: one MLP train step run three ways over N devices: pmap, jit + sharding, shard_map (C17).

Agreement: each variant trains ``steps`` steps from the same state on the same global
batches as the single-device step; ``rel_error`` is the largest relative difference of
the losses (tolerance ``TOLERANCE``, fp32). Scaling: step time vs device count, strong
(global batch fixed) and weak (batch per device fixed), with ``speedup`` over the
single-device step, the efficiency, and a prediction next to each measurement:
the single-device step time x (work / processors), plus the all-reduce of the gradients
(fp32, 4 bytes per parameter) measured on the same devices in the same case. Work is 1
(strong) or N (weak); processors are N on GPUs but 1 for CPU host devices, which share the
cores a single device already uses: there the figure tests correctness and the overhead of
splitting, not a speed-up, and the prediction says so.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import optax

from jaxgpu import devices as dv
from jaxgpu import fit, mlp, parallel, results

from experiments import claims
from experiments.views.data_parallel import TOLERANCE
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = claims.for_experiment("data_parallel")
DESCRIPTION = "data-parallel MLP training: pmap vs jit+sharding vs shard_map; agreement, strong/weak scaling"


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (256, 256)
    input_dim: int = 784
    global_batch: int = 512  # strong scaling
    per_device_batch: int = 128  # weak scaling
    device_counts: tuple[int, ...] = (1, 2, 4, 8)
    steps: int = 5
    weak_variants: tuple[str, ...] = ("jit_sharding",)
    all_counts_variants: tuple[str, ...] = ("jit_sharding",)  # the others run at 1 and the most devices
    target_s: float = 0.1


PROFILES = {
    ("tiny", "any"): Config(widths=(32,), input_dim=16, global_batch=16, per_device_batch=4, device_counts=(1, 2, 4),
                            steps=3, target_s=0.01),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(widths=(1024, 1024), global_batch=1024, per_device_batch=256,
                            weak_variants=parallel.DP_VARIANTS, all_counts_variants=parallel.DP_VARIANTS, target_s=0.5),
    ("quick", "gpu"): Config(widths=(2048, 2048), global_batch=4096, per_device_batch=1024, target_s=0.1),
    ("full", "gpu"): Config(widths=(4096, 4096, 4096), global_batch=8192, per_device_batch=2048,
                            weak_variants=parallel.DP_VARIANTS, all_counts_variants=parallel.DP_VARIANTS, target_s=0.5),
}


def _model(cfg: Config):
    return mlp.MLP(widths=cfg.widths), optax.adamw(1e-3)


@functools.lru_cache(maxsize=4)
def _state(cfg: Config):
    model, opt = _model(cfg)
    return jax.device_get(mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))


def _batch(cfg: Config, n: int, seed: int = 0):
    from jaxgpu import data

    return data.synthetic(n, cfg.input_dim, seed=seed)


def _agreement(variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def _scaling(mode: str, variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def _one_device(ctx: RunContext):
    raise results.Unsupported(f"data parallel over 1 device splits nothing (this run has one {ctx.device_kind}); "
                              "run with --devices N on CPU, or on a machine with several GPUs")


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    counts = [k for k in cfg.device_counts if k <= ctx.n_devices]
    if len(counts) < 2:
        return [Case({"case": "agreement", "devices": 1}, functools.partial(_one_device, ctx), Cost.none(), key=True)]
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    step = lambda batch: dict(flops=6.0 * batch * p, bytes=16.0 * p, rng_bytes=4.0 * batch * cfg.input_dim)
    agree = Cost(compiles=0, step_compiles=2, min_iters=0, warmup=0, calls=2 * cfg.steps,
                 **step(cfg.global_batch))
    out = [Case({"case": "agreement", "variant": v, "devices": counts[-1]},
                functools.partial(_agreement, v, counts[-1], cfg, ctx), agree, key=True) for v in parallel.DP_VARIANTS]
    ends = sorted({counts[0], counts[-1]})
    for mode, variants in (("strong", parallel.DP_VARIANTS), ("weak", cfg.weak_variants)):
        for v in variants:
            for k in (counts if v in cfg.all_counts_variants else ends):
                batch = cfg.global_batch if mode == "strong" else cfg.per_device_batch * k
                cost = Cost(compiles=1, step_compiles=1, target_s=2 * cfg.target_s, **step(batch))
                out.append(Case({"case": mode, "variant": v, "devices": k},
                                functools.partial(_scaling, mode, v, k, cfg, ctx), cost,
                                key=mode == "strong" and v == "jit_sharding"))
    return out


# ---------------------------------------------------------------- compiled for a GPU (--compile-for)


def _plan(variant: str, k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """The collectives XLA:GPU puts in the data-parallel step over k target GPUs, and their bytes."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxgpu import targets

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


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    return [Case({"case": "plan", "variant": v, "devices": k}, functools.partial(_plan, v, k, cfg, ctx), cost,
                 key=v == "jit_sharding") for v in ("jit_sharding", "shard_map") for k in (1, 2, 4, 8)
            if k <= ctx.n_devices]
