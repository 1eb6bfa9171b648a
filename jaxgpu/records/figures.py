"""Records -> figures and tables. Reads records only; it never measures.

Figures are ``matplotlib.figure.Figure`` objects made without pyplot, so they neither
need a display nor pile up in pyplot's state; a notebook shows them as they are
returned, and ``experiments.report`` saves them. Words and numbers are ``jaxgpu.records.labels``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.figure import Figure as _MplFigure
from matplotlib.ticker import ScalarFormatter

from jaxgpu.records import palette
from jaxgpu.records.labels import si
from jaxgpu.records.results import Run


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
    style: str = "-o"  # its line ("-" measured, "--" predicted) and, where no machine is compared, its marker
    color: str | None = None  # a colour of its own (else the palette's: by machine, or by variant on one machine)
    machine: str | None = None  # the machine it was had on (``palette.machine(run)``)
    variant: str | None = None  # what it is on that machine: an implementation, a precision, a collective

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


# a predicted series is dashed, with crosses: never mistaken for a measured one in a figure printed grey
PREDICTED_STYLE = "--x"


def style(run: Run, default: str = "-o") -> str:
    """The line style of a run's series: ``default`` when it ran, ``PREDICTED_STYLE`` when predicted."""
    return PREDICTED_STYLE if run.predicted else default


# A section's first figure is shown this many CSS px wide on a 1400 px screen (beside its words: the .pair grid's
# wider column of a 78rem page); a figure's text of s points reads there at s / 72 * 662 / (its width in inches) px.
SHOWN_PX = 662


def legend_size(fig) -> float:
    """The legend's size in points that reads at 10 px or more where the figure is shown narrowest (``SHOWN_PX``),
    8 points at the least."""
    return max(8.0, math.ceil(10 * 72 * fig.get_figwidth() / SHOWN_PX * 2) / 2)


def split_style(fmt: str) -> tuple[str, str]:
    """A matplotlib format ("-o", "--x", ":") as (line style, marker)."""
    for ls in ("--", "-.", "-", ":"):
        if fmt.startswith(ls):
            return ls, fmt[len(ls):]
    return "", fmt


def line_plot(series: Sequence[Series], *, xlabel: str, ylabel: str, title: str, limits: Sequence[Limit] = (),
              logx: bool = True, logy: bool = True, size: tuple[float, float] | None = None,
              xunit: str | None = None) -> Figure:
    """A log-log line plot of several series with dashed limit lines (``xunit``: x ticks as SI figures in
    that unit, "64 kB", "1.07 GB", rather than bare numbers)."""
    fig = Figure(figsize=size or ((8.5, 4.2) if len(series) > 4 else (7.0, 4.2)), dpi=100)
    ax = fig.add_subplot()
    machines = len({s.machine for s in series if s.machine})
    for s in series:
        line_style, mark = split_style(s.style)
        if s.color:
            color, gid = s.color, f"variant:{s.variant or s.label}"
        else:
            color, gid = palette.colour_of(s.machine, s.variant, machines)
            if machines > 1 and s.variant and mark:  # machines by colour, what each ran by marker
                mark = palette.marker(s.variant)
        (line,) = ax.plot(s.x, s.y, linestyle=line_style or "None", marker=mark or "None", label=s.label,
                          markersize=4, color=color, gid=gid)
        if s.lo is not None and s.hi is not None:
            ax.fill_between(s.x, s.lo, s.hi, color=color, alpha=0.2, linewidth=0)
    for lim in limits:
        if lim.y and math.isfinite(lim.y):
            ax.axhline(lim.y, linestyle="--", linewidth=1, color=palette.REFERENCE, gid="reference")
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
    if len(series) > 3 or limits:  # the legend under the axes, clear of the data and the limits' labels
        legend_below(fig, ax)
        return fig
    if series:
        ax.legend(fontsize=legend_size(fig), loc="best")
    fig.tight_layout()
    return fig


