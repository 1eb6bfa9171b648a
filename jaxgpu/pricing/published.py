"""GPU measurements others published, each as a JAX program: what ``jaxgpu.predict`` is checked against.

A ``Case`` is one figure measured on a real A100, H100 or H200 by someone else: the figure as its source
states it (with the quote and where it stands), the setup the source gives, and the same workload written
as a JAX program (``program``: a function and ``jax.ShapeDtypeStruct`` arguments, nothing allocated). A
source whose shapes, dtype or batch are ambiguous is left out. ``published_s`` turns each figure into the
seconds of one call of the program, so a prediction and the figure compare directly.

Cases the model's constants were read from are marked ``calibration`` and are never scored. Every other case is
scored twice: its price today, in sample (the development set: the model changed while its errors were read), and
its first price (``first_prices``), out of sample by ``OUT_OF_SAMPLE``, a rule a test recomputes for every case. A
case known to have guided a change says which (``guided``). ``summary`` is the one definition of how far predictions
missed. The cases are data in ``jaxgpu.pricing.published_cases``; ``program`` imports JAX when it is called.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxgpu.ground import decoders
from jaxgpu.pricing.published_cases import BEFORE_CALIBRATION, CASES, KINDS, RATES, TIMED, UNITS, Case, gemm_flops  # noqa: F401 - the cases and their record, read here too

# Each case's first price: the seconds the model gave it before any change it informed, priced at the commit before it
# entered the project (or before the change it guided); or why it has none. Data beside the cases, outside the pricing
# code's fingerprint: a first price is never priced again. experiments.first_price records a new case's.
FIRST_PRICES = Path(__file__).with_name("first_prices.json")


def first_prices() -> dict[str, dict]:
    """{case id: {"entered": commit, "priced_at": commit, "first_price_s": seconds, "how": how it was priced}}, or
    ``"first_price_s": None`` with ``"why"`` there is none."""
    return json.loads(FIRST_PRICES.read_text())


# The one rule that makes a price out of sample, in the words the report and the docs quote.
OUT_OF_SAMPLE = ("a case's first price counts out of sample when the model of a commit before the one that added the "
                 "case, and before any change the case guided, priced it (the case's own data and program builders "
                 "laid over that commit) and no case added earlier prices the same program on the same GPU; every "
                 "other price, today's included, is in sample")


def guided_changes(case: Case) -> list[tuple[str, str]]:
    """(commit, what it changed) for each change ``case.guided`` names: its clauses are "A: what" or "A and B: what",
    joined by "; "."""
    import re

    out = []
    for clause in filter(None, re.split(r"; (?=[0-9a-f]{7}\b)", case.guided)):  # a "; " inside a clause stays
        commits, _, what = clause.partition(":")
        out += [(commit.strip(), what.strip()) for commit in commits.split(" and ")]
    return out


def out_of_sample(prices: dict[str, dict] | None = None) -> dict[str, float]:
    """{case id: its first price in seconds} of the scored cases whose first price is out of sample
    (``OUT_OF_SAMPLE``): those ``first_prices.json`` gives a price, the rest saying why it has none."""
    got = first_prices() if prices is None else prices
    return {c.id: got[c.id]["first_price_s"] for c in scored() if got.get(c.id, {}).get("first_price_s")}


def scored(cases: list[Case] | None = None) -> list[Case]:
    """The cases a prediction is judged on: all but those the model's constants came from."""
    return [c for c in (CASES if cases is None else cases) if not c.calibration]


def error(predicted_s: float, case: Case) -> float:
    """predicted / published - 1 (0.2: the prediction is 20% slower than what was measured)."""
    return predicted_s / case.published_s - 1


