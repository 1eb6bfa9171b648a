"""The tour notebook runs headless, top to bottom, and every code cell shows something."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the test extra: pip install -e '.[test]'")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_tour_notebook_executes_and_every_cell_shows_a_table_or_figure():
    nb = nbformat.read(ROOT / "experiments" / "tour.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) >= 6
    for c in code[1:]:  # the set-up cell prints; every other cell returns a figure or a table
        kinds = {k for o in c.outputs for k in o.get("data", {})}
        assert kinds & {"text/html", "image/png"}, c.source[:80]  # a rendered table or figure, not a repr
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
