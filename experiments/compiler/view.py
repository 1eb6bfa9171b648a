"""The compiler section of the report: figures, tables and takeaways from its records alone.

compiler: what XLA does under JAX: op-by-op vs jit, compile vs run, fusion, library calls.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("The software stack: what XLA does with a JAX program", "compiler", seen.claims)
    good = labels.ok(pairs)
    rows, notes = [], []
    for run, x in good:
        m = x.metrics
        rows.append([run.label, x.params["program"], labels.fmt(m["eager_time_s"] * 1e6),
                     labels.fmt(m["time_s_median"] * 1e6),
                     labels.fmt(m["speedup"]), labels.fmt(m["compile_s"] * 1e3),
                     labels.fmt(m.get("runs_to_amortise_compile")),
                     f"{int(m['instructions_before'])} -> {int(m['instructions_after'])}", int(m["fusions_after"]),
                     labels.fmt(m["unfused_bytes"] / 1e6), labels.fmt(m.get("fused_bytes", float("nan")) / 1e6)])
        if x.params["program"] == "gelu_chain" and "runs_to_amortise_compile" in m:
            notes.append(f"On {run.label} the 9-op GELU chain ran {m['speedup']:.1f}x faster jitted than op by op "
                         f"({m.get('dispatch_s_per_op', 0) * 1e6:.1f} us saved per op), fused into "
                         f"{int(m['fusions_after'])} fusion(s); compiling took {m['compile_s'] * 1e3:.0f} ms, "
                         f"repaid after {m.get('runs_to_amortise_compile', float('nan')):.0f} runs. Bytes moved: "
                         f"{m['unfused_bytes'] / 1e6:.0f} MB unfused vs "
                         f"{m.get('fused_bytes', float('nan')) / 1e6:.0f} "
                         "MB fused (XLA cost analysis).")
    sec.tables.append(figures.Table(["run", "program", "op-by-op us", "jit us", "speed-up", "compile ms",
                                     "runs to amortise",
                                "top-level HLO ops", "fusions", "MB unfused", "MB fused"], rows,
                               "Op by op vs jit; fusion before and after XLA's optimisation"))
    for label, (run, _) in labels.by_run(pairs).items():
        info = run.meta.get("info", {}).get("compiler")
        if info:
            sec.paragraphs.append(f"Library calls in the optimized HLO on {label}: "
                                  + "; ".join(f"{k}: {v}" for k, v in info.items()) + ".")
        files = run.meta.get("attachments", {}).get("compiler")
        if files:
            sec.paragraphs.append(f"Lowering chain (jaxpr, StableHLO, optimized HLO) of {label}: "
                                  + ", ".join(f"{run.path.name}/{f}" for f in files) + ".")
    if good:

        fig = figures.Figure(figsize=(6.5, 3.2), dpi=100)
        ax = fig.add_subplot()
        names = [f"{run.path.name}\n{x.params['program']}" for run, x in good]
        xs = range(len(good))
        for dx, metric, what in ((-0.2, "eager_time_s", "op by op"), (0.2, "time_s_median", "jit")):
            palette.tag(ax.bar([i + dx for i in xs], [x.metrics[metric] * 1e6 for _, x in good], width=0.4,
                               label=what, color=palette.variant_color(what)), f"variant:{what}")
        ax.set_xticks(list(xs), names, fontsize=8)
        figures.finish(fig, ax, ylabel="us per call (median)", logy=True, grid="y", legend="below")
        sec.plots.append(figures.Plot("compiler", fig, " ".join(notes) or "Op by op vs jit, per program."))
    return sec


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """The same programs compiled for a GPU this machine does not have (compiled, not run)."""
    rows = [[run.label, x.params["program"], f"{int(x.metrics['instructions_before'])} -> "
             f"{int(x.metrics['instructions_after'])}", int(x.metrics["fusions_after"]), labels.libraries(x.metrics)]
            for run, x in labels.ok(pairs)]
    if rows:
        sec.tables.append(figures.Table(["run", "program", "top-level HLO ops", "fusions", "library calls"], rows,
                                   "Compiled, not run: the programs as XLA:GPU plans them"))


VIEW = View(section, compiled)
