"""The op_mix section of the report: figures, tables and takeaways from its records alone.

op_mix: is deep learning mostly matrix multiplication? FLOP and time shares of dot vs the rest.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    sec = figures.Section("Is deep learning mostly matrix multiplication?", "op_mix", seen.claims)
    # shares of time need the dots timed apart: a prediction of the whole step has none to draw
    good = labels.ok(list(seen.measured))
    if not good:
        return sec
    fig = figures.Figure(figsize=(7.5, 3.8), dpi=100)
    ax = fig.add_subplot()
    names, flop, tshare = [], [], []
    several = len({id(run) for run, _ in good}) > 1
    for run, x in good:  # the run named in the title where there is one, so the labels stay short
        names.append((f"{run.path.name}\n" if several else "")
                     + f"{x.params['model'].replace('transformer_block', 'block')}\nw={x.params['width']}")
        flop.append(x.metrics["dot_flop_share"])
        tshare.append(x.metrics["dot_time_share"])
    xs = range(len(names))
    for dx, ys, what in ((-0.2, flop, "share of FLOPs"), (0.2, tshare, "share of time")):
        palette.tag(ax.bar([i + dx for i in xs], ys, width=0.4, label=f"{what} in dot",
                           color=palette.variant_color(what)), f"variant:{what}")
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylim(0, 1.05)
    where = "" if several else f" ({good[0][0].label})"
    figures.finish(fig, ax, title=f"train step: matmul share of FLOPs and of time{where}", grid="y",
                   legend="below")
    notes = []
    for label, (_run, recs) in labels.by_run(good).items():
        m = sorted((x for x in recs if x.params["model"] == "mlp"), key=lambda x: x.params["width"])
        if m:
            notes.append(f"On {label} the MLP train step spent {m[0].metrics['dot_flop_share']:.0%} of its FLOPs and "
                         f"{m[0].metrics['dot_time_share']:.0%} of its time in matmul at width {m[0].params['width']}, "
                         f"{m[-1].metrics['dot_flop_share']:.0%} and {m[-1].metrics['dot_time_share']:.0%} at width "
                         f"{m[-1].params['width']}.")
        t = next((x for x in recs if x.params["model"] == "transformer_block"), None)
        if t:
            notes.append(f"A transformer block (d={t.params['width']}, seq {t.params['seq']}): "
                         f"{t.metrics['dot_flop_share']:.0%} of FLOPs, {t.metrics['dot_time_share']:.0%} of time in "
                         "matmul.")
    sec.plots.append(figures.Plot("op_mix", fig, " ".join(notes)))
    rows = [[run.label, x.params["model"], x.params["width"], labels.fmt(x.metrics["dot_flop_share"]),
             labels.fmt(x.metrics["elementwise_flop_share"]), labels.fmt(x.metrics["reduce_flop_share"]),
             labels.fmt(x.metrics["dot_time_share"]), labels.fmt(x.metrics["flops_parsed"]),
             labels.fmt(x.metrics.get("flops_xla"))]
            for run, x in good]
    sec.paragraphs.append("Time share = time of a program doing only the step's dots, each at the precision it has "
                          "in the step, over the whole step; above 1 means the dots alone, unfused, ran slower than "
                          "inside the step.")
    sec.tables.append(figures.Table(["run", "model", "width", "dot FLOPs", "elementwise", "reduce", "dot time",
                                "FLOPs (parsed)", "FLOPs (XLA)"], rows,
                               "FLOP shares from the HLO; time share = a program of only the step's dots / the "
                               "whole step"))
    return sec


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """FLOP shares of the train steps compiled for a GPU (compiled, not run: no time shares)."""
    rows = [[run.label, x.params["model"], x.params["width"], labels.fmt(x.metrics["dot_flop_share"]),
             labels.fmt(x.metrics["elementwise_flop_share"]), labels.fmt(x.metrics["reduce_flop_share"]),
             labels.libraries(x.metrics)] for run, x in labels.ok(pairs)]
    if rows:
        sec.tables.append(figures.Table(["run", "model", "width", "dot FLOPs", "elementwise", "reduce",
                                         "library calls"],
                                   rows, "Compiled, not run: FLOP shares of the GPU program and the libraries its "
                                         "dots become"))


VIEW = View(section, compiled)
