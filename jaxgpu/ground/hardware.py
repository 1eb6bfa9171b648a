"""Hardware limits: datasheet peaks of common NVIDIA GPUs and an estimate for CPUs.

Every throughput jaxgpu measures is shown next to a limit from here. GPU figures are
the vendor's datasheet numbers for *dense* math (sparsity figures halved away); they
are leads, not promises: the matmul experiment's measured best is the practical peak.

CPU peaks are an estimate, labelled as such everywhere they appear:

    peak FLOP/s = cores x clock x SIMD lanes (fp32) x FMA units x 2

with cores from the affinity mask, the clock from /proc/cpuinfo (the nominal clock,
not turbo), lanes from the widest vector extension in the CPU flags (AVX-512: 16,
AVX2: 8, NEON: 4) and 2 FMA units per core assumed (true of recent x86 server
cores). fp64 is half the fp32 rate. bf16 uses AMX tiles (1024 FLOP/cycle/core) or
AVX-512 BF16 (2x fp32) where the flags say so; int8 likewise AMX (2048 op/cycle/core)
or VNNI (4x fp32). Other dtypes are taken as the fp32 rate (XLA upcasts them on CPU).
"""

from __future__ import annotations

import dataclasses
import re

from jaxgpu.ground import calibration, devices

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclasses.dataclass(frozen=True)
class CompileTarget:
    """A GPU as XLA:GPU's compiler is told of it, beyond its datasheet (``Hardware`` holds SMs, lanes, clock and
    bandwidth): what ``jaxgpu.pricing.targets`` compiles for on a CPU. ``memory_mib`` is the memory the device
    reports (nvidia-smi's total), which XLA's plans are made against; the rest from the architecture whitepaper
    and the CUDA C++ Programming Guide's limits for the compute capability."""

    name: str  # the --compile-for name ("h200")
    device_kind: str  # as JAX reports the real device ("NVIDIA H200")
    compute_capability: tuple[int, int]
    accelerated: bool  # the architecture-specific instructions (sm_90a: Hopper's wgmma and FP8 Tensor Cores)
    memory_mib: int
    l2_mb: int
    shared_per_sm_kb: int
    shared_per_block_kb: int  # opted in
    source: str

    @classmethod
    def from_dict(cls, d: dict) -> CompileTarget:
        return cls(**{**d, "compute_capability": tuple(d["compute_capability"])})


