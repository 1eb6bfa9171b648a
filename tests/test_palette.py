"""Every figure of a report read back: one colour per meaning across all of them, a machine's colour never
lent to anything else, legends that read at 10 px and cover no data, no two labels on top of each other."""

import itertools
from pathlib import Path

import matplotlib.colors as mc
import pytest
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from jaxgpu.records import figures, palette

from experiments.reporting import build, render

ROOT = Path(__file__).resolve().parents[1]
STUDY = [ROOT / "reports" / d for d in ("cpu-reference", "cpu-multidevice", "compiled-h200", "compiled-h100",
                                         "priced-published")]


@pytest.fixture(scope="module")
def plots():
    _, runs, notes = render.once(STUDY)
    out = [p for s in build.build_sections(runs, notes) for p in s.plots]
    for p in out:
        p.figure.draw_without_rendering()  # lays out the text, so extents are where the PNG puts them
    return out


def _hex(c) -> str:
    return mc.to_hex(c, keep_alpha=False)


def _drawn(ax):
    """(artist, colour) of each line and bar an axes draws with a meaning (a label or a gid)."""
    for line in ax.lines:
        if line.get_gid() or not line.get_label().startswith("_"):
            yield line, _hex(line.get_color())
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and (patch.get_gid() or patch.get_width() or patch.get_height()):
            # a hatched bar (compiled, not run) wears its colour on its edge and its hatching
            yield patch, _hex(patch.get_edgecolor() if patch.get_hatch() else patch.get_facecolor())


def test_each_meaning_keeps_one_colour_and_a_machines_colour_is_its_own(plots):
    check_colours(plots)
    gids = {a.get_gid() for p in plots for ax in p.figure.get_axes() for a, _ in _drawn(ax)}
    assert {"machine:H200", "machine:Intel", "machine:AMD", "machine:H100"} <= gids, gids


def check_colours(plots) -> None:
    seen: dict[str, set[str]] = {}
    where: dict[str, set[str]] = {}
    machine_colours = {_hex(c): k for k, c in palette.MACHINES.items()}
    for p in plots:
        for ax in p.figure.get_axes():
            for artist, colour in _drawn(ax):
                gid = artist.get_gid()
                assert gid, f"{p.name}: {type(artist).__name__} {artist.get_label()!r} drawn without a meaning"
                seen.setdefault(gid, set()).add(colour)
                where.setdefault(gid, set()).add(p.name)
                if colour in machine_colours:
                    assert gid == f"machine:{machine_colours[colour]}", (p.name, gid, colour)
    mixed = {g: (c, sorted(where[g])) for g, c in seen.items() if len(c) > 1}
    assert not mixed, mixed


def test_the_palette_keeps_machines_apart_from_everything_else():
    assert len(set(palette.MACHINES.values())) == len(palette.MACHINES)
    assert not set(palette.VARIANTS) & set(palette.MACHINES.values())
    assert palette.variant_color("bf16") == palette.variant_color("bf16") != palette.variant_color("fp32")


def _legend_reads(p, leg) -> None:
    """A legend's text reads at 10 px where the figure is shown narrowest, and its entries look different."""
    px = leg.get_texts()[0].get_fontsize() / 72 * figures.SHOWN_PX / p.figure.get_figwidth()
    assert px >= 10 - 1e-9, f"{p.name}: legend at {px:.1f} px"
    keys = []
    for h in leg.legend_handles:
        if isinstance(h, Line2D):
            keys.append((_hex(h.get_color()), h.get_marker(), h.get_linestyle()))
        elif isinstance(h, Rectangle):
            keys.append((_hex(h.get_facecolor()), h.get_hatch(), h.get_linestyle()))
    assert len(set(keys)) == len(keys), f"{p.name}: two legend entries look alike: {keys}"


def test_a_legend_tells_its_entries_apart_reads_at_10px_and_covers_no_data(plots):
    check_legends(plots)


