"""The devices section of the report: figures, tables and takeaways from its records alone.

devices: what each backend is: cores or SMs, clock, lanes, memory, and parallel lanes computed (C01).
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu import report as rp

from experiments.analysis.claims import for_experiment
from experiments.contract import View

CLAIMS = for_experiment("devices")


def section(pairs: list[rp.Pair]) -> rp.Section:

    sec = rp.Section("What each backend is: cores, lanes, memory", "devices", CLAIMS)
    good = rp.ok(pairs)
    seen, rows, bars = set(), [], []
    for run, x in good:
        key = (x.params["device"], run.env.get("cpu_model") if x.params["role"] == "cpu" else "")
        if key in seen:
            continue
        seen.add(key)
        m = x.metrics
        name = x.params["device"] if x.params["device"] != "cpu" and x.params["device"] != "host cpu" else \
            f"{run.env.get('cpu_model', 'CPU')} ({int(m['cores'])} cores)"
        rows.append([name, int(m["cores"]), rp.fmt(m.get("clock_ghz")), int(m["lanes_per_core"]),
                     int(m["parallel_lanes"]),
                     rp.fmt(m.get("memory_gb")), rp.fmt(m.get("memory_bw_gbps")), rp.fmt(m["peak_fp32_tflops"]),
                     "estimate" if m["estimate"] else "datasheet"])
        bars.append((name[:28], m["parallel_lanes"]))
    sec.tables.append(rp.Table(["device", "cores / SMs", "clock GHz", "fp32 lanes per core", "parallel lanes",
                                "memory GB", "bandwidth GB/s", "fp32 TFLOP/s", "source"], rows,
                               "Parallel lanes = cores x fp32 lanes (SIMD width on a CPU, FP32 units per SM on a GPU)"))
    if bars:
        fig = rp.Figure(figsize=(6.5, 3.0), dpi=100)
        ax = fig.add_subplot()
        ax.barh([b[0] for b in bars], [b[1] for b in bars])
        ax.set_xscale("log")
        ax.set_xlabel("parallel fp32 lanes")
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        cpu = [r for r in rows if r[-1] == "estimate"]
        gpu = [r for r in rows if r[-1] == "datasheet"]
        text = "; ".join(f"{r[0]}: {r[1]} cores x {r[3]} lanes = {r[4]} lanes" for r in rows)
        if cpu and gpu:
            text += f". The GPU has {gpu[0][4] / cpu[0][4]:.0f}x the CPU's parallel lanes."
        sec.plots.append(rp.Plot("devices", fig, text + "."))
    return sec


VIEW = View(section, None)