@dataclasses.dataclass(frozen=True)
class Hardware:
    """Peak rates of one device. ``tflops`` maps a dtype name to dense TFLOP/s (TOP/s for int8).

    A GPU of the table (``GPUS``) is one entry: its datasheet, then ``compiled`` (XLA:GPU's target for it) or
    ``stand_in`` (the card whose plan is priced for it, where XLA:GPU has no target of its own here), ``colour`` (its
    colour in every figure; None: another GPU's ochre), ``aliases`` (what people call it: "h200"), ``kinds`` (the
    ``device_kind`` patterns JAX reports it by), ``lent`` (the device machines this project is lent have it: the
    predictions frozen before a GPU run are of these), ``in_report`` (the report's predicted table prices it) and
    ``lacks`` (precisions it has that the study's presets do not, said where it is priced)."""

    name: str
    tflops: dict[str, float | None]
    memory_gb: float
    memory_bw_gbps: float | None
    cores: int  # SMs on a GPU, cores on a CPU
    clock_ghz: float | None
    source: str
    estimate: bool = False
    lanes_per_core: int | None = None  # fp32 lanes: SIMD width on CPU, FP32 units per SM on GPU
    link_gbps: float | None = None  # GPU to GPU, both directions together, per GPU (NVLink, else PCIe): datasheet
    internode_gbps: float | None = None  # node to node, both directions together, per GPU (its network port)
    node: int = 8  # GPUs a node joins by link_gbps (an 8-GPU DGX or HGX board); past it, internode_gbps joins them
    host_gbps: float | None = None  # host to GPU, each way (its PCIe link): datasheet
    compiled: CompileTarget | None = None
    stand_in: str | None = None
    colour: str | None = None
    aliases: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    lent: bool = False
    in_report: bool = False
    lacks: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> Hardware:
        """The entry as run.json stores it (``dataclasses.asdict``) read back."""
        out = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        if isinstance(out.get("compiled"), dict):
            out["compiled"] = CompileTarget.from_dict(out["compiled"])
        for name in ("aliases", "kinds"):
            if name in out:
                out[name] = tuple(out[name])
        return cls(**out)

    @property
    def kind(self) -> str:
        """Where the figures come from: "estimate" (a CPU, from its flags) or "datasheet" (a GPU)."""
        return "estimate" if self.estimate else "datasheet"

    @property
    def device_bytes(self) -> float:
        """The memory the device reports to JAX (its compile target's MiB, as nvidia-smi reads it: 81,559 MiB, 85.5 GB,
        for an 80 GB H100), else the datasheet's GB: what JAX's preallocated share is a share of."""
        return self.compiled.memory_mib * 2**20 if self.compiled else self.memory_gb * 1e9

    def peak_flops(self, dtype: str) -> float | None:
        """Peak in FLOP/s (op/s for int8) for a dtype name from ``DTYPES``, or None if unknown."""
        value = self.tflops.get(dtype)
        return None if value is None else value * 1e12

    def peak_gflops(self, dtype: str) -> float | None:
        """Peak in GFLOP/s (the unit the reports plot in), or None if unknown."""
        value = self.tflops.get(dtype)
        return None if value is None else value * 1e3

    def share(self, kind: str) -> calibration.Share:
        """The share of its datasheet peak this card's ``kind`` of kernel reaches (``jaxgpu.ground.calibration``:
        "matmul:bf16", "memory", "attention", "link", "network", ...): its own published measurement, else that of
        the card standing in for it (its ``stand_in``, else the H100 SXM's, the share every card was priced at before
        each had its own), named in the ``Share``."""
        for card in (self.name, self.stand_in, "H100 SXM"):
            try:
                got = calibration.share(card, kind) if card else None
            except KeyError:
                continue
            if got:
                return got if card == self.name else dataclasses.replace(got, card=self.name,
                                                                         stand_in=got.stand_in or card)
        raise KeyError(f"no calibration entry of {kind} for the {self.name}")

    def ridge_point(self, dtype: str = "fp32") -> float | None:
        """FLOP per byte above which a kernel is compute-bound on this device."""
        peak = self.peak_flops(dtype)
        if peak is None or not self.memory_bw_gbps:
            return None
        return peak / (self.memory_bw_gbps * 1e9)


