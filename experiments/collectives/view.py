"""The collectives section of the report: figures, tables and takeaways from its records alone.

collectives: all-reduce, all-gather, reduce-scatter, all-to-all and ppermute vs message size.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Collectives: bus bandwidth vs message size", "collectives", seen.claims)
    sec.paragraphs.append("Bus bandwidth (NCCL-tests: all-reduce algbw x 2(n-1)/n; all-gather, reduce-scatter and "
                          "all-to-all x (n-1)/n; ppermute x 1), each result checked against numpy first. CPU host "
                          "devices share one process and its cores: there the figure is XLA's in-memory copy "
                          "path, not a link between chips.")
    good = labels.ok(pairs, "collectives")
    series, notes = [], []
    for label, (run, recs) in labels.by_run(good).items():
        for name in labels.first_seen(x.params["collective"] for x in recs):
            pts = sorted((x.params["bytes"], x.metrics["gbytes_per_s"]) for x in recs if x.params["collective"] == name)
            if pts:
                series.append(figures.Series(f"{label} {name.replace('_', '-')}", [p[0] for p in pts],
                                             [p[1] for p in pts], style=figures.style(run),
                                             machine=palette.machine(run), variant=name.replace("_", "-")))
        ar = sorted((x.params["bytes"], x.metrics["gbytes_per_s"], x.metrics["time_s_median"], x.params["devices"])
                    for x in recs if x.params["collective"] == "all_reduce")
        if ar:
            best = max(ar, key=lambda p: p[1])
            notes.append(f"On {label} ({ar[0][3]} devices) all-reduce took {ar[0][2] * 1e6:.0f} us at "
                         f"{labels.si(ar[0][0], 'B')} (latency-bound) and peaked at "
                         f"{best[1]:.3g} GB/s bus bandwidth at "
                         f"{labels.si(best[0], 'B')}.")
    if series:
        fig = figures.line_plot(series, xlabel="message size (NCCL-tests size)", ylabel="bus bandwidth (GB/s)",
                                xunit="B",
                           title="Collectives over the run's devices")
        sec.plots.append(figures.Plot("collectives", fig, " ".join(notes)))
    sec.paragraphs += labels.not_ok(pairs, lambda x: x.params["collective"])
    return sec


VIEW = View(section, None)
