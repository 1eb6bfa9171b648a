"""What every command line of the study shares: a parser whose errors are one line and exit code 2.

Bad input ends with ``<command>: error: <what to do>`` on stderr, never argparse's usage block and never a
traceback; the commands (``experiments.run``, ``experiments.report``, ``experiments.model``,
``experiments.gpu_check``) build their parsers from this one class. Each is named as it was called: ``python -m
experiments.run`` in its help and ``experiments.run`` in its errors, or ``jaxgpu-run`` in both when installed as a
console script.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path


def prog(module: str) -> str:
    """The command as it was called: ``jaxgpu-run`` (a console script), else ``python -m experiments.run``."""
    called = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return called if called.startswith("jaxgpu-") else f"python -m {module}"


def name(module: str) -> str:
    """The command's name in its one-line messages: ``experiments.run``, or ``jaxgpu-run`` as a console script."""
    return prog(module).removeprefix("python -m ")


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` prints one line (``prog: error: message``) and exits 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog.removeprefix('python -m ')}: error: {message}\n")


def fail(command: str, message: str) -> int:
    """Says what is wrong with the input in one line on stderr; returns 2, the exit code for bad input."""
    print(f"{command.removeprefix('python -m ')}: error: {message}", file=sys.stderr)
    return 2


def compiler_log() -> Path:
    """Where a command keeps what XLA and the CUDA plugin print while it compiles: the user's cache folder."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "jaxgpu" / "compiler.log"


@contextlib.contextmanager
def native_stderr_to(path: Path):
    """While the block runs, what native code writes to the process's stderr (XLA's and the CUDA plugin's log lines,
    printed from C++ as JAX loads the plugin and compiles) goes to ``path`` instead, overwritten each time, while
    Python's ``sys.stderr`` (the command's own errors) still reaches the terminal; where ``path`` cannot be
    written, the terminal keeps both."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "wb")
    except OSError:
        yield None
        return
    sys.stderr.flush()
    saved, python_stderr = os.dup(2), sys.stderr
    os.dup2(log.fileno(), 2)
    sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1)
    try:
        yield path
    finally:
        sys.stderr.close()
        sys.stderr = python_stderr
        os.dup2(saved, 2)
        os.close(saved)
        log.close()