# link_gbps: NVLink per GPU where eight are joined by it (H100 and H200 SXM: NVLink 4, 900 GB/s; A100 SXM: NVLink 3,
# 600 GB/s), else PCIe (L4 and RTX 4090: Gen4 x16, 64 GB/s; H200 NVL: its NVLink bridge joins 2 or 4 cards, so
# eight talk over PCIe Gen5 x16, 128 GB/s), from the same datasheets.
# host_gbps: the PCIe link to the host, one way (the datasheets give both ways together): Gen5 x16 on the H100 and
# H200 (128 GB/s, so 64 each way), Gen4 x16 on the A100, L4 and RTX 4090 (64 GB/s, so 32 each way).
# internode_gbps: a node's network port per GPU, as NVIDIA's 8-GPU systems have one: DGX H100 and DGX H200, eight
# single-port ConnectX-7 at 400 Gb/s (50 GB/s each way); DGX A100, eight single-port ConnectX-6 at 200 Gb/s HDR
# (25 GB/s each way) (the DGX H100/H200 and DGX A100 datasheets). None: no such system in the table's sources.
# Sources: NVIDIA H100 Tensor Core GPU datasheet (SXM5 column) and H200 datasheet
# (SXM); A100 datasheet (80GB SXM); L4 datasheet; Ada Lovelace architecture whitepaper
# v2.02, Table 2 (RTX 4090, FP32-accumulate rates). fp64 is the FP64 Tensor Core rate
# where the part has one (what cuBLAS DGEMM reaches), else the vector rate (Ada: 1/64 fp32).
# compiled: the H100 and H200 datasheets (SM counts, boost clocks, memory, bandwidth), the Hopper and Ampere
# architecture whitepapers (50 MB and 40 MB of L2, 128 and 64 FP32 lanes per SM), the CUDA C++ Programming Guide's
# limits per compute capability (228 KB of shared memory per SM on 9.0, 227 KB of it to one block; 164 and 163 KB on
# 8.0). The H200's memory is what nvidia-smi reported on the H200 machine this project is lent (143771 MiB), and so
# is its L2 (60 MB, as PyTorch reads it there; the whitepaper's figure for the H100 SXM5 is 50 MB); the others are
# the capacities nvidia-smi shows for those parts.
# stand_in: a card with no XLA:GPU target of its own is priced on the plan of the nearest: the H200 NVL is the H200's
# GH100 at a lower power limit; Ada (L4, RTX 4090, compute capability 8.9) is planned as Ampere's A100 (8.0), whose
# GEMM and fusion choices Ada shares but FP8 (priced at the wider format there); the A100 40GB is the A100's GA100
# with less memory, which its own capacity decides the fit against.
# colour: each GPU its own hue (Okabe-Ito and ColorBrewer Dark2 hues, which stay apart for the common colour-vision
# deficiencies and in grey print); a card of the same processor shares its sibling's (jaxgpu.records.palette).
_HOPPER = "Hopper whitepaper, CUDA guide (cc 9.0)"
_H100 = Hardware(
    "H100 SXM", {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9,
                 "int8": 1978.9},
    80, 3350, 132, 1.98, "NVIDIA H100 datasheet (SXM5), dense", lanes_per_core=128, link_gbps=900,
    internode_gbps=100, host_gbps=64,
    compiled=CompileTarget("h100", "NVIDIA H100 80GB HBM3", (9, 0), True, 81559, 50, 228, 227,
                           f"H100 datasheet (SXM5), {_HOPPER}"),
    colour="#7b3294", kinds=("H100",), lent=True, in_report=True)
_A100 = Hardware(
    "A100 80GB", {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp8": None,
                  "int8": 624.0},
    80, 2039, 108, 1.41, "NVIDIA A100 datasheet (80GB SXM), dense", lanes_per_core=64, link_gbps=600,
    internode_gbps=50, host_gbps=32,
    compiled=CompileTarget("a100", "NVIDIA A100-SXM4-80GB", (8, 0), False, 81920, 40, 164, 163,
                           "A100 datasheet (80GB SXM), Ampere whitepaper, CUDA guide (cc 8.0)"),
    colour="#009e73", kinds=("A100.*80", "A100"), in_report=True)

