"""``python -m experiments.cache_times``: how long the model command takes to answer, first and from the cache.

The README's model example (or the command line given after ``--``) is asked with an empty plan cache, once with
one worker and once with ``--workers`` processes, then again three times with every plan and answer cached, and once
more with JAX, jaxlib, Flax and Optax blocked from import. Every answer must be the first one's, word for word, or the
run fails: a time is trusted only of the answer it timed. Wall-clock seconds of the whole command, the interpreter's
start included; the cached figure is the median of its repeats with their range.

    python -m experiments.cache_times
    python -m experiments.cache_times --workers 4 -- --model llama-7b --serve --gpus a100
    python -m experiments.cache_times -- --model llama3-8b --train --batch 64 --seq 4096 --devices 8 --gpus h100 --best

The last times a layout search: its answer's closing line says how many layouts it priced.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ["--model", "llama3-8b", "--train", "--fit", "--tokens", "1e9", "--gpus", "h100,h200"]
REPEATS = 3
_BLOCK = "import sys\nfor m in ('jax', 'jaxlib', 'flax', 'optax'):\n    sys.modules[m] = None\n"


def _ask(argv: list[str], cache: Path, blocked: Path | None = None) -> tuple[float, str]:
    """(seconds, the answer) of one run of the model command with its plan cache in ``cache``."""
    path = f"{blocked}{os.pathsep}{ROOT}" if blocked else str(ROOT)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": path}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "experiments.model", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"cache_times: the model command failed: {proc.stderr.strip().splitlines()[-1:]}")
    return seconds, proc.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.cache_times", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2, help="the processes of the second first answer (default 2)")
    p.add_argument("command", nargs="*", help="the model command's arguments, after -- (default: the README's)")
    args = p.parse_args(argv)
    if args.workers < 2:
        p.error(f"--workers compares with one worker: give 2 or more, got {args.workers}")
    command = args.command or EXAMPLE
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        one, many, blocked = Path(tmp, "one"), Path(tmp, "many"), Path(tmp, "blocked")
        blocked.mkdir()
        (blocked / "sitecustomize.py").write_text(_BLOCK)
        first, want = _ask([*command, "--workers", "1"], one)
        rows.append(("first answer, 1 worker", first, ""))
        seconds, got = _ask([*command, "--workers", str(args.workers)], many)
        _same(got, want, "the answer of several workers")
        rows.append((f"first answer, {args.workers} workers", seconds, ""))
        times = []
        for _ in range(REPEATS):
            seconds, got = _ask(command, many)
            _same(got, want, "a cached answer")
            times.append(seconds)
        rows.append((f"cached (median of {REPEATS})", statistics.median(times),
                     f"{min(times):.2f}-{max(times):.2f} s"))
        seconds, got = _ask(command, many, blocked)
        _same(got, want, "the cached answer without JAX")
        rows.append(("cached, JAX blocked", seconds, ""))
    print(f"python -m experiments.model {' '.join(command)}  ({_cores()} cores)")
    for what, seconds, spread in rows:
        print(f"  {what:28s} {seconds:7.2f} s  {spread}")
    return 0


def _same(got: str, want: str, what: str) -> None:
    if got != want:
        raise SystemExit(f"cache_times: {what} differs from the first answer")


def _cores() -> int:
    from jaxgpu.pricing import workers

    return workers.cores()


if __name__ == "__main__":
    sys.exit(main())
