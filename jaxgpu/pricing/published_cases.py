"""Published GPU measurements as data: each ``Case`` beside its quote, its source and its role (``calibration``: the
model's constants were read from it, never scored; ``guided``: the change a case was looked at for). Out of sample
is only a case's first price (``jaxgpu.pricing.published.OUT_OF_SAMPLE``).

A case is one figure measured on a real A100, H100 or H200 by someone else: the figure as its source states it, the
setup the source gives, and the same workload named as a program (``program``: a builder and its arguments, which
``jaxgpu.pricing.published`` writes as a JAX program). docs/adding-a-published-case.md says how one is added. Imports
no JAX.
"""

from __future__ import annotations

import dataclasses

KINDS = ("gemm", "memory", "train", "decode", "prefill")
# The published figure's unit -> how it becomes seconds per call, given the work of one call
UNITS = ("TFLOP/s", "GB/s", "tokens/s", "sequences/s", "samples/s", "ms", "us")
# What a source's clock saw, per call of the program:
#   device   its kernels on the device alone (CUDA events around one call, or two launches between syncs)
#   kernels  its kernels, launched back to back from C++ many times (each adds a launch's start-up)
#   stream   calls issued back to back by a framework (PyTorch, JAX): the device's time or the host's
#            dispatch of a call, whichever is longer
#   call     one call on a host clock, its dispatch and the device's work in turn
TIMED = ("device", "kernels", "stream", "call")
# a rate's unit -> its scale: the work of one call over (figure x scale) is the call's seconds
RATES = {"TFLOP/s": 1e12, "GB/s": 1e9, "tokens/s": 1.0, "sequences/s": 1.0, "samples/s": 1.0}


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
    # the changes to the model this case was looked at for (commits and what changed): its first price
    # (first_prices.json) is the one before the earliest of them
    guided: str = ""
    # a whole training step's run: the share of its card's memory its framework could hold, as its own scripts set it
    # (JAX's XLA_PYTHON_CLIENT_MEM_FRACTION; 1.0 for PyTorch's caching allocator, which none of them limits), and the
    # line that says so; 0.0 where the source does not say (JAX's default 75% is then assumed, and said)
    memory_fraction: float = 0.0
    memory_source: str = ""
    # settings the source leaves unstated: each alternative is (field, value) pairs of StepSettings put in place of the
    # priced ones; the report shows the spread of the prices over them
    plausible: tuple = ()
    # a whole step's measured peak of memory a GPU, in GiB as its source states it, and what the figure counts
    # ("reserved" by PyTorch's caching allocator, "active" in tensors, "" where unstated): scored against XLA's plan
    peak_gib: float = 0.0
    peak_counts: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.unit not in UNITS:
            raise ValueError(f"{self.id}: unit must be one of {UNITS}, got {self.unit!r}")
        if self.timed not in TIMED:
            raise ValueError(f"{self.id}: timed must be one of {TIMED}, got {self.timed!r}")
        if not 0.0 <= self.memory_fraction <= 1.0 or bool(self.memory_fraction) != bool(self.memory_source):
            raise ValueError(f"{self.id}: memory_fraction is a share of the card in (0, 1] with the line that sets it")
        if self.peak_gib < 0 or self.peak_gib and self.program[0] not in ("step", "encoder"):
            raise ValueError(f"{self.id}: a measured peak of memory is a whole step's (a 'step' program), in GiB")
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

_MAMF = (
    "stas00/ml-engineering @744d01e compute/accelerator/README.md, the Maximum Achievable Matmul FLOPS "
    "table (mamf-finder.py: torch.mm, CUDA events per iteration, L2 flushed, the best shape of a search)"
)
_ZZC = (
    "zzc0721/torch-performance-test-data issue #79 (NVIDIA H100 80GB HBM3, PyTorch 2.7.0+cu128; test.py "
    "@6e2382c: 30 torch.mm calls back to back between two CUDA events)"
)
_BABEL = (
    "ukri-bench/benchmark-BabelStream @464294e README.md, 'Example performance data', Tursa "
    "(BabelStream 5.0 CUDA, fp64, 2^25 elements an array, the fastest of 100)"
)
_GPUSTREAM = "te42kyfo/gpu-benches @1c36d50 gpu-stream/{} (fp64, 2^27 + 2 elements, 1024 threads a block)"
_LLMC = "karpathy/llm.c @f1e2ace scripts/{} (8 GPUs, data parallel with ZeRO-1; the step includes the all-reduce)"
# the change llm.c's four steps were looked at for (the 350M step named in its comment, kernels/transformer.py)
_LLMC_GUIDED = ("bb97d57: the MLP activation, norms and cross-entropy keep only their inputs for the backward (llm.c's "
                "steps overflowed their cards on XLA:GPU's plan before)")
_TORCHAO = (
    "pytorch/ao @1df9cae torchao/_models/llama/benchmark_results.txt (gpt-fast's generate.py, batch 1, "
    "200 new tokens, torch.compile reduce-overhead); 1xA100 80GB SXM4 per torchao/prototype/awq/README.md"
)
_TRTLLM = (
    "NVIDIA/TensorRT-LLM docs/source/performance.md, v0.9.0 (A100 FP16, batch 1, 1st token latency); SXM "
    "80GB per NVIDIA/TensorRT-LLM#281"
)
_N25, _N27 = 2**25, 2**27 + 2
# plausible others where a source leaves a setting unstated (Case.plausible): a PyTorch framework's overlap of its
# collectives under the step's compute is priced ("framework"; no case quotes the config line that turns it on), with
# XLA's own order of the same collectives as the other end; a Megatron run whose recompute is unstated is priced
# without, with each layer recomputed as the other end
_XLA_ORDER = ("overlap", "plan")
_RECOMPUTE = ("remat", "nothing_saveable")

CASES: list[Case] = [
    # GEMMs on an H100 SXM, H200 SXM and A100 SXM
    Case(
        id="mamf-h100-bf16",
        kind="gemm",
        gpu="H100 SXM",
        workload="bf16 GEMM 2048x2048x13312 (the best shape found)",
        program=("gemm", 2048, 2048, 13312, "bf16", "nk"),
        published=794.5,
        unit="TFLOP/s",
        quote="| NVIDIA H100 SXM  |  794.5 |    989 |      80.3% |  2048x2048x13312 | 2.7.0+cu126 |",
        source=_MAMF,
        setup="PyTorch 2.7.0+cu126, torch.mm, bf16 in and out",
        work=gemm_flops(2048, 2048, 13312),
        timed="device",
        calibration=True,
    ),
    Case(
        id="mamf-h100-fp8",
        kind="gemm",
        gpu="H100 SXM",
        workload="fp8 e4m3 GEMM 1024x9216x14336 (the best shape found)",
        program=("gemm", 1024, 9216, 14336, "fp8", "nk"),
        published=1402.6,
        unit="TFLOP/s",
        quote="| NVIDIA H100 SXM  | 1402.6 |   1979 |      70.9% |  1024x9216x14336 | 2.7.0+cu126 |",
        source=_MAMF,
        setup="PyTorch 2.7.0+cu126, torch._scaled_mm, e4m3 inputs, unit scales",
        work=gemm_flops(1024, 9216, 14336),
        timed="device",
        calibration=True,  # a share of jaxgpu.ground.calibration is read from it (issue #62)
    ),
    Case(
        id="mamf-h200-fp8",
        kind="gemm",
        gpu="H200 SXM",
        workload="fp8 e4m3 GEMM 1280x4096x12032 (the best shape found)",
        program=("gemm", 1280, 4096, 12032, "fp8", "nk"),
        published=1453.4,
        unit="TFLOP/s",
        quote="| NVIDIA H200 SXM  | 1453.4 |   1979 |      73.4% |  1280x4096x12032 | 2.7.1+cu128 |",
        source=_MAMF,
        setup="PyTorch 2.7.1+cu128, torch._scaled_mm, e4m3 inputs, unit scales",
        work=gemm_flops(1280, 4096, 12032),
        timed="device",
        calibration=True,  # a share of jaxgpu.ground.calibration is read from it (issue #62)
    ),
    Case(
        id="mamf-a100-bf16",
        kind="gemm",
        gpu="A100 80GB",
        workload="bf16 GEMM 1024x10240x5120 (the best shape found)",
        program=("gemm", 1024, 10240, 5120, "bf16", "nk"),
        published=271.2,
        unit="TFLOP/s",
        quote="| NVIDIA A100 SXM  |  271.2 |    312 |      86.9% |  1024x10240x5120 | 2.6.0+cu126 |",
        source=_MAMF,
        setup="PyTorch 2.6.0+cu126, torch.mm; the row says A100 SXM without its memory (40 and 80 GB share the rates)",
        work=gemm_flops(1024, 10240, 5120),
        timed="device",
        calibration=True,  # a share of jaxgpu.ground.calibration is read from it (issue #62)
    ),
]
for _dt, _n, _tf in (
    ("bf16", 1024, 176.62),
    ("bf16", 2048, 676.59),
    ("bf16", 4096, 788.72),
    ("bf16", 8192, 797.51),
    ("fp16", 1024, 179.13),
    ("fp16", 4096, 760.04),
    ("tf32", 1024, 119.60),
    ("tf32", 4096, 402.15),
    ("fp32", 4096, 51.88),
):
    CASES.append(
        Case(
            id=f"torch-mm-h100-{_dt}-{_n}",
            kind="gemm",
            gpu="H100 SXM",
            workload=f"{_dt} GEMM {_n}^3",
            program=("gemm", _n, _n, _n, _dt),
            published=_tf,
            unit="TFLOP/s",
            quote=f"{_dt.upper()}: ... {_n}x{_n}: {_tf:.2f} TFLOPS",
            source=_ZZC,
            setup="PyTorch 2.7.0+cu128, torch.mm of two randn matrices"
            + {"tf32": ", allow_tf32=True", "fp32": ", allow_tf32=False"}.get(_dt, ""),
            work=gemm_flops(_n, _n, _n),
            timed="stream",
            # the largest of the sizes: the H100's tf32 and fp32 shares (jaxgpu.ground.calibration, issue #62)
            calibration=(_dt, _n) in (("tf32", 4096), ("fp32", 4096)),
        )
    )