GPUS: dict[str, Hardware] = {hw.name: hw for hw in (
    _H100,
    # The H200 is the H100's processor with more and faster memory: the same arithmetic rates.
    dataclasses.replace(
        _H100, name="H200 SXM", memory_gb=141, memory_bw_gbps=4800, source="NVIDIA H200 datasheet (SXM), dense",
        compiled=CompileTarget("h200", "NVIDIA H200", (9, 0), True, 143771, 60, 228, 227,
                               f"H200 datasheet (SXM), {_HOPPER}; L2 as the lent H200 reports it"),
        colour="#d55e00", kinds=("H200",)),
    _A100,
    Hardware(
        "L4", {"fp64": 0.47, "fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5,
               "int8": 242.5},
        24, 300, 58, 2.04, "NVIDIA L4 datasheet, dense (fp64: 1/64 of fp32, Ada)", lanes_per_core=128,
        link_gbps=64, host_gbps=32, stand_in="A100 80GB", kinds=(r"\bL4\b",), in_report=True),
    Hardware(
        "RTX 4090", {"fp64": 1.29, "fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3,
                     "int8": 660.6},
        24, 1008, 128, 2.52, "Ada Lovelace whitepaper, Table 2, FP32 accumulate, dense", lanes_per_core=128,
        link_gbps=64, host_gbps=32, stand_in="A100 80GB", aliases=("geforce rtx 4090",), kinds=("4090",),
        in_report=True),
    # The A100 40GB (SXM) is the same processor with 40 GB at 1,555 GB/s (the A100 datasheet's 40GB SXM column):
    # what many published runs of 2020-2023 trained on.
    dataclasses.replace(_A100, name="A100 40GB", memory_gb=40, memory_bw_gbps=1555,
                        source="NVIDIA A100 datasheet (40GB SXM), dense", compiled=None, stand_in="A100 80GB",
                        kinds=("A100.*40",), in_report=False),
    # The H200 NVL (PCIe card, NVLink bridge) is the same GH100 processor at a lower power limit:
    # the NVL column of the H200 datasheet, whose Tensor Core figures are with sparsity (halved here).
    Hardware(
        "H200 NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5,
                     "int8": 1670.5},
        141, 4800, 132, None, "NVIDIA H200 datasheet (NVL), dense", lanes_per_core=128, link_gbps=128,
        host_gbps=64, stand_in="H200 SXM", colour="#d55e00", kinds=("H200 NVL",)),
    # The B200 (Blackwell, one GPU of an HGX or DGX B200). NVIDIA Blackwell datasheet 4204213 (Oct 2025): FP64 37
    # (one row for vector and Tensor Core), FP32 75, 180 GB at 7.7 TB/s (the DGX B200 datasheet: 1,440 GB and
    # 64 TB/s for eight, 8 TB/s each), PCIe Gen5; the Blackwell architecture technical brief v2.1: TF32 2.2, BF16 and
    # FP16 4.5, FP8 and INT8 9 PFLOPS with sparsity (halved here), NVLink 5 at 1.8 TB/s a GPU; the DGX B200: eight
    # ConnectX-7 at 400 Gb/s, one a GPU. 148 SMs (NVIDIA's CUDA MPS blog); no boost clock is published: 1.965 GHz is
    # nvidia-smi's maximum SM clock, and 183359 MiB and 126 MB of L2 what nvidia-smi and torch report, in public
    # logs; the CUDA C++ Programming Guide's limits for compute capability 10.0 (228 KB of shared memory per SM).
    Hardware(
        "B200", {"fp64": 37.0, "fp32": 75.0, "tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0,
                 "int8": 4500.0},
        180, 7700, 148, 1.965, "NVIDIA Blackwell datasheet and architecture technical brief, dense",
        lanes_per_core=128, link_gbps=1800, internode_gbps=100, host_gbps=64,
        compiled=CompileTarget("b200", "NVIDIA B200", (10, 0), True, 183359, 126, 228, 227,
                               "Blackwell datasheet, CUDA guide (cc 10.0); memory, L2 and clock as public nvidia-smi "
                               "and torch logs report them"),
        kinds=("B200",), lacks="fp4 (NVFP4, 9 PFLOPS dense) and fp6, which the study's presets do not have"),
    # The H100 PCIe: GH100 with 114 SMs (Hopper whitepaper) at a 1.755 GHz boost, 80 GB HBM2e at 2,000 GB/s, FP64 25.6
    # and 51.2 on its Tensor Cores, FP32 51.2 (H100 PCIe product brief PB-11133-001_v02); TF32 756, BF16 and FP16 1,513,
    # FP8 and INT8 3,026 with sparsity (the H100 datasheet's PCIe column, halved here). Its NVLink bridge joins two
    # cards; eight talk over PCIe Gen5 x16 (128 GB/s). 81559 MiB as nvidia-smi reports it in public logs.
    Hardware(
        "H100 PCIe", {"fp64": 51.2, "fp32": 51.2, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0,
                      "int8": 1513.0},
        80, 2000, 114, 1.755, "NVIDIA H100 PCIe product brief and H100 datasheet (PCIe), dense", lanes_per_core=128,
        link_gbps=128, host_gbps=64,
        compiled=CompileTarget("h100-pcie", "NVIDIA H100 PCIe", (9, 0), True, 81559, 50, 228, 227,
                               f"H100 PCIe product brief, {_HOPPER}; memory as nvidia-smi reports it"),
        colour="#7b3294", kinds=("H100 PCIe",)),
    # The H100 NVL (a PCIe card, NVLink bridge): the H100 datasheet's NVL column, FP64 60 on its Tensor Cores, FP32
    # 60, TF32 835, BF16 and FP16 1,671, FP8 and INT8 3,341 with sparsity (halved here); 94 GB HBM3 at 3,938 GB/s
    # and a 1.785 GHz boost (H100 NVL product brief PB-11773-001_v01); 132 SMs, 95830 MiB and the full GH100's
    # 60 MB of L2 as torch and nvidia-smi report them in public logs. Eight talk over PCIe Gen5 x16 (128 GB/s).
    Hardware(
        "H100 NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5,
                     "int8": 1670.5},
        94, 3938, 132, 1.785, "NVIDIA H100 datasheet (NVL) and H100 NVL product brief, dense", lanes_per_core=128,
        link_gbps=128, host_gbps=64,
        compiled=CompileTarget("h100-nvl", "NVIDIA H100 NVL", (9, 0), True, 95830, 60, 228, 227,
                               f"H100 NVL product brief, {_HOPPER}; memory and L2 as public logs report them"),
        colour="#7b3294", kinds=("H100 NVL",)),
    # The L40S (Ada, a PCIe card): FP32 91.6, TF32 183, BF16 and FP16 362, FP8 and INT8 733 dense, 48 GB GDDR6 at
    # 864 GB/s, PCIe Gen4 x16, no NVLink (L40S product brief PB-11470-001_v02); FP64 is not listed: 1/64 of FP32, as
    # on every Ada part. 142 SMs, a 2.52 GHz boost, 46068 MiB and 96 MB of L2 as deviceQuery and nvidia-smi report
    # them in public logs; the CUDA guide's limits for compute capability 8.9 (100 KB of shared memory per SM).
    Hardware(
        "L40S", {"fp64": 1.43, "fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0,
                 "int8": 733.0},
        48, 864, 142, 2.52, "NVIDIA L40S product brief, dense (fp64: 1/64 of fp32, Ada)", lanes_per_core=128,
        link_gbps=64, host_gbps=32,
        compiled=CompileTarget("l40s", "NVIDIA L40S", (8, 9), False, 46068, 96, 100, 99,
                               "L40S product brief, CUDA guide (cc 8.9); memory and L2 as public logs report them"),
        kinds=("L40S",)),
)}

