"""The distributed section of the report: figures, tables and takeaways from its records alone.

distributed: one data-parallel training job over N processes with ``jax.distributed``.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Several processes, one job: jax.distributed", "distributed", seen.claims)
    rows = []
    for run, x in pairs:
        if x.status == "ok":
            m = x.metrics
            rows.append([run.label, x.params["processes"], x.params["worker_platform"], f"{m['rel_error']:.1e}",
                         labels.fmt(m["time_s_median"] * 1e3), labels.fmt(m["single_process_step_s"] * 1e3),
                         labels.fmt(m["wall_s"])])
            sec.paragraphs.append(
                f"On {run.label}, {x.params['processes']} processes joined through jax.distributed and trained "
                f"one model: their losses matched the single-process run to {m['rel_error']:.1e} (relative). A step "
                f"took {m['time_s_median'] * 1e3:.2f} ms against {m['single_process_step_s'] * 1e3:.2f} ms in one "
                f"process; the whole job, start-up included, {m['wall_s']:.1f} s.")
    sec.paragraphs += labels.not_ok(pairs)
    if rows:
        sec.tables.append(figures.Table(["run", "processes", "worker platform", "loss rel. error vs 1 process",
                                    "ms per step", "1-process ms per step", "job wall s"], rows,
                                   "Data-parallel MLP across processes (gloo on CPU, NCCL on GPUs)"))
    return sec


VIEW = View(section, None)
