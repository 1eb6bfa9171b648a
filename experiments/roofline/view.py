"""The roofline section of the report: figures, tables and takeaways from its records alone.

roofline: GFLOP/s vs arithmetic intensity against the roof drawn from this run's own measurements.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette, results

from experiments.contract import Seen, View


def roof(pairs_of_run) -> tuple[float | None, float | None]:
    """(bandwidth GB/s, peak GFLOP/s) measured in one run: best point under 1 FLOP/byte, and the matmul."""
    low = [x.metrics["gbytes_per_s"] for x in pairs_of_run if x.metrics["intensity_flop_per_byte"] <= 1.0]
    mm = [x.metrics["gflops"] for x in pairs_of_run if x.params["kind"] == "matmul"]
    return (max(low) if low else None), (max(mm) if mm else None)


def figure(groups: dict[str, tuple[list[results.Record], object]],
           allocator: dict[str, str] | None = None, predicted: frozenset[str] = frozenset(),
           openers: dict[str, str] | None = None, machines: dict[str, str] | None = None
           ) -> tuple[figures.Figure, list[str]]:
    """The roofline of each group, ``{label: (roofline records, Hardware or None)}``: the measured
    points, the roof measured from them (``roof``) and, where the hardware has both figures, the
    datasheet roof; returns the figure and one takeaway per group. The report and the notebook
    both draw with it. The groups named in ``predicted`` are drawn dashed and their roof called predicted;
    ``openers`` starts each group's takeaway (default "On <label>"); ``machines`` gives each group's machine key
    (``palette.machine``; default: from its hardware's name), whose colour it is drawn in."""
    allocator = allocator or {}
    fig = figures.Figure(figsize=(7.0, 6.0), dpi=100)  # the legend below the axes: the points reach every corner
    ax = fig.add_subplot()
    notes, named, texts = [], [], []  # the kernel kinds named on the figure: (kind, x, y), and their labels
    xs = [2.0**e for e in range(-4, 13)]
    for label, (recs, hw) in groups.items():
        bw, peak = roof(recs)
        pts = sorted((x.metrics["intensity_flop_per_byte"], x.metrics["gflops"], x.params["kind"]) for x in recs)
        how = "predicted" if label in predicted else "measured"
        key = (machines or {}).get(label) or palette.key_of(f"{label} {getattr(hw, 'name', '')}",
                                                              label in predicted or hw is not None and not hw.estimate)
        color, gid = palette.machine_color(key), f"machine:{key}"
        ax.plot([p[0] for p in pts if p[2] == "fma"], [p[1] for p in pts if p[2] == "fma"],
                figures.PREDICTED_STYLE if label in predicted else "-o", markersize=4, color=color, gid=gid,
                label=f"{label} FMA chain")
        for xi, yi, kind in pts:
            if kind != "fma":
                ax.plot([xi], [yi], "s", color=color, markersize=6, gid=gid)
                beside = [k for k, x, y in named if 2 / 3 < xi / x < 1.5 and 2 / 3 < yi / y < 1.5]
                if kind not in beside:  # the same kind's point of another run just beside it: named once
                    # a label under its point; above it where another kind's label is just beside
                    texts.append(ax.annotate(kind, (xi, yi), fontsize=7, xytext=(4, 6 if beside else -8),
                                             textcoords="offset points"))
                    named.append((kind, xi, yi))
        if bw and peak:
            ax.plot(xs, [min(peak, bw * x) for x in xs], "--", color=color, linewidth=1, gid=gid,
                    label=f"{label} {how} roof ({bw:,.0f} GB/s, {peak:,.0f} GFLOP/s)")
        if hw and hw.peak_gflops("fp32") and hw.memory_bw_gbps:
            ax.plot(xs, [min(hw.peak_gflops("fp32"), hw.memory_bw_gbps * x) for x in xs], ":", color=color,
                    linewidth=1.5, gid=gid, label=f"{label} {hw.kind} roof (fp32)")
        opener = (openers or {}).get(label, f"On {label}")
        notes.append(_takeaway(opener, recs, bw, peak, hw, allocator.get(label), how))
    figures.finish(fig, ax, xlabel="arithmetic intensity (FLOP per byte of memory traffic)", ylabel="GFLOP/s",
              title="roofline: measured points against the roof", logx=True, logy=True, legend="below")
    figures.unclash(fig, texts)  # two kinds' points close together (a tiny run's matvec and power, say)
    return fig, notes


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("The roofline: when do the cores wait?", "roofline", seen.claims)
    groups = labels.by_run(labels.ok(pairs))
    fig, notes = figure({label: (recs, run.hardware) for label, (run, recs) in groups.items()},
                        {label: run.env.get("allocator") for label, (run, _) in groups.items()},
                        frozenset(labels.by_run(seen.predicted)),
                        {label: labels.opener(run) for label, (run, _) in groups.items()},
                        {label: palette.machine(run) for label, (run, _) in groups.items()})
    sec.plots.append(figures.Plot("roofline", fig, " ".join(n for n in notes if n)))
    rows = [[run.label, x.params["kind"], x.params.get("k", "-"), labels.fmt(x.metrics["intensity_flop_per_byte"]),
             labels.fmt(x.metrics["gflops"]), labels.fmt(x.metrics["gbytes_per_s"]),
             labels.fmt(x.metrics["time_s_median"] * 1e3)]
            for run, x in labels.ok(list(seen.measured))]
    sec.tables.append(figures.Table(["run", "kind", "k", "FLOP/byte", "GFLOP/s", "GB/s", "median ms"], rows,
                               "Roofline points"))
    return sec


def _takeaway(opener, recs, bw, peak, hw, allocator=None, how="measured") -> str:
    if not (bw and peak):
        return ""
    ridge = peak / bw
    low = [x for x in recs if x.metrics["intensity_flop_per_byte"] <= 1.0]
    worst = min(low, key=lambda x: x.metrics["gflops"] / peak)
    text = (f"{opener} the {how} ridge point is {ridge:.1f} FLOP/byte ({peak:,.0f} GFLOP/s over {bw:,.0f} GB/s"
            + (f", host allocator {allocator}" if allocator else "") + "). "
            f"A memory-bound op ({worst.params['kind']}, {worst.metrics['intensity_flop_per_byte']:.2g} FLOP/byte) "
            f"{'ran' if how == 'measured' else 'would run'} at {worst.metrics['gflops'] / peak:.1%} of peak compute: "
            "there the cores wait on memory")
    fma = [x.metrics["gflops"] for x in recs if x.params["kind"] == "fma"]
    exp = [x for x in recs if x.params["kind"] == "transcendental" and "transcendentals_per_s" in x.metrics]
    if exp and fma:
        rate = exp[0].metrics["transcendentals_per_s"]
        text += (f". An exp or a log, which XLA counts as one FLOP, {'took' if how == 'measured' else 'would take'} "
                 f"the time of {max(fma) * 1e9 / rate:,.0f} FMA-chain FLOPs ({rate / 1e9:,.2f} G/s)")
        pw = [x for x in recs if x.params["kind"] == "power" and "powers_per_s" in x.metrics]
        if pw:
            text += f", a pow that of {rate / pw[0].metrics['powers_per_s']:,.1f} exps"
    if hw and hw.ridge_point("fp32"):
        text += (f"; datasheet ridge {hw.ridge_point('fp32'):.1f} FLOP/byte (fp32), "
                 f"{hw.ridge_point('bf16') or 0:.0f} (bf16)")
    return text + "."


VIEW = View(section, None)
