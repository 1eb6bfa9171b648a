"""transformer: decoder-only models from GPT-2 124M to Llama 70B, trained and served.

Measured on this machine: the smallest configs' train step and decode step (seconds, tokens/s, MFU against the
device's peak, bytes from XLA's memory analysis), each checked first (a finite loss that falls after a step; the
decode step's logits against the forward pass). Compiled (``--compile-for h200``): every config's train step
(AdamW, fp32 master weights, bf16 products, split fsdp) and decode step (bf16 weights and KV cache, split by
tensor parallelism) for 1 and 8 GPUs: bytes per device from XLA:GPU's plan beside ``jaxgpu.pricing.fit``'s estimate,
which cards that fits, the collectives per step and their bytes, and the step priced (``jaxgpu.plan_model``).
"""

from __future__ import annotations

import dataclasses
import functools

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext

_measure = Deferred(f"{__name__}.measure")

MODELS = ("gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "llama-1b", "llama-7b", "llama3-8b", "llama-13b",
          "llama-70b")


@dataclasses.dataclass(frozen=True)
class Config:
    measured: tuple[str, ...] = ("gpt2-124m",)  # run here: the smallest configs
    measure_batch: int = 1
    measure_seq: int = 128
    models: tuple[str, ...] = MODELS  # compiled for a GPU
    devices: tuple[int, ...] = (1, 8)
    modes: tuple[str, ...] = ("train", "serve")  # jaxgpu.pricing.planner.MODES compiled: the full profile adds the rest
    train_batch: int = 8  # sequences per step, each of the model's context (2,048 tokens at most)
    serve_batch: int = 8  # sequences decoded at once, against caches of that context
    target_s: float = 0.3


PROFILES = {
    ("tiny", "any"): Config(measured=("gpt2-124m",), measure_seq=32, models=("gpt2-124m", "llama-1b"),
                            target_s=0.01),
    ("quick", "any"): Config(),
    ("full", "cpu"): Config(measured=("gpt2-124m", "gpt2-350m"), measure_batch=2, measure_seq=256, target_s=1.0,
                            modes=("train", "train_bf16", "prefill", "serve")),
    ("full", "gpu"): Config(measured=("gpt2-124m", "gpt2-350m", "gpt2-774m", "llama-1b"), measure_batch=8,
                            measure_seq=1024, modes=("train", "train_bf16", "prefill", "serve")),
}

# seconds this CPU takes to compile one config's step for an H200 (train, serve), measured on the 2-core machine
_COMPILE_S = {"train": 4.0, "train_bf16": 4.0, "prefill": 2.0, "serve": 1.0}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = []
    for name in cfg.measured:
        for mode in ("train", "serve"):
            tokens = cfg.measure_batch * (cfg.measure_seq if mode == "train" else 1)
            params = _params(name)
            flops = (6.0 if mode == "train" else 2.0) * params * tokens
            # on a CPU the products run in fp32 (measure.measured); the checks run the step twice more (train:
            # and the forward pass once) or decode 8 tokens (serve)
            cost = Cost(compiles=1, step_compiles=1, flops=flops, dtype="fp32" if ctx.platform == "cpu" else "bf16",
                        bytes=(16.0 if mode == "train" else 4.0) * params, target_s=cfg.target_s, min_iters=3,
                        calls=3 if mode == "train" else 9, fixed_s=2.0)
            out.append(Case({"model": name, "mode": mode, "batch": cfg.measure_batch, "seq": cfg.measure_seq},
                            functools.partial(_measure.measured, name, mode, cfg, ctx), cost))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    return [Case({"case": "plan", "model": name, "mode": mode, "devices": n},
                 functools.partial(_measure.plan, name, mode, n, cfg, ctx),
                 Cost(compiles=0, min_iters=0, warmup=0, calls=0, fixed_s=_COMPILE_S[mode] * (1.5 if n > 1 else 1)))
            for name in cfg.models for mode in cfg.modes for n in cfg.devices if n <= ctx.n_devices]


def _params(name: str) -> float:
    from jaxgpu.ground import decoders

    # the configs' sizes as their names say them (the cost model needs a figure, not the exact count)
    scale = {"m": 1e6, "b": 1e9}
    tail = name.split("-")[-1]
    return float(tail[:-1]) * scale[tail[-1]] if tail[-1] in scale else decoders.find(name).params()


# version 3: the formula beside the plan (bytes_predicted) counts key/value heads, the MLP's width, a gated MLP's
# third matrix and an untied output head (Decoder.formula_params); version 2 counted 12 L d^2 + V d.
# version 4: a collective is priced at its replica group's share, and where a flash step's plan holds a layer's
# attention scores, bytes_compiled is of its twin that runs the attention a block of queries at a time (query_block)
EXPERIMENT = Experiment(
    name="transformer", gpu_part=3, benchmark_version=4, config=Config, profiles=PROFILES, cases=cases,
    compiled_cases=compiled_cases,
    description="decoder-only transformers from GPT-2 124M to Llama 70B: train and serve steps measured here at "
                "the smallest sizes, every size compiled for 1 and 8 GPUs (memory per device, fits, collectives, "
                "predicted step time)",
    pricing=Pricing(causes={None: "a step of many kernels of every size"}))
