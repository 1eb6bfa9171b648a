"""The shape of the house: one folder per experiment, layers by data flow, the report a view of records (no
JAX), no import circles, one home per thing."""

import ast
import dataclasses
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpu.ground import hardware

import experiments
from experiments.report import STUDY_RUNS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jaxgpu", "experiments")
COMMITTED = STUDY_RUNS  # the runs reports/study is merged from


def test_a_report_of_the_committed_runs_imports_no_jax(tmp_path):
    code = (
        "import sys\n"
        "from experiments import report\n"
        f"report.write_report([{', '.join(repr(str(ROOT / 'reports' / r)) for r in COMMITTED)}], '{tmp_path}')\n"
        "print(sorted(m for m in ('jax', 'jaxlib', 'flax', 'optax') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout
    committed = (ROOT / "reports" / "study" / "report.md").read_text()
    made = (tmp_path / "report.md").read_text()
    # the same report but for where its run folders lie relative to it (the last line links them)
    assert made.rsplit("Runs (raw records):", 1)[0] == committed.rsplit("Runs (raw records):", 1)[0]


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``name`` imports anywhere in its code, ``importlib.import_module`` included."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                keep = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(keep + ([base] if base else []))
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    out.add(f"{base}.{a.name}")
                elif base in modules:
                    out.add(base)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant):
                out.add(arg.value)
            elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                prefix = arg.values[0].value  # f"experiments.{name}...": any module under the prefix
                out |= {m for m in modules if m.startswith(prefix) and m != prefix.rstrip(".")}
            elif name == "experiments.contract":
                pass  # Deferred: a spec's measuring module, imported when a case runs (by design, not at import)
            else:  # a lookup such as REGISTRY[name] (and its view): every registered experiment
                out |= set(experiments.REGISTRY.values()) | {f"{m}.view" for m in experiments.REGISTRY.values()}
    return out & set(modules)


def test_no_import_circle():
    modules = _modules()
    graph = {m: _imports(m, p, modules) - {m} for m, p in modules.items()}
    # Tarjan's strongly connected components: a component of two or more modules is a circle
    index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for m in graph:
        if m not in index:
            visit(m)
    assert not circles, circles
    assert "experiments.matmul" in graph["experiments"]  # the registry's dynamic imports are seen


HEAVY = ("jax", "jaxlib", "flax", "optax")


def _layer(module: str) -> str:
    """Which layer of the data flow a module belongs to."""
    parts = module.split(".")
    if parts[0] == "jaxgpu":
        return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "library"  # the rooms, and jaxgpu's API
    if module == "experiments":
        return "registry"
    if module in ("experiments.run", "experiments.report", "experiments.model", "experiments.gpu_check",
                  "experiments.preflight", "experiments.reprice", "experiments.first_price", "experiments.cache_times",
                  "experiments.docs_figures", "experiments.best_layouts"):
        return "command line"
    if module == "experiments.cli":
        return "cli"  # what the command lines share: imports nothing of ours
    if parts[1] in ("harness", "analysis", "reporting", "contract"):
        return parts[1]
    assert parts[1] in experiments.REGISTRY, module
    return "spec" if len(parts) == 2 else parts[2]  # or "measure", "view"


