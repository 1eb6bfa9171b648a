"""The threads section of the report: figures, tables and takeaways from its records alone.

threads: does throughput grow with parallel workers? XLA:CPU pinned to 1..N cores.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.analysis import derive
from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("More workers, more throughput?", "threads", seen.claims)
    good = labels.ok(pairs)
    series, notes, rows = [], [], []
    for label, (run, recs) in labels.by_run(good).items():
        recs = sorted(recs, key=lambda x: x.params["workers"])
        ks = [x.params["workers"] for x in recs]
        sp = derive.core_speedups(recs)  # over the one-core record; none without it
        if sp:
            for kind in ("matmul", "elementwise"):
                series.append(figures.Series(f"{label} {kind}", ks, [sp[k][f"{kind}_speedup"] for k in ks],
                                             machine=palette.machine(run), variant=kind))
            if not any(s.label.startswith("ideal") for s in series):
                series.append(figures.Series("ideal (speed-up = workers)", ks, ks, style=":"))
            last = sp[ks[-1]]
            notes.append(f"On {label}, {ks[-1]} cores ran the matmul {last['matmul_speedup']:.2f}x and the elementwise "
                         f"kernel {last['elementwise_speedup']:.2f}x as fast as 1 core (matmul efficiency "
                         f"{last['matmul_efficiency']:.0%}).")
        for x in recs:
            m, s_ = x.metrics, sp.get(x.params["workers"], {})
            rows.append([label, x.params["workers"], int(m["cores_seen"]), int(m["os_threads"]),
                         labels.fmt(m["matmul_gflops"]),
                         labels.fmt(s_.get("matmul_speedup")), labels.fmt(m["elementwise_gbytes_per_s"]),
                         labels.fmt(s_.get("elementwise_speedup"))])
    if series:
        fig = figures.line_plot(series, xlabel="cores (workers)", ylabel="speed-up over 1 core",
                           title="independent output entries in parallel", logy=False)
        workers = sorted({int(k) for s in series for k in s.x})
        fig.axes[0].set_xticks(workers, [str(k) for k in workers])  # whole cores: "2", never "2.0"
        fig.axes[0].minorticks_off()
        sec.plots.append(figures.Plot("threads", fig, " ".join(notes)))
    sec.tables.append(figures.Table(["run", "workers", "cores seen", "OS threads", "matmul GFLOP/s", "speed-up",
                                "elementwise GB/s", "speed-up"], rows,
                               "Each row is its own process pinned to that many cores before JAX starts"))
    return sec


VIEW = View(section, None)