def finish(fig: Figure, ax, *, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
           logx: bool | int = False, logy: bool = False, grid: str = "both", legend: str = "best") -> Figure:
    """The axes set-up every figure shares: scales (logx may be a base), labels, grid, legend, layout.
    ``legend="below"`` puts the legend under the axes, for a figure whose points fill every corner (``"none"``:
    no legend yet, for a figure of several axes that ends with ``legend_below``)."""
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
    if legend == "below":
        legend_below(fig, ax)
        return fig
    if legend != "none" and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend_size(fig))
    fig.tight_layout()
    return fig


def unclash(fig: Figure, texts: list, step: float = 9.0, tries: int = 8) -> None:
    """Moves each annotation placed in offset points (``xytext``) that overlaps one placed before it to the nearest
    offset, ``step`` points at a time above or below its own, where it overlaps none of them (its own kept where
    ``tries`` steps each way find none): labels of points that lie close together, where no fixed offset keeps them
    apart for every run's numbers. Each candidate is tried against every label placed, so a label pushed off one is
    never pushed onto another. Call it once the layout is final."""
    fig.draw_without_rendering()
    placed = []
    for t in texts:
        dx, dy = t.xyann
        for k in range(2 * tries + 1):  # 0, +1, -1, +2, -2, ... steps
            t.xyann = (dx, dy + step * ((k + 1) // 2) * (1 if k % 2 else -1))
            if not any(t.get_window_extent().overlaps(b) for b in placed):
                break
        else:
            t.xyann = (dx, dy)
        placed.append(t.get_window_extent())


def bar_style(color: str, run: Run | None = None) -> dict[str, Any]:
    """A bar's look: solid where it was measured, hatched where compiled and not run, light with a dashed
    edge where predicted."""
    if run is not None and run.predicted:
        return {"color": color, "alpha": 0.45, "edgecolor": color, "linestyle": "--", "linewidth": 1.0}
    if run is not None and run.compiled:
        return {"color": "white", "edgecolor": color, "hatch": "//", "linewidth": 1.0}
    return {"color": color}


def legend_below(fig: Figure, *axes) -> None:
    """One legend for the whole figure, under its axes (from the entries of ``axes``, in turn): a figure of several
    axes whose curves fill them. Lays the figure out with room for it."""
    entries = [ax.get_legend_handles_labels() for ax in axes]
    handles, names = [h for hs, _ in entries for h in hs], [n for _, ns in entries for n in ns]
    for old in [*fig.legends, *(a.get_legend() for a in fig.axes)]:  # one legend: a second call replaces it
        if old is not None:
            old.remove()
    if not handles:
        fig.tight_layout()
        return
    size = legend_size(fig)
    longest = max(len(n) for n in names) * size * 0.55 / 72  # inches, roughly: the legend's widest entry
    cols = max(1, min(3, int(fig.get_figwidth() * 0.95 // (longest + 0.5))))
    rows = -(-len(names) // cols)
    room = (rows * size * 1.45 + 10) / 72  # inches under the axes for the legend's rows
    fig.set_figheight(fig.get_figheight() + room)  # the axes keep their height; the figure grows
    fig.legend(handles, names, loc="lower center", ncols=cols, fontsize=size, frameon=False)
    fig.tight_layout(rect=(0, room / fig.get_figheight(), 1, 1))


def step_figure(plans: Sequence[Any], title: str, shares: bool = False) -> Figure:
    """A step on each GPU and count (``jaxgpu.pricing.planner.ModelPlan``s or records alike: ``gpu``, ``devices``,
    ``memory_split``, ``time_split``, and the card's ``capacity`` in bytes where known): memory per GPU as XLA's
    plan splits it (held between steps, temporaries) against the card's usable share, and predicted device time
    by kind of kernel (``shares``: as shares of each step's, its total beside its name, for steps of unlike
    sizes). Compiled and predicted, never run."""
    rows = [p for p in plans if getattr(p, "memory_split", None)]
    fig = Figure(figsize=(9.0, 0.42 * len(rows) + 1.9), dpi=100)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    names = [f"{p.gpu} x{p.devices}" + (f" ({si(sum(p.time_split.values()), 's')})" if shares else "")
             for p in rows]
    ys = range(len(rows))
    held = [(p.memory_split["arguments"] + p.memory_split["outputs"] - p.memory_split["aliased"]) / 1e9 for p in rows]
    temp = [p.memory_split["temporaries"] / 1e9 for p in rows]
    for part, vals, left in (("held between steps", held, None), ("temporaries", temp, held)):
        palette.tag(ax1.barh(list(ys), vals, left=left, color=palette.variant_color(part), label=part),
                    f"variant:{part}")
    for y, p in zip(ys, rows):
        cap = getattr(p, "capacity", None)
        if cap:
            ax1.plot([cap / 1e9] * 2, [y - 0.4, y + 0.4], color=palette.REFERENCE, linewidth=1.5, gid="reference")
    ax1.plot([], [], color=palette.REFERENCE, linewidth=1.5, label="the card's usable share", gid="reference")
    ax1.set_yticks(list(ys), names, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("GB per GPU (XLA:GPU's memory plan)")
    left = [0.0] * len(rows)
    kinds = [k for k in ("matrix products", "fused attention", "other kernels", "collectives")
             if any(p.time_split.get(k) for p in rows)]
    for kind in kinds:
        vals = [p.time_split.get(kind, 0.0) / (sum(p.time_split.values()) or 1) * 100 if shares
                else p.time_split.get(kind, 0.0) * 1e3 for p in rows]
        palette.tag(ax2.barh(list(ys), vals, left=list(left), color=palette.variant_color(kind), label=kind),
                    f"variant:{kind}")
        left = [a + b for a, b in zip(left, vals)]
    ax2.set_yticks(list(ys), [""] * len(rows))
    ax2.invert_yaxis()
    ax2.set_xlabel("share of the predicted step (%), by kernel kind" if shares else
                   "predicted ms per step, by kernel kind")
    for ax in (ax1, ax2):
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    legend_below(fig, ax1, ax2)
    return fig


def layout_figure(candidates: Sequence[Any], capacity: float, title: str) -> Figure:
    """A layout search's priced candidates (``jaxgpu.pricing.layouts.Candidate``s with ``seconds`` and
    ``bytes_per_device``): predicted seconds a step against the GB a GPU XLA's plan holds, those that fit apart from
    those that do not, the best marked, the card's usable share a vertical line. Compiled and predicted, never run."""
    fig = Figure(figsize=(7.5, 4.6), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    priced = [k for k in candidates if k.seconds is not None]
    for label, group in (("fits the card", [k for k in priced if k.fits]),
                         ("does not fit the card", [k for k in priced if not k.fits])):
        color = palette.variant_color(label)
        if group:
            palette.tag(ax.scatter([k.bytes_per_device / 1e9 for k in group], [k.seconds for k in group],
                                   marker="x", s=28, color=color, label=f"{label} ({len(group)})"), f"variant:{label}")
    best = next((k for k in priced if k.fate == "best"), None)
    if best is not None:
        ax.scatter([best.bytes_per_device / 1e9], [best.seconds], s=140, facecolors="none",
                   edgecolors=palette.REFERENCE, linewidths=1.5, label=f"best: {best.layout}", gid="reference")
    ax.axvline(capacity / 1e9, color=palette.REFERENCE, linewidth=1.2, linestyle="--", gid="reference",
               label=f"the card's usable share ({capacity / 1e9:.0f} GB)")
    return finish(fig, ax, xlabel="GB per GPU (XLA:GPU's memory plan)", ylabel="predicted seconds per step",
                  title=title + " (compiled, predicted, not run)", legend="below")


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