# the card a question that names none is asked of: the lent machine's
DEFAULT_GPU = "H200 SXM"


def _matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _by_kind(text: str, squashed: bool = False) -> Hardware | None:
    """The card whose ``kinds`` pattern finds ``text``, the most specific (longest) pattern winning: "NVIDIA H200 NVL"
    is the H200 NVL, not the H200 SXM whose pattern "H200" it also holds."""
    found = [(len(p), hw) for hw in GPUS.values() for p in hw.kinds
             if _matches(p.replace(" ", "") if squashed else p, text)]
    return max(found, key=lambda f: f[0])[1] if found else None


def gpu_spec(device_kind: str) -> Hardware | None:
    """The datasheet entry for a JAX ``device_kind`` such as "NVIDIA H200", or None."""
    return _by_kind(device_kind)


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def with_network(hw: Hardware, gbps: float) -> Hardware:
    """``hw`` in a cluster whose nodes give each GPU ``gbps`` Gb/s each way to other nodes (``internode_gbps``, both
    ways, in GB/s: gbps x 2 / 8): a cloud VM's NICs shared among its GPUs rather than a DGX's port a GPU. 0 keeps the
    table's."""
    return dataclasses.replace(hw, internode_gbps=gbps * 2 / 8) if gbps else hw


def find_gpu(name: str) -> Hardware:
    """The hardware table's GPU a person names, however they spell it: "H200", "h200", "h200 sxm", "H100-SXM",
    "a100", "rtx4090", or a JAX ``device_kind`` ("NVIDIA H200"). The one resolver of every command's GPU names.

    Raises:
      KeyError: no GPU matches; the message says which one was probably meant, and lists them all.
    """
    want = _squash(name)
    if want:
        for hw in GPUS.values():
            if want in {_squash(n) for n in (hw.name, *hw.aliases, *([hw.compiled.name] if hw.compiled else ()))}:
                return hw
        # a device kind ("NVIDIA L4"), or the family alone ("h200", "nvidia h200"), which names its SXM part
        found = _by_kind(name) or _by_kind(want, squashed=True)
        if found:
            return found
    import difflib

    near = difflib.get_close_matches(want, {_squash(n): n for n in GPUS}, n=1, cutoff=0.5)
    hint = f"did you mean {dict((_squash(n), n) for n in GPUS)[near[0]]!r}? " if near else ""
    raise KeyError(f"unknown GPU {name!r}; {hint}known: {', '.join(GPUS)}")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cpu_clock_ghz() -> float | None:
    for path in ("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency",
                 "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"):
        try:
            with open(path, encoding="utf-8") as f:
                return int(f.read().strip()) / 1e6  # kHz
        except (OSError, ValueError):
            continue
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":", 1)[1]) / 1e3
    except (OSError, ValueError):
        pass
    return None


