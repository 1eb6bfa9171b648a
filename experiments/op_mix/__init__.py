"""op_mix: is deep learning mostly matrix multiplication? FLOP and time shares of dot vs the rest."""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    mlp_widths: tuple[int, ...] = (64, 256, 1024)
    mlp_batch: int = 512
    input_dim: int = 784
    block: tuple[int, int, int, int] = (256, 4, 128, 8)  # d_model, heads, sequence, batch
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(mlp_widths=(32,), mlp_batch=16, input_dim=16, block=(32, 2, 8, 2), target_s=0.01),
    ("quick", "cpu"): Config(mlp_widths=(64, 1024), target_s=0.1),
    ("full", "cpu"): Config(),
    ("quick", "gpu"): Config(mlp_widths=(8192,), mlp_batch=4096, block=(1024, 16, 1024, 8), target_s=0.1),
    ("full", "gpu"): Config(mlp_widths=(256, 1024, 4096, 8192), mlp_batch=4096, block=(1024, 16, 1024, 8)),
}


def _cost(flops: float, params: float, cfg: Config, key_bytes: float = 0.0) -> Cost:
    # the whole step and a program of only its dots: each compiled and timed
    # (parameters initialised op by op: a compile per op and shape)
    return Cost(compiles=20, gemm_compiles=1, step_compiles=1, flops=2 * flops, bytes=32.0 * params + key_bytes,
                target_s=2 * cfg.target_s,
                rng_bytes=4.0 * params)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = []
    for w in cfg.mlp_widths:
        p = fit.mlp_param_count(cfg.input_dim, (w, w, w), 10)
        out.append(Case({"model": "mlp", "width": w, "batch": cfg.mlp_batch}, functools.partial(_measure.mlp_step, w,
                                                                                                cfg, ctx),
                        _cost(6.0 * cfg.mlp_batch * p, p, cfg)))
    d, h, s, b = cfg.block
    p = 12 * d * d
    out.append(Case({"model": "transformer_block", "width": d, "heads": h, "seq": s, "batch": b},
                    functools.partial(_measure.block, cfg, ctx),
                    _cost(6.0 * b * s * p + 12.0 * b * s * s * d, p, cfg, key_bytes=4.0 * b * h * s * s * 3)))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    cost = Cost(compiles=0, step_compiles=1, min_iters=0, warmup=0, calls=0)
    out = [Case({"case": "plan", "model": "mlp", "width": w, "batch": cfg.mlp_batch},
                functools.partial(_measure.plan, "mlp", cfg, ctx, w), cost) for w in cfg.mlp_widths]
    d, h, s, b = cfg.block
    out.append(Case({"case": "plan", "model": "transformer_block", "width": d, "heads": h, "seq": s, "batch": b},
                    functools.partial(_measure.plan, "transformer_block", cfg, ctx), cost))
    return out


EXPERIMENT = Experiment(
    name="op_mix", gpu_part=2, benchmark_version=3,  # 3: the dots-only program draws each operand shape once
    config=Config, profiles=PROFILES, cases=cases, compiled_cases=compiled_cases,
    description="share of FLOPs (parsed HLO) and of time (dots-only program vs whole step) in matmul",
    pricing=Pricing(causes={None: "small kernels: XLA:CPU splits some over the cores, at a wake-up priced once, "
                                  "and runs others inline"}))
