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
    plots: list[Plot] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[float]
    lo: Sequence[float] | None = None  # spread band (e.g. the quartiles), same unit as y
    hi: Sequence[float] | None = None
    style: str = "-o"

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
    """Groups pairs by run, keyed by the run's label (made unique if two runs share one)."""
    groups: dict[str, tuple[Run, list[Record]]] = {}
    seen: dict[str, str] = {}
    for run, rec in pairs:
        key = str(run.path)
        if key not in seen:
            label = run.label
            n = 2
            while label in groups:
                label = f"{run.label} #{n}"
                n += 1
            seen[key] = label
            groups[label] = (run, [])
        groups[seen[key]][1].append(rec)
    return groups


def line_plot(series: Sequence[Series], *, xlabel: str, ylabel: str, title: str, limits: Sequence[Limit] = (),
              logx: bool = True, logy: bool = True, size: tuple[float, float] | None = None) -> Figure:
    """A log-log line plot of several series with dashed limit lines."""
    fig = Figure(figsize=size or ((8.5, 4.2) if len(series) > 4 else (7.0, 4.2)), dpi=100)
    ax = fig.add_subplot()
    colors = {}
    for s in series:
        (line,) = ax.plot(s.x, s.y, s.style, label=s.label, markersize=4)
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
           logx: bool | int = False, logy: bool = False, grid: str = "both") -> Figure:
    """The axes set-up every figure shares: scales (logx may be a base), labels, grid, legend, layout."""
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
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a table: 3 significant digits, scientific when tiny or huge."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e6):
        return str(int(x))
    ax = abs(x)
    if ax != 0 and (ax < 1e-2 or ax >= 1e6):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def not_ok(pairs: Iterable[Pair], what: Callable[[Record], Any] = lambda x: x.params) -> list[str]:
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
                v = f"{v / 2**30:.1f} GiB"
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
