"""What every command line of the study shares: a parser whose errors are one line and exit code 2.

Bad input ends with ``experiments.<command>: error: <what to do>`` on stderr, never argparse's usage block and never a
traceback; the commands (``experiments.run``, ``experiments.report``, ``experiments.model``,
``experiments.gpu_check``) build their parsers from this one class.
"""

from __future__ import annotations

import argparse
import sys


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` prints one line (``prog: error: message``) and exits 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog.removeprefix('python -m ')}: error: {message}\n")


def fail(prog: str, message: str) -> int:
    """Says what is wrong with the input in one line on stderr; returns 2, the exit code for bad input."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2