def check_legends(plots) -> None:
    for p in plots:
        fig = p.figure
        for leg in fig.legends:  # a figure's legend: under its axes, clear of each axes and its labels
            _legend_reads(p, leg)
            for ax in fig.get_axes():
                assert not leg.get_window_extent().overlaps(ax.get_tightbbox()), f"{p.name}: the legend covers axes"
        for ax in fig.get_axes():
            leg = ax.get_legend()
            if leg is None:
                continue
            _legend_reads(p, leg)
            box = leg.get_window_extent()
            for line in ax.lines:
                if line.get_label().startswith("_") and not line.get_gid():
                    continue
                pts = ax.transData.transform(list(zip(line.get_xdata(), line.get_ydata())))
                inside = [(x, y) for x, y in pts if box.x0 < x < box.x1 and box.y0 < y < box.y1]
                assert not inside, f"{p.name}: the legend covers {line.get_label()!r}"
            for patch in ax.patches:
                if isinstance(patch, Rectangle) and patch.get_height():
                    bar = patch.get_window_extent()
                    assert not bar.overlaps(box), f"{p.name}: the legend covers a bar"
            for t in ax.texts:
                if t.get_text().strip():
                    assert not t.get_window_extent().overlaps(box), f"{p.name}: the legend covers {t.get_text()!r}"


def test_no_two_labels_of_a_figure_overlap(plots):
    check_labels(plots)


def check_labels(plots) -> None:
    for p in plots:
        for ax in p.figure.get_axes():
            ticks = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text().strip()]
            lo, hi = ax.get_xlim()
            ticks = [t for t in ticks if min(lo, hi) <= t.get_position()[0] <= max(lo, hi)]
            for a, b in itertools.combinations(ticks, 2):
                assert not a.get_window_extent().overlaps(b.get_window_extent()), \
                    f"{p.name}: x labels {a.get_text()!r} and {b.get_text()!r} collide"
            texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
            for a, b in itertools.combinations(texts, 2):
                assert not a.get_window_extent().overlaps(b.get_window_extent()), \
                    f"{p.name}: {a.get_text()!r} and {b.get_text()!r} collide"


def test_labels_of_points_close_together_are_moved_apart():
    # a tiny run on JAX 0.11 put its roofline's matvec and power points this close: one label below its point, the
    # other above its own, lower one, and the two collided
    from jaxgpu.records import figures

    fig = figures.Figure(figsize=(7, 6), dpi=100)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([1, 1.05, 100], [100, 93, 1000], "s")
    a = ax.annotate("matvec", (1, 100), fontsize=7, xytext=(4, -8), textcoords="offset points")
    b = ax.annotate("power", (1.05, 93), fontsize=7, xytext=(4, 6), textcoords="offset points")
    figures.finish(fig, ax, legend="none")
    fig.draw_without_rendering()
    assert a.get_window_extent().overlaps(b.get_window_extent())
    figures.unclash(fig, [a, b])
    fig.draw_without_rendering()
    assert not a.get_window_extent().overlaps(b.get_window_extent()) and a.xyann == (4, -8)


def test_a_label_hemmed_in_by_two_takes_the_nearest_free_place():
    """Three labels of points close together, each under its point: the third, pushed off the first, is never pushed
    onto the second (a fresh run's roofline put matvec, power and transcendental so, and two of them collided)."""
    import itertools

    from jaxgpu.records import figures

    fig = figures.Figure(figsize=(7, 6), dpi=100)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([1, 1.02, 1.04, 100], [100, 97, 94, 1000], "s")
    texts = [ax.annotate(k, (x, y), fontsize=7, xytext=(4, -8), textcoords="offset points")
             for k, x, y in (("matvec", 1, 100), ("power", 1.02, 97), ("transcendental", 1.04, 94))]
    figures.finish(fig, ax, legend="none")
    figures.unclash(fig, texts)
    fig.draw_without_rendering()
    for a, b in itertools.combinations(texts, 2):
        assert not a.get_window_extent().overlaps(b.get_window_extent()), (a.get_text(), b.get_text())
    assert texts[0].xyann == (4, -8)  # the first stays where it was put
