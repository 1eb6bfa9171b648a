"""Records -> figures and tables. Reads records only; it never measures.

Figures are ``matplotlib.figure.Figure`` objects made without pyplot, so they neither
need a display nor pile up in pyplot's state; a notebook shows them as they are
returned, and ``experiments.report`` saves them.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from matplotlib.figure import Figure as _MplFigure
from matplotlib.ticker import ScalarFormatter

from jaxgpu.results import Record, Run

Pair = tuple[Run, Record]


class Figure(_MplFigure):
    """A matplotlib Figure that a notebook shows as a PNG when a cell returns it (no pyplot needed)."""

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png")
        return buf.getvalue()


@dataclasses.dataclass
class Table:
    """Rows under headers; a notebook shows it as an HTML table."""

    headers: list[str]
    rows: list[list[Any]]
    caption: str = ""
    # column -> {cell text prefix: mark}: an HTML rendering colours those cells (the text stays the same)
    marks: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    # per row, text a rendering folds under the row's first cell (the rule behind a verdict, say)
    details: list[str] = dataclasses.field(default_factory=list)
    details_title: str = "Details"  # what the folded texts are, as a whole ("The rules")
    id: str = ""  # an HTML id for the table

    def mark(self, column: int, value: Any) -> str | None:
        """The mark of a cell: the longest prefix of its text that ``marks`` names for its column."""
        found = [(len(k), m) for k, m in self.marks.get(column, {}).items() if str(value).startswith(k)]
        return max(found)[1] if found else None

    def _repr_html_(self) -> str:
        import html

        cell = lambda tag, v: f"<{tag}>{html.escape(str(v))}</{tag}>"
        head = "".join(cell("th", h) for h in self.headers)
        body = "".join("<tr>" + "".join(cell("td", v) for v in row) + "</tr>" for row in self.rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclasses.dataclass
class Plot:
    """A figure and the one-line takeaway computed from the data it shows."""

    name: str  # file stem, unique in the report
    figure: Figure
    takeaway: str


@dataclasses.dataclass
class Section:
    title: str
    anchor: str
    claims: tuple[str, ...] = ()
    paragraphs: list[str] = dataclasses.field(default_factory=list)
    lead: str = ""  # what the section measures, in a sentence: shown beside its first figure
    plots: list[Plot] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    # file name -> JSON-able data a report writes beside itself (ledger.json, summary.json)
    exports: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[float]
    lo: Sequence[float] | None = None  # spread band (e.g. the quartiles), same unit as y
    hi: Sequence[float] | None = None
    style: str = "-o"
    color: str | None = None  # one colour per thing compared (a collective, a preset), whichever run drew it

    @classmethod
    def of(cls, label: str, points: Iterable[Sequence[float]], **kw: Any) -> Series:
        """A series from (x, y, ...) points, sorted by x: what every view's curves are made of."""
        pts = sorted(points)
        return cls(label, [p[0] for p in pts], [p[1] for p in pts], **kw)


@dataclasses.dataclass(frozen=True)
class Limit:
    """A horizontal limit line: a peak or the best peer."""

    label: str
    y: float


