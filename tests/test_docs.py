"""The docs match the code: the example experiment of docs/adding-an-experiment.md runs as written."""

import re
import sys
from pathlib import Path

import pytest

from jaxgpu.records import results

import experiments
from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-an-experiment.md"


def _files(page: str) -> dict[str, str]:
    """``experiments/<name>/<file>.py`` -> the code block that follows its heading."""
    out = {}
    for m in re.finditer(r"^## \d\. [^`\n]*`(experiments/\w+/\w+\.py)`.*?\n```python\n(.*?)```", page, re.M | re.S):
        out[m.group(1)] = m.group(2)
    return out


@pytest.fixture
def saxpy(tmp_path, monkeypatch):
    page = PAGE.read_text()
    files = _files(page)
    assert set(files) == {"experiments/saxpy/__init__.py", "experiments/saxpy/measure.py",
                          "experiments/saxpy/view.py"}, sorted(files)
    for rel, code in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    line = re.search(r'^    "saxpy": "experiments\.saxpy",$', page, re.M)
    assert line, "the page shows the registry line"
    # the scratch folder joins the experiments package, and the registry gets the page's line
    monkeypatch.setattr(experiments, "__path__", [*experiments.__path__, str(tmp_path / "experiments")])
    monkeypatch.setitem(experiments.REGISTRY, "saxpy", "experiments.saxpy")
    yield
    for name in [m for m in sys.modules if m == "experiments.saxpy" or m.startswith("experiments.saxpy.")]:
        del sys.modules[name]


def test_the_example_experiment_plans_runs_and_reports(saxpy, tmp_path):
    from experiments import report
    from experiments.harness import runner

    lines = runner.dry_run(RunSettings(("saxpy",), backend="cpu", profile="quick"))
    assert lines[0].startswith("saxpy ") and "2 cases" in lines[0], lines
    out = tmp_path / "run"
    runner.run_study(RunSettings(("saxpy",), profile="tiny", out=str(out), progress=False), "cpu", log=lambda m: None)
    (rec,) = results.read_run(out).records
    assert rec.status == "ok" and rec.metrics["gbytes_per_s"] > 0 and rec.params == {"n": 4096}, rec
    md = report.write_report([out], out)[0].read_text()
    assert "## saxpy: y = a * x + y" in md
    # its headline joins the summary, and the model prices its programs on the roof its spec names
    assert "| saxpy (y = a * x + y) |" in md
    from experiments.analysis import pricing

    assert pricing._dtype(rec, own=True) == "elementwise" and pricing.pricing_of("saxpy").kernel_level


def test_the_page_names_only_fields_the_contract_has():
    import dataclasses

    from experiments.contract import Experiment

    page = PAGE.read_text()
    named = set(re.findall(r"`(\w+)`", page.split("The other fields of `Experiment` are the hooks")[1].split("##")[0]))
    hooks = {f.name for f in dataclasses.fields(Experiment)} - {"name", "description", "benchmark_version", "config",
                                                                 "profiles", "cases"}
    assert hooks <= named, sorted(hooks - named)


def test_the_readmes_machine_facts_are_the_committed_runs():
    """What the README says of how the committed runs were made (cases, minutes, the reference CPU's AMX) is what
    their run.json files hold."""
    import json

    root = Path(__file__).resolve().parents[1]
    flat = " ".join((root / "README.md").read_text().split())
    for name in ("cpu-reference", "priced-published"):
        done = json.loads((root / "reports" / name / "run.json").read_text())["completion"]
        said = f"{done['cases_done']} cases in {round(done['elapsed_s'] / 60)} minutes"
        assert said in flat, (name, said)
    env = json.loads((root / "reports" / "cpu-reference" / "run.json").read_text())["env"]
    amx = "amx" in env["cpu_features"]
    assert ("Intel Xeon VM with AMX" in flat) == amx and ("without AMX" in flat) == (not amx)


def test_the_licence_pyproject_declares_is_in_the_repository():
    root = Path(__file__).resolve().parents[1]
    assert 'license = { text = "Apache-2.0" }' in (root / "pyproject.toml").read_text()
    text = " ".join((root / "LICENSE").read_text().split())
    assert text.startswith("Apache License Version 2.0, January 2004") and "END OF TERMS AND CONDITIONS" in text


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


