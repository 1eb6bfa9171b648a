"""Figures derived from several records: speed-ups over a baseline that is itself a record.

A baseline kept in the measuring process (the fp32 time of a size, the one-core rate) would be
gone in a resumed run and absent from a merged one; taken from the records, every reader computes
the same speed-up. Views and the claims' rules both use these. Imports no JAX.
"""

from __future__ import annotations

from collections.abc import Iterable

from jaxgpu.records.results import Record


def _spread(m: dict) -> tuple[float, float, float]:
    """(pessimistic, median, optimistic) time of a record: its quartiles where kept, else min and max."""
    return m.get("time_s_q75", m.get("time_s_max", m["time_s_median"])), m["time_s_median"], \
        m.get("time_s_q25", m.get("time_s_min", m["time_s_median"]))


def time_ratio(base: dict, other: dict) -> tuple[float, float, float]:
    """How many times faster ``other`` ran than ``base`` (two records' metrics): (low, median, high),
    the low and high from their quartiles (the slow quarter of one against the fast quarter of the other)."""
    b_slow, b_mid, b_fast = _spread(base)
    o_slow, o_mid, o_fast = _spread(other)
    return b_fast / o_slow, b_mid / o_mid, b_slow / o_fast


def precision_speedups(sweep: Iterable[Record]) -> dict[tuple[str, int], tuple[float, float, float]]:
    """(preset, n) -> its speed-up over fp32 at the same n, as ``time_ratio`` gives it, for the JAX sweep
    records of one run; presets without an fp32 record at their n have none."""
    recs = [r for r in sweep if r.params.get("impl", "jax") == "jax" and r.status == "ok"]
    fp32 = {r.params["n"]: r.metrics for r in recs if r.params["preset"] == "fp32"}
    return {(r.params["preset"], r.params["n"]): time_ratio(fp32[r.params["n"]], r.metrics)
            for r in recs if r.params["n"] in fp32}


def core_speedups(recs: Iterable[Record]) -> dict[int, dict[str, float]]:
    """workers -> matmul and elementwise speed-up over one core and the matmul's efficiency, for the
    threads records of one run; none without the one-core record."""
    by = {r.params["workers"]: r.metrics for r in recs if r.status == "ok"}
    if 1 not in by:
        return {}
    one = by[1]
    return {k: {"matmul_speedup": m["matmul_gflops"] / one["matmul_gflops"],
                "elementwise_speedup": one["elementwise_time_s"] / m["elementwise_time_s"],
                "matmul_efficiency": m["matmul_gflops"] / one["matmul_gflops"] / k} for k, m in by.items()}