ROOMS = ("ground", "kernels", "pricing", "records")  # the library's, in the order they may import each other
_STUDY = {"registry", "command line", "harness", "analysis", "reporting", "contract", "spec", "measure", "view", "cli"}
# What each layer must never import (anywhere in its code): data flows measure -> records -> analysis -> report.
FORBIDDEN = {
    "library": _STUDY,
    "ground": _STUDY | {"library", "kernels", "pricing", "records"},  # stands on nothing of ours
    "records": _STUDY | {"library", "kernels", "pricing"},  # read where no kernel or plan can be made
    "kernels": _STUDY | {"library", "pricing"},  # what is measured never depends on how it is priced
    "pricing": _STUDY | {"library"},
    "spec": {"measure", "view", "harness", "analysis", "reporting", "command line"},
    "measure": {"view", "harness", "analysis", "reporting", "command line"},
    "view": {"measure", "harness", "command line"},
    "harness": {"analysis", "reporting", "view", "measure", "command line"},
    "analysis": {"reporting", "view", "measure", "harness", "command line"},
    "reporting": {"measure", "harness", "command line"},
    "contract": {"registry", "spec", "measure", "view", "harness", "analysis", "reporting", "command line"},
    "cli": {"library", "registry", "spec", "measure", "view", "harness", "analysis", "reporting", "command line",
            "contract"},
}
# Layers that import no JAX, Flax or Optax anywhere in their own code (a report, a plan, --list are made
# where JAX cannot be imported; the library is imported lazily where they need it).
JAX_FREE = ("spec", "view", "harness", "analysis", "reporting", "contract", "registry", "cli")


def _heavy(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return [n for n in names if n.split(".")[0] in HEAVY]


def test_layers_import_only_downstream_of_the_data_flow():
    modules = _modules()
    broken = []
    for name, path in modules.items():
        layer = _layer(name)
        for dep in _imports(name, path, modules) - {name}:
            if _layer(dep) in FORBIDDEN.get(layer, set()):
                broken.append(f"{name} ({layer}) imports {dep} ({_layer(dep)})")
        if layer in JAX_FREE and _heavy(path):
            broken.append(f"{name} ({layer}) imports {_heavy(path)}")
    assert not broken, "\n".join(broken)


def test_every_jax_free_layer_imports_where_jax_cannot_be(tmp_path):
    # transitively: a spec importing a library module that imports JAX would fail here, not only in a review
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nfor m in {HEAVY!r}:\n    sys.modules[m] = None\n")
    names = [m for m in _modules() if m.startswith("experiments") and _layer(m) in JAX_FREE]
    code = f"import importlib\nfor m in {names!r}:\n    importlib.import_module(m)\nprint('ok')\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("argv", [["--list"], ["--dry-run", "--backend", "gpu"], ["--dry-run", "--backend", "cpu"],
                                  ["--only", "matmull"], ["--set", "matmul.sizez=1", "--only", "matmul"]])
