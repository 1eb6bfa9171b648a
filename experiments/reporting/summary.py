"""The report's answer first: what a GPU buys, in a handful of rows, each this machine's measured figure beside a
GPU's, the factor, and where the GPU's figure came from (measured, compiled or predicted, with the prediction's
error on published GPU measurements of its kind). Computed from the records; imports no JAX.

Each row is an experiment's headline (``View.headlines``): a GPU figure is the merged GPU run's measurement where
one ran the same case; else the price of the same program on XLA:GPU's plan that an experiment gives
(``View.gpu_prices``); else nothing (the row says what would fill it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from jaxgpu.pricing.published import INTERVAL, MIN_INTERVAL_CASES
from jaxgpu.records import figures, labels, results

import experiments


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the answer: ``here`` on this machine (measured), ``gpu`` on the GPU, ``factor`` GPU over here
    (a rate's ratio, or here's seconds over the GPU's), and ``basis``: how the GPU figure was had."""

    topic: str
    here: str
    gpu: str
    factor: str
    basis: str  # "measured" | "compiled, not run" | "predicted, not run" | "estimated" | "not run"
    source: str  # where each figure came from, in a sentence
    here_value: float | None = None
    gpu_value: float | None = None
    unit: str = ""
    checked: str = ""  # how far such a prediction was off on published GPU measurements ("median error 6% ...")
    plan: str = ""  # the plan a predicted figure priced: "xla:gpu" (the GPU's own) or "xla:cpu, standing in"
    # of a predicted figure, the interval of predicted / published over its kind's published cases (90% of them):
    # the measurement is likely between gpu_value / high and gpu_value / low; None where no published case checks it
    band: tuple[float, float] | None = None

    @property
    def shown(self) -> str:
        """The GPU figure's provenance as the table's last column shows it."""
        return f"{self.basis} ({self.checked})" if self.checked else self.basis

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "shown": self.shown}


Pair = tuple[results.Run, results.Record]


def _cpu(pairs: Sequence[Pair]) -> list[Pair]:
    return [(r, x) for r, x in pairs if r.env.get("backend") == "cpu" and not r.compiled and not r.predicted
            and x.status == "ok" and not x.compiled]


def _interval(s: dict) -> str:
    """A summary's interval of predicted / published in a clause, or why it has none."""
    if "ratio_low" in s:
        return f"{INTERVAL:.0%} at {s['ratio_low']:.2f}x-{s['ratio_high']:.2f}x"
    return f"under {MIN_INTERVAL_CASES}: no interval"


def _checked(scores: dict, kind: str) -> str:
    """How far such a prediction missed published measurements of its ``kind``, as the summary's last column says
    it: out of sample first (the kind's first prices), the development set's error named as such beside it; a plan
    without first prices (this CPU's standing in) says it is in sample."""
    s, first = scores.get(kind) or {}, scores.get(f"{kind}_first") or {}
    if not s.get("cases") and not first.get("cases"):
        return "no published case checks such a program"
    if first.get("cases"):
        dev = f"; in sample {s['median_abs_error']:.0%}" if s.get("cases") else ""
        return (f"out of sample, median error {first['median_abs_error']:.0%} on {int(first['cases'])} published "
                f"{kind} cases' first prices ({_interval(first)}){dev}")
    return (f"in sample, median error {s['median_abs_error']:.0%} on {int(s['cases'])} published {kind} cases "
            f"({_interval(s)}); no first price checks them")


def _error_of(scores: dict, kind: str) -> str:
    s = scores.get(f"{kind}_first") or {}
    if not s.get("cases"):
        return "no published GPU measurement checks such a program out of sample" if not (scores.get(kind) or {}).get(
            "cases") else f"such predictions are checked in sample only: {_checked(scores, kind)}"
    return (f"out of sample, such predictions missed published {kind} measurements by a median "
            f"{s['median_abs_error']:.0%} at their first prices ({int(s['cases'])} cases; {_interval(s)})")


def _band(scores: dict, kind: str) -> tuple[float, float] | None:
    """The kind's interval of predicted / published out of sample (its first prices); None where they are too few."""
    s = scores.get(f"{kind}_first") or {}
    return (s["ratio_low"], s["ratio_high"]) if "ratio_low" in s else None


