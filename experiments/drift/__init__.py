"""drift: does the machine keep its speed through a run? The same three small programs (a matrix product, a
STREAM triad, a trivial call) timed again at moments spread through the run. How far two moments' times lie
apart is the noise under any comparison of cases timed at different moments, the roofline check's included."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import statistics
from collections.abc import Iterable

from jaxgpu.records.results import Record

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RunContext

_measure = Deferred(f"{__name__}.measure")

# one of each kind of limit a case meets: compute (a product), memory (a triad past the caches), dispatch (a call)
PROGRAMS = ("matmul", "triad", "call")


@dataclasses.dataclass(frozen=True)
class Config:
    moments: int = 12
    matmul_n: int = 256
    triad_n: int = 1 << 22  # 48 MB a call: past a server's last-level cache
    target_s: float = 0.03


PROFILES = {
    ("tiny", "any"): Config(moments=2, matmul_n=64, triad_n=1 << 12, target_s=0.005),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(moments=24, target_s=0.1),
    # a GPU's product and triad large enough to be the device's work, not its launch (the float64 reference
    # product is made once, on the host: 2048 keeps it under a second)
    ("quick", "gpu"): Config(matmul_n=2048, triad_n=1 << 26),
    ("full", "gpu"): Config(moments=24, matmul_n=2048, triad_n=1 << 26, target_s=0.1),
}


def _cost(program: str, cfg: Config, first: bool) -> Cost:
    n, m = cfg.matmul_n, cfg.triad_n
    # each program is compiled, its inputs drawn and its reference made once per process, at the first moment
    once = dict(compiles=int(first and program != "matmul"), gemm_compiles=int(first and program == "matmul"))
    if program == "matmul":
        return Cost(**once, flops=2.0 * n**3, bytes=12.0 * n * n, target_s=cfg.target_s,
                    host_flops=2.0 * n**3 if first else 0.0, rng_bytes=8.0 * n * n if first else 0.0)
    if program == "triad":
        return Cost(**once, flops=2.0 * m, dtype="elementwise", bytes=12.0 * m, target_s=cfg.target_s,
                    rng_bytes=8.0 * m if first else 0.0, host_bytes=4.0 * m)
    return Cost(**once, target_s=cfg.target_s)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    return [Case({"moment": i, "program": prog}, functools.partial(_measure.probe, prog, cfg, ctx),
                 _cost(prog, cfg, i == 0))
            for i in range(cfg.moments) for prog in PROGRAMS]


# How far a machine's speed drifts through a run, from these records: the same program's times at different
# moments, compared as the roofline check compares a case with its prediction.


@dataclasses.dataclass(frozen=True)
class Drift:
    """One probe program over a run's moments."""

    program: str
    moments: int
    median_s: float
    times_s: tuple[float, ...]  # by moment
    # median |t_a / t_b - 1| over ordered pairs of moments: what a perfect model, priced at one moment and
    # checked at another, would miss by
    pairwise: float
    slowest_over_fastest: float


def of_run(recs: Iterable[Record]) -> dict[str, Drift]:
    """program -> its drift, over a run's ok drift records; a program timed at fewer than two moments has none."""
    by: dict[str, list[tuple[int, float]]] = {}
    for r in recs:
        if r.experiment == EXPERIMENT.name and r.status == "ok" and "time_s_median" in r.metrics:
            by.setdefault(r.params["program"], []).append((r.params["moment"], r.metrics["time_s_median"]))
    out = {}
    for prog, pts in by.items():
        ts = tuple(t for _, t in sorted(pts))
        if len(ts) < 2:
            continue
        pairwise = statistics.median(abs(a / b - 1) for a, b in itertools.permutations(ts, 2))
        out[prog] = Drift(prog, len(ts), statistics.median(ts), ts, pairwise, max(ts) / min(ts))
    return out


def sentence(drifts: dict[str, Drift]) -> str:
    """The drift in one clause: "the same matmul, triad and call timed at 12 moments differ pairwise by a
    median of 16%, 8% and 22%"; empty without any."""
    if not drifts:
        return ""
    names = list(drifts)
    moments = max(d.moments for d in drifts.values())
    pct = _and([f"{drifts[n].pairwise:.0%}" for n in names])
    return f"the same {_and(names)} timed at {moments} moments of the run differ pairwise by a median of {pct}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# A probe whose moments differ pairwise by a median of this much or more: the machine was not steady (an idle 2-core
# VM keeps its three probes within about 20%; a quick run beside another job on one of its cores put the triad at
# 10.8 GB/s where the idle machine gives 31.9, its moments 62% apart)
UNSTEADY = 0.25
# ... over at least this many moments: two or three of a smoke run's millisecond probes are noise, not a verdict
UNSTEADY_MOMENTS = 4


def unsteady(recs: list[Record]) -> str:
    """The probes that moved by ``UNSTEADY`` or more, in a clause ("the triad's timings at 12 moments differ by a
    median of 62%"); "" where every probe held."""
    moved = {n: d for n, d in of_run(recs).items() if d.pairwise >= UNSTEADY and d.moments >= UNSTEADY_MOMENTS}
    if not moved:
        return ""
    moments = max(d.moments for d in moved.values())
    whose = "probes'" if len(moved) > 1 else "probe's"
    return (f"the {_and(list(moved))} {whose} timings at {moments} moments of the run differ pairwise by a median "
            f"of {_and([f'{d.pairwise:.0%}' for d in moved.values()])}")


def noise(recs: list[Record]) -> str:
    """The drift of a run's records in one clause, as the roofline check reads its errors against it."""
    return sentence(of_run(recs))


EXPERIMENT = Experiment(
    name="drift", gpu_part=1, benchmark_version=1, config=Config, profiles=PROFILES, cases=cases, spread=True,
    description="the same matmul, triad and call re-timed at moments spread through the run: the machine's noise",
    # three programs timed again and again: the machine's noise, which the model's errors are read against
    pricing=Pricing(modelled=False, noise=noise, unsteady=unsteady))
