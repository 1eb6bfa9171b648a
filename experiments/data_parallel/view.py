"""The data_parallel section of the report: figures, tables and takeaways from its records alone.

data_parallel: one MLP train step run three ways over N devices: pmap, jit + sharding, shard_map.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View
from experiments.data_parallel import TOLERANCE


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Data parallel: three implementations, scaling with devices", "data_parallel", seen.claims)
    good = labels.ok(pairs)
    rows = []
    for run, x in good:
        if x.params["case"] == "agreement":
            v, k = x.params["variant"], x.params["devices"]
            speed = next((y.metrics["time_s_median"] for r2, y in good if r2 is run and y.params["case"] == "strong"
                          and y.params["variant"] == v and y.params["devices"] == k), None)
            rows.append([run.label, x.params["variant"], x.params["devices"], f"{x.metrics['rel_error']:.1e}",
                         f"{'yes' if x.metrics['rel_error'] <= TOLERANCE else 'no'}",
                         labels.fmt(speed * 1e3 if speed else None), int(x.metrics["lines_of_code"])])
    if rows:
        sec.tables.append(figures.Table(["run", "variant", "devices", "loss rel. error", f"within {TOLERANCE:g}",
                                    "ms per step", "lines of code"], rows,
                                   "The three implementations: loss trajectory vs the single-device step on the same "
                                   "global batches, step time (strong scaling) and the lines it takes to write"))
    for label, (run, recs) in labels.by_run(good).items():
        fig = figures.Figure(figsize=(9.0, 3.8), dpi=100)
        notes = []
        for i, mode in enumerate(("strong", "weak")):
            ax = fig.add_subplot(1, 2, i + 1)
            for v in labels.first_seen(x.params["variant"] for x in recs if x.params["case"] in ("strong", "weak")):
                pts = sorted((x.params["devices"], x.metrics["time_s_median"], x.metrics["predicted_time_s"],
                              x.metrics["speedup"])
                             for x in recs if x.params["case"] == mode and x.params["variant"] == v)
                if not pts:
                    continue
                color, gid = palette.colour_of(None, v, 1)
                ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], "-", marker=palette.marker(v), markersize=4,
                        label=v, color=color, gid=gid)
                if v == "jit_sharding":
                    ax.plot([p[0] for p in pts], [p[2] * 1e3 for p in pts], "--", color=palette.REFERENCE,
                            linewidth=1, label="prediction (jit + sharding)", gid="reference")
                if v == "jit_sharding" and len(pts) > 1:
                    notes.append(f"{mode} scaling, jit + sharding: {pts[-1][3]:.2f}x the single-device throughput on "
                                 f"{pts[-1][0]} devices ({pts[-1][3] / pts[-1][0]:.0%} efficiency), "
                                 f"{pts[-1][1] / pts[-1][2]:.2f}x the predicted step time.")
            figures.finish(fig, ax, xlabel="devices", ylabel="ms per step", logx=True, legend="none",
                           title=f"{mode} scaling "
                                 f"({'global batch fixed' if mode == 'strong' else 'batch per device fixed'})")
        figures.legend_below(fig, fig.axes[-1])
        if notes:
            host = run.env.get("backend") == "cpu"
            caveat = (" These are CPU host devices sharing the same cores: the figure shows correctness and the "
                      "cost of splitting one machine's work, not a speed-up." if host else "")
            sec.plots.append(figures.Plot(f"data_parallel_{len(sec.plots)}", fig,
                                     f"On {label}: " + " ".join(notes) + caveat))
    sec.paragraphs += labels.not_ok(pairs)
    return sec


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """The collectives XLA:GPU inserts into the data-parallel step (compiled, not run)."""
    rows = [[run.label, x.params["variant"], x.params["devices"], int(x.metrics.get("all_reduce_count", 0)),
             labels.fmt(x.metrics.get("all_reduce_bytes", 0) / 1e6), labels.fmt(x.metrics["gradient_bytes"] / 1e6),
             labels.fmt(x.metrics["bytes_compiled"] / 1e6)] for run, x in labels.ok(pairs)]
    if rows:
        sec.tables.append(figures.Table(["run", "variant", "GPUs", "all-reduces", "all-reduce MB", "gradients MB",
                                    "MB per GPU"], rows, "Compiled, not run: the all-reduce each step needs, "
                                                          "against the gradients' bytes"))


VIEW = View(section, compiled)
