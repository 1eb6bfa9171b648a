"""The inference section of the report: figures, tables and takeaways from its records alone.

inference: latency and throughput vs batch size; the train step against the inference step.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Training vs inference", "inference", seen.claims)
    good = labels.ok(pairs)
    ran = {id(x) for _, x in seen.measured}  # the comparison was measured; a prediction has none
    series, notes = [], []
    for label, (run, recs) in labels.by_run(good).items():
        pts = sorted((x.params["batch"], x.metrics["samples_per_s"], x.metrics["time_s_median"]) for x in recs
                     if x.params["case"] == "batch")
        if pts:
            series.append(figures.Series.of(f"{label} throughput (samples/s)", pts, style=figures.style(run),
                                            machine=palette.machine(run), variant="throughput"))
            series.append(figures.Series(f"{label} latency (us per batch)", [p[0] for p in pts],
                                         [p[2] * 1e6 for p in pts], style=figures.style(run, "-s"),
                                         machine=palette.machine(run), variant="latency"))
            best = max(p[1] for p in pts)
            knee = next(p for p in pts if p[1] >= 0.9 * best)
            notes.append(f"{labels.opener(run, comma=True)} batch 1 took {pts[0][2] * 1e6:.0f} us; throughput "
                         f"reached 90% of its best ({best:.3g} samples/s) at batch {knee[0]}, where a batch took "
                         f"{knee[2] * 1e3:.2f} ms.")
        cmp_ = next((x for x in recs if x.params["case"] == "train_vs_infer" and id(x) in ran), None)
        if cmp_:
            m = cmp_.metrics
            notes.append(f"At batch {cmp_.params['batch']} a train step cost {m['time_ratio']:.1f}x the time of an "
                         f"inference step, {m.get('flops_ratio', float('nan')):.1f}x its FLOPs (XLA cost analysis) "
                         f"and {m['memory_ratio']:.1f}x its memory (XLA memory analysis).")
    if series:
        fig = figures.line_plot(series, xlabel="batch size", ylabel="samples/s  |  us per batch",
                           title="MLP inference: throughput and latency vs batch")
        sec.plots.append(figures.Plot("inference", fig, " ".join(notes)))
    rows = [[run.label, x.params["batch"], labels.fmt(x.metrics["time_ratio"]),
             labels.fmt(x.metrics.get("flops_ratio")),
             labels.fmt(x.metrics["memory_ratio"])]
            for run, x in labels.ok(seen.measured) if x.params["case"] == "train_vs_infer"]
    sec.tables.append(figures.Table(["run", "batch", "time ratio", "FLOP ratio", "memory ratio"], rows,
                               "Train step / inference step"))
    return sec


VIEW = View(section, None)
