"""``python -m experiments.run``: run the study on a backend and write its report.

Examples::

    python -m experiments.run                         # quick profile, every experiment, auto backend
    python -m experiments.run --backend gpu --profile full
    python -m experiments.run --only matmul --out reports/my-run
    python -m experiments.run --resume reports/my-run # finish a run that was interrupted
    python -m experiments.run --backend cpu --devices 4 --only data_parallel,tensor_parallel,collectives
    python -m experiments.run --only distributed --processes 2

Bad input ends with one line on stderr and exit code 2. Nothing here imports JAX
before the backend and host device count are set.
"""

from __future__ import annotations

import argparse
import sys

import experiments


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"experiments.run: error: {message}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _Parser(prog="python -m experiments.run", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("auto", "cpu", "gpu"),
                   help="auto: the GPU if JAX sees one, else the CPU (default)")
    p.add_argument("--profile", choices=experiments.PROFILES,
                   help="quick (default, under 5 minutes on 2 CPU cores), full (reference runs), tiny (smoke)")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these experiments (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--out", metavar="DIR", help="result folder (default: a new folder under reports/runs/)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR, skipping cases already recorded")
    p.add_argument("--devices", type=int, metavar="N",
                   help="number of CPU host devices (XLA_FLAGS is appended to); default 1, or "
                        f"{experiments.DEFAULT_HOST_DEVICES} when a multi-device experiment "
                        f"({', '.join(experiments.MULTI_DEVICE)}) is selected")
    p.add_argument("--processes", type=int, metavar="N", help="processes for the distributed experiment (default 2)")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-report", action="store_true", help="write results only, no report")
    p.add_argument("--profile-trace", metavar="DIR",
                   help="write a jax.profiler trace of the run to DIR (open in Perfetto or TensorBoard/XProf)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.resume and args.out and args.out != args.resume:
        p.error("--resume DIR already names the result folder; drop --out")
    if args.devices is not None and args.devices < 1:
        p.error(f"--devices must be at least 1, got {args.devices}")
    if args.processes is not None and args.processes < 1:
        p.error(f"--processes must be at least 1, got {args.processes}")
    return args


def _defaults_from(args: argparse.Namespace) -> None:
    """Fills what the user left unset: from the resumed run's run.json, else the defaults."""
    saved = {}
    if args.resume:
        from jaxgpu import results

        saved = results.read_run(args.resume).meta.get("config", {})
        if args.only is None and saved.get("experiments"):
            args.only = ",".join(saved["experiments"])
    for name, default in (("backend", "auto"), ("profile", "quick"), ("devices", None), ("processes", None),
                          ("seed", 0)):
        if getattr(args, name) is None:
            setattr(args, name, saved.get(name, default))


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
        for name in experiments.names():
            mod = experiments.load(name)
            print(f"{name:16s} {', '.join(mod.CLAIMS):12s} {mod.DESCRIPTION}")
        return 0

    if args.devices is None and any(n in experiments.MULTI_DEVICE for n in names):
        args.devices = experiments.DEFAULT_HOST_DEVICES  # only the CPU platform reads it

    from jaxgpu import devices  # imports JAX: only after the cheap checks above

    try:
        devices.configure(args.backend, args.devices)
        platform = devices.resolve(args.backend)
    except devices.BackendError as err:
        return _fail(str(err))

    from jaxgpu import results
    from experiments import runner

    out = args.resume or args.out or runner.default_out_dir(platform)
    try:
        runner.run_study(names, platform=platform, profile=args.profile, out_dir=out, resume=bool(args.resume),
                         seed=args.seed, host_devices=args.devices, processes=args.processes,
                         trace_dir=args.profile_trace, progress=not args.no_progress, report=not args.no_report,
                         argv=sys.argv[1:] if argv is None else argv)
    except results.ResultsError as err:
        return _fail(str(err))
    except KeyboardInterrupt:
        print(f"experiments.run: interrupted; every finished case is kept in {out}; "
              f"continue with --resume {out}", file=sys.stderr)
        return 130
    return 0


def _fail(message: str) -> int:
    print(f"experiments.run: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