CASES += [
    # memory-bound kernels: STREAM on an A100 80GB and an H200
    Case(
        id="babelstream-a100-copy",
        kind="memory",
        gpu="A100 80GB",
        workload="copy of 2^25 doubles",
        program=("stream", "copy", _N25, "fp64"),
        published=1709.36,
        unit="GB/s",
        quote="Copy        1709360.800 0.00031     0.00032     0.00032",
        source=_BABEL,
        setup="A100-SXM4-80GB, BabelStream 5.0 CUDA, driver 12.3",
        work=_stream_bytes("copy", _N25),
        timed="device",
        calibration=True,  # a share of jaxgpu.ground.calibration is read from it (issue #62)
    ),
    Case(
        id="babelstream-a100-triad",
        kind="memory",
        gpu="A100 80GB",
        workload="triad over 2^25 doubles",
        program=("stream", "triad", _N25, "fp64"),
        published=1724.83,
        unit="GB/s",
        quote="Triad       1724827.354 0.00047     0.00047     0.00047",
        source=_BABEL,
        setup="A100-SXM4-80GB, BabelStream 5.0 CUDA, driver 12.3",
        work=_stream_bytes("triad", _N25),
        timed="device",
    ),
    Case(
        id="babelstream-a100-dot",
        kind="memory",
        gpu="A100 80GB",
        workload="dot product of 2^25 doubles",
        program=("dot", _N25, "fp64"),
        published=1586.91,
        unit="GB/s",
        quote="Dot         1586905.948 0.00034     0.00036     0.00035",
        source=_BABEL,
        setup="A100-SXM4-80GB, BabelStream 5.0 CUDA (432 groups of 1024 threads)",
        work=_stream_bytes("dot", _N25),
        timed="device",
    ),
    Case(
        id="gpu-stream-a100-scale",
        kind="memory",
        gpu="A100 80GB",
        workload="scale of 2^27 doubles",
        program=("stream", "scale", _N27, "fp64"),
        published=1732,
        unit="GB/s",
        quote="1024      110592  100.0 %  |  GB/s:        1880       1769       1732       1759 ...",
        source=_GPUSTREAM.format("a100_80.txt"),
        setup="A100 80 GB (the file does not say SXM; its triad agrees with BabelStream's SXM4 figure)",
        work=_stream_bytes("scale", _N27),
        timed="device",
    ),
    Case(
        id="gpu-stream-h200-scale",
        kind="memory",
        gpu="H200 SXM",
        workload="scale of 2^27 doubles",
        program=("stream", "scale", _N27, "fp64"),
        published=3165,
        unit="GB/s",
        quote="1024      135168  100.0 %  |  GB/s:        3884       2756       3165       3534 ...",
        source=_GPUSTREAM.format("h200.txt"),
        setup="H200 (132 SMs; committed in Dec 2023, before the NVL part existed)",
        work=_stream_bytes("scale", _N27),
        timed="device",
    ),
    Case(
        id="gpu-stream-h200-triad",
        kind="memory",
        gpu="H200 SXM",
        workload="triad over 2^27 doubles",
        program=("stream", "triad", _N27, "fp64"),
        published=3534,
        unit="GB/s",
        quote="1024      135168  100.0 %  |  GB/s:        3884       2756       3165       3534 ...",
        source=_GPUSTREAM.format("h200.txt"),
        setup="H200 (132 SMs; committed in Dec 2023, before the NVL part existed)",
        work=_stream_bytes("triad", _N27),
        timed="device",
    ),
    Case(
        id="small-kernels-h200-272mb",
        kind="memory",
        gpu="H200 SXM",
        workload="A = 0.25 B over 16,993,255 doubles, repeated",
        program=("stream", "scale", 16993255, "fp64"),
        published=3273,
        unit="GB/s",
        quote="16993255  265519kB    844   1671   3224   3273   3210   3078",
        source="te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/h200.txt (thousands of launches, wall time / launches)",
        setup="H200, fp64, 256 threads a block",
        work=_stream_bytes("scale", 16993255),
        timed="kernels",
    ),
    Case(
        id="small-kernels-h200-64kb",
        kind="memory",
        gpu="H200 SXM",
        workload="A = 0.25 B over 4,096 doubles, repeated (launch-bound)",
        program=("stream", "scale", 4096, "fp64"),
        published=26,
        unit="GB/s",
        quote="4096  64kB     26     26     26     26     27     27",
        source="te42kyfo/gpu-benches @1c36d50 gpu-small-kernels/h200.txt (thousands of launches, wall time / launches)",
        setup="H200, fp64; the model's launch start-up (GPU_KERNEL_S) was read from this benchmark",
        work=_stream_bytes("scale", 4096),
        timed="kernels",
        calibration=True,
    ),
    # end-to-end steps of named models
    Case(
        id="llmc-gpt2-124m-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT-2 124M train step, 64 x 1024 tokens a GPU",
        program=("train", "gpt2-124m", 64, 1024, 1, 8),
        published=300,
        unit="ms",
        quote="# on 8X A100 80GB SXM ($14/hr) steps in ~300ms/iter",
        source=_LLMC.format("run_gpt2_124M.sh"),
        setup="-b 64 -t 1024 -d 524288 -r 0 -z 1: bf16, cuDNN flash attention, AdamW, no recompute, no accumulation",
        timed="stream",
        guided=_LLMC_GUIDED,
    ),
    Case(
        id="llmc-gpt2-350m-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT-2 350M train step, 64 x 1024 tokens a GPU",
        program=("train", "gpt2-350m", 64, 1024, 1, 8),
        published=820,
        unit="ms",
        quote="# on 8X A100 80GB SXM ($14/hr) steps in ~820ms/iter",
        source=_LLMC.format("run_gpt2_350M.sh"),
        setup="-b 64 -t 1024 -d 524288 -r 0 -z 1: bf16, cuDNN flash attention, AdamW, no recompute, no accumulation",
        timed="stream",
        guided=_LLMC_GUIDED,
    ),
    Case(
        id="llmc-gpt2-774m-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT-2 774M train step, 2 x 32 x 1024 tokens a GPU",
        program=("train", "gpt2-774m", 64, 1024, 2, 8),
        published=1700,
        unit="ms",
        quote="# on 8X A100 80GB SXM ($14/hr) steps in ~1.7s/iter",
        source=_LLMC.format("run_gpt2_774M.sh"),
        setup="-b 32 -t 1024 -d 524288 -r 0 -z 1: two micro-batches of 32, bf16, "
        "cuDNN flash attention, AdamW, no recompute",
        timed="stream",
        guided=_LLMC_GUIDED,
    ),
    Case(
        id="llmc-gpt2-1.5b-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT-2 1.5B train step, 8 x 16 x 1024 tokens a GPU",
        program=("train", "gpt2-1.5b", 128, 1024, 8, 8),
        published=2800,
        unit="ms",
        quote="# on 8X H100 80GB SXM ($28/hr) steps in 2.80s/iter",
        source=_LLMC.format("run_gpt2_1558M.sh"),
        setup="-b 16 -t 1024 -d 1048576 -r 0 -z 1: eight micro-batches of 16, bf16, "
        "cuDNN flash attention, AdamW, no recompute (the file also says 2.7 s)",
        timed="stream",
        guided=_LLMC_GUIDED,
    ),
    Case(
        id="torchao-llama2-7b-decode-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-7B decode, batch 1, bf16 weights",
        program=("decode", "llama-7b", 1, 208, "bf16"),
        published=107.38,
        unit="tokens/s",
        quote="tok/s=107.38, mem/s=1418.93 GB/s, peak_mem=13.88 GB, model_size=13.21 GB quant: None, mod: "
        "Llama-2-7b-chat-hf, kv_quant: False, compile: True",
        source=_TORCHAO,
        setup="bf16, a 5-token prompt and 200 new tokens (the cache holds about 208)",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="torchao-llama3-8b-decode-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-3-8B decode, batch 1, bf16 weights",
        program=("decode", "llama3-8b", 1, 208, "bf16"),
        published=95.64,
        unit="tokens/s",
        quote="tok/s= 95.64, mem/s=1435.54 GB/s, peak_mem=16.43 GB, model_size=15.01 GB quant: None, mod: "
        "Meta-Llama-3-8B, kv_quant: False, compile: True",
        source=_TORCHAO,
        setup="bf16, a 5-token prompt and 200 new tokens (the cache holds about 208)",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="gpt-fast-llama2-7b-int8-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-7B decode, batch 1, int8 weights",
        program=("decode", "llama-7b", 1, 208, "int8"),
        published=155.58,
        unit="tokens/s",
        quote="|           | 8-bit   | 155.58   | 1069.20 |",
        source="pytorch-labs/gpt-fast @32971d3 README.md (A100 80GB, power-limited to 330 W; batch 1, 5-token prompt)",
        setup="int8 weight-only, per-channel scales, bf16 activations, torch.compile reduce-overhead",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="trtllm-llama-7b-prefill-128-a100",
        kind="prefill",
        gpu="A100 80GB",
        workload="LLaMA 7B prefill of 128 tokens, fp16",
        program=("prefill", "llama-7b", 1, 128, "fp16"),
        published=16.2,
        unit="ms",
        quote="| LLaMA 7B | 1 | 1 | 128  | 16.2 |",
        source=_TRTLLM,
        setup="TensorRT-LLM 0.9.0, fp16 engine, context FMHA, batch 1, 1 output token",
        timed="call",
    ),
    Case(
        id="trtllm-llama-7b-prefill-2048-a100",
        kind="prefill",
        gpu="A100 80GB",
        workload="LLaMA 7B prefill of 2048 tokens, fp16",
        program=("prefill", "llama-7b", 1, 2048, "fp16"),
        published=132.4,
        unit="ms",
        quote="| LLaMA 7B | 1 | 1 | 2048 | 132.4 |",
        source=_TRTLLM,
        setup="TensorRT-LLM 0.9.0, fp16 engine, context FMHA, batch 1, 1 output token",
        timed="call",
    ),
]

# ---- whole steps over several GPUs, priced through jaxgpu.pricing.planner.plan_model ----------------------------
# Each names the model, the mode, the global batch, the sequence, the GPUs of a node and the StepSettings the source's
# run used (where its setup names one; what it leaves unsaid is said in ``setup``). A run over nodes is compiled whole
# over all its GPUs, split by the mesh its source names (MaxText's fsdp within a node and data parallel across: hsdp).
# A source that gives a rate per GPU or a model-FLOP rate is turned into seconds with the work the source itself counts.

