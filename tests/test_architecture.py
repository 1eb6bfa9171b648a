"""The shape of the house: the report is a view of records (no JAX), no import circles, one home per thing."""

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import experiments
from experiments import claims
from jaxgpu import hardware

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jaxgpu", "experiments")
COMMITTED = ("cpu-reference", "cpu-multidevice", "compiled-h200")  # the runs reports/study is merged from


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
    # the same report but for where its run folders lie relative to it
    assert made.split("\n", 6)[6] == committed.split("\n", 6)[6]


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
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
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
                prefix = arg.values[0].value  # f"experiments.views.{name}": any module under the prefix
                out |= {m for m in modules if m.startswith(prefix) and m != prefix.rstrip(".")}
            else:  # a lookup such as REGISTRY[name]: every registered experiment
                out |= set(experiments.REGISTRY.values())
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


def test_views_import_no_jax_flax_or_optax():
    heavy = ("jax", "jaxlib", "flax", "optax")
    for path in (ROOT / "experiments" / "views").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in heavy], (path.name, names)


def test_each_claims_experiments_are_written_once():
    for name in experiments.names():
        mod = experiments.load(name)
        assert mod.CLAIMS == claims.for_experiment(name), name
        assert not hasattr(mod, "config"), f"{name} still has a config() if-chain; PROFILES is the table"


def test_hardware_comes_back_typed_from_run_json():
    for hw in (hardware.GPUS["H200 SXM"], hardware.cpu_estimate()):
        back = hardware.Hardware.from_dict(dataclasses.asdict(hw))
        assert back == hw and back.ridge_point("bf16") == hw.ridge_point("bf16")
    assert hardware.GPUS["H200 SXM"].peak_gflops("bf16") == 989.4e3
