"""precision, measured: one matmul per preset timed and checked, the formats, accumulation and range live."""

from __future__ import annotations

import contextlib
import functools
import math

from jaxgpu.ground import precision, stack
from jaxgpu.kernels import matmul
from jaxgpu.records import results

from experiments.contract import RunContext
from experiments.precision import ACC_COUNT, ACC_VALUE, PEER_BUDGET, Config


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


def sweep(preset: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    res = matmul.bench_jax(_operands(n, ctx.seed), preset, ctx.device, cfg.target_s)
    _checked(res, precision.get(preset).tolerance)
    out = res.metrics()
    peak = _limit(ctx, preset)
    if peak:
        out["peak_fraction"] = res.gflops * 1e9 / peak
    return out


def torch_peer(dtype: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    res = matmul.bench_torch(_operands(n, ctx.seed), "cuda" if ctx.platform == "gpu" else "cpu", cfg.target_s, dtype,
                             budget_s=PEER_BUDGET * cfg.target_s)
    _checked(res, precision.PRESETS["bf16" if dtype == "bfloat16" else "fp16"].tolerance)
    return res.metrics()


def mamf(preset: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
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


def format_record(name: str) -> dict[str, float]:
    fmt = next(f for f in precision.formats() if f.name == name)
    return {"bits": float(fmt.bits), "exponent_bits": float(fmt.exponent_bits),
            "mantissa_bits": float(fmt.mantissa_bits), "eps": fmt.eps, "max": fmt.max, "min_normal": fmt.min_normal,
            "decimal_digits": fmt.decimal_digits}


def accumulate(dtype: str, accumulator: str) -> dict[str, float]:
    exact = ACC_VALUE * ACC_COUNT
    got = precision.accumulate(ACC_VALUE, ACC_COUNT, dtype, accumulator)
    return {"result": got, "exact": exact, "rel_error": abs(got - exact) / exact}


def range_record(dtype: str, value: float) -> dict[str, float]:
    got = precision.round_trip(value, dtype)
    return {"stored": got if math.isfinite(got) else math.nan, "overflow": float(math.isinf(got)),
            "underflow": float(got == 0.0), "rel_error": abs(got - value) / value if math.isfinite(got) else math.nan}


def plan(preset: str, n: int, ctx: RunContext) -> dict[str, float]:
    """What XLA:GPU makes of one preset's matmul on the target: its GEMM library, its operand types."""
    from jaxgpu.pricing import targets

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
            "upcast_bits": float(8 * stack.ELEMENT_BYTES[upcast] if upcast else 0)}
