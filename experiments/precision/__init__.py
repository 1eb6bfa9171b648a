"""precision: one matmul in every number format, speed and accuracy side by side; the formats themselves.

The low-precision presets against fp32 at HIGHEST and against the datasheet peaks (Tensor Cores), how much
faster and smaller each is at what cost in accuracy, and the formats, accumulation and range measured live.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import devices, workload
from jaxgpu.ground.presets import PRESETS, formats

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RoofParts, RunContext

_measure = Deferred(f"{__name__}.measure")

# The live demonstrations of the formats: a sequential sum of ACC_COUNT x ACC_VALUE in each accumulator,
# and values outside fp16's range that bf16 holds.
ACC_VALUE, ACC_COUNT = 0.01, 4096
RANGE_VALUES = (70000.0, 1e-8)

# A peer without a fast kernel for a dtype (torch bf16 on an AVX2-dispatched CPU: ~1 GFLOP/s)
# is reported unsupported, with its measured rate, once timing it would take this many times
# the case's target time.
PEER_BUDGET = 30  # times the case's target_s


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    presets: tuple[str, ...] = tuple(PRESETS)
    target_s: float = 0.2
    torch_peer: tuple[str, ...] = ("bfloat16",)  # torch's native low-precision matmul, where installed
    mamf_presets: tuple[str, ...] = ("fp32", "bf16", "int8")
    mamf_base: int = 1024
    mamf_budget_s: float = 3.0  # per preset
    mamf_target_s: float = 0.05


PROFILES = {
    ("tiny", "any"): Config(sizes=(64, 128), target_s=0.01, mamf_presets=("bf16",), mamf_base=256, mamf_budget_s=0.2,
                            mamf_target_s=0.01),
    # quick keeps the study under 5 minutes on 2 cores; three sizes, so that the roofline check prices each from
    # a neighbour at most 1.5x away (with two, each was priced at the rate of a product 8x its size or an eighth)
    ("quick", "cpu"): Config(sizes=(512, 768, 1024), target_s=0.15, mamf_presets=("fp32", "bf16"), mamf_budget_s=2.0),
    ("full", "cpu"): Config(sizes=(256, 512, 1024, 2048, 4096), target_s=0.5, mamf_budget_s=20.0, mamf_base=2048,
                            mamf_target_s=0.2),
    # quick on a GPU fits a part of the GPU check (scripts/gpu_check.sh): one size, the committed CPU reference's
    # largest, so that the GPU's figure meets the same program there (and the summary's bf16 row)
    ("quick", "gpu"): Config(sizes=(4096,), target_s=0.1, mamf_presets=("bf16",), mamf_base=8192,
                             mamf_budget_s=2.0, mamf_target_s=0.05),
    ("full", "gpu"): Config(sizes=(256, 512, 1024, 2048, 4096, 8192, 16384), target_s=0.5,
                            mamf_presets=("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8"), mamf_base=8192,
                            mamf_budget_s=110.0, mamf_target_s=0.1),
}


def _cost(n: int, preset: str, cfg: Config, draws: bool) -> Cost:
    p = PRESETS[preset]
    return Cost(compiles=2 if p.quantized else 1, gemm_compiles=1, flops=2.0 * n**3, dtype=p.hardware_dtype,
                bytes=(2 * p.bytes_per_element + 4) * n * n, target_s=cfg.target_s,
                host_flops=2.0 * len(workload.reference_rows(n)) * n * n, host_bytes=12.0 * n * n,
                rng_bytes=8.0 * n * n * workload.default_sets(n, n, n) if draws else 0.0)


def _mamf_cost(preset: str, cfg: Config) -> Cost:
    # the search runs shapes until its budget is spent, then finishes the one it is on
    top = cfg.mamf_base + 2 * 256
    one = _cost(cfg.mamf_base, preset, dataclasses.replace(cfg, target_s=cfg.mamf_target_s), draws=False)
    return dataclasses.replace(one, rng_bytes=8.0 * top * top * workload.default_sets(top, top, top),
                               fixed_s=cfg.mamf_budget_s)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    few = Cost(min_iters=0)
    out = [Case({"case": "format", "format": f.name}, functools.partial(_measure.format_record, f.name), Cost.none())
           for f in formats()]
    for dtype in ("float32", "bfloat16", "float16"):
        for acc in sorted({dtype, "float32"}):
            out.append(Case({"case": "accumulate", "dtype": dtype, "accumulator": acc},
                            functools.partial(_measure.accumulate, dtype, acc),
                            dataclasses.replace(few, loop_steps=ACC_COUNT)))
    for dtype in ("float16", "bfloat16"):
        for v in RANGE_VALUES:
            out.append(Case({"case": "range", "dtype": dtype, "value": v}, functools.partial(_measure.range_record,
                                                                                             dtype, v), few))
    order = sorted(cfg.presets, key=lambda p: p != "fp32")  # fp32 first: the speed-up baseline
    torch_ok = devices.torch_available()
    for n in cfg.sizes:
        for i, preset in enumerate(order):
            p = PRESETS[preset]
            params = {"case": "sweep", "preset": preset, "n": n, "dtype": p.operand_dtype,
                      "accumulate": p.accum_dtype, "precision": p.precision, "impl": "jax"}
            out.append(Case(params, functools.partial(_measure.sweep, preset, n, cfg, ctx),
                            _cost(n, preset, cfg, draws=i == 0)))
        for dtype in cfg.torch_peer if torch_ok else ():
            params = {"case": "sweep", "preset": "bf16" if dtype == "bfloat16" else "fp16", "n": n, "dtype": dtype,
                      "impl": "torch"}
            out.append(Case(params, functools.partial(_measure.torch_peer, dtype, n, cfg, ctx),
                            dataclasses.replace(_cost(n, "bf16", cfg, draws=False), compiles=0, gemm_compiles=0)))
    for preset in cfg.mamf_presets:
        out.append(Case({"case": "mamf", "preset": preset, "base": cfg.mamf_base},
                        functools.partial(_measure.mamf, preset, cfg, ctx), _mamf_cost(preset, cfg)))
    return out


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    return [Case({"case": "plan", "preset": preset, "n": n}, functools.partial(_measure.plan, preset, n, ctx),
                 Cost(compiles=1, gemm_compiles=1, min_iters=0, warmup=0, calls=0))
            for n in cfg.sizes for preset in cfg.presets]


# the roof key of a sweep's product, by its dtype and precision (jaxgpu.pricing.roofline.roof_key)
_SWEEP_KEYS = {"float64": "fp64", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8",
               "float8_e5m2": "fp8", "int8": "int8"}
_MAMF_KEYS = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8", "int8": "int8"}


def _sweep_key(params: dict) -> str:
    dtype = params.get("dtype", "float32")
    if dtype == "float32":
        return "tf32" if params.get("precision") == "tensorfloat32" else "fp32"
    return _SWEEP_KEYS.get(dtype, "fp32")


def _roofs(recs: list) -> RoofParts:
    """Each preset's best rate (fp32's is the matmul sweep's), and a product's rate by size per roof key: the
    sweep's, and the best shape each MAMF search found near its base size."""
    timed = [r for r in recs if "gflops" in r.metrics]
    rates = {name: tuple(r.metrics["gflops"] * 1e9 for r in timed if r.params.get("preset") == name
                         and r.params.get("impl") == "jax") for name in PRESETS if name != "fp32"}
    curve: dict[str, list] = {}
    for r in timed:  # a MAMF search's record names no impl: it is JAX's
        if "flops_xla" not in r.metrics or r.params.get("impl", "jax") != "jax":
            continue
        if r.params.get("case") == "sweep":
            key = _sweep_key(r.params)
        elif r.params.get("case") == "mamf" and r.params.get("preset") in _MAMF_KEYS:
            key = _MAMF_KEYS[r.params["preset"]]
        else:
            continue
        curve.setdefault(key, []).append((r.metrics["flops_xla"], r.metrics["gflops"] * 1e9, r.key))
    return RoofParts(rates=rates, gemm_curve={k: tuple(v) for k, v in curve.items()})


def _widened(recs: list) -> dict[str, str]:
    """Per preset, the roof a compile-only run's plan says its product meets: a preset XLA:GPU widens before the
    product (fp8 e5m2 to 16 bits, say) runs at the wider format's rate, not at the datasheet's for its own."""
    out = {}
    for r in recs:
        if r.params.get("preset") in PRESETS:
            bits = 32 if r.metrics.get("upcast_to_fp32") else int(r.metrics.get("upcast_bits", 0))
            if bits:
                out[r.params["preset"]] = "fp32" if bits >= 32 else "bf16"
    return out


EXPERIMENT = Experiment(
    # 3: references on one BLAS thread; tf32 asks for the TF32 algorithm on a GPU; mamf's budget after its first
    # shape. 2: speed-ups from the fp32 record at the same n
    name="precision", gpu_part=1, benchmark_version=3,
    config=Config, profiles=PROFILES, cases=cases,
    compiled_cases=compiled_cases,
    description="matmul per precision preset (fp64..int8): GFLOP/s, speed-up over fp32, error; formats; MAMF",
    pricing=Pricing(roof="preset", kernel_level=True, roofs=_roofs, widened=_widened))
