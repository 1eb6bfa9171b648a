"""tensor_parallel: the MLP split Megatron-style over a model axis; memory per device vs device count.

For each model-axis size m (and one 2-D data x model mesh): the output of the split
inference step against the unsharded one (``rel_error``), the loss after ``steps`` split
train steps against the unsharded train step (``loss_rel_error``), the train step's
bytes per device from ``compiled.memory_analysis()`` (``bytes_measured``) next to
``jaxgpu.pricing.fit.mlp_train_tensor_parallel`` (``bytes_predicted``), and the step time with
its ``speedup`` over m = 1. On CPU host devices the time shows the cost of splitting,
not a speed-up (the devices share the same cores); the memory is what each device holds.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext, one_device_case

_measure = Deferred(f"{__name__}.measure")


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


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    sizes = [m for m in cfg.model_sizes if m <= ctx.n_devices]
    if len(sizes) < 2:
        return [one_device_case({"data": 1, "model": 1}, "tensor parallel over 1 device splits nothing", ctx)]
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    # the unsharded reference (once), then per mesh: the split inference and train steps
    # compiled, ``steps`` steps checked, and the train step timed
    cost = Cost(compiles=1, step_compiles=1, flops=6.0 * cfg.batch * p, bytes=16.0 * p, target_s=cfg.target_s,
                calls=cfg.steps, host_bytes=16.0 * p)
    first = dataclasses.replace(cost, step_compiles=2, calls=2 * cfg.steps, rng_bytes=4.0 * cfg.batch * cfg.input_dim)
    out = [Case({"data": 1, "model": m}, functools.partial(_measure.split, 1, m, cfg, ctx), first if i == 0 else cost)
           for i, m in enumerate(sizes)]
    if ctx.n_devices >= 4:
        out.append(Case({"data": 2, "model": 2}, functools.partial(_measure.split, 2, 2, cfg, ctx), cost))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    out = [Case({"case": "plan", "data": 1, "model": m}, functools.partial(_measure.plan, 1, m, cfg, ctx), cost)
           for m in cfg.model_sizes if m <= ctx.n_devices]
    out.append(Case({"case": "plan", "data": 2, "model": 2}, functools.partial(_measure.plan, 2, 2, cfg, ctx), cost))
    return out


EXPERIMENT = Experiment(
    name="tensor_parallel", gpu_part=3, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    compiled_cases=compiled_cases, multi_device=True,
    description="Megatron-style tensor-parallel MLP: same outputs, per-device memory (XLA) vs device count")