_MAXTEXT = (
    "AI-Hypercomputer/maxtext @efb6d9e4a MaxText/configs/a3/llama_2_7b/README.md (TFLOP/sec/chip, counted by "
    "MaxText's calculate_tflops_training_per_device) and {}vm.sh"
)
# MaxText's count for one GPU's step at 4 x 4096 tokens: 6 N S B + 12 H L hd S^2 B / 2 with N = 6,738,415,616
_MAXTEXT_FLOPS = 6 * 6738415616 * 4096 * 4 + 12 * 32 * 32 * 128 * 4096**2 * 4 / 2
_MAXTEXT_SETUP = (
    "per_device_batch_size=4 max_target_length=4096 ici_fsdp_parallelism=8 dcn_data_parallelism={} "
    "attention=cudnn_flash_te remat_policy=minimal_flash scan_layers=false: bf16 products, float32 "
    "weights, AdamW; minimal_flash (the products without a batch dimension and the attention's output "
    "saved) priced as run, maxtext:minimal_flash (dots_with_no_batch_dims_saveable before 2026-12-07); over several "
    "VMs, A3 High's network (100 Gb/s a GPU)"
)
_PAX = (
    "NVIDIA/JAX-Toolbox @8bfbd17 rosetta/rosetta/projects/pax/README.md (sequences/s of the global batch; shapes "
    "in paxml @b397693f paxml/contrib/gpu/scripts_gpu/configs.py)"
)
_NEMO = (
    "NVIDIA/NeMo @2fca28a docs/source/performance/performance_summary.md (NeMo 24.07, DGX-H100, FP8; tokens/s a GPU)"
)
_GPTFAST = (
    "pytorch-labs/gpt-fast @32971d3 README.md (8 A100 80GB power-limited to 330 W; batch 1, a 5-token "
    "prompt, 200 new tokens, torch.compile)"
)
_TORCHAO_README = (
    "pytorch/ao v0.7.0 torchao/quantization/README.md (one A100 80GB; gpt-fast's generate.py, batch 1, "
    "200 new tokens, torch.compile)"
)
_SAVE_DOTS = ("remat", "dots_with_no_batch_dims_saveable")
_PAX_5B_REMAT = "pax:SAVE_DOT_WITH_NO_BATCH_DIM"  # GPT5BBase's CHECKPOINT_POLICY (paxml's scripts_gpu/configs.py)

# The XLA flags each JAX run's own script sets that shape its plan: the latency-hiding scheduler, the sizes up to which
# XLA combines collectives, pipelined collectives and double-buffered loops, the rematerialization pass turned off.
# What the XLA compiling here no longer has is left out: the async_* flags (every collective async now, XLA's
# default), graph_level (command buffers), simplify_all_fp_conversions, triton_softmax_fusion; the stream's priority
# and triton_gemm=false (already this project's) change no plan. Read at each source's commit (research notes: the
# scripts below).
_LHS = (("xla_gpu_enable_latency_hiding_scheduler", True),)
_AR, _AG, _RS = (f"xla_gpu_{op}_combine_threshold_bytes" for op in ("all_reduce", "all_gather", "reduce_scatter"))
# MaxText's GPU scripts: the three collectives pipelined, loops double-buffered, combining by dimension off, XLA's
# remat pass off, each script its own combine sizes (all-reduce, all-gather, reduce-scatter):
# AI-Hypercomputer/maxtext @efb6d9e4a MaxText/configs/a3/llama_2_7b/{1,2,4,8,16}vm.sh; NVIDIA/JAX-Toolbox @db09688
# rosetta/rosetta/projects/maxtext/scripts/example_slurm.sub; AI-Hypercomputer/gpu-recipes @dc6ef1a
# training/a3ultra/mixtral-8x7b/maxtext-pretraining-gke/values.yaml
_MAXTEXT_PIPELINED = (("xla_gpu_enable_pipelined_all_gather", True),
                      ("xla_gpu_enable_pipelined_reduce_scatter", True),
                      ("xla_gpu_enable_pipelined_all_reduce", True),
                      ("xla_gpu_enable_while_loop_double_buffering", True),
                      ("xla_gpu_enable_all_gather_combine_by_dim", False),
                      ("xla_gpu_enable_reduce_scatter_combine_by_dim", False),
                      ("xla_disable_hlo_passes", "rematerialization"))
_MAXTEXT_XLA = {script: _LHS + ((_AR, ar), (_AG, ag), (_RS, rs)) + _MAXTEXT_PIPELINED
                for script, (ar, ag, rs) in {"1vm.sh": (134217728, 134217728, 67108864),
                                             "2vm.sh": (67108864, 134217728, 67108864),
                                             "4vm.sh": (536870912, 134217728, 67108864),
                                             "8vm.sh": (1073741824, 134217728, 67108864),
                                             "16vm.sh": (1073741824, 134217728, 134217728),
                                             "example_slurm.sub": (1073741824, 1073741824, 134217728),
                                             "values.yaml": (71303168, 536870912, 134217728)}.items()}
# Pax's GPT scripts (google/paxml @378c6addf paxml/contrib/gpu/scripts_gpu/run_pile_multinode.sh, and JAX-Toolbox
# @8bfbd17's patch of run_base_config_multinode.sh): the scheduler, all-reduces combined up to 51,200 bytes; for 126M
# the README's own line: "we recommend setting --xla_gpu_all_reduce_combine_threshold_bytes=33554432"
_PAX_XLA = _LHS + ((_AR, 51200),)
_PAX_126M_XLA = _LHS + ((_AR, 33554432),)
# T5X (JAX-Toolbox @b5dbd83's patch of t5x's multiprocess_pretrain_pile.sh: "--xla_gpu_enable_latency_hiding_scheduler=
# true --xla_gpu_all_reduce_combine_threshold_bytes=8589934592"); ViT (JAX-Toolbox @fd58524 rosetta/rosetta/projects/
# vit/scripts/*.sh: "--xla_gpu_all_reduce_combine_threshold_bytes=136314880", the scheduler from the container's
# Dockerfile.jax)
_T5X_XLA = _LHS + ((_AR, 8589934592),)
_VIT_XLA = _LHS + ((_AR, 136314880),)
# what the steps whose schedule-priced time (e5b828d) exposed their collectives over nodes were read for
_READ_FOR_RINGS = ("f861804: a ring over k GPUs of each node crosses nodes at k ports' speed (this step's price under "
                   "e5b828d, its collectives over nodes exposed at one port's speed, was read before the change)")
# what the pipelines whose price fell under their own lower bound (after f861804) were read for
_READ_FOR_BOUNDS = ("0195ed7: a pipeline's collectives added over the whole step, not in each stage plan's "
                    "differences (this step's price under its lower bound was read for it)")
# what the Pax 126M steps were read for
_READ_FOR_SCHEDULE = ("e5b828d: an async collective hidden only under the compute XLA's schedule puts between its "
                      "start and its done, the plan compiled with the run's XLA flags (this step's plan was read for "
                      "it: its gradients' all-reduce started after the backward pass)")
# The A3 VMs MaxText's table names ("A3 (h100-80gb-8)") are A3 High, a3-highgpu-8g with GPUDirect-TCPX: XPK, which
# launched the scripts, maps that name to it (AI-Hypercomputer/xpk @5442641a xpk.py: "'h100-80gb-8':
# SystemCharacteristics('N/A', 1, 'nvidia-h100-80gb', 'a3-highgpu-8g', 8, ...)"; A3 Mega came to XPK on 2024-05-23,
# after the table). Its GPUs share four NICs for GPU traffic (GKE's "Maximize GPU network bandwidth with
# GPUDirect-TCPX": "Up to four secondary NICs, each supporting up to 200 Gbps bandwidth for GPU data transfer"): 800
# Gb/s over 8 GPUs, 100 Gb/s a GPU each way, a quarter of a DGX H100's port (Google's own two-VM all-reduce: 89.54 GB/s
# of bus bandwidth at 8 GiB, GoogleCloudPlatform/ai-infra-cluster-provisioning @63eb31fb
# sample_workloads/nccltest/a3/README.md)
_A3_NETWORK = 100
# What each source's run could hold of its card (research by reading each script at the commit named)
_MAXTEXT_MEMORY = ("AI-Hypercomputer/maxtext @efb6d9e4a MaxText/configs/a3/llama_2_7b/{}vm.sh: 'export "
                   "XLA_PYTHON_CLIENT_MEM_FRACTION=0.85' (and XLA's rematerialization pass disabled)")
_PAX_MEMORY = ("NVIDIA/JAX-Toolbox @8bfbd17 patches/paxml/mirror-patch-moe-support.patch, run_base_config_multinode.sh "
               "(the script the README launches the GPT configs with): "
               "'export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}'")
_TORCH_MEMORY = ("PyTorch's caching allocator, not limited: NVIDIA/NeMo @08264fe docs and code and Megatron-Bridge's "
                 "perf recipes set no torch.cuda.set_per_process_memory_fraction (the latter only "
                 "'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True')")


def step(model: str, mode: str, batch: int, seq: int, devices: int, **settings) -> tuple:
    return ("step", model, mode, batch, seq, devices, tuple(sorted(settings.items())))