@pytest.mark.slow
def test_a_card_added_as_the_gpu_page_says_is_priced_by_the_command_and_in_the_report(tmp_path):
    """docs/adding-a-gpu.md's entry, added to a scratch copy of the package in the one place the page names, is
    found by the model command (priced on its own XLA:GPU target where this machine compiles) and gets a column of
    a report's predicted table."""
    import shutil
    import subprocess

    from jaxgpu.pricing import targets

    (entry,) = _blocks(ROOT / "docs" / "adding-a-gpu.md")
    src = tmp_path / "src"
    for pkg in ("jaxgpu", "experiments"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    table = src / "jaxgpu" / "ground" / "hardware.py"
    text = table.read_text()
    end = text.index("\n)}\n", text.index("GPUS: dict[str, Hardware] = {"))
    table.write_text(text[:end] + "\n" + entry.rstrip() + text[end:])
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--model", "gpt2-124m", "--serve", "--gpus",
                           "zed 100", "--devices", "1", "--seq", "256"], cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("Z100 "))
    assert row.endswith("xla:gpu z100" if targets.unavailable() is None else ")"), row
    assert "the Z100 also has fp4, which the study's presets do not have." in proc.stdout
    out = tmp_path / "run"  # a tiny CPU run, and its report's table of its programs priced on each GPU
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "--backend", "cpu", "--only",
                           "bandwidth,roofline,serial_parallel",
                           "--profile", "tiny", "--no-progress", "--out", str(out)],
                          cwd=src, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    header = next(line for line in (out / "report.md").read_text().splitlines() if "(predicted) |" in line)
    assert header.endswith("| RTX 4090 (predicted) | Z100 (predicted) |"), header


def test_the_model_page_is_the_table_and_what_its_config_json_says():
    entry, check = _blocks(ROOT / "docs" / "adding-a-model.md")
    assert entry in (ROOT / "jaxgpu" / "ground" / "decoders.py").read_text()
    exec(compile(check, "adding-a-model.md", "exec"), {})


def test_the_published_case_page_is_the_data():
    from jaxgpu.pricing import published_cases

    (entry,) = _blocks(ROOT / "docs" / "adding-a-published-case.md")
    assert entry in (ROOT / "jaxgpu" / "pricing" / "published_cases.py").read_text()
    case = eval(entry.strip().rstrip(","), vars(published_cases))  # noqa: S307 - the page's own block
    assert case in published_cases.CASES and case.published_s > 0


def test_the_docs_figures_are_the_records_and_the_command_writes_them(tmp_path):
    """Every figure experiments.docs_figures knows stands in its doc as the data, the committed runs and the study's
    report give it; a figure edited by hand is named by --check and written back, the line breaks kept."""
    import shutil

    from experiments import docs_figures

    assert docs_figures.differences() == []
    for doc in {d for d, _ in docs_figures.PHRASES}:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    for run in ("cpu-reference", "priced-published", "study"):
        (tmp_path / "reports" / run).mkdir(parents=True)
        for name in ("run.json", "report.md"):
            if (ROOT / "reports" / run / name).exists():
                shutil.copy(ROOT / "reports" / run / name, tmp_path / "reports" / run / name)
    figs = docs_figures.figures(tmp_path)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    said = f"{figs['published_cases']} cases in {figs['published_minutes']} minutes"
    readme.write_text(text.replace(said, f"{figs['published_cases']} cases in 99 minutes"))
    assert docs_figures.differences(tmp_path) == [
        f"README.md: published_minutes is {figs['published_minutes']}, not 99 ('priced both ways: "
        "{published_cases} cases in {published_minutes} minutes')"]
    docs_figures.differences(tmp_path, write=True)
    assert readme.read_text() == text and docs_figures.differences(tmp_path) == []
    readme.write_text(text.replace("the GPU plan's predictions missed by a median", "the GPU plan missed by"))
    assert any("no longer says" in line for line in docs_figures.differences(tmp_path))
