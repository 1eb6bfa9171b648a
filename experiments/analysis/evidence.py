"""The one door a claim's rule reads records through, and the log of what it read.

A rule asks ``Evidence`` for records by experiment and params (``ok``, ``records``), for one run's share
of them (``of``), for the GPU run and the CPU run beside it (``paired``) and for what an experiment recorded
about the machine (``info``). The door logs every request (``Log``): a test holds every rule to its
claim's declared reads (``Claim.reads``), which decide the ledger's links and the cases a budgeted run
measures first (``claims.rests_on``).

Records come back with their metrics and params guarded: a rule that asks for a metric a record lacks
(an older run, a damaged file) raises ``MissingField``, which the ledger turns into "not run". Any
other exception in a rule is a bug in the rule and is not caught.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from jaxgpu.records.results import Record, Run, cpu_partner

Pairs = list[tuple[Run, Record]]


class MissingField(KeyError):
    """A record lacks a metric or param its rule reads: the record cannot be used, the verdict is not run."""

    def __str__(self) -> str:
        return str(self.args[0])


class _Guarded(dict):
    def __init__(self, data: dict, where: str):
        super().__init__(data)
        self._where = where

    def __missing__(self, key: str) -> Any:
        raise MissingField(f"{self._where} has no {key!r}")


def guard(rec: Record) -> Record:
    """The record with its metrics and params guarded: a missing one raises ``MissingField`` naming it."""
    where = f"a {rec.experiment} record ({', '.join(f'{k}={v}' for k, v in list(rec.params.items())[:4])})"
    return dataclasses.replace(rec, metrics=_Guarded(rec.metrics, where + "'s metrics"),
                               params=_Guarded(rec.params, where + "'s params"))


@dataclasses.dataclass
class Log:
    """What a rule asked the door for: (experiment, the params its records had to include), or (experiment,
    None) for what an experiment recorded about the machine rather than a case."""

    reads: list[tuple[str, dict[str, Any] | None]] = dataclasses.field(default_factory=list)


def covers(declared: dict[str, Any] | None, asked: dict[str, Any] | None) -> bool:
    """Whether a declared read covers what was asked: every record the request can return matches it."""
    if declared is None or asked is None:
        return declared is None and asked is None
    return all(k in asked and asked[k] == v for k, v in declared.items())


class Evidence:
    """``(Run, Record)`` pairs seen through the door: every experiment read is logged in ``read``."""

    def __init__(self, pairs: Iterable[tuple[Run, Record]], log: Log | None = None):
        self._pairs = [(run, rec if isinstance(rec.metrics, _Guarded) else guard(rec)) for run, rec in pairs]
        self.log = Log() if log is None else log

    @property
    def read(self) -> set[str]:
        """The experiments read so far."""
        return {experiment for experiment, _ in self.log.reads}

    def fresh(self) -> Evidence:
        """The same records with an empty log (each rule gets its own)."""
        return _with(self._pairs, Log())

    def records(self, experiment: str, *statuses: str, **params: Any) -> list[Record]:
        """The records of ``experiment`` (with one of ``statuses``, when given) whose params include ``params``."""
        self.log.reads.append((experiment, dict(params)))
        return [r for _, r in self._pairs if r.experiment == experiment and (not statuses or r.status in statuses)
                and all(r.params.get(k) == v for k, v in params.items())]

    def ok(self, experiment: str, backend: str | None = None, **params: Any) -> list[Record]:
        """The ``ok`` records of ``experiment`` on ``backend`` (any when None) whose params include ``params``."""
        return [r for r in self.records(experiment, "ok", **params) if backend is None or r.backend == backend]

    @property
    def runs(self) -> list[Run]:
        return list({id(run): run for run, _ in self._pairs}.values())

    def runs_of(self, records: Iterable[Record]) -> list[Run]:
        """The runs these records (as this door handed them out) came from."""
        ids = {id(r) for r in records}
        return list({id(run): run for run, rec in self._pairs if id(rec) in ids}.values())

    def paired(self, experiment: str | None = None, **params: Any) -> tuple[Run | None, Run | None]:
        """(a GPU run, the CPU run beside it: its own host's where the records have one), or (None, None)
        without a GPU run. With ``experiment``: the GPU run that holds its ``ok`` records with ``params`` (a GPU
        check's parts are runs of their own; of two tries that hold them, the later), else the first GPU run."""
        runs = self.runs
        gpus = [r for r in runs if r.env.get("backend") == "gpu"]
        if experiment is not None:
            holding = self.runs_of(self.ok(experiment, "gpu", **params))
            gpus = sorted(holding, key=lambda r: r.meta.get("run_id") or "", reverse=True) or gpus
        gpu = gpus[0] if gpus else None
        return (gpu, cpu_partner(gpu, runs)) if gpu is not None else (None, None)

    def of(self, run: Run | None) -> Evidence:
        """The evidence of one run (all of it when ``run`` is None), logging into the same log."""
        return _with([(r, x) for r, x in self._pairs if run is None or r is run], self.log)

    def info(self, run: Run, experiment: str) -> dict[str, Any]:
        """What ``experiment`` recorded about the machine of ``run`` (run.json ``info``; no case's record)."""
        self.log.reads.append((experiment, None))
        return (run.meta.get("info", {}) or {}).get(experiment) or {}


def _with(guarded: Pairs, log: Log) -> Evidence:
    out = Evidence((), log)
    out._pairs = guarded
    return out