def factor(gpu: float | None, here: float | None, error: float | None = None) -> str:
    """GPU over here, as the table prints it ("180x", "3.7x"; "-" where either is missing), to the significant
    figures the GPU figure's ``error`` supports (a prediction's median error on published measurements of its kind:
    three figures for a measurement or an error under 5%, two under 30%, else one: "200x", not "196x")."""
    if not gpu or not here:
        return "-"
    f = gpu / here
    digits = 3 if error is None or error < 0.05 else 2 if error < 0.30 else 1
    mag = math.floor(math.log10(f))
    r = round(f, digits - 1 - mag)
    return f"{r:,.0f}x" if digits - 1 - mag <= 0 else f"{r:.{digits}g}x"


@dataclasses.dataclass(frozen=True)
class Ask:
    """What an experiment's headline (``contract.Headline``) is asked with: the merged ``runs`` and ``pairs``, the
    ``gpu`` compared with, the CPU's measured pairs (``cpu``), the pairs a compiled row reads (``compiled``: the
    card's own compile-only run where one is merged), how far GPU prices missed published measurements per kind
    (``scores``), and the priced programs of the experiments that price them (``prices``)."""

    runs: Sequence[results.Run]
    pairs: Sequence[Pair]
    gpu: str
    cpu: list[Pair]
    compiled: Sequence[Pair]
    scores: dict
    prices: Callable[[str], list[results.Record]]
    Row: type = Row  # headlines build their rows with it (a view does not import the report's modules)

    def factor(self, gpu: float | None, here: float | None, error: float | None = None) -> str:
        return factor(gpu, here, error)

    def largest(self, experiment: str, size: Callable[[dict], int], program: str | None = None,
                **params) -> Pair | None:
        """This machine's record of the largest case; of those at a size the GPU's ``program`` was priced at,
        where there is one, so that both columns are the same program."""
        found = list(labels.ok(self.cpu, experiment, **params))
        priced = [x.params["size"] for x in self.prices(program)] if program else []
        same = [p for p in found if size(p[1].params) in priced]
        return max(same or found, key=lambda p: size(p[1].params)) if found else None

    def price(self, program: str, size: int | None = None) -> results.Record | None:
        """The GPU price of a summary program: at ``size`` where it has one, else its largest."""
        found = self.prices(program)
        same = [x for x in found if x.params.get("size") == size]
        return max(same or found, key=lambda x: x.params["size"]) if found else None

    def measured_gpu(self, key: str) -> Pair | None:
        """The measurement of the case ``key`` by the merged GPU run that holds it (of two tries of a GPU check's
        part that both do, the later)."""
        found = [(r, x) for r, x in self.pairs if r.env.get("backend") == "gpu" and not r.compiled
                 and not r.predicted and x.status == "ok" and x.key == key]
        return max(found, key=lambda p: p[0].meta.get("run_id") or "", default=None)

    def plan(self, h: results.Record, kind: str) -> tuple[str, str, str, float | None, tuple | None]:
        """(which plan priced the price ``h``, how far such prices missed published ``kind`` measurements, in a
        clause, in the table's words, as a number (the median |error|; 1.0 where unchecked) and as the kind's
        interval of predicted / published (``Row.band``)): XLA:GPU's own, or (without the gpu-compile extra) this
        CPU's standing in for it, whose check is the CPU plan's. A kind no published case is of (an MLP's step: the
        published training cases are transformer steps) is said to be unchecked."""
        if h.metrics.get("gpu_plan", 1.0):
            name, scores = "XLA:GPU's plan", self.scores
        else:
            name = "this CPU's plan standing in for XLA:GPU's (install the gpu-compile extra for the GPU's own)"
            scores = self.scores.get("cpu_plan", {})
        # the figure's digits follow the error a reader can expect: out of sample where first prices check the kind
        s = scores.get(f"{kind}_first") or {}
        if not s.get("cases"):
            s = scores.get(kind) or {}
        return (name, _error_of(scores, kind), _checked(scores, kind),
                s.get("median_abs_error") if s.get("cases") else 1.0, _band(scores, kind))

    def plan_of(self, h: results.Record) -> str:
        """The plan a GPU price ``h`` was had on, as ``Row.plan`` names it."""
        return "xla:gpu" if h.metrics.get("gpu_plan", 1.0) else "xla:cpu, standing in"

    def rate_row(self, topic: str, cpu: Pair | None, metric: str, unit: str, scale: float, program: str, kind: str,
                 shape: str, size: int | None = None, sized: Callable[[int], str] = "width {:,}".format
                 ) -> Row | None:
        """A rate measured here beside the same program's rate on the GPU (measured there, else priced); ``sized``
        says the size the GPU's program was priced at in words."""
        if cpu is None:
            return None
        run, x = cpu
        here = x.metrics[metric]
        measured = self.measured_gpu(x.key)
        if measured:
            g = measured[1].metrics[metric]
            return Row(topic, f"{labels.si(here * scale, unit)}", f"{labels.si(g * scale, unit)}", factor(g, here),
                       "measured", f"{shape}: measured in {run.path.name} and in {measured[0].path.name}",
                       here * scale, g * scale, unit)
        h = self.price(program, size)
        if h is None:
            return Row(topic, labels.si(here * scale, unit), "-", "-", "not run",
                       f"{shape}: measured in {run.path.name}; no GPU run and no GPU price of it", here * scale)
        g = h.metrics["work"] / h.metrics["predicted_s"]  # FLOP/s, B/s or samples/s: the unit the row shows
        plan, error, checked, missed, band = self.plan(h, kind)
        return Row(topic, labels.si(here * scale, unit), labels.si(g, unit), factor(g, here * scale, missed),
                   "predicted, not run", f"{shape}: measured in {run.path.name}; predicted on {self.gpu}, not run (the "
                   f"same program at {sized(h.params['size'])} on {plan}; {error})", here * scale, g, unit, checked,
                   self.plan_of(h), band)

    def host_memory(self) -> float | None:
        """This machine's memory, as its CPU run recorded it."""
        return next((r.env.get("host_memory_bytes") for r in self.runs if r.env.get("backend") == "cpu"
                     and not r.compiled and r.env.get("host_memory_bytes")), None)


