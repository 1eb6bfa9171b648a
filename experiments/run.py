"""``python -m experiments.run``: run the study on a backend and write its report.

Examples (quote what holds parentheses or spaces: a shell reads them first)::

    python -m experiments.run                         # quick profile, every experiment, auto backend
    python -m experiments.run --backend gpu --profile full
    python -m experiments.run --only matmul --out reports/my-run
    python -m experiments.run --resume reports/my-run # finish a run that was interrupted
    python -m experiments.run --resume reports/my-run --only transformer   # add an experiment to it
    python -m experiments.run --backend cpu --devices 4 --only data_parallel,tensor_parallel,collectives
    python -m experiments.run --only distributed --processes 2
    python -m experiments.run --dry-run --target h100 # the plan for an H100, without starting JAX
    python -m experiments.run --budget-s 240          # key cases first; stop cleanly in time
    python -m experiments.run --only matmul --set 'matmul.sizes=(256,512)'
    python -m experiments.run --compile-for h200      # XLA:GPU's plan for an H200, on this CPU

Bad input ends with one line on stderr and exit code 2. Nothing here imports JAX
before the backend and host device count are set, and ``--list``, ``--dry-run`` and every
bad-input check work where JAX is not installed at all.

This module joins the layers: the settings are decided (``experiments.harness.settings``), the machine is
readied (``experiments.harness.launch``), the harness measures and writes records, then the report is built from
them (``experiments.report``), as ``python -m experiments.report`` would. Installed, it is also ``jaxgpu-run``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys

from jaxgpu.ground import hardware
from jaxgpu.pricing import targets

import experiments
from experiments import cli
from experiments.harness import settings as run_settings
from experiments.harness.settings import BadInput, RunSettings

EPILOG = """examples:
  {prog}                                  # the quick study on the best backend, then its report
  {prog} --only matmul,precision --profile full --out reports/mine
  {prog} --dry-run --target h100          # what a run would take on an H100, nothing run
  {prog} --compile-for h200               # XLA:GPU's plan for an H200, compiled on this CPU
  {prog} --only matmul --set 'matmul.sizes=(256,512)'   # quoted: the shell reads ( )