CASES += [
    Case(
        id="maxtext-llama2-7b-1x8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 8 H100s (FSDP), 4 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 32, 4096, 8, remat="maxtext:minimal_flash", scan=False,
                     xla=_MAXTEXT_XLA["1vm.sh"]),
        published=492,
        unit="TFLOP/s",
        quote="| 1x A3 (h100-80gb-8)    | 492              |",
        source=_MAXTEXT.format(1),
        setup=_MAXTEXT_SETUP.format(1),
        work=_MAXTEXT_FLOPS,
        timed="stream",
        memory_fraction=0.85,
        memory_source=_MAXTEXT_MEMORY.format(1),
    ),
    Case(
        id="maxtext-llama2-7b-2x8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 2 nodes of 8 H100s, 4 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 64, 4096, 16, remat="maxtext:minimal_flash", scan=False, mesh="hsdp",
                     xla=_MAXTEXT_XLA["2vm.sh"], network=_A3_NETWORK),
        published=422,
        unit="TFLOP/s",
        quote="| 2x A3 (h100-80gb-8)    | 422              |",
        source=_MAXTEXT.format(2),
        setup=_MAXTEXT_SETUP.format(2),
        work=_MAXTEXT_FLOPS,
        timed="stream",
        guided="c2a2a12: a run's own network, A3 High's 100 Gb/s a GPU (this step's price at a quarter of a "
        "DGX's port was read before the change)",
        memory_fraction=0.85,
        memory_source=_MAXTEXT_MEMORY.format(2),
    ),
    Case(
        id="maxtext-llama2-7b-4x8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 4 nodes of 8 H100s, 4 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 128, 4096, 32, remat="maxtext:minimal_flash", scan=False, mesh="hsdp",
                     xla=_MAXTEXT_XLA["4vm.sh"], network=_A3_NETWORK),
        published=407,
        unit="TFLOP/s",
        quote="| 4x A3 (h100-80gb-8)    | 407              |",
        source=_MAXTEXT.format(4),
        setup=_MAXTEXT_SETUP.format(4),
        work=_MAXTEXT_FLOPS,
        timed="stream",
        memory_fraction=0.85,
        memory_source=_MAXTEXT_MEMORY.format(4),
    ),
    Case(
        id="maxtext-llama2-7b-8x8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 8 nodes of 8 H100s, 4 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 256, 4096, 64, remat="maxtext:minimal_flash", scan=False, mesh="hsdp",
                     xla=_MAXTEXT_XLA["8vm.sh"], network=_A3_NETWORK),
        published=409,
        unit="TFLOP/s",
        quote="| 8x A3 (h100-80gb-8)    | 409              |",
        source=_MAXTEXT.format(8),
        setup=_MAXTEXT_SETUP.format(8),
        work=_MAXTEXT_FLOPS,
        timed="stream",
        memory_fraction=0.85,
        memory_source=_MAXTEXT_MEMORY.format(8),
    ),
    Case(
        id="maxtext-llama2-7b-16x8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 16 nodes of 8 H100s, 4 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 512, 4096, 128, remat="maxtext:minimal_flash", scan=False, mesh="hsdp",
                     xla=_MAXTEXT_XLA["16vm.sh"], network=_A3_NETWORK),
        published=375,
        unit="TFLOP/s",
        quote="| 16x A3 (h100-80gb-8)   | 375              |",
        source=_MAXTEXT.format(16),
        setup=_MAXTEXT_SETUP.format(16),
        work=_MAXTEXT_FLOPS,
        timed="stream",
        guided="c2a2a12: a run's own network, A3 High's 100 Gb/s a GPU (this step's price at a quarter of a "
        "DGX's port was read before the change)",
        memory_fraction=0.85,
        memory_source=_MAXTEXT_MEMORY.format(16),
    ),
    Case(
        id="jax-toolbox-maxtext-llama2-7b-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 8 H100s (FSDP), 2 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 16, 4096, 8, remat="maxtext:minimal_flash", scan=False,
                     xla=_MAXTEXT_XLA["example_slurm.sub"]),
        published=721,
        unit="ms",
        quote="| 7B   | H100 80G SXM | BF16      | 4096            | 8     | 2        | 1  | 8    | 1  | 16  | "
        "Flash     | "
        "minimal_flash| Off  | 0.721         | 22.19         |",
        source="NVIDIA/JAX-Toolbox @db09688 rosetta/rosetta/projects/maxtext/README.md",
        setup="MaxText in ghcr.io/nvidia/jax:maxtext-2024-04-15: per_device_batch_size=2 scan_layers=false "
        "remat_policy=minimal_flash attention=cudnn_flash_te logits_dot_in_fp32=false, AdamW, float32 weights",
        timed="stream",
        guided="7e9254f: an async collective runs under the step's compute and only what outlasts it is added "
        "(checked on this step before it entered, within 15% then; tests/test_planner.py holds its gathers under "
        "the compute); "
        "74e1271: a fusion XLA renamed takes its scope from its body (this step's plan was read for it: its "
        "attention probabilities priced as memory traffic); "
        "e5b828d: an async collective hidden only under the compute between its start and its done (read for it, "
        "with XLA's default flags)",
        memory_fraction=0.90,
        memory_source="NVIDIA/JAX-Toolbox @db09688 rosetta/rosetta/projects/maxtext/scripts/example_slurm.sub (the "
        "script the README's table points to): 'export XLA_PYTHON_CLIENT_MEM_FRACTION=0.90'",
    ),
    Case(
        id="pax-gpt-126m-64-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT 126M train step, 8 nodes of 8 A100s, 4 x 2048 tokens a GPU",
        program=step("pax-gpt-126m", "train", 256, 2048, 64, flash=False, scan=False, mesh="dp", xla=_PAX_126M_XLA),
        published=2098.16,
        unit="sequences/s",
        quote="| 126M | A100 80G SXM | BF16 |  64    |64    |1    |1    | 4     |   2098.16  |        "
        "0.85        |   39.7% (± 1.2%)     |",
        source=_PAX,
        setup="Pax, bf16 without Transformer Engine, data parallel over 64 GPUs, Adam; without flash attention "
        "(the README: "
        "'126M performance numbers were gathered _without_ flash attention'); remat not stated (none priced); "
        "priced as run, data parallel over all 64 GPUs",
        work=256.0,
        timed="stream",
        guided=_READ_FOR_SCHEDULE,
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
        plausible=((_SAVE_DOTS,),),
    ),
    Case(
        id="pax-gpt-126m-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT 126M train step, 8 nodes of 8 H100s, 4 x 2048 tokens a GPU",
        program=step("pax-gpt-126m", "train", 256, 2048, 64, flash=False, scan=False, mesh="dp", xla=_PAX_126M_XLA),
        published=4709.12,
        unit="sequences/s",
        quote="| 126M | H100 80G SXM | TE BF16 |  64    |64    |1    |1    | 4        |  4709.12  |     "
        "0.38           |    42.5% (± 1.8%)        |",
        source=_PAX,
        setup="Pax with Transformer Engine's layers, bf16, data parallel over 64 GPUs, Adam, without flash attention; "
        "remat not stated (none priced); priced as run, data parallel over all 64 GPUs",
        work=256.0,
        timed="stream",
        guided=_READ_FOR_SCHEDULE,
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
        plausible=((_SAVE_DOTS,),),
    ),
    Case(
        id="pax-gpt-5b-256-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT 5B train step, 32 nodes of 8 A100s, 8 x 2048 tokens a GPU",
        program=step("gpt3-5b", "train", 2048, 2048, 256, remat=_PAX_5B_REMAT, mesh="fsdp", xla=_PAX_XLA),
        published=594.13,
        unit="sequences/s",
        quote="| 5B   | A100 80G SXM | BF16 | 256    | 1    |256    |1    | 8       | 594.13    |    2.99    | "
        "      N/A"
        "        |",
        source=_PAX,
        setup="Pax, bf16 without Transformer Engine, FSDP over 256 GPUs, Adam, flash attention, "
        "repeated (scanned) layers, CHECKPOINT_POLICY SAVE_DOT_WITH_NO_BATCH_DIM; priced as run, FSDP over all 256 "
        "GPUs",
        work=2048.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
    ),
    Case(
        id="pax-gpt-5b-256-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT 5B train step, 32 nodes of 8 H100s, 8 x 2048 tokens a GPU",
        program=step("gpt3-5b", "train", 2048, 2048, 256, remat=_PAX_5B_REMAT, mesh="fsdp", xla=_PAX_XLA),
        published=1657.24,
        unit="sequences/s",
        quote="| 5B   | H100 80G SXM | TE BF16 | 256    | 1    |256    |1    | 8       |  1657.24  |   1.07   "
        "|       N/A"
        "        |",
        source=_PAX,
        setup="Pax with Transformer Engine's layers, bf16, FSDP over 256 GPUs, Adam, flash attention, "
        "scanned layers, SAVE_DOT_WITH_NO_BATCH_DIM; priced as run, FSDP over all 256 GPUs",
        work=2048.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
    ),
    Case(
        id="pax-gpt-5b-fp8-256-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT 5B train step in fp8, 32 nodes of 8 H100s, 8 x 2048 tokens a GPU",
        program=step("gpt3-5b", "train", 2048, 2048, 256, remat=_PAX_5B_REMAT, mesh="fsdp", matmul="fp8",
                     xla=_PAX_XLA),
        published=2374.66,
        unit="sequences/s",
        quote="| 5B   | H100 80G SXM | TE FP8 | 256    | 1    |256    |1    | 8       |  2374.66   "
        "|     0.749       |       N/A        |",
        source=_PAX,
        setup="Pax with Transformer Engine's fp8 layers, FSDP over 256 GPUs, Adam, flash attention, scanned layers, "
        "SAVE_DOT_WITH_NO_BATCH_DIM; priced as run, FSDP over all 256 GPUs",
        work=2048.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
    ),
    Case(
        id="pax-llama2-7b-16-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B fine-tuning step, 2 nodes of 8 H100s, 2 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 32, 4096, 16, remat=_SAVE_DOTS[1], mesh="fsdp", xla=_PAX_XLA),
        published=43.24,
        unit="sequences/s",
        quote="| 7B | H100 80G SXM | BF16 |  16    | 1    |16    |1    | 2        |  4096 |  43.24 |      "
        "88.7%  (± 0.12%)"
        "      |",
        source=_PAX + ", SFT Results",
        setup="Pax, bf16 without Transformer Engine, FSDP over 16 GPUs, Adam, flash attention (on by default since "
        "2024-04-26); remat not stated (the Pax GPT configs' SAVE_DOT_WITH_NO_BATCH_DIM priced); priced as run, "
        "FSDP over all 16 GPUs",
        work=32.0,
        timed="stream",
        guided=_READ_FOR_RINGS,
        memory_fraction=0.85,
        memory_source="NVIDIA/JAX-Toolbox @8bfbd17 patches/paxml/mirror-patch-lora-and-sft-support.patch, "
        "run_llama_boolq.sh (the SFT runs' script): "
        "'XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.85}'",
        plausible=((("remat", "none"),),),
    ),
    Case(
        id="nemo-gpt3-5b-fp8-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT3 5B train step in fp8, 8 nodes of 8 H100s, 8 x 4 x 2048 tokens a GPU",
        program=step("gpt3-5b", "train", 2048, 2048, 64, matmul="fp8", mesh="zero1", accumulate=8, scan=False,
                     overlap="framework"),
        published=23406,
        unit="tokens/s",
        quote="| GPT3-5B       | 64     | 2048 | 4   | 2048           | 1  | 1  | 1  | 1  | 23406              | 765"
        "                     |",
        source=_NEMO,
        setup="Megatron-Core, fp8, data parallel over 64 GPUs with the distributed "
        "optimizer, micro-batches of 4 (8 a step); remat not stated (the launcher's default, none, priced); priced "
        "as ZeRO-1 over all 64 GPUs (the optimizer's state cut, the gradients all-reduced; Megatron cuts its fp32 "
        "master weights too, which this program keeps whole)",
        work=2048 * 2048 / 64,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        guided="606eeed: DDP and ZeRO-1 sum each GPU's micro-batches' gradients on it and reduce once a step (priced "
        "over its whole mesh with every micro-batch's gradients all-reduced, this step moved from -16% to +32%)",
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-llama2-7b-fp8-8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step in fp8, 8 H100s, 16 x 4096 tokens a GPU",
        program=step("llama-7b", "train", 128, 4096, 8, matmul="fp8", accumulate=16, scan=False, mesh="zero1",
                     overlap="framework"),
        published=16934,
        unit="tokens/s",
        quote="| LLAMA2-7B     | 8      | 128  | 1   | 4096           | 1  | 1  | 1  | 1  | 16934              | 780"
        "                     |",
        source=_NEMO,
        setup="Megatron-Core, fp8, data parallel over 8 GPUs with the distributed "
        "optimizer, micro-batches of 1 (16 a step); remat not stated (none priced, each layer recomputed the other "
        "end); priced as run: ZeRO-1 over the 8 GPUs (it was priced FSDP before 2026-12-07); the framework's overlap "
        "not quoted (XLA's order the other end)",
        work=128 * 4096 / 8,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="megatron-bridge-llama3-8b-fp8-8-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-3 8B train step in fp8, 8 H100s (FSDP), 16 x 8192 tokens a GPU",
        program=step("llama3-8b", "train", 128, 8192, 8, matmul="fp8", accumulate=16, scan=False, overlap="framework"),
        published=14451,
        unit="tokens/s",
        quote="| LLAMA3_8B | 8 | FP8-CS | 128 | 1 | 8192 | 8 | 1 | 1 | 1 | n/a | 1 | 16 | 14451 | 744 |",
        source="NVIDIA-NeMo/Megatron-Bridge @067f987 docs/performance-summary-archive.md (25.11 container, DGX-H100; "
        "tokens/s a GPU)",
        setup="Megatron-Bridge, fp8 current scaling, FSDP over 8 GPUs, micro-batches of 1 (16 a step); "
        "remat not stated (none priced)",
        work=128 * 8192 / 8,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    # decode steps, batch 1: one GPU's program, and tensor parallel over a node's GPUs
    Case(
        id="gpt-fast-llama2-7b-decode-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-7B decode, batch 1, bf16 weights",
        program=("decode", "llama-7b", 1, 208, "bf16"),
        published=104.9,
        unit="tokens/s",
        quote="| Llama-2-7B  | Base    |  104.9  | 1397.31 |",
        source=_GPTFAST,
        setup="bf16, torch.compile reduce-overhead",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="gpt-fast-llama3.1-8b-decode-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-3.1-8B decode, batch 1, bf16 weights",
        program=("decode", "llama3-8b", 1, 208, "bf16"),
        published=93.89,
        unit="tokens/s",
        quote="| Llama-3.1-8B  | Base    |  93.89  | 1410.76 |",
        source=_GPTFAST,
        setup="bf16, torch.compile reduce-overhead",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="gpt-fast-llama3.1-8b-int8-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-3.1-8B decode, batch 1, int8 weights",
        program=("decode", "llama3-8b", 1, 208, "int8"),
        published=137.64,
        unit="tokens/s",
        quote="|           | 8-bit   | 137.64   | 1030.89 |",
        source=_GPTFAST,
        setup="int8 weight-only, per-channel scales, bf16 activations",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="torchao-llama2-7b-int8-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-7B decode, batch 1, int8 weights",
        program=("decode", "llama-7b", 1, 208, "int8"),
        published=170.83,
        unit="tokens/s",
        quote="|             | int8wo                  | "
        "12.204              |  170.83       | 1131.18                 |  8.95            |  6.62           |",
        source=_TORCHAO_README,
        setup="int8 weight-only (int8wo), bf16 activations",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="torchao-llama3-8b-int8-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-3-8B decode, batch 1, int8 weights",
        program=("decode", "llama3-8b", 1, 208, "int8"),
        published=153.03,
        unit="tokens/s",
        quote="|             | int8wo                  |  "
        "7.447              |  153.03       | 1150.80                 | 10.42            |  7.52           |",
        source=_TORCHAO_README,
        setup="int8 weight-only (int8wo), bf16 activations",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="gpt-fast-llama2-7b-tp2-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-7B decode, batch 1, tensor parallel over 2 A100s",
        program=step("llama-7b", "serve", 1, 208, 2),
        published=168.84,
        unit="tokens/s",
        quote="|           | 2   | 168.84   | 1181.99 |",
        source=_GPTFAST + ", the tensor parallelism table",
        setup="bf16, tensor parallel over 2 GPUs (NVLink)",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="gpt-fast-llama2-70b-tp4-a100",
        kind="decode",
        gpu="A100 80GB",
        workload="Llama-2-70B decode, batch 1, tensor parallel over 4 A100s",
        program=step("llama-70b", "serve", 1, 208, 4),
        published=38.01,
        unit="tokens/s",
        quote="|           | 4   | 38.01   | 1340.76 |",
        source=_GPTFAST + ", the tensor parallelism table",
        setup="bf16, tensor parallel over 4 GPUs (NVLink)",
        work=1.0,
        timed="stream",
    ),
]

