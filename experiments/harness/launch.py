"""Getting a machine ready for a run: the checks that need no JAX, the host allocator (a restart of the process where
a CPU run asks for other malloc settings), then the backend and its devices. One call, ``start``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from experiments.harness.settings import BadInput, RunSettings


def start(s: RunSettings, *, restart: bool = True) -> str:
    """Readies this process for the run ``s`` and returns its platform ("cpu" or "gpu").

    ``restart``: allowed to restart the process (``python -m experiments.run`` with the same arguments) with the
    allocator a CPU run asked for; a caller that was handed ``argv`` (a test, a notebook) is not restarted.

    Raises:
      BadInput: JAX missing, a result folder that cannot be written or is another machine's, a backend that is
        not there, XLA:GPU missing for --compile-for.
    """
    if importlib.util.find_spec("jax") is None:
        raise BadInput(f"JAX is not installed in {sys.executable}: install the package (pip install -e .), or where "
                       "nothing can be installed, run with a Python that has JAX (PYTHONPATH=. python3 -m "
                       "experiments.run)")
    why = check_out(s.out, resume=s.resume) or _resumed_elsewhere(s.out if s.resume else None)
    if why:
        raise BadInput(why)
    if restart:
        _restart_with_allocator(s)  # returns only when the process already has the allocator asked for
    from jaxgpu.ground import devices  # imports JAX: only after the cheap checks above

    try:
        devices.configure(s.backend, s.devices)
        platform = devices.resolve(s.backend)
    except devices.BackendError as err:
        raise BadInput(str(err)) from None
    if s.compiled:
        from jaxgpu.pricing import targets

        if reason := targets.unavailable():
            raise BadInput(f"--compile-for needs XLA:GPU: {reason}")
    return platform


def likely_platform() -> str:
    """What --backend auto would pick, guessed without starting JAX: a GPU where the driver and a
    CUDA plugin are both installed."""
    plugin = any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))
    return "gpu" if plugin and shutil.which("nvidia-smi") else "cpu"


def check_out(out: str | None, resume: bool = False) -> str | None:
    """Why the result folder cannot be written, or None (checked before JAX starts)."""
    if out and not resume and (Path(out) / "results.jsonl").exists():
        return f"{out} already holds a run: choose another --out, or finish that run with --resume {out}"
    target = Path(out) if out else Path("reports/runs")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot create the result folder {target}: {err.strerror or err}"
    if not os.access(target, os.W_OK):
        return f"cannot write to the result folder {target}"
    return None


def _resumed_elsewhere(resume: str | None) -> str | None:
    """Why the run to resume is not this machine's, as far as can be told before JAX starts (its versions and the
    CPU; the device kind and count are checked once the backend is up), or None."""
    if not resume:
        return None
    from importlib.metadata import PackageNotFoundError, version

    from jaxgpu.ground import devices
    from jaxgpu.records import results

    from experiments.harness import runner

    env = {"cpu_model": devices.cpu_model()}
    for name in ("jax", "jaxlib"):
        try:
            env[name] = version(name)
        except PackageNotFoundError:
            pass
    try:
        runner.check_same_machine(resume, env)
    except results.ResultsError as err:
        return str(err)
    return None


def _restart_with_allocator(s: RunSettings) -> None:
    """Restarts this command with the host allocator a CPU run asked for (malloc reads its settings
    at process start, so they cannot be set from here): before JAX starts, once."""
    from jaxgpu.ground import devices

    want = s.allocator or "tuned"
    cpu = s.backend == "cpu" or (s.backend == "auto" and not devices.gpu_driver_present())
    if not cpu or devices.allocator_in_use() == want or os.environ.get("JAXGPU_RESTARTED"):
        return
    env = {**devices.allocator_environ(want), "JAXGPU_RESTARTED": "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *_how_called()], env)


def _how_called() -> list[str]:
    """This command's arguments for a restart: ``-m experiments.run ...``, or the console script's path."""
    if Path(sys.argv[0]).name.startswith("jaxgpu-"):
        return [sys.argv[0], *sys.argv[1:]]
    return ["-m", "experiments.run", *sys.argv[1:]]
