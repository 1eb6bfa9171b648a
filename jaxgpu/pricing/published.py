"""GPU measurements others published, each as a JAX program: what ``jaxgpu.predict`` is checked against.

A ``Case`` is one figure measured on a real A100, H100 or H200 by someone else: the figure as its source
states it (with the quote and where it stands), the setup the source gives, and the same workload written
as a JAX program (``program``: a function and ``jax.ShapeDtypeStruct`` arguments, nothing allocated). A
source whose shapes, dtype or batch are ambiguous is left out. ``published_s`` turns each figure into the
seconds of one call of the program, so a prediction and the figure compare directly.

Cases the model's constants were read from are marked ``calibration`` and are never scored; the rest are
split in two halves (``held_out``) so a change to the model can be made looking at one half and judged on
the other.

The data here imports no JAX (the report reads it); ``program`` imports JAX when it is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxgpu.ground import decoders

KINDS = ("gemm", "memory", "train", "decode", "prefill")
# The published figure's unit -> how it becomes seconds per call, given the work of one call
UNITS = ("TFLOP/s", "GB/s", "tokens/s", "sequences/s", "ms", "us")
# What a source's clock saw, per call of the program:
#   device   its kernels on the device alone (CUDA events around one call, or two launches between syncs)
#   kernels  its kernels, launched back to back from C++ many times (each adds a launch's start-up)
#   stream   calls issued back to back by a framework (PyTorch, JAX): the device's time or the host's
#            dispatch of a call, whichever is longer
#   call     one call on a host clock, its dispatch and the device's work in turn
TIMED = ("device", "kernels", "stream", "call")
# a rate's unit -> its scale: the work of one call over (figure x scale) is the call's seconds
RATES = {"TFLOP/s": 1e12, "GB/s": 1e9, "tokens/s": 1.0, "sequences/s": 1.0}


@dataclasses.dataclass(frozen=True)
class Case:
    """One published GPU measurement and the JAX program that does the same work.

    ``program`` is (builder, arguments): ``("gemm", m, n, k, dtype)``, ``("stream", kernel, n, dtype)``,
    ``("decode", model, batch, context, weights)``, ``("train", model, batch, seq, micro_batches, shards)``,
    ``("prefill", model, batch, tokens, dtype)``, ``("dot", n, dtype)``. ``work`` is what the figure's rate
    counts per call of the program (FLOPs, bytes or tokens); a time needs none. ``timed`` says what the
    source's clock saw (``TIMED``).
    """

    id: str
    kind: str
    gpu: str  # a jaxgpu.ground.hardware.GPUS key
    workload: str  # in words
    program: tuple
    published: float
    unit: str
    quote: str
    source: str
    setup: str
    work: float = 0.0
    timed: str = "device"
    calibration: bool = False
    held_out: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.unit not in UNITS:
            raise ValueError(f"{self.id}: unit must be one of {UNITS}, got {self.unit!r}")
        if self.timed not in TIMED:
            raise ValueError(f"{self.id}: timed must be one of {TIMED}, got {self.timed!r}")
        if self.unit in RATES and self.work <= 0:
            raise ValueError(f"{self.id}: a rate in {self.unit} needs the work of one call")

    @property
    def published_s(self) -> float:
        """The published figure as seconds per call of ``program``."""
        if self.unit in RATES:
            return self.work / (self.published * RATES[self.unit])
        return self.published * (1e-3 if self.unit == "ms" else 1e-6)


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    return 2.0 * batch * m * n * k


def scored(cases: list[Case] | None = None) -> list[Case]:
    """The cases a prediction is judged on: all but those the model's constants came from."""
    return [c for c in (CASES if cases is None else cases) if not c.calibration]


def halves(cases: list[Case] | None = None) -> tuple[list[Case], list[Case]]:
    """(the half a change may look at, the held-out half it is judged on)."""
    s = scored(cases)
    return [c for c in s if not c.held_out], [c for c in s if c.held_out]


def error(predicted_s: float, case: Case) -> float:
    """predicted / published - 1 (0.2: the prediction is 20% slower than what was measured)."""
    return predicted_s / case.published_s - 1


def summary(errors: list[float]) -> dict[str, float]:
    """The median of |error| and the share of cases within 2x (predicted / published in [0.5, 2])."""
    if not errors:
        return {"cases": 0.0}
    ordered = sorted(abs(e) for e in errors)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    within = sum(0.5 <= 1 + e <= 2 for e in errors) / len(errors)
    return {"cases": float(len(errors)), "median_abs_error": median, "within_2x": within}


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
    """A whole step over several GPUs (``("step", model, mode, batch, seq, devices, settings)``): priced by
    ``jaxgpu.pricing.planner.plan_model``, not one program on one GPU (``program``)."""
    return case.program[0] == "step"