# ---- LoRA and QLoRA fine-tunes, and runs that measured their peak memory a GPU ------------------------------------
_AUTOMODEL = ("NVIDIA-NeMo/Automodel docs/performance-summary.md, the LoRA row as added at 507bfb7514 (Time per Global "
              "Step and Tokens/sec/GPU; 'All benchmarks use mock data'), and "
              "examples/llm_finetune/llama3_1/llama3_1_8b_peft_benchmark.yaml at that commit")
_TORCHTUNE = ("pytorch/torchtune @30b8519e86 README.md, 'Memory and training speed' ('batch size 2 (without gradient "
              "accumulation), a dataset packed to sequence length 2048, and torch compile enabled'; '*= Measured over "
              "one full training epoch'), and recipes/configs/llama3_1/8B_qlora_single_device.yaml")
_TRAINY = ("pytorch/torchtitan @cbccb38 benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md ('TPS and Memory(GiB) "
           "are arbitrarily sampled at the 100th iteration'; torchtitan e7c0cae, torch 2.8.0a0, torchao 0afa4c1), with "
           "train_configs/llama3_8b.toml at e7c0cae")
_TRAINY_SETUP = ("torchtitan, FSDP2 over all {} H200s ({} nodes of 8, NVLink within, 400 Gb/s a GPU between), "
                 "local batch 2 of 8192 tokens, torch.compile, float8 linear layers (torchao, tensorwise, the output "
                 "head left in bf16; weights all-gathered in fp8, which this program gathers in bf16), AdamW, "
                 "selective activation checkpointing per op, priced as run: torchtitan:selective_op (the "
                 "attention's output and every other product of a block saved; dots_with_no_batch_dims_saveable "
                 "before 2026-12-07)")
_TORCH_ALLOCATOR = "PyTorch's caching allocator: the run's command and config set no per-process memory fraction"

CASES += [
    Case(
        id="automodel-llama3-8b-lora-1-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-3.1 8B LoRA fine-tuning step on one H100, 32 x 4096 tokens in 16 micro-batches",
        program=step("llama3-8b", "train", 32, 4096, 1, lora=16, accumulate=16),
        published=12472.87,
        unit="tokens/s",
        quote="| Llama3 8B | 1 | 32 | 2 | 2 | 16 | 4096 | 1 | 1 | 1 | - | 1 | 1 | - | 10.51 | 402 | 12472.87 |",
        source=_AUTOMODEL,
        setup="PyTorch FSDP2 on one GPU, bf16, LoRA rank 16 (alpha 32) on every linear layer (match_all_linear), "
        "LoRA dropout 0.1 (not priced), AdamW, global batch 32 in 16 micro-batches of 2 x 4096 tokens, activation "
        "checkpointing not set (FSDP2Manager's default: off)",
        work=32 * 4096,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_ALLOCATOR,
    ),
    Case(
        id="torchtune-llama3-8b-qlora-1-4090",
        kind="train",
        gpu="RTX 4090",
        workload="Llama-3.1 8B QLoRA fine-tuning step on one RTX 4090, 2 x 2048 tokens",
        program=step("llama3-8b", "train", 2, 2048, 1, lora=8, weights="nf4", remat="nothing_saveable"),
        published=2413,
        unit="tokens/s",
        quote="| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB | 2413  |",
        source=_TORCHTUNE,
        setup="torchtune lora_finetune_single_device, base in NF4 (torchao), LoRA rank 8 (alpha 16) on q, k, v and "
        "the output projection and the MLP, bf16, AdamW, activation checkpointing of each layer, chunked "
        "cross-entropy (this program's holds the logits whole), batch 2 packed to 2048 tokens, torch.compile; "
        "the peak's kind (active, allocated or reserved) not stated",
        work=2 * 2048,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_ALLOCATOR,
        peak_gib=7.4,
    ),
    Case(
        id="trainy-llama3-8b-fp8-32-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Llama-3.1 8B train step in fp8, 4 nodes of 8 H200s, 2 x 8192 tokens a GPU",
        program=step("llama3-8b", "train", 64, 8192, 32, mesh="fsdp", matmul="fp8", remat="torchtitan:selective_op",
                     overlap="framework"),
        published=10938,
        unit="tokens/s",
        quote="| 4 | 10938 | 47.96 |",
        source=_TRAINY,
        setup=_TRAINY_SETUP.format(32, 4),
        work=2 * 8192,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_ALLOCATOR,
        peak_gib=47.96,
        peak_counts="reserved",
        plausible=((_XLA_ORDER,),),
    ),
    Case(
        id="trainy-llama3-8b-fp8-64-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Llama-3.1 8B train step in fp8, 8 nodes of 8 H200s, 2 x 8192 tokens a GPU",
        program=step("llama3-8b", "train", 128, 8192, 64, mesh="fsdp", matmul="fp8", remat="torchtitan:selective_op",
                     overlap="framework"),
        published=10753,
        unit="tokens/s",
        quote="| 8 | 10753 | 46.97 |",
        source=_TRAINY,
        setup=_TRAINY_SETUP.format(64, 8),
        work=2 * 8192,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_ALLOCATOR,
        peak_gib=46.97,
        peak_counts="reserved",
        plausible=((_XLA_ORDER,),),
    ),
]

# Pipeline stages, expert and context parallelism, and models that are not decoders: the rows of
# docs/research/published-whole-steps.md (and its follow-ups) that the model command could not express before, each
# with its first price recorded before any change it informs (its section F says what became of each row). Left out:
# Nemotron's rows (a squared-ReLU MLP is not built), the rows with context parallelism beside tensor parallelism or a
# distributed optimizer (a cp mesh here is fsdp over its groups), the T5 rows with Transformer Engine's fp8 (the
# encoders here compute in bf16) and JAX-Toolbox's ViT row on an H100 whose form the README does not state.
_VIT = ("NVIDIA/JAX-Toolbox @fd58524 rosetta/rosetta/projects/vit/README.md (samples/s of the global batch; configs "
        "rosetta/rosetta/projects/vit/configs/base.gin, pretrain.gin, scripts/singleprocess_pretrain.sh)")
_T5X = ("NVIDIA/JAX-Toolbox @b5dbd83 rosetta/rosetta/projects/t5x/README.md (sequences/s of the global batch; shapes "
        "in google-research/t5x @cc342d4 t5x/contrib/gpu/t5/t5_1_1/large.gin and xl.gin)")
_T5X_SETUP = ("T5X, T5 v1.1 {} (gated GELU, untied head, vocab 32,128), bf16, data parallel over {} GPUs (TP 1), {} "
              "sequences a GPU, 512 input and 128 target tokens (TASK_FEATURE_LENGTHS), AdamW (adamw_opt.gin; its "
              "clipping and z-loss not priced), no packing, no remat stated (none priced); a wall-clock rate over "
              "training with real data (The Pile), so data loading is in it")
