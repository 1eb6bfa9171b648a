"""gpu_model: the GPU predictions checked against GPU measurements others published (jaxgpu.pricing.published).

Nothing is timed here. Each case compiles a published workload as a JAX program for the GPU its source
measured on (XLA:GPU's own plan, on this CPU, where the gpu-compile extra is installed) and prices it with
``jaxgpu.predict``; the record holds the prediction beside the published figure, and the same program's
price on this machine's XLA:CPU plan (how the GPU column was predicted before), so the report can say how
far to trust every predicted GPU figure it shows.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import hardware
from jaxgpu.pricing import published

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")

# seconds this CPU takes to compile a case's program twice (for XLA:GPU and XLA:CPU) and price it, by the
# program's builder: measured on the 2-core development machine
_COMPILE_S = {"gemm": 0.3, "stream": 0.2, "dot": 0.2, "decode": 9.0, "prefill": 2.0, "train": 90.0, "step": 40.0,
              "encoder": 40.0}


# the report's summary programs (``measure.headline``), at the sizes the study's CPU profiles time them
HEADLINE = (("matmul_fp32", (2048, 4096)), ("matmul_bf16", (1024, 4096)), ("triad_fp32", (1 << 25, 1 << 28)),
            ("train_step", (1024, 4096)), ("to_target_step", (256, 1024, 4096)))
_HEADLINE_S = {"matmul_fp32": 0.3, "matmul_bf16": 0.3, "triad_fp32": 0.2, "train_step": 1.5, "to_target_step": 1.2}


@dataclasses.dataclass(frozen=True)
class Config:
    kinds: tuple[str, ...] = published.KINDS  # which kinds of published case to price
    headline_gpus: tuple[str, ...] = (hardware.DEFAULT_GPU,)  # the GPUs the summary's programs are priced on
    ids: tuple[str, ...] | None = None  # the published cases to price, by id (None: every case of ``kinds``)


PROFILES = {
    ("tiny", "any"): Config(kinds=("gemm", "memory"), headline_gpus=()),
    # a train step of a GPT-2 compiles in about 14 s here and a 7B decode step about 9 s: the full profile's
    # (the default quick run has 5 minutes for everything, and the plans it keeps for an H200 take 30 s of them)
    ("quick", "any"): Config(kinds=("gemm", "memory")),
    ("full", "any"): Config(headline_gpus=tuple(n for n, hw in hardware.GPUS.items() if hw.in_report)),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    if ctx.platform == "gpu" and ctx.mode == "measured":
        # a GPU run measures; this CPU-side check of the model belongs to the runs that cannot (a GPU's own
        # timing of these programs, beside the published figures, is work not done yet)
        return []
    out = [Case({"case": c.id, "gpu": c.gpu, "kind": c.kind}, functools.partial(_measure.price, c.id),
                Cost(compiles=0, min_iters=0, warmup=0, calls=0, fixed_s=_COMPILE_S[c.program[0]]))
           for c in published.CASES if c.kind in cfg.kinds and (cfg.ids is None or c.id in cfg.ids)]
    out += [Case({"case": "headline", "program": name, "size": size, "gpu": gpu},
                 functools.partial(_measure.headline, name, size, gpu),
                 Cost(compiles=0, min_iters=0, warmup=0, calls=0, fixed_s=_HEADLINE_S[name]))
            for gpu in cfg.headline_gpus for name, sizes in HEADLINE for size in sizes]
    return out


EXPERIMENT = Experiment(
    name="gpu_model", benchmark_version=2, config=Config, profiles=PROFILES, cases=cases, compiled_cases=cases,
    in_host_check=False,
    description="the GPU predictions against published A100/H100/H200/B200 measurements: GEMMs, STREAM, train and "
                "decode")