def plan_step(case: Case):
    """The ``jaxgpu.pricing.planner.ModelPlan`` of a ``("step", ...)`` case: its model, mode (``planner.MODES``), global
    batch, sequence, GPUs a node and ``StepSettings`` fields (pairs), compiled for its GPU and priced."""
    from jaxgpu.pricing import planner

    _, model, mode, batch, seq, devices, settings = case.program
    return planner.plan_model(model_config(model), case.gpu, mode=mode, batch=batch, seq=seq, devices=devices,
                             settings=step_settings(case))


def step_settings(case: Case):
    """A ``("step", ...)`` case's ``StepSettings``: the mode's defaults (``planner.default_settings``), with what the
    case sets."""
    import dataclasses as dc

    from jaxgpu.pricing import planner

    return dc.replace(planner.default_settings(case.program[2]), **dict(case.program[6]))


_BUILDERS = {"gemm": _gemm, "stream": _stream, "decode": _decode, "train": _train, "prefill": _prefill, "dot": _dot}


def program(case: Case) -> tuple[Callable, tuple[Any, ...]]:
    """(function, ShapeDtypeStruct arguments) of the case's workload. A float64 program must be lowered inside
    ``jaxgpu.ground.precision.enable_x64()`` (``needs_x64``); a whole step over GPUs has ``plan_step`` instead."""
    name, *args = case.program
    if name == "step":
        raise ValueError(f"{case.id} is a step over {args[4]} GPUs a node: plan_step prices it")
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


def _stream_bytes(kernel: str, n: int, itemsize: int = 8) -> float:
    """Bytes a STREAM kernel moves as STREAM and BabelStream count them: each array read or written once."""
    arrays = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2}[kernel]
    return float(arrays * n * itemsize)


# ---- the cases ---------------------------------------------------------------------------------------------
# Each figure below was read in its source's text (none off a plot); the quote is the source's own line.
# Left out, with why: an H100 SXM copy whose buffer size depends on an unstated cuda-samples version; an A100
# cuBLAS 8192^3 of unstated dtype and part; power-capped or PCIe H100s and H800s; torch.mm maxima over sizes
# without the size; GPT-3 125M at 150 ms a step on 8 A100s (llm.c's run_gpt3_125M.sh: above the A100's peak by
# its own FLOPs, so not what its comment says); flash-attention's GPT-3 table (micro-batch only inferable
# from configs); A100 40GB runs (left out while the table had no A100 40GB); llm-foundry (FSDP, SXM not stated).

_MAMF = ("stas00/ml-engineering @744d01e compute/accelerator/README.md, the Maximum Achievable Matmul FLOPS "
         "table (mamf-finder.py: torch.mm, CUDA events per iteration, L2 flushed, the best shape of a search)")
_ZZC = ("zzc0721/torch-performance-test-data issue #79 (NVIDIA H100 80GB HBM3, PyTorch 2.7.0+cu128; test.py "
        "@6e2382c: 30 torch.mm calls back to back between two CUDA events)")
_BABEL = ("ukri-bench/benchmark-BabelStream @464294e README.md, 'Example performance data', Tursa "
          "(BabelStream 5.0 CUDA, fp64, 2^25 elements an array, the fastest of 100)")
_GPUSTREAM = "te42kyfo/gpu-benches @1c36d50 gpu-stream/{} (fp64, 2^27 + 2 elements, 1024 threads a block)"
_LLMC = "karpathy/llm.c @f1e2ace scripts/{} (8 GPUs, data parallel with ZeRO-1; the step includes the all-reduce)"
_TORCHAO = ("pytorch/ao @1df9cae torchao/_models/llama/benchmark_results.txt (gpt-fast's generate.py, batch 1, "
            "200 new tokens, torch.compile reduce-overhead); 1xA100 80GB SXM4 per torchao/prototype/awq/README.md")
_TRTLLM = ("NVIDIA/TensorRT-LLM docs/source/performance.md, v0.9.0 (A100 FP16, batch 1, 1st token latency); SXM "
           "80GB per NVIDIA/TensorRT-LLM#281")
_N25, _N27 = 2**25, 2**27 + 2

