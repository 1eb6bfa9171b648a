"""The tensor_parallel section of the report: figures, tables and takeaways from its records alone.

tensor_parallel: the MLP split Megatron-style over a model axis; memory per device vs device count.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Headline, Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Tensor parallel: memory per device vs device count", "tensor_parallel", seen.claims)
    good = labels.ok(pairs)
    fig = figures.Figure(figsize=(6.5, 4.2), dpi=100)
    ax = fig.add_subplot()
    notes, rows = [], []
    for label, (run, recs) in labels.by_run(good).items():
        pts = sorted((x.params["model"], x.metrics["bytes_measured"], x.metrics["bytes_predicted"])
                     for x in recs if x.params["data"] == 1)
        if not pts:
            continue
        key = palette.machine(run)
        color, gid = palette.machine_color(key), f"machine:{key}"
        ax.plot([p[0] for p in pts], [p[1] / 1e6 for p in pts], "-o", markersize=4, label=f"{label} XLA",
                color=color, gid=gid)
        ax.plot([p[0] for p in pts], [p[2] / 1e6 for p in pts], "--", marker="x", markersize=4, linewidth=1,
                label=f"{label} estimate", color=color, gid=gid)
        one = next((p for p in pts if p[0] == 1), None)
        if one and len(pts) > 1:
            last = pts[-1]
            notes.append(f"On {label}, split over {last[0]} devices each holds {last[1] / one[1]:.0%} of the "
                         f"single-device train step's memory ({last[1] / 1e6:.1f} of {one[1] / 1e6:.1f} MB; "
                         f"1/{last[0]} would be {1 / last[0]:.0%}), with outputs equal to the unsharded MLP's.")
        for x in sorted(recs, key=lambda r: (r.params["data"], r.params["model"])):
            mm = x.metrics
            rows.append([run.label, f"{x.params['data']} x {x.params['model']}", labels.fmt(mm["bytes_measured"] / 1e6),
                         labels.fmt(mm["bytes_predicted"] / 1e6), f"{mm['prediction_error']:+.1%}",
                         f"{mm['rel_error']:.1e}", labels.fmt(mm["time_s_median"] * 1e3)])
    if notes:
        from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

        figures.finish(fig, ax, xlabel="model-axis devices", ylabel="MB per device (train step, AdamW)", logx=True,
                  logy=True, title="Megatron-style MLP: memory per device", legend="below")
        counts = sorted({x.params["model"] for _, x in good})  # ticks 1, 2, 4, 8 and plain MB, not powers
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        sec.plots.append(figures.Plot("tensor_parallel", fig, " ".join(notes)))
    if rows:
        sec.tables.append(figures.Table(["run", "mesh data x model", "XLA MB/device", "estimate MB", "error",
                                    "output rel. error", "ms per step"], rows,
                                   "Per-device memory from compiled.memory_analysis(); outputs vs the unsharded MLP"))
    sec.paragraphs += labels.not_ok(pairs)
    return sec


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """Bytes per device of the split step on 1..8 GPUs of a target, from XLA:GPU's plans (compiled, not run)."""
    good = labels.ok(pairs)
    rows = [[run.label, f"{x.params['data']} x {x.params['model']}", labels.fmt(x.metrics["bytes_compiled"] / 1e6),
             labels.fmt(x.metrics["bytes_predicted"] / 1e6), f"{x.metrics['prediction_error']:+.1%}",
             int(x.metrics.get("all_reduce_count", 0)), labels.fmt(x.metrics.get("all_reduce_bytes", 0) / 1e6)]
            for run, x in sorted(good, key=lambda p: (p[1].params["data"], p[1].params["model"]))]
    one = {x.params["model"]: x.metrics["bytes_compiled"] for _, x in good if x.params["data"] == 1}
    if 1 in one and len(one) > 1:
        m = max(one)
        sec.paragraphs.append(f"Compiled for {good[0][0].label}: split over {m} GPUs each would hold "
                              f"{one[m] / one[1]:.0%} of the one-GPU train step ({one[m] / 1e6:.0f} of "
                              f"{one[1] / 1e6:.0f} MB), by XLA:GPU's memory plan.")
    if rows:
        sec.tables.append(figures.Table(["run", "mesh data x model", "XLA:GPU MB/device", "estimate MB", "error",
                                    "all-reduces", "all-reduce MB"], rows,
                                   "Compiled, not run: per-device memory and collectives of the split step"))


def headline(ask):
    """Splitting one model over devices: memory per device at the most devices against one."""
    def ratio(recs, metric):
        by = {x.params.get("model"): x.metrics.get(metric) for x in recs if x.params.get("data") == 1}
        n = max((k for k in by if by.get(k)), default=1)
        return (n, by[1] / by[n]) if n > 1 and by.get(1) else None

    pairs = ask.compiled
    here_recs = [x for _, x in labels.ok(ask.cpu, "tensor_parallel")]
    gpu_recs = [x for r, x in labels.ok(pairs, "tensor_parallel") if r.compiled and r.env.get("backend") == "gpu"]
    here, there = ratio(here_recs, "bytes_measured"), ratio(gpu_recs, "bytes_compiled")
    if here is None and there is None:
        return None
    gpu_run = next((r for r, x in labels.ok(pairs, "tensor_parallel") if r.compiled), None)
    return ask.Row("Splitting a model over devices (tensor parallel MLP)",
                   f"{here[0]} host devices: {here[1]:.2g}x less memory each" if here else "-",
                   f"{there[0]} GPUs: {there[1]:.2g}x less memory each" if there else "-",
                   "-", "compiled, not run" if there else "not run",
                   "memory per device from XLA's own plans: measured on the CPU's host devices (which share its cores, "
                   "so they buy no speed)" + (f", and compiled for 8 GPUs in {gpu_run.path.name} (not run)" if gpu_run
                                              else ""),
                   here[1] if here else None, there[1] if there else None, "x")


VIEW = View(section, compiled, headlines=(Headline(7, headline),))
