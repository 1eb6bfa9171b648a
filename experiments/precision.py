"""precision: one matmul in every number format, speed and accuracy side by side; the formats themselves.

Tests claims C12 (Tensor Cores: the low-precision presets against fp32 at HIGHEST, and
against the datasheet peaks), C13 (faster and smaller at a small cost in accuracy) and
C14 (the format table, accumulation and range measured live).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from jaxgpu import matmul, precision, results

from experiments import claims
from experiments.views.precision import ACC_COUNT, ACC_VALUE
from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 2  # 2: speed-ups are taken from the fp32 record at the same n, not kept in each record
CLAIMS = claims.for_experiment("precision")
DESCRIPTION = "matmul per precision preset (fp64..int8): GFLOP/s, speed-up over fp32, error; formats; MAMF"

# The live demonstrations of C14: the accumulation (ACC_*, which the view quotes) and values
# outside fp16's range that bf16 holds.
RANGE_VALUES = (70000.0, 1e-8)

# A peer without a fast kernel for a dtype (torch bf16 on an AVX2-dispatched CPU: ~1 GFLOP/s)
# is reported unsupported, with its measured rate, once timing it would take this many times
# the case's target time.
PEER_BUDGET = 30  # times the case's target_s


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (256, 512, 1024, 2048)
    presets: tuple[str, ...] = tuple(precision.PRESETS)
    target_s: float = 0.2
    torch_peer: tuple[str, ...] = ("bfloat16",)  # torch's native low-precision matmul, where installed
    mamf_presets: tuple[str, ...] = ("fp32", "bf16", "int8")
    mamf_base: int = 1024
    mamf_budget_s: float = 3.0  # per preset
    mamf_target_s: float = 0.05


PROFILES = {
    ("tiny", "any"): Config(sizes=(64, 128), target_s=0.01, mamf_presets=("bf16",), mamf_base=256, mamf_budget_s=0.2,
                            mamf_target_s=0.01),
    # quick keeps the study under 5 minutes on 2 cores
    ("quick", "cpu"): Config(sizes=(512, 1024), target_s=0.15, mamf_presets=("fp32", "bf16"), mamf_budget_s=2.0),
    ("full", "cpu"): Config(sizes=(256, 512, 1024, 2048, 4096), target_s=0.5, mamf_budget_s=20.0, mamf_base=2048,
                            mamf_target_s=0.2),
    # quick on a GPU fits the lent machine's window: the CPU's largest size and one that fills the GPU
    ("quick", "gpu"): Config(sizes=(1024, 8192), target_s=0.1, mamf_presets=("bf16",), mamf_base=8192,
                             mamf_budget_s=2.0, mamf_target_s=0.05),
    ("full", "gpu"): Config(sizes=(256, 512, 1024, 2048, 4096, 8192, 16384), target_s=0.5,
                            mamf_presets=("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8"), mamf_base=8192,
                            mamf_budget_s=110.0, mamf_target_s=0.1),
}


@functools.lru_cache(maxsize=1)
def _operands(n: int, seed: int):
    # Cases are ordered size-major, so one size's operands serve every preset.
    return matmul.operands(n, n, n, seed=seed)


def _limit(ctx: RunContext, preset: str) -> float | None:
    return ctx.hardware.peak_flops(precision.get(preset).hardware_dtype) if ctx.hardware else None


def _checked(res: matmul.MatmulResult, tolerance: float) -> None:
    if not res.rel_error <= tolerance:
        raise ArithmeticError(f"{res.impl} {res.preset} off: rel_error {res.rel_error:.2e} > {tolerance:.0e}; "
                              "timing discarded")


def _sweep(preset: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    res = matmul.bench_jax(_operands(n, ctx.seed), preset, ctx.device, cfg.target_s)
    _checked(res, precision.get(preset).tolerance)
    out = res.metrics()
    peak = _limit(ctx, preset)
    if peak:
        out["peak_fraction"] = res.gflops * 1e9 / peak
    return out


def _torch(dtype: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    res = matmul.bench_torch(_operands(n, ctx.seed), "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s, dtype,
                             budget_s=PEER_BUDGET * cfg.target_s)
    _checked(res, precision.PRESETS["bf16" if dtype == "bfloat16" else "fp16"].tolerance)
    return res.metrics()


def _mamf(preset: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    found = matmul.mamf_search(preset, cfg.mamf_base, cfg.mamf_budget_s, ctx.device, target_s=cfg.mamf_target_s,
                               seed=ctx.seed)
    b = found.best
    out = {**b.metrics(), "m": float(b.m), "k": float(b.k), "n": float(b.n), "shapes_tried": float(found.shapes_tried),
           "search_s": found.search_s}
    peak = _limit(ctx, preset)
    if peak:
        out["peak_fraction"] = b.gflops * 1e9 / peak
    torch_dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(preset)
    if torch_dtype and matmul.torch_available():
        try:
            peer = matmul.bench_torch(matmul.operands(b.m, b.k, b.n, seed=ctx.seed),
                                      "cuda" if ctx.platform == "gpu" else "cpu", cfg.mamf_target_s * 4, torch_dtype,
                                      budget_s=PEER_BUDGET * cfg.mamf_target_s * 4)
        except results.Unsupported:  # no fast torch kernel for this dtype here: the sweep's record says why
            peer = None
        if peer is not None and peer.rel_error <= precision.get(preset).tolerance:
            out["torch_gflops"] = peer.gflops
            out["of_torch"] = b.gflops / peer.gflops
    return out


def _format(fmt: precision.Format) -> dict[str, float]:
    return {"bits": float(fmt.bits), "exponent_bits": float(fmt.exponent_bits),
            "mantissa_bits": float(fmt.mantissa_bits), "eps": fmt.eps, "max": fmt.max, "min_normal": fmt.min_normal,
            "decimal_digits": fmt.decimal_digits}


def _accumulate(dtype: str, accumulator: str) -> dict[str, float]:
    exact = ACC_VALUE * ACC_COUNT
    got = precision.accumulate(ACC_VALUE, ACC_COUNT, dtype, accumulator)
    return {"result": got, "exact": exact, "rel_error": abs(got - exact) / exact}


def _range(dtype: str, value: float) -> dict[str, float]:
    got = precision.round_trip(value, dtype)
    return {"stored": got if math.isfinite(got) else math.nan, "overflow": float(math.isinf(got)),
            "underflow": float(got == 0.0), "rel_error": abs(got - value) / value if math.isfinite(got) else math.nan}


def _cost(n: int, preset: str, cfg: Config, draws: bool) -> Cost:
    p = precision.get(preset)
    return Cost(compiles=2 if p.quantized else 1, gemm_compiles=1, flops=2.0 * n**3, dtype=p.hardware_dtype,
                bytes=(2 * p.bytes_per_element + 4) * n * n, target_s=cfg.target_s,
                host_flops=2.0 * len(matmul.reference_rows(n)) * n * n, host_bytes=12.0 * n * n,
                rng_bytes=8.0 * n * n * matmul.default_sets(n, n, n) if draws else 0.0)


def _mamf_cost(preset: str, cfg: Config) -> Cost:
    # the search runs shapes until its budget is spent, then finishes the one it is on
    top = cfg.mamf_base + 2 * 256
    one = _cost(cfg.mamf_base, preset, dataclasses.replace(cfg, target_s=cfg.mamf_target_s), draws=False)
    return dataclasses.replace(one, rng_bytes=8.0 * top * top * matmul.default_sets(top, top, top),
                               fixed_s=cfg.mamf_budget_s)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    few = Cost(min_iters=0)
    out = [Case({"case": "format", "format": f.name}, functools.partial(_format, f), Cost.none(), key=True)
           for f in precision.formats()]
    for dtype in ("float32", "bfloat16", "float16"):
        for acc in sorted({dtype, "float32"}):
            out.append(Case({"case": "accumulate", "dtype": dtype, "accumulator": acc},
                            functools.partial(_accumulate, dtype, acc), dataclasses.replace(few, loop_steps=ACC_COUNT),
                            key=True))
    for dtype in ("float16", "bfloat16"):
        for v in RANGE_VALUES:
            out.append(Case({"case": "range", "dtype": dtype, "value": v}, functools.partial(_range, dtype, v), few,
                            key=True))
    presets = sorted(cfg.presets, key=lambda p: p != "fp32")  # fp32 first: the speed-up baseline
    torch_ok = matmul.torch_available()
    largest = max(cfg.sizes)
    for n in cfg.sizes:
        for i, preset in enumerate(presets):
            p = precision.get(preset)
            params = {"case": "sweep", "preset": preset, "n": n, "dtype": p.operand_dtype,
                      "accumulate": p.accum_dtype, "precision": p.precision, "impl": "jax"}
            out.append(Case(params, functools.partial(_sweep, preset, n, cfg, ctx),
                            _cost(n, preset, cfg, draws=i == 0),
                            key=n == largest and preset in ("fp32", "bf16", "fp16", "int8")))
        for dtype in cfg.torch_peer if torch_ok else ():
            params = {"case": "sweep", "preset": "bf16" if dtype == "bfloat16" else "fp16", "n": n, "dtype": dtype,
                      "impl": "torch"}
            out.append(Case(params, functools.partial(_torch, dtype, n, cfg, ctx),
                            dataclasses.replace(_cost(n, "bf16", cfg, draws=False), compiles=0, gemm_compiles=0)))
    for preset in cfg.mamf_presets:
        out.append(Case({"case": "mamf", "preset": preset, "base": cfg.mamf_base},
                        functools.partial(_mamf, preset, cfg, ctx), _mamf_cost(preset, cfg)))
    return out


# ---------------------------------------------------------------- compiled for a GPU (--compile-for)


def _plan(preset: str, n: int, ctx: RunContext) -> dict[str, float]:
    """What XLA:GPU makes of one preset's matmul on the target: its GEMM library, its operand types."""
    import contextlib

    from jaxgpu import targets

    p = precision.get(preset)
    dev = ctx.target_devices(1)[0]
    with precision.enable_x64() if p.needs_x64 else contextlib.nullcontext():
        specs = [targets.spec((n, n), p.operand_dtype, dev)] * 2
        if p.quantized:  # per-channel scales for int8, one per tensor for fp8 (precision.prepare)
            shapes = ((n, 1), (1, n)) if p.operand_dtype == "int8" else ((), ())
            specs += [targets.spec(s, "float32", dev) for s in shapes]
        plan = targets.compile_plan(matmul.jax_matmul(p), *specs)
    upcast = precision.upcast_in_hlo(plan.hlo, p)
    return {**plan.metrics(), "flops": 2.0 * n**3, "upcast_to_fp32": float(upcast == "f32"),
            "upcast_bits": float({"f16": 16, "bf16": 16, "f32": 32, "s32": 32}.get(upcast or "", 0))}


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    return [Case({"case": "plan", "preset": preset, "n": n}, functools.partial(_plan, preset, n, ctx),
                 Cost(compiles=1, gemm_compiles=1, min_iters=0, warmup=0, calls=0), key=n == max(cfg.sizes))
            for n in cfg.sizes for preset in cfg.presets]