CASES: list[Case] = [
    # GEMMs on an H100 SXM, H200 SXM and A100 SXM
    Case("mamf-h100-bf16", "gemm", "H100 SXM", "bf16 GEMM 2048x2048x13312 (the best shape found)",
         ("gemm", 2048, 2048, 13312, "bf16", "nk"), 794.5, "TFLOP/s",
         "| NVIDIA H100 SXM  |  794.5 |    989 |      80.3% |  2048x2048x13312 | 2.7.0+cu126 |", _MAMF,
         "PyTorch 2.7.0+cu126, torch.mm, bf16 in and out", gemm_flops(2048, 2048, 13312), "device",
         calibration=True),
    Case("mamf-h100-fp8", "gemm", "H100 SXM", "fp8 e4m3 GEMM 1024x9216x14336 (the best shape found)",
         ("gemm", 1024, 9216, 14336, "fp8", "nk"), 1402.6, "TFLOP/s",
         "| NVIDIA H100 SXM  | 1402.6 |   1979 |      70.9% |  1024x9216x14336 | 2.7.0+cu126 |", _MAMF,
         "PyTorch 2.7.0+cu126, torch._scaled_mm, e4m3 inputs, unit scales", gemm_flops(1024, 9216, 14336), "device"),
    Case("mamf-h200-fp8", "gemm", "H200 SXM", "fp8 e4m3 GEMM 1280x4096x12032 (the best shape found)",
         ("gemm", 1280, 4096, 12032, "fp8", "nk"), 1453.4, "TFLOP/s",
         "| NVIDIA H200 SXM  | 1453.4 |   1979 |      73.4% |  1280x4096x12032 | 2.7.1+cu128 |", _MAMF,
         "PyTorch 2.7.1+cu128, torch._scaled_mm, e4m3 inputs, unit scales", gemm_flops(1280, 4096, 12032), "device",
         held_out=True),
    Case("mamf-a100-bf16", "gemm", "A100 80GB", "bf16 GEMM 1024x10240x5120 (the best shape found)",
         ("gemm", 1024, 10240, 5120, "bf16", "nk"), 271.2, "TFLOP/s",
         "| NVIDIA A100 SXM  |  271.2 |    312 |      86.9% |  1024x10240x5120 | 2.6.0+cu126 |", _MAMF,
         "PyTorch 2.6.0+cu126, torch.mm; the row says A100 SXM without its memory (40 and 80 GB share the rates)",
         gemm_flops(1024, 10240, 5120), "device"),
]
for _i, (_dt, _n, _tf) in enumerate((("bf16", 1024, 176.62), ("bf16", 2048, 676.59), ("bf16", 4096, 788.72),
                                     ("bf16", 8192, 797.51), ("fp16", 1024, 179.13), ("fp16", 4096, 760.04),
                                     ("tf32", 1024, 119.60), ("tf32", 4096, 402.15), ("fp32", 4096, 51.88))):
    CASES.append(Case(
        f"torch-mm-h100-{_dt}-{_n}", "gemm", "H100 SXM", f"{_dt} GEMM {_n}^3", ("gemm", _n, _n, _n, _dt), _tf,
        "TFLOP/s", f"{_dt.upper()}: ... {_n}x{_n}: {_tf:.2f} TFLOPS", _ZZC,
        "PyTorch 2.7.0+cu128, torch.mm of two randn matrices" + {"tf32": ", allow_tf32=True",
                                                                "fp32": ", allow_tf32=False"}.get(_dt, ""),
        gemm_flops(_n, _n, _n), "stream", held_out=_i % 2 == 1))

