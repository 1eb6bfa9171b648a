"""What share of each card's datasheet peak each kind of kernel reaches: the hardware table's other half (its entries
are in ``jaxgpu.ground.hardware``), published kernel-level measurements, one entry each, with its source and the line
it was read from (docs/research/calibration.md holds the table, the rule that picked each entry and what each moved).

``share(card, kind)`` is the ``Share`` a price uses: the card's own entry of that kind, else the entry of the card that
stands in for it (``STAND_INS``, in order), which the share names so the output can say so. Kinds: "matmul:bf16",
"matmul:fp8", "matmul:tf32", "matmul:fp32" (fp16 and int8 take bf16's, fp64 takes fp32's: the same units); "memory";
"attention" (a fused kernel's forward and backward together, by sequence length); "link" (ring collectives over
NVLink), "link:all-reduce" (an all-reduce, which NVLink's switches can reduce in place); "network" (a collective's
rate a GPU across nodes, over its network port's line rate); "interference" (the slowdown of compute while a
collective runs beside it). No entry comes from a whole step's time and nothing is fitted to one: a test fails on an
entry that names a whole-step published case or has no source. JAX-free.
"""

from __future__ import annotations

import dataclasses
import math

# The rule, one sentence a kind, written before anything was re-priced with it (docs/research/calibration.md)
RULE = {
    "matmul": "the best rate of a published maximum-achievable-matmul search (MAMF) for the card and input type, "
              "else the largest of a published torch.mm table's square sizes, over the hardware table's dense peak "
              "(the price models a shape's own losses: wave fill, tiles, split-K)",
    "memory": "a copy-like kernel's rate (bytes read and written) at the largest size a source gives, over the "
              "datasheet's bandwidth (a benchmark that limits its own occupancy by design is left out)",
    "attention": "cuDNN's fused attention (JAX's on a GPU), bf16, head size 128, causal, forward and backward "
                 "together (the backward 2.5 times the forward's FLOPs) by sequence length, over the bf16 peak; a "
                 "card measured forward only takes the backward / forward ratio of the nearest card measured both "
                 "ways; where only a band is published, the band",
    "link": "the median of a node's ring all-reduce, all-gather and reduce-scatter bus bandwidth at the largest "
            "size published, over one direction of the card's NVLink (an all-reduce: with NVLink SHARP where the "
            "source's node has it, as NCCL runs it)",
    "network": "a collective's rate a GPU across nodes at the largest size published, over the port's line rate",
    "interference": "the mean slowdown of compute kernels while a collective runs beside them, measured kernel by "
                    "kernel",
}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One published kernel-level measurement: the card, the kind, the share of the peak it reached (``points``:
    (sequence length, share) for attention; a band (low, middle, high) where that is what is published), the figure as
    published, the peak it is over, the source (a repository at a commit and its file, or a paper or page), the line
    it was read from, and the published case it is, if any (that case is then a calibration case, not scored)."""

    card: str
    kind: str
    share: float
    measured: str
    peak: str
    source: str
    quote: str
    case: str = ""
    points: tuple[tuple[int, float], ...] = ()
    band: tuple[float, float, float] = ()


@dataclasses.dataclass(frozen=True)
class Share:
    """The share a price uses for ``kind`` on ``card``: its value, the entry it comes from, and ``stand_in``: the
    card whose entry stands in (None: the card's own)."""

    card: str
    kind: str
    value: float
    entry: Entry
    stand_in: str | None = None

    def said(self) -> str:
        """The share and where it comes from, as a breakdown line says it."""
        whose = f"{self.stand_in}'s, standing in" if self.stand_in else self.card + "'s"
        return f"{self.value:.3f} of peak ({whose}: {self.entry.source})"


def combined(forward: float, backward: float) -> float:
    """A fused attention's forward and backward rate together: the backward does 2.5 times the forward's FLOPs
    (FlashAttention's count, which the sources use)."""
    return 3.5 / (1 / forward + 2.5 / backward)


_MAMF = ("stas00/ml-engineering @744d01e compute/accelerator/README.md (MAMF table: torch.mm, the best shape of a "
         "search)")
_ZZC = "zzc0721/torch-performance-test-data @9d82827 database.md (the largest of square torch.mm sizes 1024-10240)"
_MLENG_NET = "stas00/ml-engineering @744d01e network/README.md"
_CUDNN_H200 = ("NVIDIA/cudnn-frontend @3929da2 benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/"
               "llama3.1_20260227_034703.csv (cuDNN 9.19.1; 64 query heads, 8 KV, head 128, batch 1)")
_CUDNN_B200 = ("NVIDIA/cudnn-frontend @0501eca benchmark/attention_inference/results/prefill_sweep/b200/"
               "prefill_sweep_20260918_221024.csv (cuDNN 9.27.0, forward; the mask not written: an inference "
               "benchmark's context phase, causal taken)")
_CUDNN_GB200 = ("NVIDIA/cudnn-frontend @3929da2 benchmark/sdpa_benchmark_training/results/llama3.1/gb200/"
                "llama3.1_20260424_100750.csv (causal, 16384: forward 1708, backward 1328 TFLOP/s)")
_GB200_RATIO = 1328 / 1708  # backward over forward, the nearest card measured both ways (GB200's Blackwell)
# cuDNN on an H200, causal bf16 (forward, backward) TFLOP/s by sequence length; B200's forward by length
_H200_ATTN = {2048: (484.0, 370.0), 4096: (591.0, 474.0), 8192: (644.0, 541.0), 16384: (673.0, 579.0),
              32768: (688.0, 581.0)}
_B200_FWD = {2048: 914.991, 4096: 1201.542, 8192: 1401.241, 16384: 1488.046}


def _mm(card, kind, measured, peak, source, quote, case=""):
    return Entry(card, f"matmul:{kind}", measured / peak, f"{measured} TFLOP/s", f"{peak} TFLOP/s", source, quote, case)


TABLE: tuple[Entry, ...] = (
    _mm("A100 80GB", "bf16", 271.2, 312.0, _MAMF,
        "| NVIDIA A100 SXM  |  271.2 |    312 |      86.9% |  1024x10240x5120 | 2.6.0+cu126 |", "mamf-a100-bf16"),
    _mm("A100 80GB", "fp32", 19.18, 19.5, _ZZC, "| NVIDIA A100 SXM4 80GB | 19.18 |  | 258.74 | 264.53 |"),
    _mm("H100 SXM", "bf16", 794.5, 989.4, _MAMF,
        "| NVIDIA H100 SXM  |  794.5 |    989 |      80.3% |  2048x2048x13312 | 2.7.0+cu126 | H200 is the same |",
        "mamf-h100-bf16"),
    _mm("H100 SXM", "fp8", 1402.6, 1978.9, _MAMF,
        "| NVIDIA H100 SXM  | 1402.6 |   1979 |      70.9% |  1024x9216x14336 | 2.7.0+cu126 |", "mamf-h100-fp8"),
    _mm("H100 SXM", "tf32", 402.15, 494.7, _ZZC + ", issue #79: 4096", "| NVIDIA H100 80GB HBM3 | 51.88 | 402.15 | "
        "760.04 | 797.51 |", "torch-mm-h100-tf32-4096"),
    _mm("H100 SXM", "fp32", 51.88, 67.0, _ZZC + ", issue #79: 4096", "| NVIDIA H100 80GB HBM3 | 51.88 | 402.15 | "
        "760.04 | 797.51 |", "torch-mm-h100-fp32-4096"),
    _mm("H200 SXM", "bf16", 794.5, 989.4, _MAMF + ": the H100's row says the H200 is the same",
        "| NVIDIA H100 SXM  |  794.5 |    989 |      80.3% |  2048x2048x13312 | 2.7.0+cu126 | H200 is the same |",
        "mamf-h100-bf16"),
    _mm("H200 SXM", "fp8", 1453.4, 1978.9, _MAMF,
        "| NVIDIA H200 SXM  | 1453.4 |   1979 |      73.4% |  1280x4096x12032 | 2.7.1+cu128 |", "mamf-h200-fp8"),
    _mm("H200 SXM", "fp32", 51.34, 67.0, _ZZC, "| NVIDIA H200 | 51.34 |  | 759.40 | 790.29 | docker |"),
    _mm("B200", "bf16", 1745.0, 2250.0, _MAMF,
        "| NVIDIA B200 SXM  | 1745.0 |   2250 |      77.6% |  1792x16128x3072 | 2.7.1+cu128 |"),
    _mm("B200", "fp8", 3432.5, 4500.0, _MAMF,
        "| NVIDIA B200 SXM  | 3432.5 |   4500 |      76.3% |  15360x4096x3072 | 2.7.1+cu128 |"),
    _mm("B200", "fp32", 66.24, 75.0, _ZZC, "| NVIDIA B200 180GB | 66.24 |  | 1627.64 | 1696.03 | GCP a4-highgpu-8g"),
    _mm("L40S", "bf16", 269.15, 362.05, _ZZC, "| NVIDIA L40S | 46.88 |  | 264.02 | 269.15 | docker |"),
    _mm("L40S", "fp32", 46.88, 91.6, _ZZC, "| NVIDIA L40S | 46.88 |  | 264.02 | 269.15 | docker |"),
    _mm("L4", "bf16", 70.89, 121.0, _ZZC, "| NVIDIA L4 | 15.38 | 31.88 | 68.83 | 70.89 |"),
    _mm("L4", "tf32", 31.88, 60.0, _ZZC, "| NVIDIA L4 | 15.38 | 31.88 | 68.83 | 70.89 |"),
    _mm("L4", "fp32", 15.38, 30.3, _ZZC, "| NVIDIA L4 | 15.38 | 31.88 | 68.83 | 70.89 |"),
    # the 4090 runs above the boost clock its whitepaper's peaks assume: shares of 1 and more are what it measures
    _mm("RTX 4090", "bf16", 164.81, 165.2, _ZZC, "| NVIDIA GeForce RTX 4090 | 53.84 | 85.65 | 168.38 | 164.81 |"),
    _mm("RTX 4090", "tf32", 85.65, 82.6, _ZZC, "| NVIDIA GeForce RTX 4090 | 53.84 | 85.65 | 168.38 | 164.81 |"),
    _mm("RTX 4090", "fp32", 53.84, 82.6, _ZZC, "| NVIDIA GeForce RTX 4090 | 53.84 | 85.65 | 168.38 | 164.81 |"),
    Entry("A100 80GB", "memory", 1709.36 / 2039, "1709.36 GB/s (copy, 2^25 doubles an array)", "2039 GB/s",
          "ukri-bench/benchmark-BabelStream @464294e README.md (BabelStream 5.0 CUDA on Tursa's A100-SXM4-80GB)",
          "Copy        1709360.800 0.00031     0.00032     0.00032", "babelstream-a100-copy"),
    Entry("A100 40GB", "memory", 1378.8 / 1555, "1378.800 GB/s (a float4 copy, 2^28 + 2 floats)", "1555 GB/s",
          "xytpai/nvbench @017724f README.md (the A100-40GB column)", "| float 4 | 921.850 | 1378.800 |"),
    Entry("H100 SXM", "memory", 3010 / 3350, "3.01 TB/s (a softmax, reduction 131K, fp32)", "3350 GB/s",
          "Dao-AILab/quack @c8ec317 media/2025-07-10-membound-sol.md",
          "We achieve DRAM throughput (device memory throughput) at 3.01 TB/s which is 89.7% of the peak DRAM "
          "throughput."),
    Entry("H200 SXM", "memory", 4.3 / 4.8, "4.3 TB/s (a device copy of 8.6 GB)", "4800 GB/s",
          "the device tool's KINDS.md (a copy timed on the H200 this project is lent)",
          "about 4.3 TB/s counting bytes read and written (8.6 GB in 2.0 ms)"),
    Entry("RTX 4090", "memory", 921.85 / 1008, "921.850 GB/s (a float4 copy, 2^28 + 2 floats)", "1008 GB/s",
          "xytpai/nvbench @017724f README.md (the RTX 4090 column)", "| float 4 | 921.850 | 1378.800 |"),
    Entry("A100 80GB", "attention", 0.615, "50-73% of the peak (forward and backward)", "312 TFLOP/s",
          "Dao 2023, arXiv 2307.08691 (FlashAttention-2's abstract; no cuDNN measurement on an A100 SXM found)",
          "FlashAttention-2 ... reaching 50-73% of the theoretical maximum FLOPs/s on A100", band=(0.50, 0.615, 0.73)),
    Entry("H200 SXM", "attention", combined(*_H200_ATTN[8192]) / 989.4,
          "causal bf16 forward / backward TFLOP/s: " + ", ".join(f"{n}: {f:g} / {b:g}" for n, (f, b) in
                                                                  _H200_ATTN.items()), "989.4 TFLOP/s", _CUDNN_H200,
          "llama3.1,llama3.1,cudnn,bfloat16,top_left,1,32768,32768,64,8,128,128,both,False,25.566,75.688,688.000,"
          "581.000,0.000,10,,True,,NVIDIA H200,1.19.0,91901",
          points=tuple((n, combined(f, b) / 989.4) for n, (f, b) in _H200_ATTN.items())),
    Entry("B200", "attention", combined(_B200_FWD[8192], _B200_FWD[8192] * _GB200_RATIO) / 2250,
          "bf16 forward TFLOP/s: " + ", ".join(f"{n}: {f:g}" for n, f in _B200_FWD.items())
          + f"; the backward at {_GB200_RATIO:.3f} of it (GB200's, {_CUDNN_GB200})", "2250 TFLOP/s", _CUDNN_B200,
          "prefill_sweep,llama3.1,context,cudnn,bfloat16,bfloat16,1,16384,16384,64,8,128,128,gqa,,16,2.955586,"
          "1488.046,204.352,2.5544,20,True,,NVIDIA B200,cudnn 9.27.0,",
          points=tuple((n, combined(f, f * _GB200_RATIO) / 2250) for n, f in _B200_FWD.items())),
    Entry("H200 SXM", "link", 362.9 / 450, "ring all-reduce 367.2, all-gather 361.4, reduce-scatter 362.9 GB/s of "
          "bus bandwidth at 16 GiB, 8 GPUs (the median)", "450 GB/s (NVLink 4, one direction)", _MLENG_NET,
          "| reduce-scatter                   | Ring | 362.9GBps |          81% |"),
    Entry("H200 SXM", "link:all-reduce", 480.0 / 450, "480.0 GB/s of bus bandwidth (NVLink SHARP) at 16 GiB",
          "450 GB/s (NVLink 4, one direction)", _MLENG_NET,
          "| all-reduce, `NCCL_NVLS_ENABLE=1` | NVLS | 480.0GBps |         107% |"),
    Entry("A100 40GB", "link", 230.77 / 300, "230.77 GB/s of all-reduce bus bandwidth at 1 GiB, 8 GPUs (p4dn)",
          "300 GB/s (NVLink 3, one direction)", "NVIDIA/nccl issue 527 (NCCL 2.9.9, nccl-tests all_reduce_perf)",
          "   1   1073741824     268435456     float     sum   8142.6  131.87  230.77  2e-07"),
    Entry("B200", "link", 682.2 / 900, "682.2 GB/s of ring all-reduce bus bandwidth (NVLS off) at 8 GiB, 8 GPUs",
          "900 GB/s (NVLink 5, one direction)", _MLENG_NET,
          "|    8 | NVLS            | 838.0GBps |       682.2GBps |           1.23x |"),
    Entry("B200", "link:all-reduce", 838.0 / 900, "838.0 GB/s of all-reduce bus bandwidth (NVLS) at 8 GiB, 8 GPUs",
          "900 GB/s (NVLink 5, one direction)", _MLENG_NET,
          "|    8 | NVLS            | 838.0GBps |       682.2GBps |           1.23x |"),
    Entry("B200", "network", 36.95 / 50, "36.95 GB/s a GPU of all-reduce across 4 nodes of 8 at 16 GiB (EFA, 8 x "
          "400 Gb/s a node)", "50 GB/s (400 Gb/s a GPU)", _MLENG_NET,
          "|   16GiB |                     381.80 |              36.95 |     73.9% |"),
    Entry("H100 SXM", "network", 338.82 / 15 / 25, "338.82 GB/s of all-reduce bus bandwidth over 2 nodes of 8 at "
          "8 GiB: 22.59 GB/s a GPU (bus bandwidth x (nodes - 1) / (GPUs - 1))", "25 GB/s (A3 Mega's 200 Gb/s a GPU)",
          "lessizzmore/create-a3mega-ztan-fork @02dd8f4 ztan-NCCL-test-result (A3 Mega, by the repository's name)",
          "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0"),
    Entry("any", "interference", 0.189, "18.9% slower compute on average while a collective runs beside it (at most "
          "40%), on 4 A100s, 4 H100s and two AMD cards", "the compute alone", "Lee et al. 2025, arXiv 2507.03114 "
          "(Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning)",
          "overlapping computation and communication can result in an average computational slowdown of 18.9%, with "
          "a maximum of 40.0% slowdown"),
)
# the card whose entry stands in where a card has none of a kind, in order: the same die first (an SXM card's PCIe
# and NVL parts, the A100's two memories, the H100 and H200), then the nearest architecture
STAND_INS = {
    "H100 SXM": ("H200 SXM",), "H200 SXM": ("H100 SXM",), "B200": ("H200 SXM",),
    "A100 80GB": ("A100 40GB", "H100 SXM"), "A100 40GB": ("A100 80GB", "H100 SXM"),
    "H100 PCIe": ("H100 SXM", "H200 SXM"), "H100 NVL": ("H100 SXM", "H200 SXM"), "H200 NVL": ("H200 SXM", "H100 SXM"),
    "L40S": ("RTX 4090", "A100 80GB"), "L4": ("RTX 4090", "A100 80GB"), "RTX 4090": ("L40S", "A100 80GB"),
}
_SAME_UNITS = {"matmul:fp16": "matmul:bf16", "matmul:int8": "matmul:bf16", "matmul:fp64": "matmul:fp32",
               "link:all-reduce": "link"}
_BY = {(e.card, e.kind): e for e in TABLE}


def share(card: str, kind: str) -> Share:
    """The share ``card``'s ``kind`` of kernel reaches: its own entry, else its stand-ins' in order (and theirs after
    them); fp16 and int8 products take a card's bf16 share, fp64 its fp32, an all-reduce its ring's, where it has
    none of their own; a kind measured for no card but "any" takes that.

    Raises:
      KeyError: neither the card nor any stand-in has an entry of the kind.
    """
    order = [card]
    for who in order:  # the stand-ins' own stand-ins after them, each once
        order += [c for c in STAND_INS.get(who, ()) if c not in order]
    for who in (*order, "any"):
        for kind_ in (kind, _SAME_UNITS.get(kind)):
            if kind_ and (who, kind_) in _BY:
                e = _BY[(who, kind_)]
                return Share(card, kind, e.share, e, None if who == card else who)
    raise KeyError(f"no calibration entry of {kind} for the {card} or a card standing in for it")


def attention_at(card: str, length: int) -> tuple[float, float, float]:
    """(lowest, at ``length``, highest) share of a fused attention's forward and backward on ``card`` (its stand-in's
    where it has none): the measured curve interpolated in log length, clamped to its ends; a published band as it
    is."""
    e = share(card, "attention").entry
    if e.band:
        return e.band
    pts = sorted(e.points)
    values = [v for _, v in pts]
    if length <= pts[0][0]:
        return min(values), pts[0][1], max(values)
    if length >= pts[-1][0]:
        return min(values), pts[-1][1], max(values)
    for (n0, v0), (n1, v1) in zip(pts, pts[1:]):
        if n0 <= length <= n1:
            t = (math.log(length) - math.log(n0)) / (math.log(n1) - math.log(n0))
            return min(values), v0 + t * (v1 - v0), max(values)
    return min(values), e.share, max(values)
