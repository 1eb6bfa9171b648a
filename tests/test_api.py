import importlib

import jaxgpu


def test_every_public_name_imports_and_is_documented():
    assert jaxgpu.__all__, "jaxgpu exports nothing"
    for name in jaxgpu.__all__:
        obj = getattr(jaxgpu, name)
        if callable(obj):
            assert obj.__doc__, f"jaxgpu.{name} has no docstring"


def test_all_lists_no_duplicates():
    assert len(set(jaxgpu.__all__)) == len(jaxgpu.__all__)


def test_experiment_modules_define_the_interface():
    import experiments
    from experiments import views

    for name in experiments.names():
        mod = importlib.import_module(experiments.REGISTRY[name])
        for attr in ("BENCHMARK_VERSION", "CLAIMS", "DESCRIPTION", "Config", "PROFILES", "cases"):
            assert hasattr(mod, attr), f"experiment {name} lacks {attr}"
        assert callable(views.load(name).section), name
        for profile in experiments.PROFILES:
            for platform in ("cpu", "gpu"):
                cfg = experiments.config(name, profile, platform)
                assert isinstance(cfg, mod.Config)


def test_the_api_page_lists_every_public_name():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    missing = [n for n in jaxgpu.__all__ if f"`{n}" not in page and f"{n}(" not in page and f", `{n}`" not in page]
    assert not missing, f"docs/api.md does not mention {missing}"