CASES += [
    # memory-bound kernels: STREAM on an A100 80GB and an H200
    Case("babelstream-a100-copy", "memory", "A100 80GB", "copy of 2^25 doubles",
         ("stream", "copy", _N25, "fp64"), 1709.36, "GB/s",
         "Copy        1709360.800 0.00031     0.00032     0.00032", _BABEL,
         "A100-SXM4-80GB, BabelStream 5.0 CUDA, driver 12.3", _stream_bytes("copy", _N25), "device"),
    Case("babelstream-a100-triad", "memory", "A100 80GB", "triad over 2^25 doubles", ("stream", "triad", _N25, "fp64"),
         1724.83, "GB/s", "Triad       1724827.354 0.00047     0.00047     0.00047", _BABEL,
         "A100-SXM4-80GB, BabelStream 5.0 CUDA, driver 12.3", _stream_bytes("triad", _N25), "device", held_out=True),
    Case("babelstream-a100-dot", "memory", "A100 80GB", "dot product of 2^25 doubles", ("dot", _N25, "fp64"),
         1586.91, "GB/s", "Dot         1586905.948 0.00034     0.00036     0.00035", _BABEL,
         "A100-SXM4-80GB, BabelStream 5.0 CUDA (432 groups of 1024 threads)", _stream_bytes("dot", _N25), "device"),
    Case("gpu-stream-a100-scale", "memory", "A100 80GB", "scale of 2^27 doubles",
         ("stream", "scale", _N27, "fp64"), 1732, "GB/s",
         "1024      110592  100.0 %  |  GB/s:        1880       1769       1732       1759 ...",
         _GPUSTREAM.format("a100_80.txt"), "A100 80 GB (the file does not say SXM; its triad agrees with "
         "BabelStream's SXM4 figure)", _stream_bytes("scale", _N27), "device", held_out=True),
    Case("gpu-stream-h200-scale", "memory", "H200 SXM", "scale of 2^27 doubles",
         ("stream", "scale", _N27, "fp64"), 3165, "GB/s",
         "1024      135168  100.0 %  |  GB/s:        3884       2756       3165       3534 ...",
         _GPUSTREAM.format("h200.txt"), "H200 (132 SMs; committed in Dec 2023, before the NVL part existed)",
         _stream_bytes("scale", _N27), "device"),
    Case("gpu-stream-h200-triad", "memory", "H200 SXM", "triad over 2^27 doubles",
         ("stream", "triad", _N27, "fp64"), 3534, "GB/s",
         "1024      135168  100.0 %  |  GB/s:        3884       2756       3165       3534 ...",
         _GPUSTREAM.format("h200.txt"), "H200 (132 SMs; committed in Dec 2023, before the NVL part existed)",
         _stream_bytes("triad", _N27), "device", held_out=True),
    Case("small-kernels-h200-272mb", "memory", "H200 SXM", "A = 0.25 B over 16,993,255 doubles, repeated",
         ("stream", "scale", 16993255, "fp64"), 3273, "GB/s",
         "16993255  265519kB    844   1671   3224   3273   3210   3078",
         "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/h200.txt (thousands of launches, wall time / launches)",
         "H200, fp64, 256 threads a block", _stream_bytes("scale", 16993255), "kernels"),
    Case("small-kernels-h200-64kb", "memory", "H200 SXM", "A = 0.25 B over 4,096 doubles, repeated (launch-bound)",
         ("stream", "scale", 4096, "fp64"), 26, "GB/s", "4096  64kB     26     26     26     26     27     27",
         "te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/h200.txt (thousands of launches, wall time / launches)",
         "H200, fp64; the model's launch start-up (GPU_KERNEL_S) was read from this benchmark",
         _stream_bytes("scale", 4096), "kernels", calibration=True),
    # end-to-end steps of named models
    Case("llmc-gpt2-124m-a100", "train", "A100 80GB", "GPT-2 124M train step, 64 x 1024 tokens a GPU",
         ("train", "gpt2-124m", 64, 1024, 1, 8), 300, "ms", "# on 8X A100 80GB SXM ($14/hr) steps in ~300ms/iter",
         _LLMC.format("run_gpt2_124M.sh"), "-b 64 -t 1024 -d 524288 -r 0 -z 1: bf16, cuDNN flash attention, AdamW, "
         "no recompute, no accumulation", timed="stream"),
    Case("llmc-gpt2-350m-a100", "train", "A100 80GB", "GPT-2 350M train step, 64 x 1024 tokens a GPU",
         ("train", "gpt2-350m", 64, 1024, 1, 8), 820, "ms", "# on 8X A100 80GB SXM ($14/hr) steps in ~820ms/iter",
         _LLMC.format("run_gpt2_350M.sh"), "-b 64 -t 1024 -d 524288 -r 0 -z 1: bf16, cuDNN flash attention, AdamW, "
         "no recompute, no accumulation", timed="stream", held_out=True),
    Case("llmc-gpt2-774m-a100", "train", "A100 80GB", "GPT-2 774M train step, 2 x 32 x 1024 tokens a GPU",
         ("train", "gpt2-774m", 64, 1024, 2, 8), 1700, "ms", "# on 8X A100 80GB SXM ($14/hr) steps in ~1.7s/iter",
         _LLMC.format("run_gpt2_774M.sh"), "-b 32 -t 1024 -d 524288 -r 0 -z 1: two micro-batches of 32, bf16, "
         "cuDNN flash attention, AdamW, no recompute", timed="stream"),
    Case("llmc-gpt2-1.5b-h100", "train", "H100 SXM", "GPT-2 1.5B train step, 8 x 16 x 1024 tokens a GPU",
         ("train", "gpt2-1.5b", 128, 1024, 8, 8), 2800, "ms", "# on 8X H100 80GB SXM ($28/hr) steps in 2.80s/iter",
         _LLMC.format("run_gpt2_1558M.sh"), "-b 16 -t 1024 -d 1048576 -r 0 -z 1: eight micro-batches of 16, bf16, "
         "cuDNN flash attention, AdamW, no recompute (the file also says 2.7 s)", timed="stream", held_out=True),
    Case("torchao-llama2-7b-decode-a100", "decode", "A100 80GB", "Llama-2-7B decode, batch 1, bf16 weights",
         ("decode", "llama-7b", 1, 208, "bf16"), 107.38, "tokens/s",
         "tok/s=107.38, mem/s=1418.93 GB/s, peak_mem=13.88 GB, model_size=13.21 GB quant: None, mod: "
         "Llama-2-7b-chat-hf, kv_quant: False, compile: True", _TORCHAO,
         "bf16, a 5-token prompt and 200 new tokens (the cache holds about 208)", 1.0, "stream"),
    Case("torchao-llama3-8b-decode-a100", "decode", "A100 80GB", "Llama-3-8B decode, batch 1, bf16 weights",
         ("decode", "llama3-8b", 1, 208, "bf16"), 95.64, "tokens/s",
         "tok/s= 95.64, mem/s=1435.54 GB/s, peak_mem=16.43 GB, model_size=15.01 GB quant: None, mod: "
         "Meta-Llama-3-8B, kv_quant: False, compile: True", _TORCHAO,
         "bf16, a 5-token prompt and 200 new tokens (the cache holds about 208)", 1.0, "stream", held_out=True),
    Case("gpt-fast-llama2-7b-int8-a100", "decode", "A100 80GB", "Llama-2-7B decode, batch 1, int8 weights",
         ("decode", "llama-7b", 1, 208, "int8"), 155.58, "tokens/s", "|           | 8-bit   | 155.58   | 1069.20 |",
         "pytorch-labs/gpt-fast @32971d3 README.md (A100 80GB, power-limited to 330 W; batch 1, 5-token prompt)",
         "int8 weight-only, per-channel scales, bf16 activations, torch.compile reduce-overhead", 1.0, "stream"),
    Case("trtllm-llama-7b-prefill-128-a100", "prefill", "A100 80GB", "LLaMA 7B prefill of 128 tokens, fp16",
         ("prefill", "llama-7b", 1, 128, "fp16"), 16.2, "ms", "| LLaMA 7B | 1 | 1 | 128  | 16.2 |", _TRTLLM,
         "TensorRT-LLM 0.9.0, fp16 engine, context FMHA, batch 1, 1 output token", timed="call"),
    Case("trtllm-llama-7b-prefill-2048-a100", "prefill", "A100 80GB", "LLaMA 7B prefill of 2048 tokens, fp16",
         ("prefill", "llama-7b", 1, 2048, "fp16"), 132.4, "ms", "| LLaMA 7B | 1 | 1 | 2048 | 132.4 |", _TRTLLM,
         "TensorRT-LLM 0.9.0, fp16 engine, context FMHA, batch 1, 1 output token", timed="call", held_out=True),
]