GPU names are read in any case and spelling: h200, H200, "H200 SXM", a100, rtx4090."""


def parser() -> cli.Parser:
    prog = cli.prog("experiments.run")
    p = cli.Parser(prog=prog, description=__doc__.split("\n\n")[0].replace("``python -m experiments.run``", prog),
                   epilog=EPILOG.format(prog=prog), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("auto", "cpu", "gpu"),
                   help="auto: the GPU if JAX sees one, else the CPU (default)")
    p.add_argument("--profile", choices=experiments.PROFILES,
                   help="quick (default, under 5 minutes on 2 CPU cores), full (reference runs), tiny (smoke)")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these experiments (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--out", metavar="DIR", help="result folder (default: a new folder under reports/runs/)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the run in DIR, skipping cases already recorded (its experiments, or with --only "
                        "these, added to it; run.json's sessions says what each invocation ran); only on the "
                        "machine and JAX it was recorded with")
    p.add_argument("--devices", type=int, metavar="N",
                   help="number of CPU host devices (XLA_FLAGS is appended to); default 1, or "
                        f"{experiments.DEFAULT_HOST_DEVICES} when a multi-device experiment "
                        f"({', '.join(experiments.multi_device())}) is selected")
    p.add_argument("--processes", type=int, metavar="N",
                   help=f"processes for the {' and '.join(experiments.reads_processes(experiments.names()))} "
                        "experiment's job (default 2)")
    p.add_argument("--seed", type=int, metavar="N",
                   help="seed of every random draw a case makes (operands, data, initial weights; default 0): the "
                        "same seed measures the same numbers")
    p.add_argument("--no-report", action="store_true", help="write results only, no report")
    p.add_argument("--profile-trace", metavar="DIR",
                   help="write a jax.profiler trace of the run to DIR (open in Perfetto or TensorBoard/XProf)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (cases, compiles, estimated seconds per experiment) without starting JAX")
    p.add_argument("--target", metavar="GPU",
                   help="the GPU --dry-run plans for, whatever this machine has (a GPU plan; default: the "
                        f"{hardware.DEFAULT_GPU} where this machine has a GPU JAX would use, else this CPU's plan)")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="measure every experiment's key cases first and stop cleanly within S seconds")
    p.add_argument("--compile-for", metavar="GPU",
                   help=f"compile each experiment's programs for this GPU ({', '.join(targets.TARGETS)}) on this "
                        "machine's CPU "
                        "and record XLA:GPU's plan (memory, library calls, collectives); nothing runs "
                        "(needs the gpu-compile extra)")
    p.add_argument("--allocator", choices=("tuned", "system"),
                   help="host malloc settings for a CPU run: tuned (default: XLA:CPU keeps its large buffers, "
                        "the process restarts itself with them) or system (glibc's defaults)")
    p.add_argument("--set", action="append", default=[], metavar="EXPERIMENT.FIELD=VALUE",
                   help="change one field of an experiment's config, e.g. --set 'matmul.sizes=(256,512)'")
    return p


def parse_args(argv: list[str] | None = None) -> RunSettings:
    """The settings of a command line; bad input exits 2 with one line."""
    p = parser()
    return _settings(p, p.parse_args(argv), argv)


def _settings(p: cli.Parser, args: argparse.Namespace, argv: list[str] | None) -> RunSettings:
    try:
        return run_settings.from_args(args, sys.argv[1:] if argv is None else argv)
    except BadInput as err:
        p.error(str(err))


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.list:
        return _list()
    s = _settings(p, args, argv)
    for why in s.warnings:
        print(f"{cli.name('experiments.run')}: warning: {why}; ignored", file=sys.stderr)
    from experiments.harness import launch, runner

    if s.dry_run:
        try:
            print("\n".join(runner.dry_run(s, likely=launch.likely_platform())))
        except KeyError as err:
            return _fail(err.args[0])
        return 0
    try:
        platform = launch.start(s, restart=argv is None)
    except BadInput as err:
        return _fail(str(err))
    return _run(runner.with_folder(s, platform), platform)


def _list() -> int:
    from experiments.analysis import claims

    tested = {name: ", ".join(claims.for_experiment(name)) or "-" for name in experiments.names()}
    width = max(map(len, tested.values()))
    for name, ids in tested.items():
        print(f"{name:16s} {ids:{width}s}  {experiments.load(name).description}")
    return 0


def _run(s: RunSettings, platform: str) -> int:
    """Measures, then reports; the exit code."""
    from jaxgpu.records import results

    from experiments.analysis import claims
    from experiments.harness import runner

    out = s.out
    try:
        with _sigterm_as_interrupt():
            runner.run_study(s, platform, rests_on=claims.rests_on)
    except (results.ResultsError, FileExistsError) as err:  # FileExistsError: another run claimed the folder first
        return _fail(str(err))
    except results.RunWriteError as err:  # the input was fine: the machine could not take the write
        print(f"{cli.name('experiments.run')}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: the run stopped; what it measured is reported
        sig = getattr(err, "signal_name", "SIGINT")
        where = _report(out, not s.report)
        print(f"{cli.name('experiments.run')}: stopped by {sig}; every finished case is kept in {out}{where}; "
              f"continue with --resume {out}", file=sys.stderr)
        return 143 if sig == "SIGTERM" else 130
    if not s.report:
        return 0
    where = _report(out, False)
    if not where.startswith(", report"):
        return 1
    from experiments import report

    print(f"jaxgpu:{where.lstrip(',')}", file=sys.stderr)
    print("\n".join(f"jaxgpu: {line}" for line in report.closing_lines(out)), file=sys.stderr)
    return 0


class Stopped(KeyboardInterrupt):
    """A SIGTERM (a scheduler, a container stop, a lease's end), raised where Ctrl-C would be."""

    signal_name = "SIGTERM"


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Inside, SIGTERM stops the run as Ctrl-C does: the case in flight is abandoned, run.json says so."""
    def stop(signum, frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(out: str, skip: bool) -> str:
    """Writes the report of ``out``; returns a phrase for the closing line (where it is, or why not)."""
    if skip:
        return ""
    from jaxgpu.records import results

    from experiments import report

    try:
        md, page = report.write_report([out], out)
    except (results.ResultsError, OSError) as err:
        text = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        print(f"{cli.name('experiments.run')}: error: the report was not written ({text}); the records are kept "
              f"in {out}", file=sys.stderr)
        return "; no report"
    return f", report: {md} and {page}"


def _fail(message: str) -> int:
    return cli.fail(cli.prog("experiments.run"), message)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head`: what was wanted has been read
        sys.stderr.close()
        sys.exit(0)
