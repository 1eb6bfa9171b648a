"""The devices section of the report: figures, tables and takeaways from its records alone.

devices: what each backend is: cores or SMs, clock, lanes, memory, and parallel lanes computed.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.ground import hardware
from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("What each backend is: cores, lanes, memory", "devices", seen.claims)
    good = labels.ok(pairs)
    seen, rows, bars = set(), [], []
    for run, x in good:
        key = (x.params["device"], run.env.get("cpu_model") if x.params["role"] == "cpu" else "")
        if key in seen:
            continue
        seen.add(key)
        m = x.metrics
        name = x.params["device"] if x.params["device"] not in ("cpu", "host cpu") else run.machine
        rows.append([name, int(m["cores"]), labels.fmt(m.get("clock_ghz")), int(m["lanes_per_core"]),
                     int(m["parallel_lanes"]),
                     labels.fmt(m.get("memory_gb")), labels.fmt(m.get("memory_bw_gbps")),
                     labels.fmt(m["peak_fp32_tflops"]),
                     "estimate" if m["estimate"] else "datasheet"])
        bars.append((name if len(name) <= 34 else name[:33] + "…", m["parallel_lanes"]))
    sec.tables.append(figures.Table(["device", "cores / SMs", "clock GHz", "fp32 lanes per core", "parallel lanes",
                                "memory GB", "bandwidth GB/s", "fp32 TFLOP/s", "source"], rows,
                               "Parallel lanes = cores x fp32 lanes (SIMD width on a CPU, FP32 units per SM on a GPU)"))
    if bars:
        sec.plots.append(figures.Plot("devices", _figure(bars), _takeaway(rows)))
    return sec


def _figure(measured: list[tuple[str, float]]) -> figures.Figure:
    """Parallel fp32 lanes: each device the run saw (measured introspection), then every GPU of the hardware
    table from its datasheet (SMs x FP32 units per SM), so that "thousands of cores" has its scale."""
    sheet = [(f"{hw.name} (datasheet)", hw.cores * hw.lanes_per_core) for hw in hardware.GPUS.values()
             if hw.lanes_per_core and hw.name not in {n for n, _ in measured}]
    bars = measured + sorted(sheet, key=lambda b: b[1])
    fig = figures.Figure(figsize=(7.0, 0.45 * len(bars) + 1.2), dpi=100)
    ax = fig.add_subplot()
    for i, (name, v) in enumerate(bars):  # each device in its machine's colour; a datasheet's figure light
        key = palette.key_of(name, i >= len(measured) or "NVIDIA" in name)
        palette.tag(ax.barh([name], [v], color=palette.machine_color(key), alpha=1.0 if i < len(measured) else 0.4),
                    f"machine:{key}")
    for i, (_, v) in enumerate(bars):
        ax.annotate(f"{v:,.0f}", (v, i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(right=max(b[1] for b in bars) * 4)
    ax.tick_params(axis="y", labelsize=8)
    return figures.finish(fig, ax, xlabel="parallel fp32 lanes (cores x SIMD lanes; SMs x FP32 units)",
                     title="Lanes that work at once: devices of the run (solid), GPU datasheets (light)", grid="x")


def _takeaway(rows: list[list]) -> str:
    text = "; ".join(f"{r[0]}: {r[1]} cores x {r[3]} lanes = {r[4]:,} lanes" for r in rows)
    cpu = [r for r in rows if r[-1] == "estimate"]
    gpu = [r for r in rows if r[-1] == "datasheet"]
    if cpu and gpu:
        text += f". The GPU has {gpu[0][4] / cpu[0][4]:,.0f}x the CPU's parallel lanes"
    elif cpu:
        most = max((hw for hw in hardware.GPUS.values() if hw.lanes_per_core), key=lambda h: h.cores * h.lanes_per_core)
        lanes = most.cores * most.lanes_per_core
        text += (f". By its datasheet {labels.a_or_an(most.name)} {most.name} has {lanes:,} ({most.cores} SMs x "
                 f"{most.lanes_per_core}), {lanes / cpu[0][4]:,.0f}x this CPU's: a datasheet figure, not measured here")
    return text + "."


VIEW = View(section, None)
