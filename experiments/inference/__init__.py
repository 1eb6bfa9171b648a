"""inference: latency and throughput vs batch size; the train step against the inference step."""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    widths: tuple[int, ...] = (1024, 1024, 1024)
    input_dim: int = 784
    batches: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
    compare_batch: int = 1024
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(widths=(64,), input_dim=32, batches=(1, 8), compare_batch=8, target_s=0.01),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(batches=tuple(2**i for i in range(0, 13)), target_s=0.5),
    ("quick", "gpu"): Config(batches=(1, 256, 8192), compare_batch=8192, target_s=0.1),
    ("full", "gpu"): Config(batches=tuple(4**i for i in range(7)) + (8192,), compare_batch=8192),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    p = fit.mlp_param_count(cfg.input_dim, cfg.widths, 10)
    infer = lambda b: Cost(compiles=0, gemm_compiles=1, flops=2.0 * b * p, bytes=4.0 * p, target_s=cfg.target_s,
                           rng_bytes=4.0 * b * cfg.input_dim)
    out = [Case({"case": "batch", "batch": b}, functools.partial(_measure.infer, b, cfg, ctx),
                infer(b)) for b in cfg.batches]
    b = cfg.compare_batch
    # an inference loop and a train-step loop, each timed, and the train step compiled twice
    both = dataclasses.replace(infer(b), step_compiles=2, flops=8.0 * b * p, bytes=20.0 * p, target_s=2 * cfg.target_s)
    out.append(Case({"case": "train_vs_infer", "batch": b}, functools.partial(_measure.compare, cfg, ctx), both))
    return out


EXPERIMENT = Experiment(
    name="inference", gpu_part=3, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases,
    description="MLP inference latency/throughput vs batch; train vs inference step: time, FLOPs, memory ratios",
    pricing=Pricing(causes={None: "small kernels: XLA:CPU splits some over the cores, at a wake-up priced once, "
                                  "and runs others inline"}))
