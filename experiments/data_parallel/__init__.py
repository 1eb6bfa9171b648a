"""data_parallel: one MLP train step run three ways over N devices: pmap, jit + sharding, shard_map.

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

from jaxgpu.ground import workload
from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext, one_device_case

_measure = Deferred(f"{__name__}.measure")

TOLERANCE = 1e-5  # relative, fp32 losses: the variants differ only in the order of the gradient sums


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
                            weak_variants=workload.DP_VARIANTS, all_counts_variants=workload.DP_VARIANTS, target_s=0.5),
    ("quick", "gpu"): Config(widths=(2048, 2048), global_batch=4096, per_device_batch=1024, target_s=0.1),
    ("full", "gpu"): Config(widths=(4096, 4096, 4096), global_batch=8192, per_device_batch=2048,
                            weak_variants=workload.DP_VARIANTS, all_counts_variants=workload.DP_VARIANTS, target_s=0.5),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    counts = [k for k in cfg.device_counts if k <= ctx.n_devices]
    if len(counts) < 2:
        return [one_device_case({"case": "agreement", "devices": 1}, "data parallel over 1 device splits nothing", ctx)]
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    step = lambda batch: dict(flops=6.0 * batch * p, bytes=16.0 * p, rng_bytes=4.0 * batch * cfg.input_dim)
    agree = Cost(compiles=0, step_compiles=2, min_iters=0, warmup=0, calls=2 * cfg.steps,
                 **step(cfg.global_batch))
    out = [Case({"case": "agreement", "variant": v, "devices": counts[-1]},
                functools.partial(_measure.agreement, v, counts[-1], cfg, ctx), agree) for v in workload.DP_VARIANTS]
    ends = sorted({counts[0], counts[-1]})
    for mode, variants in (("strong", workload.DP_VARIANTS), ("weak", cfg.weak_variants)):
        for v in variants:
            for k in (counts if v in cfg.all_counts_variants else ends):
                batch = cfg.global_batch if mode == "strong" else cfg.per_device_batch * k
                cost = Cost(compiles=1, step_compiles=1, target_s=2 * cfg.target_s, **step(batch))
                out.append(Case({"case": mode, "variant": v, "devices": k},
                                functools.partial(_measure.scaling, mode, v, k, cfg, ctx), cost))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    return [Case({"case": "plan", "variant": v, "devices": k}, functools.partial(_measure.plan, v, k, cfg, ctx), cost)
            for v in ("jit_sharding", "shard_map") for k in (1, 2, 4, 8) if k <= ctx.n_devices]


EXPERIMENT = Experiment(
    name="data_parallel", gpu_part=3, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    compiled_cases=compiled_cases, multi_device=True,
    description="data-parallel MLP training: pmap vs jit+sharding vs shard_map; agreement, strong/weak scaling")
