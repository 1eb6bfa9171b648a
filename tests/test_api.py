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
