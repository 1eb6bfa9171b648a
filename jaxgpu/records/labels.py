"""Records -> words: how a case, a number, a library call is written in a table or a sentence, and which records a
view reads. No matplotlib and no JAX: the harness labels its progress lines with it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any

from jaxgpu.records.results import Record, Run

Pair = tuple[Run, Record]


def measured(pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs of runs that ran: without a report's predicted twins (``Run.predicted``, ``Record.predicted``),
    which a view draws in its figures, labelled, but never lists in its tables or sums into its takeaways."""
    return [(run, rec) for run, rec in pairs if not (run.predicted or rec.predicted)]


def ok(pairs: Iterable[Pair], experiment: str | None = None, **params: Any) -> list[Pair]:
    """The ``ok`` records (of one experiment, matching ``params``), with their runs."""
    out = []
    for run, rec in pairs:
        if rec.status != "ok" or (experiment and rec.experiment != experiment):
            continue
        if all(rec.params.get(k) == v for k, v in params.items()):
            out.append((run, rec))
    return out


def by_run(pairs: Iterable[Pair]) -> dict[str, tuple[Run, list[Record]]]:
    """Groups pairs by run, keyed by the run's label (its folder and machine; where two folders share a
    name, with their parent folders' names in front)."""
    groups: dict[str, tuple[Run, list[Record]]] = {}
    seen: dict[str, str] = {}
    for run, rec in pairs:
        key = str(run.path)
        if key not in seen:
            label = run.label
            # two folders of one name (two machines' reports/runs/...): the parent folders tell them apart
            parent = run.path.resolve().parent
            while label in groups and parent != parent.parent:
                label = f"{parent.name}/{label}"
                parent = parent.parent
            seen[key] = label
            groups[label] = (run, [])
        groups[seen[key]][1].append(rec)
    return groups


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a table: 3 significant digits, thousands separated from 1,000 ("1,790"), scientific only
    when tiny (an error of 2.4e-03) or past 10^15."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    ax = abs(x)
    if 1000 <= ax < 1e15:
        return f"{x:,.0f}"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and ax < 1000):
        return str(int(x))
    if ax != 0 and (ax < 1e-2 or ax >= 1e15):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def not_ok(pairs: Iterable[Pair], what: Callable[[Record], Any] = lambda x: case_label(x.params)) -> list[str]:
    """One sentence per run and reason for the cases that did not run: "run: case(s): status: reason",
    cases that share a status and reason in one sentence (five collectives over one device, say)."""
    groups: dict[tuple[str, str, str | None], list[str]] = {}
    for run, x in pairs:
        if x.status != "ok":
            groups.setdefault((run.label, x.status, x.reason), []).append(str(what(x)))
    return [f"{label}: {'; '.join(cases)}: {status.replace('_', ' ')}: {reason}"
            for (label, status, reason), cases in groups.items()]


_LIBRARY_NAMES = {"cublaslt_f8": "cuBLASLt FP8", "cublaslt": "cuBLASLt", "cublas": "cuBLAS", "cudnn": "cuDNN",
                  "cusolver": "cuSOLVER", "triton_gemm": "Triton GEMM", "triton": "Triton", "ynnpack": "YNNPACK",
                  "onednn": "oneDNN"}


def libraries(metrics: dict[str, float]) -> str:
    """The library calls a compiled record counted (``calls_*`` metrics), in words: "cuBLASLt x8, Triton x3"."""
    found = [(k[6:], int(v)) for k, v in metrics.items() if k.startswith("calls_") and v]
    return ", ".join(f"{_LIBRARY_NAMES.get(k, k)} x{n}" for k, n in found) or "none (XLA's own kernels)"


def first_seen(values: Iterable[Any]) -> list[Any]:
    """The distinct values in the order they first appear (a legend in the order the cases were measured)."""
    return list(dict.fromkeys(values))


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