_GPU_RECIPES = ("AI-Hypercomputer/gpu-recipes @dc6ef1a training/a3ultra/mixtral-8x7b/maxtext-pretraining-gke/README.md "
                "(an example log line; config src/frameworks/a3ultra/maxtext-configs/mixtral-8x7b-256gpus-a3u-bf16."
                "yaml; the recipe was withdrawn at ca2078f)")

CASES += [
    Case(
        id="nemo-llama2-13b-fp8-pp4-16-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 13B train step in fp8, 2 nodes of 8 H100s, 4 pipeline stages of 4 GPUs interleaved 10 "
        "ways, 32 micro-batches of 4 x 4096 tokens",
        program=step("llama-13b", "train", 128, 4096, 16, matmul="fp8", pp=4, vp=10, accumulate=32, mesh="zero1",
                     scan=False, overlap="framework"),
        published=8715,
        unit="tokens/s",
        quote="| LLAMA2-13B    | 16     | 128  | 1   | 4096           | 1  | 4  | 1  | 10 | 8715               | "
        "760                     |",
        source=_NEMO,
        setup="NeMo 24.07 (Megatron-Core), fp8, TP 1, PP 4 with 10 virtual stages (interleaved 1F1B), DP 4, micro-"
        "batches of 1 a GPU (128 / (1 x 4) = 32 a step); the optimizer not stated (the launcher's default, Megatron's "
        "distributed optimizer, priced: ZeRO-1 within each stage); remat not stated (none priced)",
        work=128 * 4096 / 16,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="maxtext-mixtral-8x7b-ep8-256-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Mixtral 8x7B train step, 32 nodes of 8 H200s, experts over each node's 8 GPUs, 5 x 4096 tokens "
        "a GPU",
        program=step("mixtral-8x7b", "train", 1280, 4096, 256, ep=8, remat=_SAVE_DOTS[1], scan=False,
                     xla=_MAXTEXT_XLA["values.yaml"]),
        published=3437,
        unit="ms",
        quote="completed step: 45, seconds: 3.437, TFLOP/s/device: 494.168, Tokens/s/device: 5958.570, "
        "total_weights: 5242880, loss: 0.000",
        source=_GPU_RECIPES,
        setup="MaxText, bf16 weights and products, ici_expert_parallelism=8 within a node, dcn_data_parallelism=16 x "
        "dcn_fsdp_parallelism=2 across nodes (priced: fsdp over the 32 expert groups), per_device_batch_size=5, "
        "attention=cudnn_flash_te, scan_layers=false, remat_policy=custom saving every projection's output (priced "
        "as dots_with_no_batch_dims_saveable), dropping MoE (megablox=false) at capacity_factor=1 (priced at this "
        "program's 1.25: its expert buffers a quarter larger), synthetic data; one step's log line",
        work=1.0,
        timed="stream",
    ),
    Case(
        id="jaxtoolbox-vit-b16-8-a100",
        kind="train",
        gpu="A100 80GB",
        workload="ViT-B/16 pretraining step at 224 x 224, 8 A100s (data parallel), 512 images a GPU",
        program=("encoder", "vit-b/16", "train", 4096, 224, 8, (("mesh", "dp"), ("xla", _VIT_XLA))),
        published=7200.38,
        unit="samples/s",
        quote="|B/16 |    87M      | 8    |   512       |    4096       |    32       |  1       |    1       |"
        "           7200.38            |          11669.52           |        731.41           |       1266.95 "
        "       |",
        source=_VIT,
        setup="T5X's ViT (Google's ViT config: width 768, 12 layers, 12 heads, MLP 3072, patch 16, class token), "
        "bf16 (PREC=bfloat16), pure data parallel on one DGX A100 node, 512 images a GPU (4096 a step), no "
        "gradient accumulation; AdamW with clipping (clipping not priced), dropout 0.1 and the 768-wide pre-logits "
        "layer not priced; remat not stated (none priced); images fed by DALI, so data loading is in the rate",
        work=4096.0,
        timed="stream",
    ),
    Case(
        id="jaxtoolbox-t5-large-64-a100",
        kind="train",
        gpu="A100 80GB",
        workload="T5 v1.1 large train step, 8 nodes of 8 A100s (data parallel), 32 x (512 + 128) tokens a GPU",
        program=("encoder", "t5-v1.1-large", "train", 2048, (512, 128), 64, (("mesh", "dp"), ("xla", _T5X_XLA))),
        published=4853,
        unit="sequences/s",
        quote="| T5-v1.1-large | A100 80G SXM | bf16 | 64 | 1 | 32 | ~4853 | 75.8 |",
        source=_T5X,
        setup=_T5X_SETUP.format("large (d_model 1024, 24 + 24 layers, 16 heads, d_ff 2816)", 64, 32),
        work=2048.0,
        timed="stream",
    ),
    Case(
        id="jaxtoolbox-t5-xl-256-a100",
        kind="train",
        gpu="A100 80GB",
        workload="T5 v1.1 xl train step, 32 nodes of 8 A100s (data parallel), 8 x (512 + 128) tokens a GPU",
        program=("encoder", "t5-v1.1-xl", "train", 2048, (512, 128), 256, (("mesh", "dp"), ("xla", _T5X_XLA))),
        published=4322,
        unit="sequences/s",
        quote="| T5-v1.1-xl | A100 80G SXM | bf16 | 256 | 1 | 8 | ~4322 | 16.9 |",
        source=_T5X,
        setup=_T5X_SETUP.format("xl (d_model 2048, 24 + 24 layers, 32 heads, d_ff 5120)", 256, 8),
        work=2048.0,
        timed="stream",
        guided=_READ_FOR_RINGS,
    ),
    Case(
        id="jaxtoolbox-t5-xl-144-a100",
        kind="train",
        gpu="A100 80GB",
        workload="T5 v1.1 xl train step, 18 nodes of 8 A100s (data parallel), 8 x (512 + 128) tokens a GPU",
        program=("encoder", "t5-v1.1-xl", "train", 1152, (512, 128), 144, (("mesh", "dp"), ("xla", _T5X_XLA))),
        published=3021,
        unit="sequences/s",
        quote="| T5-v1.1-xl | A100 80G SXM | bf16 | 144 | 1 | 8 | ~3021 | 21.0 |",
        source=_T5X,
        setup=_T5X_SETUP.format("xl (d_model 2048, 24 + 24 layers, 32 heads, d_ff 5120)", 144, 8),
        work=1152.0,
        timed="stream",
        guided=_READ_FOR_RINGS,
    ),
]

# NeMo Automodel's Llama-3.1 70B pre-training row: FSDP2 with context parallelism, the one CP row a mesh here expresses
_AUTOMODEL_70B = ("NVIDIA-NeMo/Automodel @36044ad3 docs/performance-summary.mdx (DGX-H100, BF16; the row added at "
                  "2013a4dd6; config examples/llm_benchmark/llama3_3/"
                  "custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at HEAD, which may postdate the measurement)")

CASES += [
    Case(
        id="automodel-llama3-70b-cp2-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-3.1 70B pre-training step, 8 nodes of 8 H100s, FSDP2 with sequences over pairs of GPUs, "
        "4 micro-batches of 32 x 8192 tokens",
        program=step("llama3-70b", "train", 128, 8192, 64, cp=2, accumulate=4, remat="nothing_saveable",
                     overlap="framework"),
        published=18900,
        unit="ms",
        quote="| Llama3 70B | 64 | 128 | 1 | 1 | 4 | 8192 | 1 | 1 | 2 | - | - | 32 | TE + fsdp2_prefetch | 18.90 | "
        "389 | 866.77 |",
        source=_AUTOMODEL_70B,
        setup="NeMo Automodel (PyTorch FSDP2 over 64 GPUs: 32 data-parallel groups x context parallel 2, TP 1, PP 1), "
        "bf16, Transformer Engine's FusedAdam, sdpa attention, torch.compile; local batch 1 (a sequence a group), "
        "4 micro-batches a step; activation_checkpointing: True (each layer recomputed: priced nothing_saveable)",
        work=1.0,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,),),
    ),
]

# NeMo's and Megatron-Bridge's rows with tensor parallelism (inside pipeline stages or alone): Megatron's layout, the
# zero1+tp mesh (tp groups within a node, their weights' cuts whole across the data-parallel groups, the distributed
# optimizer's state cut over every GPU), fp8; sequence parallelism, the launcher's default with TP, is part of the mesh
# since 2026-12-07 (the first prices, recorded before it, held the stream whole on each tp rank)
_NEMO_TP = ("NeMo 24.07 (Megatron-Core), fp8, {}; the optimizer not stated (the launcher's default, "
            "distributed_fused_adam, priced: zero1+tp), remat not stated (none priced, each layer recomputed the "
            "other end; the launcher's selective recompute is the attention core, which flash attention recomputes "
            "anyway)")
_BRIDGE = ("NVIDIA-NeMo/Megatron-Bridge @067f987 docs/performance-summary-archive.md (25.11 container, DGX-H100; "
           "tokens/s a GPU)")

