"""The drift section of the report, from its records alone: each probe's time at each moment of the run,
against its median, and how far two moments lie apart. Imports no JAX."""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments import drift
from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Does the machine keep its speed?", "drift",
                     lead="The same matrix product, STREAM triad and trivial call, timed again at moments spread "
                          "through the run")
    series, notes, rows = [], [], []
    for label, (run, recs) in labels.by_run(labels.ok(list(seen.measured), "drift")).items():
        drifts = drift.of_run(recs)
        if not drifts:
            continue
        for d in drifts.values():
            series.append(figures.Series(f"{label} {d.program}", list(range(d.moments)),
                                         [t / d.median_s for t in d.times_s], machine=palette.machine(run),
                                         variant=d.program))
            rows.append([label, d.program, d.moments, labels.fmt(d.median_s * 1e6), f"{d.pairwise:.0%}",
                         f"{d.slowest_over_fastest:.2f}x"])
        notes.append(f"On {label}, {drift.sentence(drifts)}: two cases timed at different moments, a case and the "
                     "roofs it is priced on in the roofline check included, cannot be compared more finely than "
                     "that.")
    if series:
        fig = figures.line_plot(series, xlabel="moment of the run (evenly spread, first to last case)",
                           ylabel="time / the program's median", title="the same programs, timed again",
                           logx=False, logy=False)
        sec.plots.append(figures.Plot("drift", fig, " ".join(notes)))
    if rows:
        sec.tables.append(figures.Table(["run", "program", "moments", "median (us)", "two moments apart (median)",
                                    "slowest / fastest"], rows,
                                   "Each moment's time is the median of its own repeats; two moments apart: the "
                                   "median of |t_a / t_b - 1| over ordered pairs of moments"))
    sec.paragraphs += labels.not_ok(pairs)
    return sec


VIEW = View(section, None)
