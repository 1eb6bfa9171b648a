"""memory_fit: what a model needs in memory, predicted and checked against XLA; what fits on 24-141 GB."""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import decoders
from jaxgpu.pricing import fit

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


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
    ("quick", "cpu"): Config(widths=((256, 256), (512, 512, 512, 512), (128, 1024, 128)), batches=(32, 1024)),
    ("full", "cpu"): _FULL,
    # each config is an XLA:GPU compile of a train step (seconds, with autotuning) and one step
    # (no held-out shapes: the byte counts were read off XLA:CPU; a GPU's own plan is their test there)
    # two sets of widths: the GPU check's part 2 holds eight train-step compiles with the rest of its work
    ("quick", "gpu"): Config(widths=((4096, 4096), (128, 1024, 128)), batches=(256, 4096), held_out=()),
    ("full", "gpu"): dataclasses.replace(_FULL, held_out=()),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    val = [(widths, batch, preset, False) for widths in cfg.widths for batch in cfg.batches for preset in cfg.presets]
    val += [(widths, batch, preset, True) for widths in cfg.held_out for batch in cfg.held_out_batches
            for preset in cfg.presets]
    # smallest first: on a GPU each step then raises the allocator's high-water mark, which is
    # the only way its peak can be read (see device_peak_bytes)
    val.sort(key=lambda v: fit.mlp_train(cfg.input_dim, v[0], 10, v[1], "adamw", v[2]).total)
    out, seen = [], set()
    for widths, batch, preset, held_out in val:
        params = fit.mlp_param_count(cfg.input_dim, widths, 10)
        # on a GPU the first config of a set of widths initialises its parameters op by op (a compile per op and
        # shape) to run the step; elsewhere the step is compiled from its shapes alone
        first = ctx.platform == "gpu" and widths not in seen
        p = {"case": "mlp_train", "widths": list(widths), "batch": batch, "preset": preset, "optimizer": "adamw"}
        out.append(Case({**p, "held_out": True} if held_out else p,
                        functools.partial(_measure.validate, widths, batch, preset, cfg, ctx),
                        Cost(compiles=25 if first else 2, step_compiles=1, flops=6.0 * batch * params,
                             min_iters=0, warmup=0, calls=int(ctx.platform == "gpu"), host_bytes=16.0 * params)))
        seen.add(widths)
    out.append(Case({"case": "mlp_train", "widths": list(cfg.too_big), "batch": 1024, "preset": "fp32",
                     "optimizer": "adamw"}, functools.partial(_measure.too_big, cfg, ctx), Cost.none()))
    out.append(Case({"case": "allocate_past_memory"}, functools.partial(_measure.overallocate, ctx), Cost(min_iters=0)))
    for t in (decoders.MODELS[name] for name in fit.CLASSIC):
        for preset in ("fp32", "bf16", "fp16"):
            out.append(Case({"case": "transformer", "model": t.name, "preset": preset, "mode": "train"},
                            functools.partial(_measure.table, t, preset, "train"), Cost.none()))
        for preset in ("fp32", "bf16", "fp8_e4m3", "int8"):
            out.append(Case({"case": "transformer", "model": t.name, "preset": preset, "mode": "inference"},
                            functools.partial(_measure.table, t, preset, "inference"), Cost.none()))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    configs = [(w, b, p) for w in cfg.widths for b in cfg.batches for p in cfg.presets]
    configs.append((cfg.too_big, 1024, "fp32"))  # about 210 GB: XLA:GPU's plan says where it fits, on no device
    return [Case({"case": "plan", "widths": list(w), "batch": b, "preset": p, "optimizer": "adamw"},
                 functools.partial(_measure.plan, w, b, p, cfg, ctx), Cost(compiles=0, step_compiles=1, min_iters=0,
                                                                           warmup=0,
                                                                   calls=0))
            for i, (w, b, p) in enumerate(configs)]


EXPERIMENT = Experiment(
    name="memory_fit", gpu_part=4, benchmark_version=2, config=Config, profiles=PROFILES, cases=cases,
    compiled_cases=compiled_cases,
    # measured before the other experiments of a run: a device's peak memory can only be read while its
    # high-water mark is still low (_measure.device_peak_bytes)
    run_first=True, in_host_check=False,
    description="memory estimate of MLP/transformer training and inference vs XLA's memory analysis; what fits where")
