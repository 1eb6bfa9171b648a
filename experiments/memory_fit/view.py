"""The memory_fit section of the report: figures, tables and takeaways from its records alone.

memory_fit: what a model needs in memory, predicted and checked against XLA; what fits on 24-141 GB.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.pricing import fit
from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View

TOLERANCE = 0.15  # an estimate within this share of XLA's own count holds


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("What fits in memory: predicted and checked against XLA", "memory_fit", seen.claims)
    val = [(r, x) for r, x in labels.ok(pairs) if x.params.get("case") == "mlp_train"]
    if val:
        _validation(sec, val)
    tab = [x for _, x in labels.ok(pairs) if x.params.get("case") == "transformer"]
    if tab:
        _transformers(sec, tab)
    sec.paragraphs += labels.not_ok(pairs)
    return sec


def _validation(sec: figures.Section, val: list[labels.Pair]) -> None:
    """The MLP train steps: the estimate against XLA's memory analysis, drawn and tabled."""
    fig = figures.Figure(figsize=(6.0, 4.4), dpi=100)
    ax = fig.add_subplot()
    notes = []
    for label, (run, recs) in labels.by_run(val).items():
        key = palette.machine(run)
        ax.plot([x.metrics["bytes_measured"] / 1e6 for x in recs],
                [x.metrics["bytes_predicted"] / 1e6 for x in recs],
                "o", label=label, markersize=4, color=palette.machine_color(key), gid=f"machine:{key}")
        errs = [abs(x.metrics["prediction_error"]) for x in recs]
        worst = max(recs, key=lambda x: abs(x.metrics["prediction_error"]))
        within = sum(e <= TOLERANCE for e in errs)
        notes.append(f"On {label} the estimate was within {TOLERANCE:.0%} of XLA's memory analysis on {within} of "
                     f"{len(errs)} MLP train steps (median error {labels.median(errs):.1%}; worst "
                     f"{worst.metrics['prediction_error']:+.1%} at widths {worst.params['widths']}, batch "
                     f"{worst.params['batch']}, {worst.params['preset']})." + _held_out(recs))
    lim = max(x.metrics["bytes_measured"] for _, x in val) / 1e6 * 1.2
    ax.plot([0.1, lim], [0.1, lim], "--", color=palette.REFERENCE, linewidth=1, label="estimate = XLA",
            gid="reference")
    figures.finish(fig, ax, xlabel="XLA memory analysis (MB)", ylabel="estimate (MB)", logx=10, logy=True,
              title="MLP train step (AdamW): estimate vs XLA")
    sec.plots.append(figures.Plot("memory_fit", fig, " ".join(notes)))
    kept = {}
    for _, x in val:
        if "lowering_keep" in x.metrics:
            kept.setdefault(x.params["preset"], x.metrics)
    if kept:
        sec.paragraphs.append(
            "The estimate walks the backward pass from the top layer down and takes the largest live set: what "
            "the forward pass kept of the layers below, the current layer's gradients, the compute copies of the "
            "inputs and weights; or, if larger, the largest weight's gradient with one temporary of its size. "
            "Bytes kept per element, by preset: " + "; ".join(
                f"{preset}: {m['lowering_keep']:g} per hidden activation ({m['lowering_keep_last']:g} for the top "
                f"layer), {m['lowering_input_copy']:g} per input, {m['lowering_weight_copy']:g} per weight"
                for preset, m in kept.items()) + ".")
    rows = [[run.label, "x".join(map(str, x.params["widths"])), x.params["batch"], x.params["preset"],
             labels.fmt(x.metrics["bytes_predicted"] / 1e6), labels.fmt(x.metrics["bytes_measured"] / 1e6),
             f"{x.metrics['prediction_error']:+.1%}", labels.fmt(x.metrics.get("peak_bytes", float("nan")) / 1e6)]
            for run, x in val]
    sec.tables.append(figures.Table(["run", "widths", "batch", "preset", "estimate MB", "XLA MB", "error",
                                "device peak MB"], rows, "Estimate vs compiled.memory_analysis()"))


