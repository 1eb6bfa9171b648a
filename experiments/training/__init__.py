"""training: a Flax + Optax MLP on the digits set per precision preset; throughput and MFU vs width.

Per preset: the loss/accuracy curve, samples/s, time to the target test accuracy (compile
excluded and included), achieved FLOP/s from XLA's cost analysis of the compiled step and
MFU against the hardware table. fp16 runs with and without dynamic loss scaling; what
goes wrong without it is measured (zero gradients, non-finite steps, and the share of
real fp32 gradients that fp16 would flush to zero), not asserted.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import devices
from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext

_measure = Deferred(f"{__name__}.measure")

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
    # time to a target on a task that takes time: students of these widths (two hidden
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


def _costs(cfg: Config) -> tuple[Cost, Cost, Cost]:
    """(a training run, a throughput step, a torch step): the digits set has 1437 training images."""
    steps = 1437 // cfg.batch * cfg.epochs
    params = fit.mlp_param_count(64, cfg.widths, 10)
    # per step: the step, its batch gather and one metrics fetch; per epoch an evaluation
    run = Cost(compiles=6, step_compiles=2, flops=6.0 * cfg.batch * params, dispatches=3, min_iters=0, warmup=0,
               calls=steps + 2 * cfg.epochs)
    widths = max(cfg.sweep_widths)
    big = fit.mlp_param_count(cfg.sweep_input, (widths,) * cfg.sweep_depth, 10)
    # the dots-only program's operands, drawn on the host once per shape (stack.dots_only): the batch's
    # activations at every layer, the weights, and the gradients of the outputs that have the same shapes
    b = cfg.sweep_batch
    operands = b * cfg.sweep_input + big + b * widths * cfg.sweep_depth + b * 10
    sweep = Cost(compiles=0, step_compiles=1, flops=6.0 * b * big, bytes=16.0 * big, target_s=cfg.target_s,
                 rng_bytes=4.0 * operands, host_bytes=4.0 * operands)
    return run, sweep, dataclasses.replace(sweep, step_compiles=0, rng_bytes=0.0, host_bytes=0.0)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    run_cost, _, _ = _costs(cfg)
    out = []
    for v in VARIANTS:
        # fp32 also measures what fp16 would flush to zero: gradients taken op by op
        cost = dataclasses.replace(run_cost, compiles=run_cost.compiles + 20) if v == "fp32" else run_cost
        run = {"case": "run", "variant": v, "widths": list(cfg.widths), "batch": cfg.batch}
        out.append(Case(run, functools.partial(_measure.run, v, cfg, ctx), cost))
        for i in range(cfg.epochs):  # each point reads its run's training (one run serves them all)
            out.append(Case({"case": "curve", "variant": v, "epoch": i + 1},
                            functools.partial(_measure.point, v, i, cfg, ctx), Cost.none(), needs=run))
    for w in cfg.to_target_widths:
        p = fit.mlp_param_count(64, (w, w), 10)
        steps = 16384 // cfg.to_target_batch * 3  # three epochs, about what the students take
        out.append(Case({"case": "to_target", "width": w, "batch": cfg.to_target_batch,
                         "target": cfg.to_target_accuracy}, functools.partial(_measure.to_target, w, cfg, ctx),
                        Cost(compiles=4, step_compiles=2, flops=6.0 * cfg.to_target_batch * p, dispatches=3,
                             min_iters=0, warmup=0, calls=steps, rng_bytes=4.0 * 3 * 20480 * 64)))
    impls = ["jax"] + (["torch"] if devices.torch_available() else [])
    for w in cfg.sweep_widths:
        _, jax_cost, torch_cost = _costs(dataclasses.replace(cfg, sweep_widths=(w,)))
        for impl in impls:
            out.append(Case({"case": "throughput", "width": w, "depth": cfg.sweep_depth, "batch": cfg.sweep_batch,
                             "impl": impl}, functools.partial(_measure.sweep, w, impl, cfg, ctx),
                            jax_cost if impl == "jax" else torch_cost))
    return out


EXPERIMENT = Experiment(
    # 3: tf32 asks for the TF32 algorithm on a GPU; the dots-only program draws each shape once
    name="training", gpu_part=2, benchmark_version=3,
    config=Config, profiles=PROFILES, cases=cases,
    description="MLP training on digits per preset (curves, time to 95%, MFU); train-step throughput vs width vs torch",
    pricing=Pricing(causes={None: "small kernels: XLA:CPU splits some over the cores, at a wake-up priced once, "
                                  "and runs others inline"}))
