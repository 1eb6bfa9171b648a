"""The threads section of the report: figures, tables and takeaways from its records alone.

threads: does throughput grow with parallel workers? XLA:CPU pinned to 1..N cores (C04).
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations



from jaxgpu import report as rp

from experiments.claims import for_experiment

CLAIMS = for_experiment("threads")


def section(pairs: list[rp.Pair]) -> rp.Section:
    sec = rp.Section("More workers, more throughput?", "threads", CLAIMS)
    good = rp.ok(pairs)
    series, notes, rows = [], [], []
    for label, (run, recs) in rp.by_run(good).items():
        recs = sorted(recs, key=lambda x: x.params["workers"])
        ks = [x.params["workers"] for x in recs]
        series.append(rp.Series(f"{label} matmul", ks, [x.metrics.get("matmul_speedup", 1.0) for x in recs]))
        series.append(rp.Series(f"{label} elementwise", ks, [x.metrics.get("elementwise_speedup", 1.0) for x in recs]))
        series.append(rp.Series("ideal (speed-up = workers)", ks, ks, style=":"))
        last = recs[-1].metrics
        notes.append(f"On {label}, {ks[-1]} cores ran the matmul {last.get('matmul_speedup', 1):.2f}x and the elementwise "
                     f"kernel {last.get('elementwise_speedup', 1):.2f}x as fast as 1 core (matmul efficiency "
                     f"{last.get('matmul_efficiency', 1):.0%}).")
        for x in recs:
            m = x.metrics
            rows.append([label, x.params["workers"], int(m["cores_seen"]), int(m["os_threads"]), rp.fmt(m["matmul_gflops"]),
                         rp.fmt(m.get("matmul_speedup")), rp.fmt(m["elementwise_gbytes_per_s"]),
                         rp.fmt(m.get("elementwise_speedup"))])
    if series:
        fig = rp.line_plot(series, xlabel="cores (workers)", ylabel="speed-up over 1 core",
                           title="independent output entries in parallel", logy=False)
        sec.plots.append(rp.Plot("threads", fig, " ".join(notes)))
    sec.tables.append(rp.Table(["run", "workers", "cores seen", "OS threads", "matmul GFLOP/s", "speed-up",
                                "elementwise GB/s", "speed-up"], rows,
                               "Each row is its own process pinned to that many cores before JAX starts"))
    return sec