# the fewest cases whose spread is read as an interval: below it a kind is shown without one (or pooled), so said
MIN_INTERVAL_CASES = 8
INTERVAL = 0.90  # the share of cases the interval of the ratio holds, empirical: its 5th and 95th percentiles


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, linear between the two nearest (numpy's default)."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summary(errors: list[float]) -> dict[str, float]:
    """How far predictions missed, one definition for the report, the summary, the README and the model command, of
    errors ``predicted / published - 1``: ``cases``; ``median_abs_error``; ``bias``, the geometric mean of the ratio
    predicted / published (below 1: the predictions lean fast); the shares within 15%, 25% and 2x; and where there
    are ``MIN_INTERVAL_CASES`` or more, ``ratio_low`` and ``ratio_high``, the empirical ``INTERVAL`` of the ratio
    (its 5th and 95th percentiles): a time predicted at t was measured between t / ratio_high and t / ratio_low in
    that share of the cases."""
    if not errors:
        return {"cases": 0.0}
    ordered = sorted(abs(e) for e in errors)
    ratios = sorted(1 + e for e in errors)
    out = {"cases": float(len(errors)), "median_abs_error": _quantile(ordered, 0.5),
           "bias": math.exp(sum(math.log(r) for r in ratios) / len(ratios)),
           "within_15": sum(abs(e) <= 0.15 for e in errors) / len(errors),
           "within_25": sum(abs(e) <= 0.25 for e in errors) / len(errors),
           "within_2x": sum(0.5 <= r <= 2 for r in ratios) / len(errors)}
    if len(errors) >= MIN_INTERVAL_CASES:
        out["ratio_low"] = _quantile(ratios, (1 - INTERVAL) / 2)
        out["ratio_high"] = _quantile(ratios, 1 - (1 - INTERVAL) / 2)
    return out


# ---- the programs ----------------------------------------------------------------------------------------

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32", "fp8": "float8_e4m3fn",
           "int8": "int8", "fp64": "float64"}


def _gemm(m: int, n: int, k: int, dtype: str, b_layout: str = "kn") -> tuple[Callable, tuple]:
    """``b_layout="nk"``: the second matrix stored n x k and contracted on its last axis (torch's
    ``randn(n, k).t()``, the layout cuBLASLt's fp8 GEMM wants: no transpose kernel before it)."""
    import jax
    import jax.numpy as jnp

    t = jnp.dtype(_DTYPES[dtype])
    a = jax.ShapeDtypeStruct((m, k), t)
    if b_layout == "nk":
        b = jax.ShapeDtypeStruct((n, k), t)
        out = jnp.bfloat16 if dtype == "fp8" else None
        return (lambda x, y: jax.lax.dot_general(x, y, (((1,), (1,)), ((), ())), preferred_element_type=out)), (a, b)
    b = jax.ShapeDtypeStruct((k, n), t)
    if dtype == "fp8":  # a scaled fp8 GEMM writes bf16, as cuBLASLt's and torch._scaled_mm's benchmarks do
        return (lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.bfloat16)), (a, b)
    if dtype == "int8":
        return (lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.int32)), (a, b)
    if dtype == "tf32":  # HIGH: one TF32 pass on XLA:GPU's cuBLAS path (the plan priced), and valid on a CPU plan
        return (lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGH)), (a, b)
    if dtype == "fp32":
        return (lambda x, y: jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST)), (a, b)
    return (lambda x, y: x @ y), (a, b)


def _stream(kernel: str, n: int, dtype: str) -> tuple[Callable, tuple]:
    import jax
    import jax.numpy as jnp

    from jaxgpu.kernels import stream

    t = jnp.dtype(_DTYPES[dtype])
    fn = stream.stream_kernel(kernel)
    spec = jax.ShapeDtypeStruct((n,), t)
    return (lambda a, b, c: fn(a, b, c)), (spec, spec, spec)


def _decode(model: str, batch: int, context: int, weights: str = "bf16") -> tuple[Callable, tuple]:
    from jaxgpu.kernels import transformer

    c = decoders.MODELS[model]
    # layers unrolled, each its own buffers, as a PyTorch decoder holds them (a scan would copy each layer's
    # slice of the stacked weights out first: twice the bytes)
    return transformer.decode_step(c, weights=weights), transformer.decode_specs(c, batch, context, weights,
                                                                                  unrolled=True)


