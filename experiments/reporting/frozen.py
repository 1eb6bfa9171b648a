"""Predictions frozen before a GPU runs: what the model says an H100 SXM and an H200 SXM will measure, kept as data
that no later change of the model rewrites, so that the first GPU run tests a prediction made before it.

``freeze(runs)`` prices, per card: every summary row (the same rows as the report's, from the committed CPU runs,
the published check's headline prices and that card's compile-only run), every timed case of the CPU runs (the
seconds the model gives the same program on the card, and the plan it priced), and the verdict each claim's rule
reaches on those predicted records. ``write(frozen, folder)`` adds a file named by the date and the model's
fingerprint (a hash of the pricing code) and never replaces one: a new model adds a new file beside the old.
``compare(frozen, runs)`` sets a merged GPU run's measurements beside them: measured, predicted and the error,
per summary row and per timed case. Imports no JAX.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from jaxgpu.ground import hardware
from jaxgpu.pricing import fingerprint, roofline
from jaxgpu.records import figures, labels, results

from experiments.analysis import claims, pricing
from experiments.reporting import summary

CARDS = tuple(name for name, hw in hardware.GPUS.items() if hw.lent)  # the cards a lent machine has
SCHEMA = 1
def model_fingerprint(cards: Sequence[str] = CARDS) -> str:
    """A hash of the pricing code's fingerprint (``jaxgpu.pricing.fingerprint``: every module a price depends on, found
    by its imports, as code, with the compiler's versions) and of the entries of the data the ``cards``' predictions
    read (their datasheets and calibration: ``fingerprint.data``)."""
    code = fingerprint.fingerprint()
    data = [fingerprint.data(f"card:{c}") for c in cards]
    return hashlib.sha256("|".join([code, *data]).encode()).hexdigest()[:12]


def _for_card(runs: Sequence[results.Run], card: str) -> list[results.Run]:
    """The runs a card's predictions read: every measured run, and only that card's compile-only runs."""
    return [r for r in runs if not r.compiled or (r.hardware is not None and r.hardware.name == card)]


def _cases(runs: Sequence[results.Run], card: str) -> dict[str, dict]:
    hw = hardware.GPUS[card]
    roofs = roofline.roofs_for(hw)
    plan = pricing.compiled_plan(list(runs), card)
    out = {}
    for run in runs:
        if run.env.get("backend") != "cpu" or run.compiled:
            continue
        for r in filter(pricing.on_a_gpu, pricing.timed(run.records)):
            t, priced_on = pricing.priced(r, roofs, pricing.gpu_plans(run, r, card), own=False, plan=plan)
            metric = pricing.timed_as(r)[0]
            out[r.key] = {"experiment": r.experiment, "params": r.params, "metric": metric, "predicted": t,
                          "plan": priced_on, "run": run.path.name}
    return out


def _verdicts(runs: Sequence[results.Run], card: str) -> dict[str, str]:
    pairs = results.merge(list(runs))
    cpu = [(r, x) for r, x in pairs if r.env.get("backend") == "cpu"]
    return {c.id: v.verdict for c, v in claims.ledger(cpu + pricing.predicted_pairs(list(runs), card))}


def freeze(runs: Sequence[results.Run], cards: Sequence[str] = CARDS) -> dict:
    """The predictions of ``runs`` for each card, as ``write`` stores them."""
    out = {"schema": SCHEMA, "made": time.strftime("%Y-%m-%d", time.gmtime()), "model": model_fingerprint(),
           "runs": sorted({r.path.name for r in runs}), "cards": {}}
    for card in cards:
        mine = _for_card(runs, card)
        pairs = results.merge(mine)
        rows = [dataclasses.asdict(r) for r in summary.rows(mine, pairs, card)]
        out["cards"][card] = {"summary": rows, "cases": _cases(mine, card), "verdicts": _verdicts(mine, card)}
    out["sha256"] = _digest(out)
    return out


def _digest(frozen: dict) -> str:
    body = {k: v for k, v in frozen.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def intact(frozen: dict) -> bool:
    """Whether a frozen file holds what it was written with (its own digest)."""
    return frozen.get("sha256") == _digest(frozen)


def write(frozen: dict, folder: str | Path) -> Path:
    """Adds ``frozen`` to ``folder`` as ``<made>-model-<fingerprint>.json``.

    Raises:
      FileExistsError: predictions of this model are already frozen there (they are never rewritten).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{frozen['made']}-model-{frozen['model']}.json"
    same = sorted(folder.glob(f"*-model-{frozen['model']}.json"))
    if same:
        raise FileExistsError(f"{same[0]} already holds this model's predictions; they are never rewritten (a "
                              "changed model gets a new file)")
    with open(path, "x", encoding="utf-8") as f:
        json.dump(frozen, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def read(folder: str | Path) -> list[dict]:
    """The frozen predictions in ``folder``, oldest first."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(folder).glob("*-model-*.json"))]


@dataclasses.dataclass(frozen=True)
class Met:
    """A frozen prediction beside what a GPU run measured: ``what`` (a summary row's topic or a case), ``unit``."""

    what: str
    card: str
    predicted: float
    measured: float
    unit: str
    model: str

    @property
    def error(self) -> float:
        """predicted / measured - 1: positive where the model expected more (a rate) or longer (a time)."""
        return self.predicted / self.measured - 1


def compare(frozen: dict, runs: Sequence[results.Run]) -> list[Met]:
    """Each frozen prediction that a merged GPU run of the same card measured: the summary rows whose GPU figure was
    measured, then every timed case of the same key."""
    out = []
    gpu_runs = pricing.gpu_runs(list(runs))
    for card, got in frozen.get("cards", {}).items():
        mine = [g for g, name in gpu_runs if name == card]
        if not mine:
            continue
        pairs = results.merge(_for_card(runs, card))
        now = {r.topic: r for r in summary.rows(_for_card(runs, card), pairs, card)}
        for row in got["summary"]:
            m = now.get(row["topic"])
            if m and m.basis == "measured" and m.gpu_value and row.get("gpu_value") \
                    and row["basis"].startswith("predicted"):
                out.append(Met(row["topic"], card, row["gpu_value"], m.gpu_value, row["unit"], frozen["model"]))
        measured = pricing.measured_on(list(runs), card)
        for key, case in got["cases"].items():
            if key in measured:
                out.append(Met(key, card, case["predicted"], measured[key], "s", frozen["model"]))
    return out


FOLDER = fingerprint.ROOT / "reports" / "predictions"


def section(runs: Sequence[results.Run], folder: str | Path = FOLDER) -> figures.Section | None:
    """The report's section setting a merged GPU run's measurements beside every prediction frozen before it
    (``folder``), or None where no GPU run of a frozen card is merged."""
    met = [m for f in read(folder) if intact(f) for m in compare(f, runs)]
    if not met:
        return None
    rows = [[m.what if m.unit != "s" else m.what.replace(":", ": ", 1), m.card, m.model,
             labels.si(m.predicted, m.unit), labels.si(m.measured, m.unit), f"{m.error:+.0%}"] for m in met]
    errs = sorted(abs(m.error) for m in met)
    lead = (f"Predictions frozen before the GPU ran ({Path(folder).name}), beside "
            f"what it measured: {len(met)} figures, median |error| {errs[len(errs) // 2]:.0%}, "
            f"{sum(e <= 1 for e in errs) / len(errs):.0%} within 2x. A summary row's error is its rate's or time's; "
            "a case's is its timed seconds' (predicted / measured - 1).")
    return figures.Section("The predictions made before the GPU ran", "frozen", paragraphs=[lead],
                      tables=[figures.Table(["what", "card", "model", "predicted", "measured", "error"], rows,
                                       "Frozen predictions against the GPU's measurements")])
