"""Result records, their JSON Lines file and ``run.json``, exactly as docs/results.md describes them.

A record is appended and flushed to ``results.jsonl`` the moment it is measured, so a
killed run keeps everything before the kill. Readers refuse what they do not know (an
unknown ``schema``, a line that is not JSON) with one line naming the file; the one
exception is a last line without its newline, which is what a kill during a write leaves
behind, and is dropped with a warning.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import re
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from jaxgpu.ground import hardware

SCHEMA = 1
STATUSES = ("ok", "does_not_fit", "unsupported", "failed")
# How a record's figures were obtained: run on the device, compiled for a target never run on
# (compile-time facts only: memory analysis, library calls, collectives; never a time), or predicted
# by a model from a measured record (a report's twin, made when records are read: never written).
MODES = ("measured", "compiled", "predicted")
RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
# the compiled plans of the timed programs, beside the records they belong to (jaxgpu.pricing.plans): one line per
# (case key, plan), read into ``Run.plans``; derived facts, so a damaged line is dropped, not refused
PLANS_FILE = "plans.jsonl"


class ResultsError(ValueError):
    """A results file that cannot be read; the message names the file."""


class RunWriteError(OSError):
    """A run's file could not be written (a full disk, a folder gone read-only): the message names the file
    and the cause, and says that every record written before it is kept."""

    def __init__(self, path: Path, err: OSError, started: bool = True):
        then = (f"every record written before it is kept (free the space and continue with --resume {path.parent})"
                if started else "nothing was measured (free the space and start the run again)")
        super().__init__(err.errno, f"cannot write {path}: {err.strerror or err}; {then}")
        self.path, self.cause = path, err

    def __str__(self) -> str:
        return self.strerror


class FolderTaken(FileExistsError):
    """Another run has claimed the result folder (its results file exists)."""


class Unsupported(Exception):
    """The backend or dtype cannot run this case; recorded as ``status: unsupported``."""


class DoesNotFit(Exception):
    """The case needs more memory than the device has; recorded as ``status: does_not_fit``."""


_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM when allocating")


def status_of(err: BaseException) -> tuple[str, str]:
    """Maps an exception raised by a case to the contract's (status, one-line reason)."""
    line = (str(err).strip().splitlines() or [""])[0][:300]
    reason = f"{type(err).__name__}: {line}" if line else type(err).__name__
    if isinstance(err, Unsupported):
        return "unsupported", line
    if isinstance(err, (DoesNotFit, MemoryError)) or any(m in str(err) for m in _OOM_MARKERS):
        return "does_not_fit", reason
    return "failed", reason


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured case."""

    experiment: str
    params: dict[str, Any]
    metrics: dict[str, float]
    status: str = "ok"
    reason: str | None = None
    run_id: str = ""
    backend: str = ""
    device_kind: str = ""
    n_devices: int = 1
    benchmark_version: int = 1
    schema: int = SCHEMA
    mode: str = "measured"

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name, value in self.metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"metric {name!r} must be a plain number, got {type(value).__name__}")

    @property
    def key(self) -> str:
        """Identifies the case (experiment + params) across runs, for resume and merging."""
        return case_key(self.experiment, self.params)

    @property
    def compiled(self) -> bool:
        return self.mode == "compiled"

    @property
    def predicted(self) -> bool:
        return self.mode == "predicted"

    def to_dict(self) -> dict[str, Any]:
        d = {
            "schema": self.schema, "benchmark_version": self.benchmark_version, "run_id": self.run_id,
            "experiment": self.experiment, "backend": self.backend, "device_kind": self.device_kind,
            "n_devices": self.n_devices, "params": self.params, "status": self.status,
            "reason": self.reason, "metrics": {k: _finite_or_none(v) for k, v in self.metrics.items()},
        }
        if self.mode != "measured":  # a record without the field was measured (the contract)
            d["mode"] = self.mode
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        metrics = {k: (math.nan if v is None else v) for k, v in (d.get("metrics") or {}).items()}
        return cls(experiment=d["experiment"], params=d.get("params") or {}, metrics=metrics,
                   status=d.get("status", "ok"), reason=d.get("reason"), run_id=d.get("run_id", ""),
                   backend=d.get("backend", ""), device_kind=d.get("device_kind", ""),
                   n_devices=int(d.get("n_devices", 1)), benchmark_version=int(d.get("benchmark_version", 1)),
                   schema=int(d["schema"]), mode=d.get("mode", "measured"))


def _finite_or_none(v: float) -> float | None:
    # JSON has no NaN/inf; null marks "measured but not a number" (e.g. a diverged loss).
    return v if math.isfinite(v) else None


def case_key(experiment: str, params: dict[str, Any]) -> str:
    return experiment + ":" + json.dumps(params, sort_keys=True, separators=(",", ":"))


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:6]}"


CUT_FILE = "results.jsonl.cut"


class RunWriter:
    """Appends records to ``DIR/results.jsonl`` (flushed and synced each time) and writes ``run.json``.

    Opening a folder whose results file ends in a line without its newline (a run killed
    while writing) moves that cut line to ``results.jsonl.cut`` first, so appended records
    start on a line of their own; every complete record is kept.
    """

    def __init__(self, out_dir: str | os.PathLike, run_meta: dict[str, Any], new: bool = False):
        """``new``: the folder must hold no run yet; it is claimed by creating its results file exclusively, so
        of two runs started into it at once exactly one gets it (the other: ``FolderTaken``)."""
        self.dir = Path(out_dir)
        meta = {"schema": SCHEMA, **run_meta}
        run_path = self.dir / RUN_FILE
        results_path = self.dir / RESULTS_FILE
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if new:
                with open(results_path, "x", encoding="utf-8"):
                    pass
        except FileExistsError:
            raise FolderTaken(f"{self.dir} already holds a run (another may have just started there); choose "
                              f"another folder, or resume it with --resume {self.dir}") from None
        except OSError as err:
            raise RunWriteError(results_path if new else self.dir, err, started=False) from None
        if run_path.exists():
            # A resumed run keeps its first run.json and lists later sessions beside it.
            old = json.loads(run_path.read_text(encoding="utf-8"))
            old.setdefault("resumed_by", []).append(meta.get("run_id"))
            # Experiments first run by the resuming session bring their facts along.
            for key in ("info", "attachments"):
                old[key] = {**meta.get(key, {}), **old.get(key, {})}
            cfg_old, cfg_new = old.setdefault("config", {}), meta.get("config", {})
            cfg_old["experiments"] = list(dict.fromkeys([*cfg_old.get("experiments", []),
                                                         *cfg_new.get("experiments", [])]))
            cfg_old["per_experiment"] = {**cfg_new.get("per_experiment", {}), **cfg_old.get("per_experiment", {})}
            old["sessions"] = [*old.get("sessions", []), *meta.get("sessions", [])]
            for key in ("completion", "timing"):  # what this session does replaces what the last one did
                if key in meta:
                    old[key] = meta[key]
            meta = old
        self.meta = meta
        try:
            self._write_meta()
        except RunWriteError as err:
            if new:  # the folder is given back: a run that could not start leaves nothing half-made
                results_path.unlink(missing_ok=True)
                raise RunWriteError(run_path, err.cause, started=False) from None
            raise
        self.cut_line = set_aside_cut_line(results_path)
        try:
            self._f = open(results_path, "a", encoding="utf-8")
        except OSError as err:
            raise RunWriteError(results_path, err) from None

    def _write_meta(self) -> None:
        run_path = self.dir / RUN_FILE
        tmp = run_path.with_suffix(".json.tmp")
        try:  # a temporary file renamed over the old: a full disk leaves the last run.json whole
            tmp.write_text(json.dumps(self.meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, run_path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise RunWriteError(run_path, err) from None

    def update(self, **fields: Any) -> None:
        """Sets top-level fields of run.json (written at once, atomically)."""
        self.meta.update(fields)
        self._write_meta()

    def write(self, record: Record, plans: Iterable[dict[str, Any]] = ()) -> None:
        """Appends ``record``, then the ``plans`` of the program it timed (``jaxgpu.pricing.plans``), to their files."""
        if record.mode == "predicted":  # results.jsonl holds what was measured or compiled, never a model's output
            raise ValueError(f"a predicted record is not written to {RESULTS_FILE}: {record.experiment} "
                             f"{record.params}")
        try:  # a line cut by a full disk is set aside when the run is resumed (set_aside_cut_line)
            self._f.write(json.dumps(record.to_dict(), sort_keys=True) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as err:
            raise RunWriteError(self.dir / RESULTS_FILE, err) from None
        lines = "".join(json.dumps({"schema": SCHEMA, "run_id": record.run_id, "key": record.key, **p},
                                   sort_keys=True) + "\n" for p in plans)
        if lines:
            try:
                with open(self.dir / PLANS_FILE, "a", encoding="utf-8") as f:
                    f.write(lines)
            except OSError as err:
                raise RunWriteError(self.dir / PLANS_FILE, err) from None

    def close(self) -> None:
        try:
            self._f.close()
        except OSError:  # the data it held was written and synced, or its write already raised
            pass

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def set_aside_cut_line(path: Path) -> str | None:
    """Moves a last line without its newline (a write cut by a kill) from ``path`` to ``CUT_FILE``
    beside it; returns that line, or None when the file ends cleanly (or does not exist)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if not data or data.endswith(b"\n"):
        return None
    keep = data.rfind(b"\n") + 1
    with open(path.with_name(CUT_FILE), "ab") as f:
        f.write(data[keep:] + b"\n")
    with open(path, "r+b") as f:
        f.truncate(keep)
    return data[keep:].decode("utf-8", "replace")


