"""The tour notebook: it opens on "what would a GPU buy this step", uses only ``import jaxgpu``'s public names,
runs headless top to bottom with every code cell showing a table or a figure, and is committed with its outputs.

``python -m tests.test_notebook --save`` executes it and writes the outputs back (without the execution
timestamps a kernel stamps on each cell), as committed.
"""

import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook test needs the test extra: pip install -e '.[test]'")
nbclient = pytest.importorskip("nbclient", reason="the notebook test needs the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "experiments" / "tour.ipynb"


def execute(nb):
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    for i, cell in enumerate(nb.cells):  # what differs between two runs of the same notebook but the figures
        cell.metadata.pop("execution", None)
        cell.setdefault("id", f"cell-{i}")
        if cell.cell_type == "code":  # the CUDA plugin's start-up lines on a machine without a GPU: noise
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
    nb.metadata.pop("widgets", None)
    return nb


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_notebook_opens_on_the_gpu_question_through_the_public_api():
    import jaxgpu

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = _code(nb)
    assert "jaxgpu.on_gpus(" in code[1].source  # the first cell after the set-up
    text = "\n".join(c.source for c in code)
    assert not re.search(r"^\s*(from|import) (jaxgpu\.|experiments)|from jaxgpu import", text, re.M)
    used = set(re.findall(r"\bjaxgpu\.(\w+)", text))
    assert used and used <= set(jaxgpu.__all__), used - set(jaxgpu.__all__)
    # committed as run: every code cell has its output, and no kernel's timestamps
    assert all(c.outputs for c in code), [c.source[:40] for c in code if not c.outputs]
    assert not any("execution" in c.metadata for c in code)


@pytest.mark.slow
def test_tour_notebook_executes_and_every_cell_shows_a_table_or_figure():
    nb = execute(nbformat.read(NOTEBOOK, as_version=4))
    code = _code(nb)
    assert len(code) >= 6
    for c in code[1:]:  # the set-up cell prints; every other cell returns a figure or a table
        kinds = {k for o in c.outputs for k in o.get("data", {})}
        assert kinds & {"text/html", "image/png"}, c.source[:80]  # a rendered table or figure, not a repr
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    first = "".join(o["data"].get("text/html", "") for o in code[1].outputs if "data" in o)
    assert "H200 SXM" in first and "measured here" in first and "predicted, not run" in first


if __name__ == "__main__":
    if sys.argv[1:] != ["--save"]:
        sys.exit("usage: python -m tests.test_notebook --save")
    nbformat.write(execute(nbformat.read(NOTEBOOK, as_version=4)), NOTEBOOK)