CASES += [
    Case(
        id="nemo-gpt3-20b-fp8-tp2-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT3 20B train step in fp8, 8 nodes of 8 H100s, tp 2 x 32 data-parallel groups, 4 micro-batches",
        program=step("gpt3-20b", "train", 256, 2048, 64, matmul="fp8", mesh="zero1+tp", tp=2, accumulate=4,
                     scan=False, overlap="framework"),
        published=5851,
        unit="tokens/s",
        quote="| GPT3-20B      | 64     | 256  | 2   | 2048           | 2  | 1  | 1  | 1  | 5851               | "
        "750                     |",
        source=_NEMO,
        setup=_NEMO_TP.format("TP 2, PP 1, DP 32, micro-batches of 2 a group (256 / (2 x 32) = 4 a step)"),
        work=256 * 2048 / 64,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        guided="81b8422 and f9cc08e: the fused q/k/v columns a KV head's group at a time, and sequence "
        "parallelism on the tp meshes (this step's plan was read for both: its all-to-alls and "
        "collective-permutes on the q/k/v split, its stream held whole on each tp rank); e58674c: a fusion "
        "slicing a few layers out of a converted stack reads those layers (this step's plan was read for it: 236 "
        "such kernels priced as reading the whole 10 GB stack); a4793ec: zero1 as Megatron's distributed "
        "optimizer runs it (this step's plan was read for it: 143 GiB a GPU, the fp32 weights whole on each tp "
        "rank)",
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-gpt3-175b-fp8-pp8-128-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT3 175B train step in fp8, 16 nodes of 8 H100s, 8 pipeline stages (interleaved 6 ways) of tp 4 x "
        "4 groups, 64 micro-batches",
        program=step("gpt3-175b", "train", 256, 2048, 128, matmul="fp8", mesh="zero1+tp", tp=4, pp=8, vp=6,
                     accumulate=64, scan=False, overlap="framework"),
        published=716,
        unit="tokens/s",
        quote="| GPT3-175B     | 128    | 256  | 1   | 2048           | 4  | 8  | 1  | 6  | 716                | "
        "771                     |",
        source=_NEMO,
        setup=_NEMO_TP.format("TP 4, PP 8 with 6 virtual stages (interleaved 1F1B), DP 4, micro-batches of 1 a "
                              "group (256 / (1 x 4) = 64 a step)"),
        work=256 * 2048 / 128,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        guided="81b8422 and f9cc08e: the fused q/k/v columns a KV head's group at a time, and sequence "
        "parallelism on the tp meshes (this step's plan was read for both: its all-to-alls and "
        "collective-permutes on the q/k/v split, its stream held whole on each tp rank); " + _READ_FOR_BOUNDS
        + "; 31c24d1: a micro-batch's work is one more trip of the stage's loop (this step's stage plans were read "
        "for it: the plans of one and two micro-batches gave 0.148 s a micro-batch, the loop's trip 0.088 s)",
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-gpt3-175b-fp8-pp8-512-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT3 175B train step in fp8, 64 nodes of 8 H100s, 8 pipeline stages (interleaved 6 ways) of tp 4 x "
        "16 groups, 64 micro-batches",
        program=step("gpt3-175b", "train", 2048, 2048, 512, matmul="fp8", mesh="zero1+tp", tp=4, pp=8, vp=6,
                     accumulate=64, scan=False, overlap="framework"),
        published=825,
        unit="tokens/s",
        quote="| GPT3-175B     | 512    | 2048 | 2   | 2048           | 4  | 8  | 1  | 6  | 825                | "
        "[888](https://mlcommons.org/benchmarks/training/)                     |",
        source=_NEMO,
        setup=_NEMO_TP.format("TP 4, PP 8 with 6 virtual stages (interleaved 1F1B), DP 16, micro-batches of 2 a "
                              "group (2048 / (2 x 16) = 64 a step)"),
        work=2048 * 2048 / 512,
        timed="stream",
        guided=_READ_FOR_BOUNDS,
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-llama2-70b-fp8-pp4-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 70B train step in fp8, 8 nodes of 8 H100s, 4 pipeline stages (interleaved 20 ways) of tp 4 "
        "x 4 groups, 32 micro-batches",
        program=step("llama-70b", "train", 128, 4096, 64, matmul="fp8", mesh="zero1+tp", tp=4, pp=4, vp=20,
                     accumulate=32, scan=False, overlap="framework"),
        published=1728,
        unit="tokens/s",
        quote="| LLAMA2-70B    | 64     | 128  | 1   | 4096           | 4  | 4  | 1  | 20 | 1728               | "
        "768                     |",
        source=_NEMO,
        setup=_NEMO_TP.format("TP 4, PP 4 with 20 virtual stages (interleaved 1F1B), DP 4, micro-batches of 1 a "
                              "group (128 / (1 x 4) = 32 a step)"),
        work=128 * 4096 / 64,
        timed="stream",
        guided=_READ_FOR_BOUNDS,
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="megatron-bridge-llama3-70b-fp8-pp8-64-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-3 70B train step in fp8, 8 nodes of 8 H100s, 8 pipeline stages (interleaved 5 ways) of tp 4 x "
        "2 groups, 64 micro-batches",
        program=step("llama3-70b", "train", 128, 8192, 64, matmul="fp8", mesh="zero1+tp", tp=4, pp=8, vp=5,
                     accumulate=64, scan=False, overlap="framework"),
        published=1602,
        unit="tokens/s",
        quote="| LLAMA3_70B | 64 | FP8-CS | 128 | 1 | 8192 | 0 | 4 | 8 | 1 | 5 | 1 | 64 | 1602 | 719 |",
        source=_BRIDGE,
        setup="Megatron-Bridge, fp8 current scaling, TP 4, PP 8 with 5 virtual stages (interleaved 1F1B), DP 2 "
        "('FSDP = 0 means DDP'; whether its optimizer is distributed is not stated: zero1+tp priced), micro-batches "
        "of 1 a group (64 a step); remat not stated (none priced, each layer recomputed the other end)",
        work=128 * 8192 / 64,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        guided="f9cc08e: sequence parallelism on the tp meshes (this step's plan was read for it: 133 GB a GPU,"
        " the stream held whole on each tp rank); 9fa4d01: a pipeline's micro-batches in flight without the "
        "head's logits (made while this step's plan was 1.41x its run's memory, a 128k-row vocabulary)",
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
]

# Whole steps added for issue #62 before any of its calibration: runs on B200, H200 and A100, in fp8 and over nodes,
# each first-priced by the model as it stood (docs/research/published-whole-steps.md, section G, has their research).
# A Megatron run's unstated recompute and a PyTorch framework's unquoted overlap price the plausible others, as above.
_BRIDGE_B200 = ("NVIDIA-NeMo/Megatron-Bridge @067f987 docs/performance-summary-archive.md (25.11 container, DGX-B200; "
                "tokens/s a GPU)")
_NEMO_2502 = ("docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html as stored for "
              "NeMo 25.02 (DGX-B200, FP8, NeMo 2.0; tokens/s a GPU; the page's cells one a line, joined here)")
_RECIPES = "AI-Hypercomputer/gpu-recipes @{} training/{}/README.md (an example log line)"
# Google Cloud's GPU VMs: A3 Mega (a3-megagpu-8g) gives its 8 H100s eight 200 Gb/s NICs for GPU traffic
# (GPUDirect-TCPXO), A3 Ultra (H200) and A4 (B200) eight 400 Gb/s RDMA NICs, a DGX's port a GPU (Google Cloud's
# "GPU machine types" page, accelerator-optimized A3 and A4 series)
_A3_MEGA_NETWORK = 200
# the XLA flags of gpu-recipes' MaxText charts for these runs (values.yaml at each commit): the scheduler, all-reduce
# and all-gather combined up to 2 GiB (A3 Ultra and A4's 70B) or as the A3 Mega 7B chart sets them, the rest as
# MaxText's own scripts (_MAXTEXT_PIPELINED)
_RECIPES_70B_XLA = _LHS + ((_AR, 2147483648), (_AG, 2147483648), (_RS, 16777216)) + _MAXTEXT_PIPELINED
_RECIPES_MEGA_XLA = _LHS + ((_AR, 536870912), (_AG, 134217728), (_RS, 67108864)) + _MAXTEXT_PIPELINED
_NEMO_RECIPE = ("NeMo {} (Megatron-Core) as gpu-recipes' config {} sets it: {}; activations_checkpoint_granularity: "
                "null (no recompute); distributed optimizer (zero1+tp priced); the framework's overlap not quoted "
                "(XLA's order the other end)")
_GPT2_VOCAB = ("tokenizer GPT2BPETokenizer, so a vocabulary of about 50k, not Llama-3's 128,256 (priced: about 1% "
               "more work a step)")

# the calibration's out-of-sample check (issue #62): these steps' first prices were recorded before it
BEFORE_CALIBRATION = ("megatron-bridge-llama3-8b-fp8-8-b200", "nemo-llama3-8b-fp8-8-b200",
                      "nemo-gpt3-175b-fp8-tp4pp4-512-b200", "maxtext-llama3-70b-fp8-256-b200",
                      "maxtext-llama3-70b-256-h200", "pax-gpt3-175b-256-a100", "maxtext-llama2-7b-256-h100",
                      "nemo-gpt3-175b-fp8-tp4pp8-256-h100", "nemo-mixtral-8x7b-ep8-256-h200",
                      "nemo-llama3-70b-fp8-tp2pp4-256-h200", "nemo-llama3-70b-fp8-tp2pp4-256-b200")

CASES += [
    Case(
        id="megatron-bridge-llama3-8b-fp8-8-b200",
        kind="train",
        gpu="B200",
        workload="Llama-3 8B train step in fp8, 8 B200s (data parallel, distributed optimizer), 8 x 2 x 8192 tokens "
        "a GPU",
        program=step("llama3-8b", "train", 128, 8192, 8, matmul="fp8", mesh="zero1", accumulate=8, scan=False,
                     overlap="framework"),
        published=30624,
        unit="tokens/s",
        quote="| LLAMA3_8B | 8 | FP8-CS (FP8-MX) | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 1 | 8 | 30624 (29521) | "
        "1576 (1519) |",
        source=_BRIDGE_B200,
        setup="Megatron-Bridge, fp8 current scaling (the figure outside the brackets), DDP ('FSDP = 0') with the "
        "recipe's distributed Adam (zero1 priced), micro-batches of 2 (8 a step), CUDA graphs of the whole "
        "iteration; remat not stated (none priced, each layer recomputed the other end); the framework's overlap "
        "not quoted (XLA's order the other end)",
        work=128 * 8192 / 8,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-llama3-8b-fp8-8-b200",
        kind="train",
        gpu="B200",
        workload="Llama-3 8B train step in fp8, 8 B200s (data parallel, distributed optimizer), 8 x 2 x 8192 tokens "
        "a GPU",
        program=step("llama3-8b", "train", 128, 8192, 8, matmul="fp8", mesh="zero1", accumulate=8, scan=False,
                     overlap="framework"),
        published=26006,
        unit="tokens/s",
        quote="LLAMA3-8B | 8 | 128 | 2 | 8192 | 1 | 1 | 1 | 1 | 1 | 8 | 26006 | 1506 |",
        source=_NEMO_2502,
        setup="NeMo 25.02 (NeMo 2.0, Megatron-Core), fp8 (the performance scripts of that time: delayed scaling), "
        "DP 8 with distributed_fused_adam (zero1 priced), micro-batches of 2 (8 a step), CUDA graphs; remat not "
        "stated (none priced, each layer recomputed the other end); the framework's overlap not quoted (XLA's "
        "order the other end)",
        work=128 * 8192 / 8,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="nemo-gpt3-175b-fp8-tp4pp4-512-b200",
        kind="train",
        gpu="B200",
        workload="GPT3 175B train step in fp8, 64 nodes of 8 B200s, 4 pipeline stages (interleaved 6 ways) of tp 4 "
        "x 32 groups, 32 micro-batches of 2",
        program=step("gpt3-175b", "train", 2048, 2048, 512, matmul="fp8", mesh="zero1+tp", tp=4, pp=4, vp=6,
                     accumulate=32, scan=False, overlap="framework"),
        published=1600,
        unit="tokens/s",
        quote="GPT3-175B | 512 | 2048 | 2 | 2048 | 4 | 4 | 1 | 6 | 1 | 32 | 1600 |",
        source=_NEMO_2502,
        setup="NeMo 25.02 (Megatron-Core), fp8, TP 4, PP 4 with 6 virtual stages, DP 32, micro-batches of 2 (32 a "
        "step); the optimizer not stated (NeMo 2.0's recipes: distributed_fused_adam, zero1+tp priced); remat not "
        "stated (none priced, each layer recomputed the other end); the framework's overlap not quoted (XLA's "
        "order the other end)",
        work=2048 * 2048 / 512,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,), (_RECOMPUTE,)),
    ),
    Case(
        id="maxtext-llama3-70b-fp8-256-b200",
        kind="train",
        gpu="B200",
        workload="Llama-3.1 70B train step, 32 nodes of 8 B200s (FSDP over all), 8 x 8192 tokens a GPU",
        program=step("llama3-70b", "train", 2048, 8192, 256, matmul="fp8", remat="maxtext:full",
                     xla=_RECIPES_70B_XLA),
        published=20935,
        unit="ms",
        quote="completed step: 11, seconds: 20.935, TFLOP/s/device: 1507.142, Tokens/s/device: 3130.521, "
        "total_weights: 16777216, loss: 12.329",
        source=_RECIPES.format("5be5988e", "a4/llama3-1-70b/maxtext-pretraining-gke"),
        setup="MaxText, ici_fsdp_parallelism 8 x dcn_fsdp_parallelism 32 (FSDP over 256), per_device_batch_size 8, "
        "attention cudnn_flash_te, remat_policy full (nothing_saveable), scanned layers, synthetic data; the log "
        "line does not say fp8 or bf16 (the README's default is fp8, priced; bf16 the other end)",
        work=1.0,
        timed="stream",
        memory_fraction=0.98,
        memory_source="the recipe's launcher (helm chart at 5be5988e): XLA_PYTHON_CLIENT_MEM_FRACTION 0.98",
        plausible=((("matmul", "bf16"),),),
    ),
    Case(
        id="maxtext-llama3-70b-256-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Llama-3.1 70B train step, 32 nodes of 8 H200s (FSDP), 2 x 8192 tokens a GPU",
        program=step("llama3-70b", "train", 512, 8192, 256, remat="maxtext:save_dot_except_mlp",
                     xla=_RECIPES_70B_XLA),
        published=15516,
        unit="ms",
        quote="completed step: 12, seconds: 15.516, TFLOP/s/device: 508.371, Tokens/s/device: 1055.949, "
        "total_weights: 4194304, loss: 0.000",
        source=_RECIPES.format("a3b9caba", "a3ultra/llama-3.1-70b/maxtext-pretraining-gke"),
        setup="MaxText, bf16 (the README's default), ici_fsdp_parallelism 8 x dcn_fsdp_parallelism 16 x "
        "dcn_data_parallelism 2 (priced: FSDP over all 256), per_device_batch_size 2, attention cudnn_flash_te, "
        "scanned layers, remat_policy save_dot_except_mlp (q, k, v and the output projection kept), priced as run "
        "(its first price, before the frameworks' policies had names here, took dots_with_no_batch_dims_saveable, "
        "which keeps the MLP's products too), synthetic data",
        work=1.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source="the recipe's launcher (helm chart at a3b9caba): XLA_PYTHON_CLIENT_MEM_FRACTION 0.9",
    ),
    Case(
        id="pax-gpt3-175b-256-a100",
        kind="train",
        gpu="A100 80GB",
        workload="GPT 175B train step, 32 nodes of 8 A100s (FSDP), 6 x 2048 tokens a GPU",
        program=step("gpt3-175b", "train", 1536, 2048, 256, remat="pax:SAVE_NOTHING", mesh="fsdp", xla=_PAX_XLA),
        published=18.29,
        unit="sequences/s",
        quote="| 175B | A100 80G SXM | BF16 | 256    |1    |256    |1    | 6       |   18.29     |        72.92      "
        "   |        N/A       |    |",
        source="NVIDIA/JAX-Toolbox @9889725 rosetta/rosetta/projects/pax/README.md, A100 results (sequences/s of "
        "the global batch; shapes in paxml @39694a0 paxml/contrib/gpu/scripts_gpu/configs.py, GPT175B)",
        setup="Pax (container 23.10), bf16 without Transformer Engine, FSDP over 256 GPUs, Adam, repeated "
        "(scanned) layers, CHECKPOINT_POLICY not set in GPT175B: SAVE_NOTHING inherited "
        "(TransformerLmSpmdAdafactor), nothing_saveable priced",
        work=1536.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source=_PAX_MEMORY,
    ),
    Case(
        id="maxtext-llama2-7b-256-h100",
        kind="train",
        gpu="H100 SXM",
        workload="Llama-2 7B train step, 32 A3 Mega nodes of 8 H100s (FSDP in a node, data parallel across), 4 x "
        "4096 tokens a GPU",
        program=step("llama-7b", "train", 1024, 4096, 256, remat="maxtext:minimal_flash", scan=False, mesh="hsdp",
                     xla=_RECIPES_MEGA_XLA, network=_A3_MEGA_NETWORK),
        published=1500,
        unit="ms",
        quote="completed step: 12, seconds: 1.500, TFLOP/s/device: 503.384, Tokens/s/device: 10922.973, "
        "total_weights: 4194304, loss: 0.000",
        source=_RECIPES.format("d57d2223", "a3mega/llama-2-7b/maxtext-pretraining-gke"),
        setup="MaxText, bf16, ici_fsdp_parallelism 8 x dcn_data_parallelism 32 (hsdp), per_device_batch_size 4, "
        "attention cudnn_flash_te, scan_layers false, remat_policy minimal_flash (priced as run; its first price "
        "took dots_with_no_batch_dims_saveable, as the A3 cases above then), synthetic data, A3 Mega's network",
        work=1.0,
        timed="stream",
        memory_fraction=0.9,
        memory_source="the recipe's launcher (configmap at d57d2223): XLA_PYTHON_CLIENT_MEM_FRACTION 0.9",
    ),
    Case(
        id="nemo-gpt3-175b-fp8-tp4pp8-256-h100",
        kind="train",
        gpu="H100 SXM",
        workload="GPT3 175B train step in fp8, 32 A3 Mega nodes of 8 H100s, 8 pipeline stages (interleaved 2 ways) "
        "of tp 4 x 8 groups, 256 micro-batches",
        program=step("gpt3-175b", "train", 2048, 2048, 256, matmul="fp8", mesh="zero1+tp", tp=4, pp=8, vp=2,
                     accumulate=256, scan=False, overlap="framework", network=_A3_MEGA_NETWORK),
        published=25116,
        unit="ms",
        quote='"train_step_timing in s": 25.115550994873047,',
        source=_RECIPES.format("916aa8ee", "a3mega/GPT3-175B/nemo-pretraining-gke"),
        setup=_NEMO_RECIPE.format("24.07", "gpt3-175b-256gpus-fp8.yaml", "fp8 (hybrid, delayed scaling), TP 4, "
                                  "PP 8 with 2 virtual stages, DP 8, micro-batches of 1 (256 a step), sequence "
                                  "parallel") + "; A3 Mega's network; one step's log line (step 47)",
        work=1.0,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,),),
    ),
    Case(
        id="nemo-mixtral-8x7b-ep8-256-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Mixtral 8x7B train step, 32 nodes of 8 H200s, experts over each node's 8 GPUs, 2 micro-batches of "
        "2 x 4096 tokens a GPU",
        program=step("mixtral-8x7b", "train", 1024, 4096, 256, ep=8, accumulate=2, scan=False, overlap="framework"),
        published=2740,
        unit="ms",
        quote='"train_step_timing in s": 2.7396187782287598,',
        source=_RECIPES.format("bd6c2597", "a3ultra/mixtral-8x7b/nemo-pretraining-gke"),
        setup=_NEMO_RECIPE.format("24.07", "mixtral-8x7b-256gpus-a3u-bf16.yaml", "bf16, EP 8, TP 1, PP 1, DP 256 "
                                  "(priced: ep groups of 8, the rest fsdp over 256), micro-batches of 2 (2 a step), "
                                  "all-to-all dispatch padded to capacity factor 1.0 (priced at this program's 1.25)")
        + "; tokenizer GPT2BPETokenizer, so a vocabulary of about 50k, not Mixtral's 32,000 (priced: well under 1% "
        "less work a step); step 26's line",
        work=1.0,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,),),
    ),
    Case(
        id="nemo-llama3-70b-fp8-tp2pp4-256-h200",
        kind="train",
        gpu="H200 SXM",
        workload="Llama-3.1 70B train step in fp8, 32 nodes of 8 H200s, 4 pipeline stages (interleaved 20 ways) of "
        "tp 2 x 32 groups, 32 micro-batches",
        program=step("llama3-70b", "train", 1024, 8192, 256, matmul="fp8", mesh="zero1+tp", tp=2, pp=4, vp=20,
                     accumulate=32, scan=False, overlap="framework"),
        published=20021,
        unit="ms",
        quote='"train_step_timing in s": 20.021318435668945,',
        source=_RECIPES.format("7fa45181", "a3ultra/llama-3.1-70b/nemo-pretraining-gke"),
        setup=_NEMO_RECIPE.format("24.07", "llama-3.1-70b-256gpus-a3ultra-fp8.yaml", "fp8 (hybrid, delayed "
                                  "scaling, fp8 parameters), TP 2, PP 4 with 20 virtual stages, DP 32, micro-batches "
                                  "of 1 (32 a step), sequence parallel") + "; " + _GPT2_VOCAB + "; step 15's line",
        work=1.0,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        guided="9fa4d01: a pipeline's micro-batches in flight without the head's logits (made while this step's "
        "plan was 1.54x its run's memory, a 128k-row vocabulary)",
        plausible=((_XLA_ORDER,),),
    ),
    Case(
        id="nemo-llama3-70b-fp8-tp2pp4-256-b200",
        kind="train",
        gpu="B200",
        workload="Llama-3.1 70B train step in fp8, 32 nodes of 8 B200s, 4 pipeline stages (interleaved 20 ways) of "
        "tp 2 x 32 groups, 64 micro-batches",
        program=step("llama3-70b", "train", 2048, 8192, 256, matmul="fp8", mesh="zero1+tp", tp=2, pp=4, vp=20,
                     accumulate=64, scan=False, overlap="framework"),
        published=19954,
        unit="ms",
        quote='"train_step_timing in s": 19.954481744766234,',
        source=_RECIPES.format("0211dc17", "a4/llama3-1-70b/nemo-pretraining-gke"),
        setup=_NEMO_RECIPE.format("25.02", "llama3-1-70b-256gpus-a4-fp8.yaml", "fp8 (hybrid, delayed scaling), "
                                  "TP 2, PP 4 with 20 virtual stages, DP 32, micro-batches of 1 (64 a step), "
                                  "sequence parallel, tensor-parallel communication overlap on")
        + "; " + _GPT2_VOCAB + "; step 11's line",
        work=1.0,
        timed="stream",
        memory_fraction=1.0,
        memory_source=_TORCH_MEMORY,
        plausible=((_XLA_ORDER,),),
    ),
]