def _train(model: str, batch: int, seq: int, micro_batches: int = 1, shards: int = 1) -> tuple[Callable, tuple]:
    """One GPU's step of data-parallel training: ``batch`` sequences in ``micro_batches`` passes, AdamW on the
    1/``shards`` of the weights it owns (ZeRO-1); the collectives between the GPUs are not part of it. Attention
    is named as one fused kernel, as the sources ran it (cuDNN or FlashAttention)."""
    from jaxgpu.kernels import transformer

    c = decoders.MODELS[model]
    settings = decoders.StepSettings(flash=True, scan=False)
    step, _ = transformer.train_step(c, micro_batches=micro_batches, shards=shards, settings=settings)
    return step, transformer.train_specs(c, batch, seq, shards)


def _prefill(model: str, batch: int, tokens: int, dtype: str = "fp16") -> tuple[Callable, tuple]:
    """The forward pass over a prompt (the first token's latency), weights stored in ``dtype``."""
    import jax
    import jax.numpy as jnp

    from jaxgpu.kernels import transformer

    c = decoders.MODELS[model]
    t = jnp.dtype(_DTYPES[dtype])
    fn = lambda p, x: transformer.forward(c, p, x, compute=t, flash=True)[:, -1]
    return fn, (transformer.param_specs(c, t), jax.ShapeDtypeStruct((batch, tokens), jnp.int32))


def _dot(n: int, dtype: str) -> tuple[Callable, tuple]:
    import jax
    import jax.numpy as jnp

    spec = jax.ShapeDtypeStruct((n,), jnp.dtype({"fp64": "float64", "fp32": "float32"}[dtype]))
    return (lambda a, b: jnp.dot(a, b)), (spec, spec)


def model_config(name: str):
    """The ``jaxgpu.ground.decoders.Decoder`` a case's ``("step", ...)`` program names."""
    return decoders.MODELS[name]


def is_step(case: Case) -> bool:
    """A whole step over several GPUs (``("step", model, mode, batch, seq, devices, settings)``, or an encoder's
    ``("encoder", model, mode, batch, size, devices, settings)``): priced by ``jaxgpu.pricing.planner.plan_model``
    (an encoder's by ``jaxgpu.pricing.anystep.price_step``), not one program on one GPU (``program``)."""
    return case.program[0] in ("step", "encoder")


def plan_step(case: Case, alternative: tuple = ()):
    """The ``jaxgpu.pricing.planner.ModelPlan`` of a ``("step", ...)`` case: its model, mode (``planner.MODES``), global
    batch, sequence, GPUs (all of them, over every node) and ``StepSettings`` fields (pairs), compiled for its GPU
    and priced; with
    ``alternative`` (one of ``case.plausible``) its pairs in place of the case's."""
    from jaxgpu.pricing import planner

    if case.program[0] == "encoder":
        return _plan_encoder(case)
    _, model, mode, batch, seq, devices, settings = case.program
    return planner.plan_model(model_config(model), case.gpu, mode=mode, batch=batch, seq=seq, devices=devices,
                             settings=step_settings(case, alternative))


def _plan_encoder(case: Case):
    """An ``("encoder", ...)`` case's ``jaxgpu.pricing.anystep.StepPlan``: a ViT (``size``: the images' side) or a
    T5 v1.1 (``size``: (input tokens, target tokens)) of ``jaxgpu.kernels.encoders``, its AdamW step over ``batch``
    examples split data parallel over ``devices`` GPUs (the weights and state whole on each), priced through the
    public door as a user's step is."""
    from jax.sharding import PartitionSpec as P

    from jaxgpu.kernels import encoders
    from jaxgpu.pricing import anystep

    _, model, _, batch, size, devices, settings = case.program
    if model.startswith("vit"):
        s = encoders.vit_train_step(encoders.vit(model), batch, image=size)
    else:
        s = encoders.t5_train_step(encoders.t5(model), batch, inputs=size[0], targets=size[1])
    return anystep.price_step(s.step, *s.specs, in_specs=(None, None, P("data"), P("data")),
                              mesh={"data": devices}, gpu=case.gpu, donate=(0, 1), name=case.id,
                              xla=dict(dict(settings).get("xla", ())))


def step_settings(case: Case, alternative: tuple = ()):
    """A ``("step", ...)`` case's ``StepSettings``: the mode's defaults (``planner.default_settings``), with what the
    case sets, and then what ``alternative`` sets."""
    import dataclasses as dc

    from jaxgpu.pricing import planner

    return dc.replace(planner.default_settings(case.program[2]), **(dict(case.program[6]) | dict(alternative)))


