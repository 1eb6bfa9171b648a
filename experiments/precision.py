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
from jaxgpu import report as rp

from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = ("C12", "C13", "C14")
DESCRIPTION = "matmul per precision preset (fp64..int8): GFLOP/s, speed-up over fp32, error; formats; MAMF"

# The live demonstrations of C14: 4096 additions of 0.01 (exactly 40.96), and values
# outside fp16's range that bf16 holds.
ACC_VALUE, ACC_COUNT = 0.01, 4096
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
                             mamf_budget_s=4.0, mamf_target_s=0.05),
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


def _sweep(preset: str, n: int, cfg: Config, ctx: RunContext, fp32_times: dict) -> dict[str, float]:
    res = matmul.bench_jax(_operands(n, ctx.seed), preset, ctx.device, cfg.target_s)
    _checked(res, precision.get(preset).tolerance)
    out = res.metrics()
    if preset == "fp32":
        fp32_times[n] = res.timing.median_s
    if n in fp32_times:
        out["speedup"] = fp32_times[n] / res.timing.median_s
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
    fp32_times: dict[int, float] = {}
    presets = sorted(cfg.presets, key=lambda p: p != "fp32")  # fp32 first: the speed-up baseline
    torch_ok = matmul.torch_available()
    largest = max(cfg.sizes)
    for n in cfg.sizes:
        for i, preset in enumerate(presets):
            p = precision.get(preset)
            params = {"case": "sweep", "preset": preset, "n": n, "dtype": p.operand_dtype,
                      "accumulate": p.accum_dtype, "precision": p.precision, "impl": "jax"}
            out.append(Case(params, functools.partial(_sweep, preset, n, cfg, ctx, fp32_times),
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


# ---------------------------------------------------------------- report


def _sel(pairs, case):
    return [(r, x) for r, x in pairs if x.params.get("case") == case]


def section(pairs: list[rp.Pair]) -> rp.Section:
    sec = rp.Section("Precision and Tensor Cores: one matmul in every format", "precision", CLAIMS)
    sweep = rp.ok(_sel(pairs, "sweep"))
    groups = rp.by_run(sweep)
    series, takeaways, limits = [], [], []
    for label, (run, recs) in groups.items():
        for impl in ("jax", "torch"):
            for preset in [p for p in precision.PRESETS if any(x.params["preset"] == p and x.params["impl"] == impl
                                                              for x in recs)]:
                pts = sorted((x.params["n"], x.metrics["gflops"]) for x in recs
                             if x.params["preset"] == preset and x.params["impl"] == impl)
                style = "-o" if impl == "jax" else ":s"
                series.append(rp.Series(f"{label} {preset}" + (" (torch)" if impl == "torch" else ""),
                                        [p[0] for p in pts], [p[1] for p in pts], style=style))
        takeaways.append(_sweep_takeaway(label, recs))
        hw = run.meta.get("hardware") or {}
        for dt in ("fp32", "bf16"):
            if hw.get("tflops", {}).get(dt):
                kind = "estimate" if hw.get("estimate") else "datasheet"
                limits.append(rp.Limit(f"{label} {dt} peak ({kind})", hw["tflops"][dt] * 1e3))
    if series:
        fig = rp.line_plot(series, xlabel="n (square n x n x n)", ylabel="GFLOP/s (int8: GOP/s)", limits=limits,
                           title="matmul throughput per precision preset, with peaks from the hardware table")
        sec.plots.append(rp.Plot("precision_gflops", fig, " ".join(t for t in takeaways if t)))
        sec.plots.append(_error_plot(groups))
    sec.tables.append(_sweep_table(sweep))
    sec.tables.append(_mamf_table(_sel(pairs, "mamf")))
    sec.tables.append(_format_table(rp.ok(_sel(pairs, "format"))))
    acc_text, acc_table = _accumulate_view(rp.ok(_sel(pairs, "accumulate")))
    sec.tables.append(acc_table)
    rng_text, rng_table = _range_view(rp.ok(_sel(pairs, "range")))
    sec.tables.append(rng_table)
    sec.paragraphs += [t for t in (acc_text, rng_text) if t]
    unsupported = [(r, x) for r, x in pairs if x.status != "ok"]
    for run, x in unsupported:
        sec.paragraphs.append(f"{run.label}: {x.params.get('preset', x.params)} n={x.params.get('n', '-')}: "
                              f"{x.status}: {x.reason}")
    return sec


def _sweep_takeaway(label: str, recs) -> str:
    jax_recs = [x for x in recs if x.params["impl"] == "jax"]
    if not jax_recs:
        return ""
    n = max(x.params["n"] for x in jax_recs)
    at_n = {x.params["preset"]: x for x in jax_recs if x.params["n"] == n}
    parts = []
    fastest = max(at_n.values(), key=lambda x: x.metrics["gflops"])
    if "fp32" in at_n:
        base = at_n["fp32"].metrics["time_s_median"]
        for name in ("tf32", "bf16", "fp16", "fp8_e4m3", "int8"):
            if name in at_n:
                x = at_n[name]
                parts.append(f"{name} {base / x.metrics['time_s_median']:.1f}x (rel. error {x.metrics['rel_error']:.0e}"
                             + _upcast_note(x.metrics) + ")")
    text = (f"On {label} at n={n}, against fp32 (HIGHEST): " + ", ".join(parts) + "."
            f" Fastest: {fastest.params['preset']} at {fastest.metrics['gflops']:.0f} GFLOP/s.")
    torch_bf16 = [x for x in recs if x.params["impl"] == "torch" and x.params["n"] == n]
    if torch_bf16 and "bf16" in at_n:
        ratio = at_n["bf16"].metrics["gflops"] / torch_bf16[0].metrics["gflops"]
        text += (f" JAX's bf16 ran at {ratio:.0%} of torch's bf16 "
                 f"({torch_bf16[0].metrics['gflops']:.0f} GFLOP/s).")
    return text


def _upcast_cell(m: dict) -> str:
    if m.get("upcast_to_fp32"):
        return "yes"
    return f"to {int(m['upcast_bits'])}-bit" if m.get("upcast_bits") else ""


def _upcast_note(m: dict) -> str:
    if m.get("upcast_to_fp32"):
        return ", upcast to fp32"
    return f", upcast to {int(m['upcast_bits'])}-bit" if m.get("upcast_bits") else ""


def _error_plot(groups) -> rp.Plot:

    fig = rp.Figure(figsize=(7.0, 3.8), dpi=100)
    ax = fig.add_subplot()
    names = list(precision.PRESETS)
    width = 0.8 / max(len(groups), 1)
    worst = {}
    for i, (label, (run, recs)) in enumerate(groups.items()):
        jax_recs = [x for x in recs if x.params["impl"] == "jax"]
        if not jax_recs:
            continue
        n = max(x.params["n"] for x in jax_recs)
        errs = {x.params["preset"]: x.metrics["rel_error"] for x in jax_recs if x.params["n"] == n}
        xs = [j + i * width for j, name in enumerate(names) if name in errs]
        ys = [max(errs[name], 1e-17) for name in names if name in errs]
        ax.bar(xs, ys, width=width, label=f"{label} n={n}")
        worst[label] = errs
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, fontsize=8)
    rp.finish(fig, ax, ylabel="rel. error vs float64", logy=True, grid="y",
              title="accuracy per preset (whole quantise-multiply-dequantise path)")
    parts = []
    for label, errs in worst.items():
        ordered = sorted(errs, key=errs.get)
        parts.append(f"On {label} the error grows from {ordered[0]} ({errs[ordered[0]]:.0e}) to "
                     f"{ordered[-1]} ({errs[ordered[-1]]:.0e})"
                     + (f"; bf16 {errs['bf16']:.0e} vs fp16 {errs['fp16']:.0e}" if {"bf16", "fp16"} <= set(errs) else ""))
    return rp.Plot("precision_error", fig, ". ".join(parts) + ".")


def _sweep_table(sweep) -> rp.Table:
    rows = []
    order = {name: i for i, name in enumerate(precision.PRESETS)}
    for run, x in sorted(sweep, key=lambda p: (p[0].label, p[1].params["n"], p[1].params["impl"],
                                                order.get(p[1].params["preset"], 99))):
        m = x.metrics
        rows.append([run.label, x.params["impl"], x.params["preset"], x.params["n"], rp.fmt(m["time_s_median"] * 1e3),
                     rp.fmt(m["gflops"]), rp.fmt(m.get("speedup")), rp.fmt(m.get("peak_fraction")),
                     int(m.get("bytes_per_element", 0)), rp.fmt(m["rel_error"]),
                     _upcast_cell(m)])
    return rp.Table(["run", "impl", "preset", "n", "median ms", "GFLOP/s", "x fp32", "of peak", "bytes/elem",
                     "rel. error", "upcast"], rows,
                    "Every timed preset; x fp32 = speed-up over fp32 (HIGHEST) at the same n; of peak = the "
                    "hardware table's figure for that dtype (CPU: estimate)")


def _mamf_table(pairs) -> rp.Table:
    rows = []
    for run, x in pairs:
        if x.status != "ok":
            rows.append([run.label, x.params["preset"], "-", "-", "-", "-", f"{x.status}: {x.reason}"])
            continue
        m = x.metrics
        rows.append([run.label, x.params["preset"], f"{int(m['m'])}x{int(m['k'])}x{int(m['n'])}", rp.fmt(m["gflops"]),
                     rp.fmt(m.get("peak_fraction")), rp.fmt(m.get("torch_gflops")),
                     f"{int(m['shapes_tried'])} shapes in {m['search_s']:.0f} s"])
    return rp.Table(["run", "preset", "best m x k x n", "GFLOP/s", "of peak", "torch same shape", "search"], rows,
                    "Maximum achievable matmul FLOP/s (MAMF): the practical peak, searched around the large sizes")


def _format_table(pairs) -> rp.Table:
    seen, rows = set(), []
    for _, x in pairs:
        f = x.params["format"]
        if f in seen:
            continue
        seen.add(f)
        m = x.metrics
        rows.append([f, int(m["bits"]), int(m["exponent_bits"]), int(m["mantissa_bits"]), rp.fmt(m["eps"]),
                     rp.fmt(m["max"]), rp.fmt(m["min_normal"]), rp.fmt(m["decimal_digits"])])
    return rp.Table(["format", "bits", "exponent", "mantissa", "epsilon", "largest", "smallest normal",
                     "decimal digits"], rows, "Claim C14: number formats, from jnp.finfo / iinfo")


def _accumulate_view(pairs) -> tuple[str, rp.Table]:
    rows, worst = [], None
    for run, x in pairs:
        m = x.metrics
        rows.append([run.label, x.params["dtype"], x.params["accumulator"], rp.fmt(m["result"], 5), rp.fmt(m["exact"], 5),
                     rp.fmt(m["rel_error"])])
        if x.params["accumulator"] == x.params["dtype"] and (worst is None or m["rel_error"] > worst[1].metrics["rel_error"]):
            worst = (run, x)
    text = ""
    if worst:
        run, x = worst
        text = (f"Adding {ACC_VALUE} to itself {ACC_COUNT} times (exactly {ACC_VALUE * ACC_COUNT:g}) in a "
                f"{x.params['dtype']} accumulator gave {x.metrics['result']:g} on {run.label}: once the sum's spacing "
                "exceeds twice the addend, additions round away. This is why low-precision matmuls accumulate in fp32.")
    return text, rp.Table(["run", "values", "accumulator", "sum", "exact", "rel. error"], rows,
                          f"Sequential sum of {ACC_COUNT} x {ACC_VALUE}")


def _range_view(pairs) -> tuple[str, rp.Table]:
    rows, lost = [], []
    for run, x in pairs:
        m = x.metrics
        what = "overflow (inf)" if m["overflow"] else "underflow (0)" if m["underflow"] else rp.fmt(m["stored"])
        rows.append([run.label, x.params["dtype"], rp.fmt(x.params["value"]), what, rp.fmt(m.get("rel_error"))])
        if m["overflow"] or m["underflow"]:
            lost.append(f"{x.params['value']:g} in {x.params['dtype']} -> {'inf' if m['overflow'] else '0'}")
    held = sorted({x.params["dtype"] for _, x in pairs if not (x.metrics["overflow"] or x.metrics["underflow"])})
    text = ("Range, measured: " + "; ".join(lost) + (f"; held by {', '.join(held)}" if held else "") + ".") if lost else ""
    return text, rp.Table(["run", "dtype", "value", "stored", "rel. error"], rows,
                          "Values outside fp16's range that bf16's 8-bit exponent holds")