# ---- whole steps over several GPUs, priced through jaxgpu.pricing.planner.plan_model ----------------------------
# Each names the model, the mode, the global batch, the sequence, the GPUs of a node and the StepSettings the source's
# run used (where its setup names one; what it leaves unsaid is said in ``setup``). A run over nodes is one node's
# program plus the gradients' all-reduce between nodes (StepSettings.nodes). A source that gives a rate per GPU or a
# model-FLOP rate is turned into seconds with the work the source itself counts.

_MAXTEXT = ("AI-Hypercomputer/maxtext @efb6d9e4a MaxText/configs/a3/llama_2_7b/README.md (TFLOP/sec/chip, counted by "
            "MaxText's calculate_tflops_training_per_device) and {}vm.sh")
# MaxText's count for one GPU's step at 4 x 4096 tokens: 6 N S B + 12 H L hd S^2 B / 2 with N = 6,738,415,616
_MAXTEXT_FLOPS = 6 * 6738415616 * 4096 * 4 + 12 * 32 * 32 * 128 * 4096**2 * 4 / 2
_MAXTEXT_SETUP = ("per_device_batch_size=4 max_target_length=4096 ici_fsdp_parallelism=8 dcn_data_parallelism={} "
                  "attention=cudnn_flash_te remat_policy=minimal_flash scan_layers=false: bf16 products, float32 "
                  "weights, AdamW; minimal_flash (the products without a batch dimension and the attention's output "
                  "saved) priced as dots_with_no_batch_dims_saveable")
_PAX = ("NVIDIA/JAX-Toolbox @8bfbd17 rosetta/rosetta/projects/pax/README.md (sequences/s of the global batch; shapes "
        "in paxml @b397693f paxml/contrib/gpu/scripts_gpu/configs.py)")
_NEMO = ("NVIDIA/NeMo @2fca28a docs/source/performance/performance_summary.md (NeMo 24.07, DGX-H100, FP8; tokens/s "
         "a GPU)")