def spans(case: Case) -> tuple[int, int]:
    """(the GPUs the source's run used, the GPUs of the program priced for it). A step over GPUs is compiled whole,
    over every node; llm.c's steps as one GPU's share of a data-parallel step (``("train", ...)``), its collectives
    left out; the rest whole."""
    if is_step(case):
        devices, nodes = case.program[5], dict(case.program[6]).get("nodes", 1)
        return devices * nodes, devices * nodes
    if case.program[0] == "train":
        return case.program[5], 1
    return 1, 1


# the report's rows a case counts in beside its kind's (``groups``), and the row of measured peaks of memory
GROUPS = ("train over nodes", "LoRA train", "pipeline train", "expert-parallel train", "context-parallel train",
          "encoder train")
PEAK = "peak memory"


def groups(case: Case) -> tuple[str, ...]:
    """The rows of the report's accuracy table a case counts in beside its kind's: a training step whose run spanned
    more GPUs than a node holds ("train over nodes"), a LoRA or QLoRA fine-tune ("LoRA train"), a run in pipeline
    stages ("pipeline train"), a mixture's experts over expert-parallel groups ("expert-parallel train"), sequences
    over context-parallel groups ("context-parallel train"), a model that is not a decoder (a ViT, a T5: "encoder
    train")."""
    from jaxgpu.ground import hardware

    if not (is_step(case) and case.kind == "train"):
        return ()
    said = dict(case.program[6])
    yes = (spans(case)[0] > hardware.find_gpu(case.gpu).node, bool(said.get("lora")), said.get("pp", 1) > 1,
           said.get("ep", 1) > 1, said.get("cp", 1) > 1, case.program[0] == "encoder")
    return tuple(g for g, y in zip(GROUPS, yes) if y)


def memory_share(case: Case, bytes_per_device: float) -> dict[str, float]:
    """A step's memory a GPU on XLA's plan against its card: the card's bytes as the device reports them (its compile
    target's MiB, else the datasheet's GB), the plan's share of them, the share the source's run could hold
    (``memory_fraction``, else JAX's default) and the plan over that share (1.04: 4% more than the run could hold)."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import sharded

    hw = hardware.find_gpu(case.gpu)
    card = hw.device_bytes
    allowed = case.memory_fraction or sharded.USABLE_FRACTION
    return {"card_bytes": card, "plan_share": bytes_per_device / card, "allowed_share": allowed,
            "over_allowed": bytes_per_device / (allowed * card)}


_BUILDERS = {"gemm": _gemm, "stream": _stream, "decode": _decode, "train": _train, "prefill": _prefill, "dot": _dot}


def program(case: Case) -> tuple[Callable, tuple[Any, ...]]:
    """(function, ShapeDtypeStruct arguments) of the case's workload. A float64 program must be lowered inside
    ``jaxgpu.ground.precision.enable_x64()`` (``needs_x64``); a whole step over GPUs has ``plan_step`` instead."""
    name, *args = case.program
    if name == "step":
        raise ValueError(f"{case.id} is a step over {args[4]} GPUs: plan_step prices it")
    return _BUILDERS[name](*args)


def needs_x64(case: Case) -> bool:
    return "fp64" in case.program


def seconds(case: Case, p: Any, kernel_s: float, dispatch_s: float) -> tuple[float, float, float]:
    """(estimate, lower, upper) seconds per call of a ``jaxgpu.pricing.roofline.Prediction`` as the case's source timed
    it (``TIMED``), given a kernel's launch start-up and a framework's dispatch of one call."""
    (lo, hi), dev = p.device_range_s, p.device_s
    if case.timed == "device":
        return dev, lo, hi
    if case.timed == "kernels":
        return dev + kernel_s, lo + kernel_s, hi + kernel_s
    if case.timed == "stream":
        return max(dev + kernel_s, dispatch_s), max(lo, dispatch_s), max(hi + kernel_s, dispatch_s)
    return p.estimate_s, p.lower_s, p.upper_s