def measured(pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs of runs that ran: without a report's predicted twins (``Run.predicted``, ``Record.predicted``),
    which a view draws in its figures, labelled, but never lists in its tables or sums into its takeaways."""
    return [(run, rec) for run, rec in pairs if not (run.predicted or rec.predicted)]


# a predicted series is dashed, with crosses: never mistaken for a measured one in a figure printed grey
PREDICTED_STYLE = "--x"


def style(run: Run, default: str = "-o") -> str:
    """The line style of a run's series: ``default`` when it ran, ``PREDICTED_STYLE`` when predicted."""
    return PREDICTED_STYLE if run.predicted else default


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


def line_plot(series: Sequence[Series], *, xlabel: str, ylabel: str, title: str, limits: Sequence[Limit] = (),
              logx: bool = True, logy: bool = True, size: tuple[float, float] | None = None,
              xunit: str | None = None) -> Figure:
    """A log-log line plot of several series with dashed limit lines (``xunit``: x ticks as SI figures in
    that unit, "64 kB", "1.07 GB", rather than bare numbers)."""
    fig = Figure(figsize=size or ((8.5, 4.2) if len(series) > 4 else (7.0, 4.2)), dpi=100)
    ax = fig.add_subplot()
    colors = {}
    for s in series:
        (line,) = ax.plot(s.x, s.y, s.style, label=s.label, markersize=4, **({"color": s.color} if s.color else {}))
        colors[s.label] = line.get_color()
        if s.lo is not None and s.hi is not None:
            ax.fill_between(s.x, s.lo, s.hi, color=line.get_color(), alpha=0.2, linewidth=0)
    for lim in limits:
        if lim.y and math.isfinite(lim.y):
            ax.axhline(lim.y, linestyle="--", linewidth=1, color="0.4")
            ax.annotate(lim.label, (0.01, lim.y), xycoords=("axes fraction", "data"), fontsize=7,
                        color="0.3", va="bottom")
    if logx:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
    if xunit is not None:  # decades, each as an SI figure: "10 MB", "100 MB", "1 GB"
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_xscale("log", base=10)
        ax.xaxis.set_major_locator(LogLocator(base=10))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v, xunit, 2)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if len(series) > 4:  # many series: legend beside the axes, clear of the data and limit labels
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    elif series:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def finish(fig: Figure, ax, *, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
           logx: bool | int = False, logy: bool = False, grid: str = "both", legend: str = "best") -> Figure:
    """The axes set-up every figure shares: scales (logx may be a base), labels, grid, legend, layout.
    ``legend="below"`` puts the legend under the axes, for a figure whose points fill every corner."""
    if logx:
        ax.set_xscale("log", base=2 if logx is True else logx)
    if logy:
        ax.set_yscale("log")
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", axis=grid if grid in ("x", "y") else "both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        if legend == "below":
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
        else:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


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


def env_table(runs: Sequence[Run]) -> Table:
    """One column per run: where and with what it ran."""
    keys = [("backend", "backend"), ("device_kind", "device"), ("n_devices", "devices"),
            ("cpu_model", "CPU"), ("cpu_cores", "CPU cores"), ("device_memory_bytes", "device memory"),
            ("jax", "jax"), ("jaxlib", "jaxlib"), ("jax_plugins", "jax plugins"), ("flax", "flax"),
            ("optax", "optax"), ("numpy", "numpy"), ("torch", "torch"), ("python", "python"),
            ("driver_version", "driver"), ("cuda_driver_api_version", "CUDA (driver)"),
            ("platform_version", "platform"), ("allocator", "host allocator"), ("xla_flags", "XLA_FLAGS"),
            ("git_commit", "git commit")]
    rows = []
    for key, label in keys:
        vals = [run.env.get(key) for run in runs]
        if all(v in (None, "", {}) for v in vals):
            continue
        row = [label]
        for v in vals:
            if key.endswith("_bytes") and isinstance(v, (int, float)):
                v = f"{v / 1e9:.1f} GB"
            elif isinstance(v, dict):
                v = ", ".join(f"{k} {x}" for k, x in v.items()) or "-"
            elif key == "git_commit" and v:
                v = v[:10]
            row.append("-" if v in (None, "") else str(v))
        rows.append(row)
    rows.append(["run id", *[str(r.meta.get("run_id", "?")) for r in runs]])
    rows.append(["profile", *[str(r.meta.get("config", {}).get("profile", "?")) for r in runs]])
    rows.append(["experiments", *[", ".join(r.meta.get("config", {}).get("experiments", [])) or "?" for r in runs]])
    # the folder names tell two runs of one backend (two machines) apart
    return Table(["", *[f"{r.label}: {r.path.name}" for r in runs]], rows, "Environment of each run")


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