def test_the_command_line_plans_and_refuses_without_jax(argv, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nfor m in {HEAVY!r}:\n    sys.modules[m] = None\n")
    proc = subprocess.run([sys.executable, "-m", "experiments.run", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    bad_input = argv[0] in ("--only", "--set")
    assert proc.returncode == (2 if bad_input else 0), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    if bad_input:
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    else:
        assert proc.stdout.strip(), argv


def test_every_room_of_the_library_is_mapped():
    rooms = sorted(p.name for p in (ROOT / "jaxgpu").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == sorted(ROOMS)
    flat = sorted(p.name for p in (ROOT / "jaxgpu").glob("*.py"))
    assert flat == ["__init__.py"], f"a module of jaxgpu/ outside its rooms: {flat}"


def test_one_name_one_file():
    """No two modules of the tree share a file name, but an experiment's measure.py and view.py and __init__.py."""
    seen: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if path.name not in ("__init__.py", "measure.py", "view.py"):
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {k: v for k, v in seen.items() if len(v) > 1}


def test_the_records_and_the_harness_import_no_plotting_and_no_jax(tmp_path):
    names = [m for m in _modules() if m.startswith(("jaxgpu.records", "jaxgpu.ground.hardware", "experiments.harness"))
             and m != "jaxgpu.records.figures"]
    code = (f"import importlib, sys\nfor m in {names!r}:\n    importlib.import_module(m)\n"
            "print(sorted(m for m in ('matplotlib', 'jax', 'jaxlib') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", (proc.stdout, proc.stderr[-2000:])


def _names_experiments(path: Path) -> list[str]:
    """Where a module names a registered experiment in a string: comparing a record's experiment with it, reading an
    experiment's records by it. A string used as a key (``params["devices"]``, ``params.get("devices")``, a key of
    a ``{"devices": ...}`` table) is a parameter or field that shares the name, not the experiment."""
    tree = ast.parse(path.read_text())
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys |= {id(k) for k in node.keys if k is not None}
        if isinstance(node, ast.Subscript):
            keys.add(id(node.slice))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args:
            keys.add(id(node.args[0]))
    return [f"{path.name}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in experiments.REGISTRY and id(n) not in keys]


def test_no_shared_module_names_an_experiment():
    """What an experiment is (its pricing, its headline, its noise, its part of the GPU check) lives in its folder: the
    analysis, the report, the harness and the commands fold over the registry. The claims are the one exception:
    their reads are declared and tested; the registry itself names each once."""
    shared = [path for pkg in ("analysis", "reporting", "harness")
              for path in (ROOT / "experiments" / pkg).glob("*.py")]
    commands = [path for path in (ROOT / "experiments").glob("*.py") if path.name != "__init__.py"]
    found = [hit for path in sorted(shared + commands) if path.name != "claims.py" for hit in _names_experiments(path)]
    assert not found, found


def test_the_name_check_sees_a_name():
    probe = ROOT / "tests" / "_probe_names.py"
    try:
        probe.write_text('def f(r, p):\n    return r.experiment == "matmul" and p["devices"] and p.get("drift") and '
                         '{"threads": 1} and ("training", 2)\n')
        assert _names_experiments(probe) == ["_probe_names.py:2 'matmul'", "_probe_names.py:2 'training'"]
    finally:
        probe.unlink()


def test_views_are_told_their_claims_and_what_was_predicted():
    """A view draws what the report gives it (``contract.Seen``): it neither asks the claims which read it nor sorts
    measured records from predicted twins itself (``labels.measured``), nor rewrites a twin's sentences after."""
    modules = _modules()
    for name, module in experiments.REGISTRY.items():
        path = modules[f"{module}.view"]
        assert "experiments.analysis.claims" not in _imports(f"{module}.view", path, modules), name
        assert "labels.measured(" not in path.read_text(), name
    assert "_said_predicted" not in (ROOT / "experiments" / "reporting" / "build.py").read_text()


LONGEST = 60  # lines a function may take, its docstring included


def test_no_function_is_longer_than_a_screen():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in _modules().values() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST]
    assert not long, long


def _docstrings(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "name", path.stem), doc


def test_no_claim_id_is_typed_in_a_docstring():
    """Which claims read an experiment is the claims' to say (``--list`` shows it): a typed ID drifts."""
    typed = [f"{path.relative_to(ROOT)} {name}: {m}" for path in _modules().values() if path.name != "claims.py"
             for name, doc in _docstrings(path) for m in re.findall(r"\bC\d\d\b", doc)]
    assert not typed, typed


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_module_a_docstring_names_exists():
    named = {(str(path.relative_to(ROOT)), ref.rstrip(".")) for path in _modules().values()
             for _, doc in _docstrings(path) for ref in re.findall(r"\b(?:jaxgpu|experiments)(?:\.[A-Za-z_]\w*)+", doc)}
    assert len(named) > 50
    missing = sorted((where, ref) for where, ref in named if not _resolves(ref))
    assert not missing, missing
    assert not _resolves("experiments.plan") and _resolves("jaxgpu.pricing.roofline.Roofs")


def test_every_deferred_measuring_function_exists():
    """A spec names its measuring functions through ``Deferred`` (no JAX at planning time): each must be there."""
    called = []
    for name, module in experiments.REGISTRY.items():
        tree = ast.parse(_modules()[module].read_text())
        deferred = {n.targets[0].id for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", None) == "Deferred"}
        measure = importlib.import_module(f"{module}.measure")
        called += [(name, n.attr, hasattr(measure, n.attr)) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                   and isinstance(n.value, ast.Name) and n.value.id in deferred]
    assert len({c[:2] for c in called}) > 20
    assert all(ok for *_, ok in called), [c for c in called if not c[2]]


def test_hardware_comes_back_typed_from_run_json():
    for hw in (hardware.GPUS["H200 SXM"], hardware.cpu_estimate()):
        back = hardware.Hardware.from_dict(dataclasses.asdict(hw))
        assert back == hw and back.ridge_point("bf16") == hw.ridge_point("bf16")
    assert hardware.GPUS["H200 SXM"].peak_gflops("bf16") == 989.4e3


def test_a_deprecated_call_from_the_projects_code_fails_and_one_from_elsewhere_does_not(tmp_path, monkeypatch):
    """pyproject.toml's filterwarnings, as pytest applies it here (and to the suite's tiny study of every experiment):
    the next JAX removes what this one deprecates, so the project's own deprecated calls must fail now, not on the
    GPU machine; a library's stays a warning."""
    import importlib
    import warnings

    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit("going", DeprecationWarning, "parallel.py", 1, module="jaxgpu.kernels.parallel")
    with pytest.warns(DeprecationWarning):
        warnings.warn_explicit("going", DeprecationWarning, "other.py", 1, module="flax.linen")
    # a real deprecated JAX name (the old shard_map module's function), called at import by a module whose name the
    # filter reads as the project's, then by one it does not
    call = "import jax.experimental.shard_map as m\nm.shard_map\n"
    monkeypatch.syspath_prepend(str(tmp_path))
    for module, ours in (("jaxgpu_deprecation_probe", True), ("elsewhere_deprecation_probe", False)):
        (tmp_path / f"{module}.py").write_text(call)
        with (pytest.raises if ours else pytest.warns)(DeprecationWarning):
            importlib.import_module(module)


LONGEST_MODULE = 600  # lines a library module may take: past it, it holds more than one concern
DATA_MODULES = ("jaxgpu.pricing.published_cases",)  # data beside its record, a field a line: no concern to split


def test_no_library_module_is_longer_than_its_concern():
    long = [f"{path.relative_to(ROOT)} ({n} lines)" for name, path in _modules().items()
            if name.startswith("jaxgpu") and name not in DATA_MODULES
            and (n := len(path.read_text().splitlines())) > LONGEST_MODULE]
    assert not long, long
    for name in DATA_MODULES:  # data, not code: no function beyond the record's own checks and counts
        tree = ast.parse(_modules()[name].read_text())
        assert len([n for n in tree.body if isinstance(n, ast.FunctionDef)]) <= 3, name


def _decoder_classes(path: Path) -> tuple[list[str], list[str]]:
    """(the dataclasses of ``path`` with ``layers`` and ``d_model`` fields; the classes or names made of ``Decoder``:
    a subclass, or an assignment of the class to another name)."""
    described, made = [], []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if {"layers", "d_model"} <= fields:
                described.append(f"{path.relative_to(ROOT)}:{node.name}")
            if any(getattr(b, "id", getattr(b, "attr", None)) == "Decoder" for b in node.bases):
                made.append(f"{path.relative_to(ROOT)}:{node.name}")
        elif isinstance(node, ast.Assign) and getattr(node.value, "id", getattr(node.value, "attr", None)) == "Decoder":
            made.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return described, made


def test_one_dataclass_describes_a_decoder_and_it_needs_no_jax(tmp_path):
    found = [_decoder_classes(path) for path in sorted((ROOT / "jaxgpu").rglob("*.py"))]
    assert [d for ds, _ in found for d in ds] == ["jaxgpu/ground/decoders.py:Decoder"]
    assert not [m for _, ms in found for m in ms]  # no subclass or alias of it
    assert not [p for p in (ROOT / "jaxgpu").rglob("*.py") if "_fit_shape" in p.read_text()]
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nfor m in {HEAVY!r}:\n    sys.modules[m] = None\n")
    code = ("from jaxgpu.ground import decoders\nfrom jaxgpu.pricing import fit\n"
            "m = decoders.find('Llama3-8B')\nprint(m.params(), fit.transformer_train(m)['state'] > 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout.split() == ["8030261248", "True"], proc.stderr[-2000:]


def test_the_probe_sees_a_second_decoder_and_an_alias():
    probe = ROOT / "tests" / "_probe_decoder.py"
    try:
        probe.write_text("import dataclasses\nfrom jaxgpu.ground.decoders import Decoder\n\n\n@dataclasses.dataclass\n"
                         "class Shape:\n    layers: int\n    d_model: int\n\n\nclass Mine(Decoder):\n    pass\n\n\n"
                         "Config = Decoder\n")
        assert _decoder_classes(probe) == (["tests/_probe_decoder.py:Shape"],
                                           ["tests/_probe_decoder.py:Mine", "tests/_probe_decoder.py:15"])
    finally:
        probe.unlink()


def _card_names() -> set[str]:
    """Every way the hardware table names a card: its name, aliases, compile target and device kind."""
    out = set()
    for hw in hardware.GPUS.values():
        out |= {hw.name, *hw.aliases, *((hw.compiled.name, hw.compiled.device_kind) if hw.compiled else ())}
    return {n.lower() for n in out}


def _names_cards(path: Path) -> list[str]:
    """Where code names a card in a string (docstrings and comments aside): anywhere but the hardware table it is a
    second place to change when a card is added or renamed. Case data (``Case(...)``'s fields) is data."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))  # a docstring
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Case":
            skip |= {id(n) for n in ast.walk(node)}
    names = _card_names()
    return [f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
            and n.value.lower() in names]


def test_a_cards_name_is_written_only_in_the_hardware_table():
    """A card is named in the hardware table alone: its entry (hardware.py) and its measured shares of the entry's
    peaks (calibration.py, the table's other half: one published measurement a row)."""
    tables = {ROOT / "jaxgpu" / "ground" / "hardware.py", ROOT / "jaxgpu" / "ground" / "calibration.py"}
    found = [hit for name, path in sorted(_modules().items()) if path not in tables for hit in _names_cards(path)]
    assert not found, found


def test_the_card_check_sees_a_card():
    probe = ROOT / "tests" / "_probe_cards.py"
    try:
        probe.write_text('"""On the H200 SXM."""\n\n\ndef f(gpu="H200 SXM", on="h100"):\n    # the "L4"\n'
                         '    return Case("x", "gemm", "A100 80GB"), gpu, on\n')
        assert _names_cards(probe) == ["tests/_probe_cards.py:4 'H200 SXM'", "tests/_probe_cards.py:4 'h100'"]
    finally:
        probe.unlink()


def test_no_command_writes_onto_its_parsed_arguments():
    """A command's parsing returns its settings decided once (a frozen record): nothing is set on the argparse
    namespace afterwards, by assignment or ``setattr``."""
    found = []
    for path in sorted([*(ROOT / "experiments").glob("*.py"), *(ROOT / "experiments" / "harness").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            if any(isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "args" for t in targets):
                found.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args \
                    and getattr(node.args[0], "id", None) == "args":
                found.append(f"{path.name}:{node.lineno}")
    assert not found, found


def test_the_profile_reaches_the_measuring_only_through_the_configs_it_selects():
    """A profile selects each experiment's config and the run's own (``Study``); a case's context carries no profile
    for code to branch on, and the harness compares no profile by name."""
    from experiments.contract import RunContext
    from experiments.harness import settings

    assert "profile" not in {f.name for f in dataclasses.fields(RunContext)}
    assert set(settings.STUDY) == set(experiments.PROFILES)
    named = [f"{path.name}:{n.lineno}" for path in (ROOT / "experiments" / "harness").glob("*.py")
             for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Compare)
             and any(isinstance(c, ast.Constant) and c.value in experiments.PROFILES for c in n.comparators)]
    assert not named, named