@dataclasses.dataclass(frozen=True)
class Run:
    """One result folder: its ``run.json`` and its records."""

    path: Path
    meta: dict[str, Any]
    records: tuple[Record, ...]
    # case key -> plan name ("xla:cpu", "xla:gpu h200", ...) -> {"loop_steps": n, "kernels": [...], "devices": d}: the
    # compiled plans of the timed programs (jaxgpu.pricing.plans), the last written winning
    plans: dict[str, dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)

    @property
    def env(self) -> dict[str, Any]:
        return self.meta.get("env", {})

    @property
    def compiled(self) -> bool:
        """A run compiled for a target it never ran on (``--compile-for``): compile-time facts only."""
        return self.meta.get("mode") == "compiled"

    @property
    def predicted(self) -> bool:
        """A report's in-memory twin of a CPU run, its programs' times predicted on a GPU that was not run
        (``experiments.analysis.pricing``); never a folder."""
        return self.meta.get("mode") == "predicted"

    @property
    def label(self) -> str:
        """The run's name in tables and legends: its folder and its machine ("cpu-reference: Intel Xeon, 2
        cores"; "compiled-h200: NVIDIA H200, compiled, not run"), so two CPU runs never read alike."""
        return f"{self.path.name}: {self.machine}"

    @property
    def machine(self) -> str:
        """What the run ran on, in words: the CPU model and cores, or the GPU (and "compiled, not run" or
        "predicted, not run" where nothing ran on it)."""
        env = self.env
        kind = env.get("device_kind", "?")
        if env.get("backend") == "cpu" and not self.compiled:
            model = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b|@.*", "", str(env.get("cpu_model") or "CPU"))
            cores = env.get("cpu_cores")
            return " ".join(model.split()) + (f", {cores} cores" if cores else "")
        name = re.sub(r",? ?(compiled|predicted)(, not run)?$", "", str(kind))
        if self.compiled:
            return f"{name}, compiled, not run"
        if self.predicted:
            return f"{name}, predicted, not run"
        return name

    @property
    def hardware(self) -> hardware.Hardware | None:
        """The limits of the run's device, as the run recorded them (a GPU's datasheet, a CPU's estimate)."""
        d = self.meta.get("hardware")
        return hardware.Hardware.from_dict(d) if d else None

    @property
    def host(self) -> tuple:
        """The machine a run ran on, as far as its environment tells without a hostname: CPU
        model, cores and memory. Two runs with equal hosts ran on the same kind of machine."""
        env = self.env
        return env.get("cpu_model"), env.get("cpu_cores"), env.get("host_memory_bytes")

    @property
    def completion(self) -> dict[str, Any]:
        """How the run ended: ``state`` is complete, cut_by_budget, interrupted, or running (a
        run killed without the chance to say so); runs older than the field count as complete."""
        return self.meta.get("completion") or {"state": "complete"}


