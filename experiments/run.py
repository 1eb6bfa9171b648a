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

This module joins the layers: the harness measures and writes records, then the report is
built from them (``experiments.report``), as ``python -m experiments.report`` would.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import signal
import sys
from pathlib import Path

import experiments
from experiments import cli

# XLA's host platform takes seconds and hundreds of MB per thousand host devices (measured:
# 4096 took 11 s and 0.6 GB to start; far more aborts the process); they share the machine's
# cores anyway.
MAX_HOST_DEVICES = 1024
# A jax.distributed worker process holds about 0.5 GB at start-up; more than 4 per core only queue.
PROCESS_BYTES, PROCESSES_PER_CORE = 2**29, 4




EPILOG = """examples:
  python -m experiments.run                                  # the quick study on the best backend, then its report
  python -m experiments.run --only matmul,precision --profile full --out reports/mine
  python -m experiments.run --dry-run --target h100          # what a run would take on an H100, nothing run
  python -m experiments.run --compile-for h200               # XLA:GPU's plan for an H200, compiled on this CPU
  python -m experiments.run --only matmul --set 'matmul.sizes=(256,512)'   # quoted: the shell reads ( )
GPU names are read in any case and spelling: h200, H200, "H200 SXM", a100, rtx4090."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = cli.Parser(prog="python -m experiments.run", description=__doc__.split("\n\n")[0], epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--processes", type=int, metavar="N", help="processes for the distributed experiment (default 2)")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-report", action="store_true", help="write results only, no report")
    p.add_argument("--profile-trace", metavar="DIR",
                   help="write a jax.profiler trace of the run to DIR (open in Perfetto or TensorBoard/XProf)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (cases, compiles, estimated seconds per experiment) without starting JAX")
    p.add_argument("--target", metavar="GPU",
                   help="the GPU --dry-run plans for where this machine has none (default: H200 SXM)")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="measure every experiment's key cases first and stop cleanly within S seconds")
    p.add_argument("--compile-for", metavar="GPU",
                   help="compile each experiment's programs for this GPU (h200, h100, a100) on this machine's CPU "
                        "and record XLA:GPU's plan (memory, library calls, collectives); nothing runs "
                        "(needs the gpu-compile extra)")
    p.add_argument("--allocator", choices=("tuned", "system"),
                   help="host malloc settings for a CPU run: tuned (default: XLA:CPU keeps its large buffers, "
                        "the process restarts itself with them) or system (glibc's defaults)")
    p.add_argument("--set", action="append", default=[], metavar="EXPERIMENT.FIELD=VALUE",
                   help="change one field of an experiment's config, e.g. --set 'matmul.sizes=(256,512)'")
    args = p.parse_args(argv)
    if args.resume and args.out and args.out != args.resume:
        p.error("--resume DIR already names the result folder; drop --out")
    if args.devices is not None and args.devices < 1:
        p.error(f"--devices must be at least 1, got {args.devices}")
    if args.devices is not None and args.devices > MAX_HOST_DEVICES:
        p.error(f"--devices {args.devices}: at most {MAX_HOST_DEVICES} host devices (XLA takes seconds and "
                "hundreds of MB per thousand, and they share this machine's cores)")
    if args.processes is not None and args.processes < 1:
        p.error(f"--processes must be at least 1, got {args.processes}")
    if args.processes is not None and args.processes > max_processes():
        p.error(f"--processes {args.processes}: this machine holds at most {max_processes()} JAX processes "
                f"({PROCESSES_PER_CORE} per core, {PROCESS_BYTES / 1e9:.1f} GB each)")
    if args.budget_s is not None and not args.budget_s > 0:
        p.error(f"--budget-s must be a positive number of seconds, got {args.budget_s:g}")
    if args.target and not args.dry_run:
        p.error("--target names the GPU a --dry-run plans for; add --dry-run")
    from jaxgpu.ground import hardware

    if args.target:
        try:
            args.target = hardware.find_gpu(args.target).name
        except KeyError as err:
            p.error(f"--target: {err.args[0]}")
    if args.compile_for:
        if args.backend not in (None, "cpu"):
            p.error("--compile-for compiles on this machine's CPU; drop --backend")
        args.compile_for = _compile_target(p, args.compile_for)
    return args


def _compile_target(p: argparse.ArgumentParser, name: str) -> str:
    """The ``jaxgpu.pricing.targets`` name of the GPU ``name`` reads as (the same resolver as --target's)."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import targets

    try:
        hw = hardware.find_gpu(name)
    except KeyError as err:
        p.error(f"--compile-for: {err.args[0]}")
    found = next((t.name for t in targets.TARGETS.values() if t.hardware == hw.name), None)
    if found is None:
        p.error(f"--compile-for: no XLA:GPU target for the {hw.name} yet; compile targets: "
                + ", ".join(f"{t.name} ({t.hardware})" for t in targets.TARGETS.values()))
    return found


def ignored(args: argparse.Namespace, names: list[str]) -> list[str]:
    """The flags this command line sets that nothing will read, each with why (a warning, not an error)."""
    out = []
    gpu = args.backend == "gpu" or bool(args.compile_for)
    if args.devices is not None and args.backend == "gpu":
        out.append("--devices sets CPU host devices; a GPU run uses the GPUs JAX sees")
    if args.processes is not None and "distributed" not in names:
        out.append("--processes is read by the distributed experiment, which is not selected")
    if args.allocator and gpu:
        out.append("--allocator sets the host allocator of a CPU run")
    if args.dry_run:
        out += [f"{flag} does nothing with --dry-run (nothing runs)" for flag, on in
                (("--out", args.out), ("--resume", args.resume), ("--profile-trace", args.profile_trace),
                 ("--budget-s", args.budget_s), ("--no-report", args.no_report)) if on]
    if args.compile_for and args.budget_s is not None:
        out.append("--budget-s orders timed cases; --compile-for times nothing")
    return out


def max_processes() -> int:
    """How many jax.distributed worker processes this machine can hold at once."""
    from jaxgpu.ground import devices

    mem = devices.host_memory_bytes() or 0
    return max(2, min(PROCESSES_PER_CORE * devices.cpu_count(), mem // PROCESS_BYTES))


def _defaults_from(args: argparse.Namespace) -> None:
    """Fills what the user left unset: from the resumed run's run.json, else the defaults."""
    saved = {}
    if args.resume:
        import warnings

        from jaxgpu.records import results

        with warnings.catch_warnings():  # a cut last line: the runner sets it aside and says so
            warnings.simplefilter("ignore")
            saved = results.read_run(args.resume).meta.get("config", {})
        if args.only is None and saved.get("experiments"):
            args.only = ",".join(saved["experiments"])
    for name, default in (("compile_for", None), ("backend", "auto"), ("profile", "quick"), ("devices", None),
                          ("processes", None), ("seed", 0), ("allocator", None)):
        if getattr(args, name) is None:
            setattr(args, name, saved.get(name, default))
    if args.compile_for:
        args.backend = "cpu"  # compiling for a GPU happens on this machine's CPU


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        _defaults_from(args)
    except Exception as err:  # noqa: BLE001 - ResultsError, without importing JAX first
        return _fail(str(err))
    try:
        names = experiments.parse_only(args.only)
    except experiments.UnknownExperiment as err:
        return _fail(err.args[0])
    if args.list:
        from experiments.analysis import claims

        tested = {name: ", ".join(claims.for_experiment(name)) or "-" for name in experiments.names()}
        width = max(map(len, tested.values()))
        for name, ids in tested.items():
            print(f"{name:16s} {ids:{width}s}  {experiments.load(name).description}")
        return 0
    try:
        settings = experiments.parse_settings(args.set, names)
        _check_processes(args, names)
    except experiments.BadSetting as err:
        return _fail(str(err))

    for why in ignored(args, names):
        print(f"experiments.run: warning: {why}; ignored", file=sys.stderr)
    if args.devices is None and any(n in experiments.multi_device() for n in names):
        args.devices = experiments.DEFAULT_HOST_DEVICES  # only the CPU platform reads it

    if args.dry_run:
        from experiments.harness import runner

        platform = args.backend if args.backend != "auto" else _likely_platform()
        try:
            lines = runner.dry_run(names, platform=platform, profile=args.profile, target=args.target,
                                   host_devices=args.devices, processes=args.processes, seed=args.seed,
                                   settings=settings)
        except KeyError as err:
            return _fail(err.args[0])
        print("\n".join(lines))
        return 0

    if importlib.util.find_spec("jax") is None:
        return _fail("JAX is not installed in this Python; pip install -e . (or -e '.[cuda13]' on a GPU machine)")
    out_error = _check_out(args.resume or args.out, resume=bool(args.resume)) or _check_resumed_here(args.resume)
    if out_error:
        return _fail(out_error)
    if argv is None:
        _restart_with_allocator(args)  # returns only when the process already has the allocator asked for

    from jaxgpu.ground import devices  # imports JAX: only after the cheap checks above

    try:
        devices.configure(args.backend, args.devices)
        platform = devices.resolve(args.backend)
    except devices.BackendError as err:
        return _fail(str(err))
    if args.compile_for:
        from jaxgpu.pricing import targets

        if reason := targets.unavailable():
            return _fail(f"--compile-for needs XLA:GPU: {reason}")

    from jaxgpu.records import results

    from experiments.analysis import claims
    from experiments.harness import runner

    label = f"compiled-{args.compile_for.lower()}" if args.compile_for else platform
    out = args.resume or args.out or runner.default_out_dir(label)
    try:
        with _sigterm_as_interrupt():
            runner.run_study(names, platform=platform, profile=args.profile, out_dir=out, resume=bool(args.resume),
                             seed=args.seed, host_devices=args.devices, processes=args.processes,
                             trace_dir=args.profile_trace, progress=not args.no_progress,
                             argv=sys.argv[1:] if argv is None else argv, budget_s=args.budget_s, settings=settings,
                             compile_for=args.compile_for, rests_on=claims.rests_on)
    except results.ResultsError as err:
        return _fail(str(err))
    except FileExistsError as err:  # another run claimed the folder first (FolderTaken), or already holds it
        return _fail(str(err))
    except results.RunWriteError as err:  # the input was fine: the machine could not take the write
        print(f"experiments.run: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: the run stopped; what it measured is reported
        sig = getattr(err, "signal_name", "SIGINT")
        where = _report(out, args.no_report)
        print(f"experiments.run: stopped by {sig}; every finished case is kept in {out}{where}; "
              f"continue with --resume {out}", file=sys.stderr)
        return 143 if sig == "SIGTERM" else 130
    if not args.no_report:
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


def _report(out: str | Path, skip: bool) -> str:
    """Writes the report of ``out``; returns a phrase for the closing line (where it is, or why not)."""
    if skip:
        return ""
    from jaxgpu.records import results

    from experiments import report

    try:
        md, page = report.write_report([out], out)
    except (results.ResultsError, OSError) as err:
        text = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        print(f"experiments.run: error: the report was not written ({text}); the records are kept in {out}",
              file=sys.stderr)
        return "; no report"
    return f", report: {md} and {page}"


def _restart_with_allocator(args: argparse.Namespace) -> None:
    """Restarts this command with the host allocator a CPU run asked for (malloc reads its settings
    at process start, so they cannot be set from here): before JAX starts, once."""
    from jaxgpu.ground import devices

    want = args.allocator or "tuned"
    cpu = args.backend == "cpu" or (args.backend == "auto" and not devices.gpu_driver_present())
    if not cpu or devices.allocator_in_use() == want or os.environ.get("JAXGPU_RESTARTED"):
        return
    env = {**devices.allocator_environ(want), "JAXGPU_RESTARTED": "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "experiments.run", *sys.argv[1:]], env)


def _check_processes(args: argparse.Namespace, names: list[str]) -> None:
    if "distributed" not in names or args.processes is None:
        return
    spec = experiments.config("distributed", args.profile, "cpu", None).spec
    if spec.global_batch % args.processes:
        raise experiments.BadSetting(f"--processes {args.processes}: the distributed job's global batch "
                                     f"({spec.global_batch}) does not split evenly over {args.processes} processes")


def _check_out(out: str | None, resume: bool = False) -> str | None:
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


def _check_resumed_here(resume: str | None) -> str | None:
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


def _likely_platform() -> str:
    """What --backend auto would pick, guessed without starting JAX: a GPU where the driver and a
    CUDA plugin are both installed."""
    plugin = any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))
    return "gpu" if plugin and shutil.which("nvidia-smi") else "cpu"


def _fail(message: str) -> int:
    print(f"experiments.run: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head`: what was wanted has been read
        sys.stderr.close()
        sys.exit(0)
