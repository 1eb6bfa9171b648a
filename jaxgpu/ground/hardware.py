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

from jaxgpu.ground import devices

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """Peak rates of one device. ``tflops`` maps a dtype name to dense TFLOP/s (TOP/s for int8)."""

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
    host_gbps: float | None = None  # host to GPU, each way (its PCIe link): datasheet

    @classmethod
    def from_dict(cls, d: dict) -> Hardware:
        """The entry as run.json stores it (``dataclasses.asdict``) read back."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    @property
    def kind(self) -> str:
        """Where the figures come from: "estimate" (a CPU, from its flags) or "datasheet" (a GPU)."""
        return "estimate" if self.estimate else "datasheet"

    def peak_flops(self, dtype: str) -> float | None:
        """Peak in FLOP/s (op/s for int8) for a dtype name from ``DTYPES``, or None if unknown."""
        value = self.tflops.get(dtype)
        return None if value is None else value * 1e12

    def peak_gflops(self, dtype: str) -> float | None:
        """Peak in GFLOP/s (the unit the reports plot in), or None if unknown."""
        value = self.tflops.get(dtype)
        return None if value is None else value * 1e3

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
GPUS: dict[str, Hardware] = {
    "H100 SXM": Hardware(
        "H100 SXM", {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9,
                     "int8": 1978.9},
        80, 3350, 132, 1.98, "NVIDIA H100 datasheet (SXM5), dense", lanes_per_core=128, link_gbps=900,
        internode_gbps=100, host_gbps=64),
    "A100 80GB": Hardware(
        "A100 80GB", {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp8": None,
                      "int8": 624.0},
        80, 2039, 108, 1.41, "NVIDIA A100 datasheet (80GB SXM), dense", lanes_per_core=64, link_gbps=600,
        internode_gbps=50, host_gbps=32),
    "L4": Hardware(
        "L4", {"fp64": 0.47, "fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5,
               "int8": 242.5},
        24, 300, 58, 2.04, "NVIDIA L4 datasheet, dense (fp64: 1/64 of fp32, Ada)", lanes_per_core=128,
        link_gbps=64, host_gbps=32),
    "RTX 4090": Hardware(
        "RTX 4090", {"fp64": 1.29, "fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3,
                     "int8": 660.6},
        24, 1008, 128, 2.52, "Ada Lovelace whitepaper, Table 2, FP32 accumulate, dense", lanes_per_core=128,
        link_gbps=64, host_gbps=32),
}

# The A100 40GB (SXM) is the same processor with 40 GB at 1,555 GB/s (the A100 datasheet's 40GB SXM column): what
# many published runs of 2020-2023 trained on.
GPUS["A100 40GB"] = dataclasses.replace(GPUS["A100 80GB"], name="A100 40GB", memory_gb=40, memory_bw_gbps=1555,
                                        source="NVIDIA A100 datasheet (40GB SXM), dense")

# The H200 is the H100's processor with more and faster memory: the same arithmetic rates.
GPUS["H200 SXM"] = dataclasses.replace(GPUS["H100 SXM"], name="H200 SXM", memory_gb=141, memory_bw_gbps=4800,
                                       source="NVIDIA H200 datasheet (SXM), dense")

# The H200 NVL (PCIe card, NVLink bridge) is the same GH100 processor at a lower power limit:
# the NVL column of the H200 datasheet, whose Tensor Core figures are with sparsity (halved here).
GPUS["H200 NVL"] = Hardware(
    "H200 NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5,
                 "int8": 1670.5},
    141, 4800, 132, None, "NVIDIA H200 datasheet (NVL), dense", lanes_per_core=128, link_gbps=128,
    host_gbps=64)

# device_kind strings as JAX reports them, matched in order (the first pattern wins): the NVL
# says so in its name ("NVIDIA H200 NVL"), the SXM part is plain "NVIDIA H200".
_KIND_PATTERNS = (
    (r"H200 NVL", "H200 NVL"),
    (r"H200", "H200 SXM"),
    (r"H100", "H100 SXM"),
    (r"A100.*80", "A100 80GB"),
    (r"A100.*40", "A100 40GB"),
    (r"A100", "A100 80GB"),
    (r"\bL4\b", "L4"),
    (r"4090", "RTX 4090"),
)


def gpu_spec(device_kind: str) -> Hardware | None:
    """The datasheet entry for a JAX ``device_kind`` such as "NVIDIA H200", or None."""
    for pattern, name in _KIND_PATTERNS:
        if re.search(pattern, device_kind):
            return GPUS[name]
    return None


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def find_gpu(name: str) -> Hardware:
    """The hardware table's GPU a person names, however they spell it: "H200", "h200", "h200 sxm", "H100-SXM",
    "a100", "rtx4090", or a JAX ``device_kind`` ("NVIDIA H200"). The one resolver of every command's GPU names.

    Raises:
      KeyError: no GPU matches; the message says which one was probably meant, and lists them all.
    """
    want = _squash(name)
    if want:
        for hw_name, hw in GPUS.items():
            if _squash(hw_name) == want:
                return hw
        for pattern, hw_name in _KIND_PATTERNS:  # the family alone ("h200", "nvidia h200") names its SXM part
            if re.search(pattern.replace(" ", ""), want, re.IGNORECASE):
                return GPUS[hw_name]
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