def cpu_estimate(cores: int | None = None, clock_ghz: float | None = None,
                 flags: set[str] | None = None, fma_units: int = 2) -> Hardware:
    """Estimated peak of this machine's CPU from cores x clock x lanes x FMA units x 2.

    Arguments override what is read from the machine (tests use them).
    """
    cores = cores or devices.cpu_count()
    clock = clock_ghz or _cpu_clock_ghz() or 2.0
    flags = _cpu_flags() if flags is None else flags
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    fp32 = cores * clock * 1e9 * lanes * fma_units * 2
    per_cycle = cores * clock * 1e9
    if "amx_bf16" in flags:
        bf16 = per_cycle * 1024
    elif "avx512_bf16" in flags:
        bf16 = 2 * fp32
    else:
        bf16 = fp32
    if "amx_int8" in flags:
        int8 = per_cycle * 2048
    elif "avx512_vnni" in flags or "avx_vnni" in flags:
        int8 = 4 * fp32
    else:
        int8 = fp32
    tflops = {"fp64": fp32 / 2e12, "fp32": fp32 / 1e12, "tf32": fp32 / 1e12, "bf16": bf16 / 1e12,
              "fp16": fp32 / 1e12, "fp8": fp32 / 1e12, "int8": int8 / 1e12}
    isa = "AVX-512" if lanes == 16 else "AVX2" if lanes == 8 else "128-bit SIMD"
    mem = devices.host_memory_bytes()
    return Hardware(
        name=f"{devices.cpu_model()} ({cores} cores)",
        tflops=tflops,
        memory_gb=(mem or 0) / 1e9,
        memory_bw_gbps=None,  # not knowable from flags; the bandwidth experiment measures it
        cores=cores,
        clock_ghz=clock,
        source=f"estimate: {cores} cores x {clock:.2f} GHz x {lanes} fp32 lanes ({isa}) x {fma_units} FMA x 2",
        estimate=True,
        lanes_per_core=lanes,
    )


def for_device(platform_name: str, device_kind: str) -> Hardware | None:
    """The limits of the device a run used: the GPU table entry or the CPU estimate."""
    if platform_name == "cpu":
        return cpu_estimate()
    return gpu_spec(device_kind)
