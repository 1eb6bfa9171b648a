"""The precision section of the report: figures, tables and takeaways from its records alone.

precision: one matmul in every number format, speed and accuracy side by side; the formats themselves.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.ground import presets
from jaxgpu.records import figures, labels, palette

from experiments.analysis import derive
from experiments.contract import Headline, Seen, View
from experiments.precision import ACC_COUNT, ACC_VALUE


def _sel(pairs, case):
    return [(r, x) for r, x in pairs if x.params.get("case") == case]


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Precision and Tensor Cores: one matmul in every format", "precision", seen.claims)
    sweep = labels.ok(_sel(pairs, "sweep"))
    groups = labels.by_run(sweep)
    takeaways = [_sweep_takeaway(run, recs) for run, recs in groups.values()]
    if groups:
        sec.plots.append(figures.Plot("precision_gflops", _rate_bars(groups), " ".join(t for t in takeaways if t)))
        sec.plots.append(_error_plot(labels.by_run(labels.ok(_sel(seen.measured, "sweep")))))
    pairs = list(seen.measured)  # below: what ran
    sec.tables.append(_sweep_table(labels.ok(_sel(seen.measured, "sweep"))))
    sec.tables.append(_mamf_table(_sel(pairs, "mamf")))
    sec.tables.append(_format_table(labels.ok(_sel(pairs, "format"))))
    acc_text, acc_table = _accumulate_view(labels.ok(_sel(pairs, "accumulate")))
    sec.tables.append(acc_table)
    rng_text, rng_table = _range_view(labels.ok(_sel(pairs, "range")))
    sec.tables.append(rng_table)
    sec.paragraphs += [t for t in (acc_text, rng_text) if t]
    sec.paragraphs += labels.not_ok(pairs, lambda x: f"{x.params.get('preset', x.params)} n={x.params.get('n', '-')}")
    return sec


def _sweep_takeaway(run, recs) -> str:
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
                err = x.metrics.get("rel_error")  # a predicted record has no error: only a run has one
                parts.append(f"{name} {base / x.metrics['time_s_median']:.1f}x"
                             + (f" (rel. error {err:.0e}" + _upcast_note(x.metrics) + ")" if err is not None else ""))
    text = (f"{labels.opener(run)} at n={n}, against fp32 (HIGHEST): " + ", ".join(parts) + "."
            f" Fastest: {fastest.params['preset']} at {fastest.metrics['gflops']:,.0f} GFLOP/s.")
    torch_bf16 = [x for x in recs if x.params["impl"] == "torch" and x.params["n"] == n]
    if torch_bf16 and "bf16" in at_n:
        ratio = at_n["bf16"].metrics["gflops"] / torch_bf16[0].metrics["gflops"]
        text += (f" JAX's bf16 ran at {ratio:.0%} of torch's bf16 "
                 f"({torch_bf16[0].metrics['gflops']:,.0f} GFLOP/s).")
    return text


def _upcast_cell(m: dict) -> str:
    if m.get("upcast_to_fp32"):
        return "yes"
    return f"to {int(m['upcast_bits'])}-bit" if m.get("upcast_bits") else ""


def _upcast_note(m: dict) -> str:
    if m.get("upcast_to_fp32"):
        return ", upcast to fp32"
    return f", upcast to {int(m['upcast_bits'])}-bit" if m.get("upcast_bits") else ""


def _rate_bars(groups) -> figures.Figure:
    """JAX's GFLOP/s per preset at each run's largest n, a bar per run (a predicted run hatched), each bar's
    peak from the hardware table as a black tick above it and its speed-up over the run's fp32 on it: one
    colour per run, the presets in one order for every run."""
    names = list(presets.PRESETS)
    fig = figures.Figure(figsize=(8.0, 4.0), dpi=100)
    ax = fig.add_subplot()
    width = 0.8 / max(len(groups), 1)
    for i, (label, (run, recs)) in enumerate(groups.items()):
        jax_recs = [x for x in recs if x.params["impl"] == "jax"]
        if not jax_recs:
            continue
        n = max(x.params["n"] for x in jax_recs)
        rate = {x.params["preset"]: x.metrics["gflops"] for x in jax_recs if x.params["n"] == n}
        at = [(j + i * width, name) for j, name in enumerate(names) if name in rate]
        key = palette.machine(run)
        bars = ax.bar([x for x, _ in at], [rate[nm] for _, nm in at], width=width * 0.95,
                      label=f"{label}, n={n:,}", **figures.bar_style(palette.machine_color(key), run))
        palette.tag(bars, f"machine:{key}")
        hw = run.hardware
        for x, name in at:
            peak = hw.peak_gflops(presets.PRESETS[name].hardware_dtype) if hw else None
            if peak:
                ax.plot([x - width * 0.45, x + width * 0.45], [peak, peak], color=palette.REFERENCE,
                        linewidth=1.2, gid="reference")
            if "fp32" in rate and name != "fp32":  # above the bar and its peak tick, never through it
                ax.annotate(f"{rate[name] / rate['fp32']:.2g}x", (x, max(rate[name], peak or 0)), xytext=(0, 3),
                            textcoords="offset points", ha="center", fontsize=7)
    ax.plot([], [], color=palette.REFERENCE, linewidth=1.2, label="peak (datasheet or CPU estimate)",
            gid="reference")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], [n.replace("_", " ") for n in names],
                  fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room above the bars and peaks for the speed-ups
    figures.finish(fig, ax, ylabel="GFLOP/s (int8: GOP/s)", logy=True, grid="y", legend="below",
                   title="one matmul per precision preset at the largest n: rate, speed-up over fp32, peak")
    return fig


def _error_plot(groups) -> figures.Plot:

    fig = figures.Figure(figsize=(7.0, 3.8), dpi=100)
    ax = fig.add_subplot()
    names = list(presets.PRESETS)
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
        key = palette.machine(run)
        palette.tag(ax.bar(xs, ys, width=width, label=f"{label} n={n}",
                           **figures.bar_style(palette.machine_color(key), run)), f"machine:{key}")
        worst[label] = errs
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, fontsize=8)
    figures.finish(fig, ax, ylabel="rel. error vs float64", logy=True, grid="y",
              title="accuracy per preset (whole quantise-multiply-dequantise path)")
    parts = []
    for label, errs in worst.items():
        ordered = sorted(errs, key=errs.get)
        parts.append(f"On {label} the error grows from {ordered[0]} ({errs[ordered[0]]:.0e}) to "
                     f"{ordered[-1]} ({errs[ordered[-1]]:.0e})"
                     + (f"; bf16 {errs['bf16']:.0e} vs fp16 {errs['fp16']:.0e}" if {"bf16",
                                                                                    "fp16"} <= set(errs) else ""))
    return figures.Plot("precision_error", fig, ". ".join(parts) + ".")


def _sweep_table(sweep) -> figures.Table:
    rows = []
    speedups = {label: derive.precision_speedups(recs) for label, (run, recs) in labels.by_run(sweep).items()}
    order = {name: i for i, name in enumerate(presets.PRESETS)}
    for run, x in sorted(sweep, key=lambda p: (p[0].label, p[1].params["n"], p[1].params["impl"],
                                                order.get(p[1].params["preset"], 99))):
        m = x.metrics
        rows.append([run.label, x.params["impl"], x.params["preset"], x.params["n"],
                     labels.fmt(m["time_s_median"] * 1e3),
                     labels.fmt(m["gflops"]), labels.fmt(_speedup(speedups, run.label,
                                                                  x)), labels.fmt(m.get("peak_fraction")),
                     int(m.get("bytes_per_element", 0)), labels.fmt(m["rel_error"]),
                     _upcast_cell(m)])
    return figures.Table(["run", "impl", "preset", "n", "median ms", "GFLOP/s", "x fp32", "of peak", "bytes/elem",
                     "rel. error", "upcast"], rows,
                    "Every timed preset; x fp32 = speed-up over fp32 (HIGHEST) at the same n, the sweep's own fp32 "
                    "timing beside the other presets (the matmul section times the same fp32 product apart: two "
                    "timings of one program, whose difference is run-to-run noise); of peak = the hardware "
                    "table's figure for that dtype (CPU: estimate)")


def _speedup(speedups, label, x):
    if x.params["impl"] != "jax":
        return None
    got = speedups.get(label, {}).get((x.params["preset"], x.params["n"]))
    return got[1] if got else None


def _mamf_table(pairs) -> figures.Table:
    rows = []
    for run, x in pairs:
        if x.status != "ok":
            rows.append([run.label, x.params["preset"], "-", "-", "-", "-", f"{x.status}: {x.reason}"])
            continue
        m = x.metrics
        rows.append([run.label, x.params["preset"], f"{int(m['m'])}x{int(m['k'])}x{int(m['n'])}",
                     labels.fmt(m["gflops"]),
                     labels.fmt(m.get("peak_fraction")), labels.fmt(m.get("torch_gflops")),
                     _search(m)])
    return figures.Table(["run", "preset", "best m x k x n", "GFLOP/s", "of peak", "torch same shape", "search"], rows,
                    "Maximum achievable matmul FLOP/s (MAMF): the practical peak, searched around the large sizes; "
                    f"a search of fewer than {MAMF_SEARCHED} shapes (a quick run's) gives the best of a sample, "
                    "not the maximum")


# a search that tried fewer shapes than this found the best of a handful (a quick GPU run tries about two in its
# 2 s), not the practical peak
MAMF_SEARCHED = 10


def _search(m: dict) -> str:
    n = int(m["shapes_tried"])
    said = f"{n} shapes in {m['search_s']:.0f} s"
    return said if n >= MAMF_SEARCHED else f"{said}: the best of a sample, not the maximum"


def _format_table(pairs) -> figures.Table:
    seen, rows = set(), []
    for _, x in pairs:
        f = x.params["format"]
        if f in seen:
            continue
        seen.add(f)
        m = x.metrics
        rows.append([f, int(m["bits"]), int(m["exponent_bits"]), int(m["mantissa_bits"]), labels.fmt(m["eps"]),
                     labels.fmt(m["max"]), labels.fmt(m["min_normal"]), labels.fmt(m["decimal_digits"])])
    return figures.Table(["format", "bits", "exponent", "mantissa", "epsilon", "largest", "smallest normal",
                     "decimal digits"], rows, "Claim C14: number formats, from jnp.finfo / iinfo")


def _accumulate_view(pairs) -> tuple[str, figures.Table]:
    rows, worst = [], None
    for run, x in pairs:
        m = x.metrics
        rows.append([run.label, x.params["dtype"], x.params["accumulator"], labels.fmt(m["result"], 5),
                     labels.fmt(m["exact"],
                                                                                                           5),
                     labels.fmt(m["rel_error"])])
        worse = worst is None or m["rel_error"] > worst[1].metrics["rel_error"]
        if x.params["accumulator"] == x.params["dtype"] and worse:
            worst = (run, x)
    text = ""
    if worst:
        run, x = worst
        text = (f"Adding {ACC_VALUE} to itself {ACC_COUNT} times (exactly {ACC_VALUE * ACC_COUNT:g}) in a "
                f"{x.params['dtype']} accumulator gave {x.metrics['result']:g} on {run.label}: once the sum's spacing "
                "exceeds twice the addend, additions round away. This is why low-precision matmuls accumulate in fp32.")
    return text, figures.Table(["run", "values", "accumulator", "sum", "exact", "rel. error"], rows,
                          f"Sequential sum of {ACC_COUNT} x {ACC_VALUE}")


def _range_view(pairs) -> tuple[str, figures.Table]:
    rows, lost = [], []
    for run, x in pairs:
        m = x.metrics
        what = "overflow (inf)" if m["overflow"] else "underflow (0)" if m["underflow"] else labels.fmt(m["stored"])
        rows.append([run.label, x.params["dtype"], labels.fmt(x.params["value"]), what, labels.fmt(m.get("rel_error"))])
        if m["overflow"] or m["underflow"]:
            lost.append(f"{x.params['value']:g} in {x.params['dtype']} -> {'inf' if m['overflow'] else '0'}")
    held = sorted({x.params["dtype"] for _, x in pairs if not (x.metrics["overflow"] or x.metrics["underflow"])})
    held_by = f"; held by {', '.join(held)}" if held else ""
    text = ("Range, measured: " + "; ".join(lost) + held_by + ".") if lost else ""
    return text, figures.Table(["run", "dtype", "value", "stored", "rel. error"], rows,
                          "Values outside fp16's range that bf16's 8-bit exponent holds")


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """What each preset's matmul becomes on a GPU this machine compiled for (compiled, not run)."""
    rows, kept, widened = [], [], []
    order = {name: i for i, name in enumerate(presets.PRESETS)}
    for run, x in sorted(labels.ok(pairs), key=lambda p: (p[0].label, p[1].params["n"],
                                                        order.get(p[1].params["preset"], 99))):
        m, preset = x.metrics, x.params["preset"]
        hw = run.hardware
        peak = hw.peak_gflops(presets.PRESETS[preset].hardware_dtype) if hw and preset in presets.PRESETS else None
        up = int(m.get("upcast_bits", 0))
        rows.append([run.label, preset, x.params["n"], labels.libraries(m), f"to {up}-bit" if up else "kept",
                     labels.fmt(peak / 1e3 if peak else None), labels.fmt(m.get("bytes_compiled", 0) / 1e6)])
        if x.params["n"] == max(y.params["n"] for _, y in pairs):
            (widened if up else kept).append(f"{preset} ({labels.libraries(m)})" if not up else f"{preset} to {up}-bit")
    if rows:
        label = pairs[0][0].label
        sec.paragraphs.append(f"Compiled for {label}: the GEMM of each preset as XLA:GPU plans it (cuBLAS(Lt) asked "
                              "for, since without a device XLA cannot autotune between libraries and Triton). Kept "
                              f"in their own format: {', '.join(kept) or 'none'}; widened before the product: "
                              f"{', '.join(widened) or 'none'}. A plan, not a speed: the peaks are the datasheet's.")
        sec.tables.append(figures.Table(["run", "preset", "n", "library calls", "operands", "datasheet TFLOP/s",
                                    "MB"], rows, "Compiled, not run: each preset's matmul on the target GPU"))


def headline(ask):
    """The same product in bf16: Tensor Cores on the GPU, whatever the CPU has."""
    bf = ask.largest("precision", lambda p: p.get("n", 0), "matmul_bf16", case="sweep", preset="bf16", impl="jax")
    n = bf[1].params["n"] if bf else None
    return ask.rate_row("The same in bf16 (Tensor Cores)", bf, "gflops", "FLOP/s", 1e9, "matmul_bf16", "gemm",
                        f"a {n:,}x{n:,} bf16 matmul here" if bf else "", n, lambda s: f"{s:,}x{s:,}")


VIEW = View(section, compiled, headlines=(Headline(2, headline),))
