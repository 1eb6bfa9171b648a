"""The serial_parallel section of the report: figures, tables and takeaways from its records alone.

serial_parallel: the professor and the students measured.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def _times(recs, kind, variant):
    return {x.params["n"]: x.metrics["time_s_median"] for x in recs
            if x.params["kind"] == kind and x.params["variant"] == variant}


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Serial vs parallel: the professor and the students", "serial_parallel", seen.claims)
    good = labels.ok(pairs)
    series, notes = [], []
    groups = labels.by_run(good)
    for label, (run, recs) in groups.items():
        for v in labels.first_seen(x.params["variant"] for x in recs if x.params["kind"] == "independent"):
            pts = sorted(_times(recs, "independent", v).items())
            if pts:
                series.append(figures.Series.of(f"{label} {v}", pts, style=figures.style(run),
                                                machine=palette.machine(run), variant=v))
        py, vec = _times(recs, "independent", "python_loop"), _times(recs, "independent", "vectorized")
        common = sorted(set(py) & set(vec))
        hit = next((n for n in common if py[n] / vec[n] >= 100), None)
        if common:
            n = common[-1]
            best = max(common, key=lambda k: py[k] / vec[k])
            notes.append(f"{labels.opener(run)} the vectorised op beat the Python loop by {py[n] / vec[n]:.0f}x at "
                         f"N={n} (most: {py[best] / vec[best]:.0f}x at N={best})"
                         + (f"; it first reached 100x at N={hit}." if hit else "; it never reached 100x here."))
        scan, assoc = _times(recs, "recurrence", "scan"), _times(recs, "recurrence", "associative_scan")
        if scan and assoc:
            n = max(set(scan) & set(assoc))
            notes.append(f"{labels.opener(run)} the recurrence at N={n} took {scan[n] * 1e3:.3g} ms as a serial scan "
                         f"and {assoc[n] * 1e3:.3g} ms as an associative scan.")
    ran = labels.by_run(labels.ok(seen.measured))
    cpu = next((recs for label, (run, recs) in ran.items() if run.env.get("backend") == "cpu"), None)
    gpu = next((recs for label, (run, recs) in ran.items() if run.env.get("backend") == "gpu"), None)
    if cpu and gpu:
        c, g = _times(cpu, "independent", "vectorized"), _times(gpu, "independent", "vectorized")
        both = sorted(set(c) & set(g))
        cross = next((n for n in both if g[n] < c[n]), None)
        notes.append(f"GPU vs CPU, vectorised: the GPU is faster from N={cross} on." if cross else
                     "GPU vs CPU, vectorised: the CPU was faster at every N measured.")
        cs, gs = _times(cpu, "recurrence", "scan"), _times(gpu, "recurrence", "scan")
        for n in sorted(set(cs) & set(gs))[-1:]:
            winner = "CPU" if cs[n] < gs[n] else "GPU"
            notes.append(f"Serial recurrence at N={n}: CPU {cs[n] * 1e3:.2f} ms, GPU {gs[n] * 1e3:.2f} ms: "
                         f"the {winner} wins the one hard problem.")
    if series:
        fig = figures.line_plot(series, xlabel="N (independent multiply-adds)", ylabel="seconds (median)",
                           title="N multiply-adds: serial vs parallel", logx=True)
        fig.axes[0].set_xscale("log", base=10)
        sec.plots.append(figures.Plot("serial_parallel", fig, " ".join(notes)))
    rows = [[run.label, x.params["kind"], x.params["variant"], x.params["n"],
             labels.fmt(x.metrics["time_s_median"] * 1e6),
             labels.fmt(x.metrics["ns_per_element"])] for run, x in labels.ok(seen.measured)]
    sec.tables.append(figures.Table(["run", "kind", "variant", "N", "median us", "ns per element"], rows, "Every case"))
    return sec


VIEW = View(section, None)
