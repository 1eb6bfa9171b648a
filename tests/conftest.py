"""Backend and device count for the test run, set before JAX starts its backends.

``python -m pytest`` tests the CPU backend with 4 host devices; ``--backend gpu`` runs
the GPU tests too (skipped, with the reason, where JAX sees no GPU). The user's
XLA_FLAGS are appended to, never replaced.
"""

from __future__ import annotations

import pytest

HOST_DEVICES = 4


def pytest_addoption(parser):
    parser.addoption("--backend", choices=("cpu", "gpu"), default="cpu",
                     help="backend under test: cpu (default) or gpu (also runs tests marked gpu)")


def pytest_configure(config):
    from jaxgpu.ground import devices

    backend = config.getoption("--backend")
    if backend == "gpu" and getattr(config.option, "numprocesses", None):
        # each worker's JAX would take its 75% of the card: the second cannot start
        raise pytest.UsageError("--backend gpu runs in one process (JAX preallocates 75% of the GPU in each): drop -n")
    try:
        devices.configure("cpu" if backend == "cpu" else "auto", HOST_DEVICES)
    except devices.BackendError as err:
        raise pytest.UsageError(f"{err}; set the device count in conftest before JAX starts") from None


def _gpu_missing_reason() -> str | None:
    from jaxgpu.ground import devices

    try:
        devices.resolve("gpu")
    except devices.BackendError as err:
        return str(err)
    return None


def pytest_collection_modifyitems(config, items):
    backend = config.getoption("--backend")
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    reason = "GPU tests run with --backend gpu" if backend == "cpu" else _gpu_missing_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def platform(pytestconfig) -> str:
    """The JAX platform under test: "cpu" or "gpu" (a test needing a missing GPU is skipped)."""
    backend = pytestconfig.getoption("--backend")
    if backend == "gpu" and (reason := _gpu_missing_reason()):
        pytest.skip(reason)
    return backend


@pytest.fixture(scope="session")
def device(platform):
    import jax

    return jax.devices(platform)[0]


@pytest.fixture(autouse=True)
def _answers_priced_afresh(request, monkeypatch):
    """A test may change a constant a price reads (a card's usable share, a scores threshold): its answers are priced
    afresh, never read from the plan cache nor kept in it (the user's cache would hold them), whose plans (keyed by
    what makes each step) are still read. A test of the cached answers asks for them
    (``@pytest.mark.cached_answers``)."""
    if "cached_answers" in request.keywords:
        return
    from jaxgpu.pricing import planner

    monkeypatch.setattr(planner, "_answered", lambda key: None)
    monkeypatch.setattr(planner, "_keep", lambda key, answer: None)
