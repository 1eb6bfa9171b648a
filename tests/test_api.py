import re
from pathlib import Path

import pytest

import jaxgpu


def test_every_public_name_imports_and_is_documented():
    assert jaxgpu.__all__, "jaxgpu exports nothing"
    for name in jaxgpu.__all__:
        obj = getattr(jaxgpu, name)
        if callable(obj):
            assert obj.__doc__, f"jaxgpu.{name} has no docstring"


def test_import_jaxgpu_starts_no_jax_and_a_typo_names_itself():
    import subprocess
    import sys

    code = ("import sys, jaxgpu\n"
            "jaxgpu.Record, jaxgpu.GPUS, jaxgpu.formats\n"  # names of JAX-free modules resolve without JAX
            "print(sorted(m for m in ('jax', 'jaxlib', 'flax', 'optax') if m in sys.modules))\n"
            "try:\n    jaxgpu.bench_jaxx\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "module 'jaxgpu' has no attribute 'bench_jaxx'"]


def test_every_experiment_is_one_folder_behind_the_contract():
    import experiments
    from experiments.contract import Experiment, View

    root = Path(__file__).resolve().parents[1] / "experiments"
    for name in experiments.names():
        assert experiments.REGISTRY[name] == f"experiments.{name}", name
        assert {p.name for p in (root / name).glob("*.py")} == {"__init__.py", "measure.py", "view.py"}, name
        spec = experiments.load(name)
        assert isinstance(spec, Experiment) and spec.name == name, name
        assert isinstance(experiments.view(name), View), name
        hooks = [h for h in (spec.info, spec.attachments) if h is not None]
        assert all(h.func.__name__ == "_call" and h.args[0] == f"experiments.{name}.measure" for h in hooks), name
        for profile in experiments.PROFILES:
            for platform in ("cpu", "gpu"):
                assert isinstance(experiments.config(name, profile, platform), spec.config), (name, profile)


def test_the_api_page_lists_every_public_name():
    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    missing = [n for n in jaxgpu.__all__ if f"`{n}" not in page and f"{n}(" not in page and f", `{n}`" not in page]
    assert not missing, f"docs/api.md does not mention {missing}"


def _moved_rows() -> list[tuple[str, str, str]]:
    """(module, old name, what the warning names) for each name docs/api.md's table of moved names lists."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    table = page.split("| moved from | names | now in |")[1].split("\n\n")[0]
    out = []
    for line in table.splitlines():
        if m := re.match(r"\| `(jaxgpu[\w.]*)` \| (.+) \| (.+) \|$", line):
            module, names, now = m.groups()
            home = now.strip("`") if now.startswith("`") else "CLASSIC"
            for name, new in re.findall(r"`(\w+)`(?: \(now `(\w+)`\))?", names):
                # what the warning must name: the new home and the name there
                out.append((module, name, f"{home}.{new or name}" if home != "CLASSIC" else home))
    return out


def test_every_moved_name_the_api_page_lists_resolves_with_a_warning():
    """The last waves' moved names, as docs/api.md lists them, each found where it was, with a DeprecationWarning that
    names its new home (or, where the old module imports it for its own use, as that very object); and every name a
    module still forwards is in that table."""
    import importlib

    rows = _moved_rows()
    assert ("jaxgpu.pricing.sizing", "USABLE_FRACTION", "jaxgpu.pricing.sharded.USABLE_FRACTION") in rows
    assert len(rows) >= 30
    for module, name, now in rows:
        mod = importlib.import_module(module)
        if name in vars(mod):  # imported there for the module's own use: the new home's object itself
            assert getattr(mod, name) is not None, (module, name)
            continue
        with pytest.warns(DeprecationWarning, match=re.escape(now)):
            assert getattr(mod, name) is not None, (module, name)
    from jaxgpu.kernels import transformer
    from jaxgpu.pricing import sizing

    listed = {(m, n) for m, n, _ in rows}
    assert {("jaxgpu.pricing.sizing", n) for n in sizing._MOVED} <= listed
    assert {("jaxgpu.kernels.transformer", n) for n in transformer._MOVED} <= listed
    from jaxgpu.pricing import sharded

    with pytest.warns(DeprecationWarning, match="sharded"):
        assert sizing.USABLE_FRACTION == sharded.USABLE_FRACTION


@pytest.mark.parametrize("module, name, now", [
    ("jaxgpu.kernels.transformer", "Config", "Decoder"), ("jaxgpu.kernels.transformer", "CONFIGS", "MODELS"),
    ("jaxgpu.kernels.transformer", "REMAT_POLICIES", "decoders"),
    ("jaxgpu.kernels.transformer", "mesh_for", "mesh_for"), ("jaxgpu.pricing.sizing", "plan_model", "plan_model"),
    ("jaxgpu.pricing.sizing", "KINDS", "KINDS"),
    ("jaxgpu.pricing.fit", "TRANSFORMERS", "CLASSIC"), ("jaxgpu", "TRANSFORMERS", "CLASSIC")])
def test_a_moved_name_still_resolves_with_a_warning_naming_its_new_home(module, name, now):
    import importlib

    with pytest.warns(DeprecationWarning, match=now):
        value = getattr(importlib.import_module(module), name)
    assert value is not None
    if name == "TRANSFORMERS":
        assert [t.name for t in value] == ["1B", "7B", "13B", "70B"]
