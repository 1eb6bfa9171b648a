"""What every command line of the study shares: a parser whose errors are one line and exit code 2.

Bad input ends with ``<command>: error: <what to do>`` on stderr, never argparse's usage block and never a
traceback; the commands (``experiments.run``, ``experiments.report``, ``experiments.model``,
``experiments.gpu_check``) build their parsers from this one class. Each is named as it was called: ``python -m
experiments.run`` in its help and ``experiments.run`` in its errors, or ``jaxgpu-run`` in both when installed as a
console script.
"""

from __future__ import annotations

import argparse
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
