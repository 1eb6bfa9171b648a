"""How far a machine's speed drifts through a run, from the drift experiment's records: the same program's
times at different moments, compared as the roofline check compares a case with its prediction. Imports no JAX.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Iterable

from jaxgpu.records.results import Record


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
        if r.experiment == "drift" and r.status == "ok" and "time_s_median" in r.metrics:
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
