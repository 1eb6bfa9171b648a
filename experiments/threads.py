"""threads: does throughput grow with parallel workers? XLA:CPU pinned to 1..N cores (C04)."""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu import devices, threads
from jaxgpu import report as rp

from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = ("C04",)
DESCRIPTION = "matmul and elementwise speed with XLA:CPU limited to 1..N cores, each in its own process"


@dataclasses.dataclass(frozen=True)
class Config:
    matmul_n: int = 1024
    elementwise_n: int = 1 << 24
    target_s: float = 0.3


PROFILES = {
    ("tiny", "any"): Config(matmul_n=128, elementwise_n=1 << 16, target_s=0.01),
    ("quick", "any"): Config(),
    ("full", "any"): Config(matmul_n=2048, target_s=1.0),
}

# A worker process: Python, JAX and XLA:CPU starting (measured here: about 2.5 s).
WORKER_START_S = 2.5


def worker_counts() -> list[int]:
    n = devices.cpu_count()
    counts, k = [], 1
    while k < n:
        counts.append(k)
        k *= 2
    return counts + [n]


_BASE: dict = {}


def _run(k: int, cfg: Config) -> dict[str, float]:
    m = threads.measure(k, cfg.matmul_n, cfg.elementwise_n, cfg.target_s)
    if k == 1:
        _BASE.clear()
        _BASE.update(m)
    if _BASE:
        m["matmul_speedup"] = m["matmul_gflops"] / _BASE["matmul_gflops"]
        m["elementwise_speedup"] = _BASE["elementwise_time_s"] / m["elementwise_time_s"]
        m["matmul_efficiency"] = m["matmul_speedup"] / k
    return m


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    # CPU workers only: on a GPU run this measures the host, which the CPU run already does.
    if ctx.platform != "cpu":
        return []
    n, e = cfg.matmul_n, cfg.elementwise_n
    return [Case({"workers": k}, functools.partial(_run, k, cfg),
                 Cost(compiles=2, gemm_compiles=1, flops=2.0 * n**3 * devices.cpu_count() / k, target_s=2 * cfg.target_s, bytes=8.0 * e, calls=2,
                      fixed_s=WORKER_START_S, rng_bytes=8.0 * n * n, host_flops=2.0 * min(n, 512) * n * n), key=True)
            for k in worker_counts()]


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