# How a case's parameters read in words: names a value speaks for itself under, words for values, units.
_SELF_EVIDENT = {"case", "variant", "kind", "kernel", "direction", "preset", "model", "shape", "mode", "impl",
                 "dtype", "feed", "optimizer", "collective", "gpu", "allocator", "role"}
_WORDS = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8 e4m3",
          "float8_e5m2": "fp8 e5m2", "tensorfloat32": "TF32", "highest": "full fp32", "jit_sharding": "jit + sharding",
          "fori_loop": "fori_loop", "to_target": "to target accuracy", "mlp_step": "MLP step", "on_device_copy":
          "on-device copy", "host_to_device": "host to device", "device_to_host": "device to host"}
_NAMES = {"n": "n", "m": "m", "k": "k", "batch": "batch", "width": "width", "depth": "depth", "seq": "sequence",
          "heads": "heads", "devices": "devices", "data": "data axis", "model": "model axis", "target": "target",
          "widths": "widths", "base": "base", "epoch": "epoch", "accumulate": "accumulating in",
          "accumulator": "accumulating in", "precision": "precision", "bytes": "size", "held_out": "held out"}


def _value(key: str, v: Any) -> str:
    if key == "bytes" and isinstance(v, (int, float)):
        return si(v, "B")
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return "x".join(_value("", x) for x in v)
    if isinstance(v, int) and abs(v) >= 1000:
        return f"{v:,}"
    return _WORDS.get(str(v), str(v).replace("_", " "))


def case_label(params: dict[str, Any], leave_out: Iterable[str] = ()) -> str:
    """A case's parameters in words for a table or legend ("sweep, fp8 e4m3, n 1,024, accumulating in fp32"):
    values that speak for themselves alone, the rest after their name, nothing as ``key=value``."""
    out = []
    for k, v in params.items():
        if k in leave_out or v is None:
            continue
        if k == "precision" and v == "default":
            continue
        text = _value(k, v) if k in _SELF_EVIDENT else f"{_NAMES.get(k, k.replace('_', ' '))} {_value(k, v)}"
        if text not in out:  # a preset and the dtype it names read alike: once
            out.append(text)
    return ", ".join(out)


def a_or_an(name: str) -> str:
    """The article before a device's name as it is said: "an H100", "an A100", "an L4", "a B200", "a GPU"."""
    # an initialism is read letter by letter: the letters whose names open on a vowel sound take "an"
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


def si(x: float | None, unit: str = "", digits: int = 3) -> str:
    """A number with an SI prefix and its unit, decimal throughout (1 GB = 1e9 bytes): "1.34 TB", "54 us"."""
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return f"0 {unit}".strip()
    prefixes = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")]
    scale, p = next(((s, p) for s, p in prefixes if abs(x) >= s * 0.9995), prefixes[-1])
    v = x / scale
    text = f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"
    if unit and unit not in _SI_UNITS:  # a count, not a unit: "2.12 M samples/s"
        return f"{text} {p} {unit}" if p else f"{text} {unit}"
    return f"{text} {p}{unit}".strip()


_SI_UNITS = {"s", "B", "B/s", "FLOP/s", "FLOP", "Hz", "W"}


def said(run: Run) -> str:
    """How a sentence names a run: its label, or for a report's predicted twin (``Run.predicted``) what it is:
    "predicted on H200 SXM, not run (the programs of cpu-reference)"."""
    if not run.predicted:
        return run.label
    gpu = run.hardware.name if run.hardware else "a GPU"
    return f"predicted on {gpu}, not run (the programs of {run.path.name.split('-predicted-')[0]})"


def opener(run: Run, comma: bool = False) -> str:
    """A sentence's start about a run: "On cpu-reference: Intel Xeon" (and a comma where the sentence wants one),
    or for a predicted twin "Predicted on H200 SXM, not run (the programs of cpu-reference):"."""
    if not run.predicted:
        return f"On {run.label}" + ("," if comma else "")
    words = said(run)
    return f"{words[0].upper()}{words[1:]}:"