def _transformers(sec: figures.Section, tab: list) -> None:
    """The decoders' estimates and which cards they fit."""
    seen, rows = set(), []
    for x in tab:
        key = (x.params["model"], x.params["mode"], x.params["preset"])
        if key in seen:
            continue
        seen.add(key)
        m = x.metrics
        rows.append([x.params["model"], x.params["mode"], x.params["preset"],
                     labels.fmt(m["bytes_predicted"] / 1e9),
                     *["yes" if m[f"fits_{gb}gb"] else "no" for gb in fit.GPU_MEMORY_GB]])
    sec.tables.append(figures.Table(["model", "mode", "preset", "GB",
                                     *[f"fits {gb} GB" for gb in fit.GPU_MEMORY_GB]],
                               rows, "Decoder-only transformers, sequence 2048, batch 1: training with Adam "
                                     "(state + activations) and inference (weights + KV cache)"))
    t7 = next((x for x in tab if x.params == {"case": "transformer", "model": "7B", "preset": "bf16",
                                               "mode": "train"}), None)
    i7 = next((x for x in tab if x.params == {"case": "transformer", "model": "7B", "preset": "bf16",
                                               "mode": "inference"}), None)
    if t7 and i7:
        sec.paragraphs.append(
            f"By the estimate (a formula, not a measurement), a 7B model needs "
            f"{i7.metrics['bytes_predicted'] / 1e9:.0f} GB to serve in bf16 and "
            f"{t7.metrics['bytes_predicted'] / 1e9:.0f} GB to train with Adam "
            f"({t7.metrics['bytes_predicted'] / i7.metrics['bytes_predicted']:.1f}x).")


def _held_out(recs) -> str:
    """The estimate on shapes its byte counts were not read from (``params.held_out``)."""
    out = [abs(x.metrics["prediction_error"]) for x in recs if x.params.get("held_out")]
    if not out:
        return ""
    return (f" On shapes none of its byte counts were read from it held within {TOLERANCE:.0%} on "
            f"{sum(e <= TOLERANCE for e in out)} of {len(out)} (worst {max(out):.1%}).")


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """The estimate against XLA:GPU's own memory plan, and where each plan fits (compiled, not run)."""
    good = labels.ok(pairs)
    if not good:
        return
    rows = [[run.label, "x".join(map(str, x.params["widths"])), x.params["batch"], x.params["preset"],
             labels.fmt(x.metrics["bytes_predicted"] / 1e6), labels.fmt(x.metrics["bytes_compiled"] / 1e6),
             f"{x.metrics['prediction_error']:+.1%}",
             ", ".join(f"{gb} GB" for gb in fit.GPU_MEMORY_GB if x.metrics.get(f"fits_{gb}gb")) or "none"]
            for run, x in good]
    errs = [abs(x.metrics["prediction_error"]) for _, x in good]
    within = sum(e <= TOLERANCE for e in errs)
    names = ", ".join(labels.by_run(good))
    sec.paragraphs.append(
        f"Compiled for {names}: the estimate, whose byte counts were read off XLA:CPU, was within "
        f"{TOLERANCE:.0%} of XLA:GPU's own plan on {within} of {len(errs)} train steps (median error "
        f"{labels.median(errs):.1%}): out of sample, the CPU's lowering does not carry over to the GPU's. What fits "
        "where is decided by XLA:GPU's count (arguments + outputs + temporaries - aliased), not by the estimate.")
    _draw_compiled(sec, good)
    sec.tables.append(figures.Table(["run", "widths", "batch", "preset", "estimate MB", "XLA:GPU MB", "error",
                                "fits on"], rows, "Compiled, not run: the train step's memory as XLA:GPU plans it"))


def _draw_compiled(sec: figures.Section, good: list[labels.Pair]) -> None:
    """XLA:GPU's plans of the same train steps, hollow in each GPU's colour, on the estimate's figure."""
    plot = next((p for p in sec.plots if p.name == "memory_fit"), None)
    if plot is None:
        return
    ax = plot.figure.axes[0]
    for i, (label, (run, recs)) in enumerate(labels.by_run(good).items()):
        key = palette.machine(run)  # each card's plan a size larger: two cards' equal plans both show
        ax.plot([x.metrics["bytes_compiled"] / 1e6 for x in recs], [x.metrics["bytes_predicted"] / 1e6 for x in recs],
                "s", mfc="none", markersize=5 + 3 * i, color=palette.machine_color(key), gid=f"machine:{key}",
                label=f"{label} (XLA:GPU's plan)")
    figures.finish(plot.figure, ax, logx=10, logy=True, legend="below")


VIEW = View(section, compiled)