_GPTFAST = ("pytorch-labs/gpt-fast @32971d3 README.md (8 A100 80GB power-limited to 330 W; batch 1, a 5-token "
            "prompt, 200 new tokens, torch.compile)")
_TORCHAO_README = ("pytorch/ao v0.7.0 torchao/quantization/README.md (one A100 80GB; gpt-fast's generate.py, batch 1, "
                   "200 new tokens, torch.compile)")
_SAVE_DOTS = ("remat", "dots_with_no_batch_dims_saveable")


def _step(model: str, mode: str, batch: int, seq: int, devices: int, **settings) -> tuple:
    return ("step", model, mode, batch, seq, devices, tuple(sorted(settings.items())))


CASES += [
    Case("maxtext-llama2-7b-1x8-h100", "train", "H100 SXM", "Llama-2 7B train step, 8 H100s (FSDP), 4 x 4096 tokens "
         "a GPU", _step("llama-7b", "train", 32, 4096, 8, remat=_SAVE_DOTS[1], scan=False), 492, "TFLOP/s",
         "| 1x A3 (h100-80gb-8)    | 492              |", _MAXTEXT.format(1), _MAXTEXT_SETUP.format(1),
         _MAXTEXT_FLOPS, "stream"),
    Case("maxtext-llama2-7b-2x8-h100", "train", "H100 SXM", "Llama-2 7B train step, 2 nodes of 8 H100s, 4 x 4096 "
         "tokens a GPU", _step("llama-7b", "train", 64, 4096, 8, remat=_SAVE_DOTS[1], scan=False, nodes=2), 422,
         "TFLOP/s", "| 2x A3 (h100-80gb-8)    | 422              |", _MAXTEXT.format(2), _MAXTEXT_SETUP.format(2),
         _MAXTEXT_FLOPS, "stream", held_out=True),
    Case("maxtext-llama2-7b-16x8-h100", "train", "H100 SXM", "Llama-2 7B train step, 16 nodes of 8 H100s, 4 x 4096 "
         "tokens a GPU", _step("llama-7b", "train", 512, 4096, 8, remat=_SAVE_DOTS[1], scan=False, nodes=16), 375,
         "TFLOP/s", "| 16x A3 (h100-80gb-8)   | 375              |", _MAXTEXT.format(16),
         _MAXTEXT_SETUP.format(16), _MAXTEXT_FLOPS, "stream"),
    Case("jax-toolbox-maxtext-llama2-7b-h100", "train", "H100 SXM", "Llama-2 7B train step, 8 H100s (FSDP), 2 x 4096 "
         "tokens a GPU", _step("llama-7b", "train", 16, 4096, 8, remat=_SAVE_DOTS[1], scan=False), 721, "ms",
         "| 7B   | H100 80G SXM | BF16      | 4096            | 8     | 2        | 1  | 8    | 1  | 16  | Flash     | "
         "minimal_flash| Off  | 0.721         | 22.19         |",
         "NVIDIA/JAX-Toolbox @db09688 rosetta/rosetta/projects/maxtext/README.md",
         "MaxText in ghcr.io/nvidia/jax:maxtext-2024-04-15: per_device_batch_size=2 scan_layers=false "
         "remat_policy=minimal_flash attention=cudnn_flash_te logits_dot_in_fp32=false, AdamW, float32 weights",
         timed="stream", held_out=True),
    Case("pax-gpt-126m-64-a100", "train", "A100 80GB", "GPT 126M train step, 8 nodes of 8 A100s, 4 x 2048 tokens a "
         "GPU", _step("pax-gpt-126m", "train", 256, 2048, 8, flash=False, scan=False, nodes=8), 2098.16,
         "sequences/s", "| 126M | A100 80G SXM | BF16 |  64    |64    |1    |1    | 4     |   2098.16  |        "
         "0.85        |   39.7% (± 1.2%)     |", _PAX,
         "Pax, bf16 without Transformer Engine, data parallel over 64 GPUs, Adam; without flash attention (the README: "
         "'126M performance numbers were gathered _without_ flash attention'); remat not stated (none priced); "
         "priced FSDP within a node", 256.0, "stream"),
    Case("pax-gpt-126m-64-h100", "train", "H100 SXM", "GPT 126M train step, 8 nodes of 8 H100s, 4 x 2048 tokens a "
         "GPU", _step("pax-gpt-126m", "train", 256, 2048, 8, flash=False, scan=False, nodes=8), 4709.12,
         "sequences/s", "| 126M | H100 80G SXM | TE BF16 |  64    |64    |1    |1    | 4        |  4709.12  |     "
         "0.38           |    42.5% (± 1.8%)        |", _PAX,
         "Pax with Transformer Engine's layers, bf16, data parallel over 64 GPUs, Adam, without flash attention; "
         "remat not stated (none priced); priced FSDP within a node", 256.0, "stream", held_out=True),
    Case("pax-gpt-5b-256-a100", "train", "A100 80GB", "GPT 5B train step, 32 nodes of 8 A100s, 8 x 2048 tokens a GPU",
         _step("gpt3-5b", "train", 2048, 2048, 8, remat=_SAVE_DOTS[1], nodes=32), 594.13, "sequences/s",
         "| 5B   | A100 80G SXM | BF16 | 256    | 1    |256    |1    | 8       | 594.13    |    2.99    |       N/A"
         "        |", _PAX, "Pax, bf16 without Transformer Engine, FSDP over 256 GPUs, Adam, flash attention, "
         "repeated (scanned) layers, CHECKPOINT_POLICY SAVE_DOT_WITH_NO_BATCH_DIM; priced FSDP within a node and "
         "data parallel between", 2048.0, "stream"),
    Case("pax-gpt-5b-256-h100", "train", "H100 SXM", "GPT 5B train step, 32 nodes of 8 H100s, 8 x 2048 tokens a GPU",
         _step("gpt3-5b", "train", 2048, 2048, 8, remat=_SAVE_DOTS[1], nodes=32), 1657.24, "sequences/s",
         "| 5B   | H100 80G SXM | TE BF16 | 256    | 1    |256    |1    | 8       |  1657.24  |   1.07   |       N/A"
         "        |", _PAX, "Pax with Transformer Engine's layers, bf16, FSDP over 256 GPUs, Adam, flash attention, "
         "scanned layers, SAVE_DOT_WITH_NO_BATCH_DIM; priced FSDP within a node and data parallel between",
         2048.0, "stream", held_out=True),
    Case("pax-gpt-5b-fp8-256-h100", "train", "H100 SXM", "GPT 5B train step in fp8, 32 nodes of 8 H100s, 8 x 2048 "
         "tokens a GPU", _step("gpt3-5b", "train", 2048, 2048, 8, remat=_SAVE_DOTS[1], nodes=32, matmul="fp8"),
         2374.66, "sequences/s", "| 5B   | H100 80G SXM | TE FP8 | 256    | 1    |256    |1    | 8       |  2374.66   "
         "|     0.749       |       N/A        |", _PAX,
         "Pax with Transformer Engine's fp8 layers, FSDP over 256 GPUs, Adam, flash attention, scanned layers, "
         "SAVE_DOT_WITH_NO_BATCH_DIM; priced FSDP within a node and data parallel between", 2048.0, "stream"),
    Case("pax-llama2-7b-16-h100", "train", "H100 SXM", "Llama-2 7B fine-tuning step, 2 nodes of 8 H100s, 2 x 4096 "
         "tokens a GPU", _step("llama-7b", "train", 32, 4096, 8, remat=_SAVE_DOTS[1], nodes=2), 43.24, "sequences/s",
         "| 7B | H100 80G SXM | BF16 |  16    | 1    |16    |1    | 2        |  4096 |  43.24 |      88.7%  (± 0.12%)"
         "      |", _PAX + ", SFT Results",
         "Pax, bf16 without Transformer Engine, FSDP over 16 GPUs, Adam, flash attention (on by default since "
         "2024-04-26); remat not stated (the Pax GPT configs' SAVE_DOT_WITH_NO_BATCH_DIM priced); priced FSDP within "
         "a node and data parallel between", 32.0, "stream", held_out=True),
    Case("nemo-gpt3-5b-fp8-64-h100", "train", "H100 SXM", "GPT3 5B train step in fp8, 8 nodes of 8 H100s, 8 x 4 x "
         "2048 tokens a GPU", _step("gpt3-5b", "train", 2048, 2048, 8, matmul="fp8", nodes=8, accumulate=8,
                                    scan=False), 23406, "tokens/s",
         "| GPT3-5B       | 64     | 2048 | 4   | 2048           | 1  | 1  | 1  | 1  | 23406              | 765"
         "                     |", _NEMO, "Megatron-Core, fp8, data parallel over 64 GPUs with the distributed "
         "optimizer, micro-batches of 4 (8 a step); remat not stated (the launcher's default, none, priced); priced "
         "FSDP within a node", 2048 * 2048 / 64, "stream"),
    Case("nemo-llama2-7b-fp8-8-h100", "train", "H100 SXM", "Llama-2 7B train step in fp8, 8 H100s, 16 x 4096 tokens a "
         "GPU", _step("llama-7b", "train", 128, 4096, 8, matmul="fp8", accumulate=16, scan=False), 16934, "tokens/s",
         "| LLAMA2-7B     | 8      | 128  | 1   | 4096           | 1  | 1  | 1  | 1  | 16934              | 780"
         "                     |", _NEMO, "Megatron-Core, fp8, data parallel over 8 GPUs with the distributed "
         "optimizer, micro-batches of 1 (16 a step); remat not stated (none priced); priced FSDP", 128 * 4096 / 8,
         "stream", held_out=True),
    Case("megatron-bridge-llama3-8b-fp8-8-h100", "train", "H100 SXM", "Llama-3 8B train step in fp8, 8 H100s (FSDP), "
         "16 x 8192 tokens a GPU", _step("llama3-8b", "train", 128, 8192, 8, matmul="fp8", accumulate=16,
                                         scan=False), 14451, "tokens/s",
         "| LLAMA3_8B | 8 | FP8-CS | 128 | 1 | 8192 | 8 | 1 | 1 | 1 | n/a | 1 | 16 | 14451 | 744 |",
         "NVIDIA-NeMo/Megatron-Bridge @067f987 docs/performance-summary-archive.md (25.11 container, DGX-H100; "
         "tokens/s a GPU)", "Megatron-Bridge, fp8 current scaling, FSDP over 8 GPUs, micro-batches of 1 (16 a step); "
         "remat not stated (none priced)", 128 * 8192 / 8, "stream"),
    # decode steps, batch 1: one GPU's program, and tensor parallel over a node's GPUs
    Case("gpt-fast-llama2-7b-decode-a100", "decode", "A100 80GB", "Llama-2-7B decode, batch 1, bf16 weights",
         ("decode", "llama-7b", 1, 208, "bf16"), 104.9, "tokens/s", "| Llama-2-7B  | Base    |  104.9  | 1397.31 |",
         _GPTFAST, "bf16, torch.compile reduce-overhead", 1.0, "stream", held_out=True),
    Case("gpt-fast-llama3.1-8b-decode-a100", "decode", "A100 80GB", "Llama-3.1-8B decode, batch 1, bf16 weights",
         ("decode", "llama3-8b", 1, 208, "bf16"), 93.89, "tokens/s", "| Llama-3.1-8B  | Base    |  93.89  | 1410.76 |",
         _GPTFAST, "bf16, torch.compile reduce-overhead", 1.0, "stream"),
    Case("gpt-fast-llama3.1-8b-int8-a100", "decode", "A100 80GB", "Llama-3.1-8B decode, batch 1, int8 weights",
         ("decode", "llama3-8b", 1, 208, "int8"), 137.64, "tokens/s", "|           | 8-bit   | 137.64   | 1030.89 |",
         _GPTFAST, "int8 weight-only, per-channel scales, bf16 activations", 1.0, "stream", held_out=True),
    Case("torchao-llama2-7b-int8-a100", "decode", "A100 80GB", "Llama-2-7B decode, batch 1, int8 weights",
         ("decode", "llama-7b", 1, 208, "int8"), 170.83, "tokens/s", "|             | int8wo                  | "
         "12.204              |  170.83       | 1131.18                 |  8.95            |  6.62           |",
         _TORCHAO_README, "int8 weight-only (int8wo), bf16 activations", 1.0, "stream"),
    Case("torchao-llama3-8b-int8-a100", "decode", "A100 80GB", "Llama-3-8B decode, batch 1, int8 weights",
         ("decode", "llama3-8b", 1, 208, "int8"), 153.03, "tokens/s", "|             | int8wo                  |  "
         "7.447              |  153.03       | 1150.80                 | 10.42            |  7.52           |",
         _TORCHAO_README, "int8 weight-only (int8wo), bf16 activations", 1.0, "stream", held_out=True),
    Case("gpt-fast-llama2-7b-tp2-a100", "decode", "A100 80GB", "Llama-2-7B decode, batch 1, tensor parallel over 2 "
         "A100s", _step("llama-7b", "serve", 1, 208, 2), 168.84, "tokens/s", "|           | 2   | 168.84   | 1181.99 |",
         _GPTFAST + ", the tensor parallelism table", "bf16, tensor parallel over 2 GPUs (NVLink)", 1.0, "stream"),
    Case("gpt-fast-llama2-70b-tp4-a100", "decode", "A100 80GB", "Llama-2-70B decode, batch 1, tensor parallel over 4 "
         "A100s", _step("llama-70b", "serve", 1, 208, 4), 38.01, "tokens/s", "|           | 4   | 38.01   | 1340.76 |",
         _GPTFAST + ", the tensor parallelism table", "bf16, tensor parallel over 4 GPUs (NVLink)", 1.0, "stream",
         held_out=True),
]