def cpu_partner(gpu_run: Run, runs: Iterable[Run]) -> Run | None:
    """The CPU run to set beside a GPU run: one made on the GPU's own host when there is one,
    else the first CPU run (None without any)."""
    cpus = [r for r in runs if r.env.get("backend") == "cpu" and not r.compiled]
    return next((r for r in cpus if r.host == gpu_run.host), cpus[0] if cpus else None)


def _check_schema(obj: dict[str, Any], where: str) -> None:
    if obj.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: unknown schema {obj.get('schema')!r} (this reader knows {SCHEMA})")


def iter_records(path: str | os.PathLike) -> Iterator[Record]:
    """Reads a ``results.jsonl``; raises ResultsError naming the file on anything unreadable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ResultsError(f"{path}: cannot read ({err.__class__.__name__}: {err})") from None
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last_unterminated = i == len(lines)  # text did not end with "\n"
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except ValueError as err:
            if last_unterminated:
                warnings.warn(f"{path}: line {i} is cut short (interrupted write); dropped", stacklevel=2)
                return
            raise ResultsError(f"{path}: line {i} is not a JSON record ({err})") from None
        _check_schema(obj, f"{path}: line {i}")
        try:
            yield Record.from_dict(obj)
        except (KeyError, TypeError, ValueError) as err:
            raise ResultsError(f"{path}: line {i} is not a valid record ({err})") from None


def read_run(out_dir: str | os.PathLike) -> Run:
    """Reads one result folder (``run.json`` + ``results.jsonl``)."""
    d = Path(out_dir)
    if not d.is_dir():
        raise ResultsError(f"{d}: not a result folder (no such directory)")
    run_path = d / RUN_FILE
    try:
        meta = json.loads(run_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{run_path}: missing; {d} is not a result folder") from None
    except (OSError, ValueError) as err:
        raise ResultsError(f"{run_path}: not readable JSON ({err})") from None
    if not isinstance(meta, dict):
        raise ResultsError(f"{run_path}: not a JSON object")
    _check_schema(meta, str(run_path))
    res_path = d / RESULTS_FILE
    records = tuple(iter_records(res_path)) if res_path.exists() else ()
    return Run(d, meta, records, read_plans(d / PLANS_FILE))


def read_plans(path: str | os.PathLike) -> dict[str, dict[str, dict[str, Any]]]:
    """A ``plans.jsonl`` as ``Run.plans`` holds it; {} without the file. A line that is not a plan (cut by a
    kill, damaged) is dropped with a warning: its record is then priced from its counts."""
    path = Path(path)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    except (OSError, UnicodeDecodeError) as err:
        warnings.warn(f"{path}: cannot read ({err.__class__.__name__}); the records are priced from their counts",
                      stacklevel=2)
        return out
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if obj.get("schema") != SCHEMA or not isinstance(obj["kernels"], list):
                raise ValueError
            out.setdefault(obj["key"], {})[obj["plan"]] = {"loop_steps": int(obj.get("loop_steps", 0)),
                                                          "kernels": obj["kernels"],
                                                          "devices": max(1, int(obj.get("devices", 1)))}
        except (ValueError, KeyError, TypeError, AttributeError):
            bad += 1
    if bad:
        warnings.warn(f"{path}: {bad} line(s) are not plans and were dropped; their records are priced from their "
                      "counts", stacklevel=2)
    return out


def completed_keys(records: Iterable[Record]) -> set[str]:
    """Case keys that need no re-run: everything but ``failed`` (a failure may be transient)."""
    return {r.key for r in records if r.status != "failed"}


def latest(records: Iterable[Record]) -> list[Record]:
    """One record per case key, the last written winning (a resumed failed case re-measured)."""
    by_key: dict[str, Record] = {}
    for r in records:
        by_key[r.key] = r
    return list(by_key.values())


def newest_methods(runs: Sequence[Run]) -> tuple[list[Run], list[str]]:
    """The runs with each experiment's records of its newest ``benchmark_version`` among them, and a sentence for
    each run whose older records were left out: figures measured by different methods do not share a table, a
    figure or a verdict (the older run measures the newer method again to come back)."""
    newest: dict[str, int] = {}
    for run in runs:
        for r in run.records:
            newest[r.experiment] = max(newest.get(r.experiment, 0), r.benchmark_version)
    kept, notes = [], []
    for run in runs:
        old = [r for r in run.records if r.benchmark_version < newest[r.experiment]]
        if not old:
            kept.append(run)
            continue
        gone = {id(r) for r in old}
        kept.append(dataclasses.replace(run, records=tuple(r for r in run.records if id(r) not in gone)))
        for name in sorted({r.experiment for r in old}):
            mine = sorted({r.benchmark_version for r in old if r.experiment == name})
            where = sorted(other.path.name for other in runs if any(
                r.experiment == name and r.benchmark_version == newest[name] for r in other.records))
            count = sum(r.experiment == name for r in old)
            notes.append(f"{run.path.name}'s {count} {name} records (benchmark_version {', '.join(map(str, mine))}) "
                         f"are left out: {', '.join(where)} hold {name} records of a newer method (version "
                         f"{newest[name]}); run {name} again on {run.path.name}'s machine to bring them back.")
    return kept, notes


def merge(runs: Iterable[Run]) -> list[tuple[Run, Record]]:
    """All records of several runs (several machines), each paired with its run, in a stable order."""
    out = []
    for run in sorted(runs, key=lambda r: (r.env.get("backend", ""), str(r.path))):
        out.extend((run, rec) for rec in latest(run.records))
    return out