def rows(runs: Sequence[results.Run], pairs: Sequence[Pair], gpu: str) -> list[Row]:
    """The summary's rows from the merged ``pairs`` of ``runs``: each experiment's headlines (``View.headlines``),
    in their rank's order; a row whose figures no run holds is left out."""
    views = [experiments.view(name) for name in experiments.names()]
    pricers = [v.gpu_prices for v in views if v.gpu_prices is not None]
    scorer = next((v.scores for v in views if v.scores is not None), None)
    scores = scorer(list(pairs)) if scorer else {}
    if scorer:  # the same cases priced on this CPU's plan: what a run without the gpu-compile extra predicts with
        scores["cpu_plan"] = scorer(list(pairs), "cpu_plan_error")
    # the compiled rows from the card's own compile-only run where one is merged (two cards' plans differ in size)
    own = [(r, x) for r, x in pairs if not r.compiled or (r.hardware is not None and r.hardware.name == gpu)]
    ask = Ask(runs, pairs, gpu, _cpu(pairs), own if any(r.compiled for r, _ in own) else pairs, scores,
              lambda program: [x for f in pricers for x in f(list(pairs), program, gpu)])
    heads = sorted((h for v in views for h in v.headlines), key=lambda h: h.rank)
    return [r for r in (h.row(ask) for h in heads) if r is not None]


def table(rows_: Sequence[Row], machine: str, gpu: str) -> figures.Table:
    return figures.Table(["what", f"here ({machine})", f"{gpu}", "GPU / here", "GPU figure"],
                    [[r.topic, r.here, r.gpu, r.factor, r.shown] for r in rows_],
                    "Here measured; the GPU as the last column says. Open a row for its sources.",
                    details=[r.source + "." for r in rows_],
                    details_title="Where each figure comes from", id="summary-table")


def readme_block(summary: dict, ledger: list[dict], report: str = "reports/study/report.md") -> str:
    """The README's answer: the summary table and the ledger's counts as ``summary.json`` and ``ledger.json``
    beside a report hold them (a test keeps the README's copy equal to the committed study's)."""
    from experiments.analysis.claims import VERDICTS

    rows = summary["rows"]
    lines = [f"| what | here ({summary['machine']}) | {summary['gpu']} | GPU / here | GPU figure |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['topic']} | {r['here']} | {r['gpu']} | {r['factor']} | {r['shown']} |" for r in rows]
    counts = {v: sum(it["verdict"] == v for it in ledger) for v in VERDICTS}
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    lines += ["", f"Of the explainer's {len(ledger)} claims, on the committed runs: **{said}** "
              f"([the ledger]({report}#ledger))."]
    return "\n".join(lines)
