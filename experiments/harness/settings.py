"""What a run is asked to do, decided once: ``RunSettings``, built from the command line and, for a resumed run, its
run.json. Imports no JAX: every check here runs before a backend starts, and where JAX is not installed.

The command line (``experiments.run``) parses; this module fills the defaults, checks what argparse cannot, and
says which flags nothing will read. The harness then takes the settings whole (``runner.run_study``).
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import experiments

# XLA's host platform takes seconds and hundreds of MB per thousand host devices (measured:
# 4096 took 11 s and 0.6 GB to start; far more aborts the process); they share the machine's
# cores anyway.
MAX_HOST_DEVICES = 1024
# A jax.distributed worker process holds about 0.5 GB at start-up; more than 4 per core only queue.
PROCESS_BYTES, PROCESSES_PER_CORE = 2**29, 4
# what a resumed run's run.json gives the flags its command line leaves unset
_SAVED = {"compile_for": None, "backend": "auto", "profile": "quick", "devices": None, "processes": None, "seed": 0,
          "allocator": None}


@dataclasses.dataclass(frozen=True)
class Study:
    """The run's own config, beside each experiment's, selected by the profile as theirs are (``STUDY``).

    Attributes:
      triton_plans: a timed program's GPU plan is compiled with its GEMMs as Triton fusions too, and the cheaper
        kept, as XLA's autotuner keeps the faster on the GPU (it costs a quick run half a minute of its five).
    """

    triton_plans: bool = False


STUDY = {"tiny": Study(), "quick": Study(), "full": Study(triton_plans=True)}


class BadInput(ValueError):
    """Input the run cannot take: its message is the one line the command prints before exiting 2."""


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """One run, as asked: which experiments, where, how long, into which folder.

    ``backend`` is what was asked ("auto", "cpu", "gpu"); the platform it becomes is known only once JAX starts
    (``launch.start``). ``overrides`` are the ``--set`` fields, ``{experiment: {field: value}}``. ``target`` is the
    GPU a dry run plans for; ``compile_for`` a ``jaxgpu.pricing.targets`` name to compile for on this CPU.
    ``warnings`` are the flags nothing will read, each with why."""

    experiments: tuple[str, ...]
    backend: str = "auto"
    profile: str = "quick"
    out: str | None = None
    resume: bool = False
    devices: int | None = None
    processes: int | None = None
    seed: int = 0
    report: bool = True
    trace_dir: str | None = None
    progress: bool = True
    dry_run: bool = False
    target: str | None = None
    budget_s: float | None = None
    compile_for: str | None = None
    allocator: str | None = None
    overrides: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    argv: tuple[str, ...] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def compiled(self) -> bool:
        return bool(self.compile_for)

    @property
    def study(self) -> Study:
        """The run's own config for its profile: the profile reaches the measuring only through the configs it
        selects, this one and each experiment's."""
        return STUDY[self.profile]

    def planned_platform(self, likely: str = "cpu") -> str:
        """The platform a plan is made for without starting JAX: a GPU for --target or --compile-for, the asked
        backend, or ``likely`` (what "auto" would find) for "auto"."""
        if self.target or self.compile_for:
            return "gpu"
        return self.backend if self.backend != "auto" else likely


def from_args(args: argparse.Namespace, argv: Sequence[str] | None = None) -> RunSettings:
    """The settings of a parsed command line: defaults (from the resumed run's run.json first), names resolved,
    every check argparse cannot make.

    Raises:
      BadInput: what is wrong, in one line.
    """
    _check_numbers(args)
    asked = vars(args)
    saved = _saved(args.resume) if args.resume else {}
    only = args.only if args.only is not None or not saved.get("experiments") else ",".join(saved["experiments"])
    try:
        names = tuple(experiments.parse_only(only))
    except experiments.UnknownExperiment as err:
        raise BadInput(err.args[0]) from None
    filled = {k: asked[k] if asked[k] is not None else saved.get(k, default) for k, default in _SAVED.items()}
    if args.target and args.backend == "cpu":
        raise BadInput("--target names the GPU a --dry-run plans for; --backend cpu plans this CPU: drop one")
    target = _gpu_name("--target", args.target) if args.target else None
    compile_for = _compile_target(filled["compile_for"]) if filled["compile_for"] else None
    if compile_for and args.backend not in (None, "cpu"):
        raise BadInput("--compile-for compiles on this machine's CPU; drop --backend")
    devices = filled["devices"]
    if devices is None and any(n in experiments.multi_device() for n in names):
        devices = experiments.DEFAULT_HOST_DEVICES  # only the CPU platform reads it
    overrides = _overrides(args.set, saved, names)
    s = RunSettings(
        experiments=names, backend="cpu" if compile_for else filled["backend"], profile=filled["profile"],
        out=args.resume or args.out, resume=bool(args.resume), devices=devices, processes=filled["processes"],
        seed=filled["seed"], report=not args.no_report, trace_dir=args.profile_trace, progress=not args.no_progress,
        dry_run=args.dry_run, target=target, budget_s=args.budget_s, compile_for=compile_for,
        allocator=filled["allocator"], overrides=overrides, argv=tuple(argv) if argv is not None else None)
    _check_processes(s)
    return dataclasses.replace(s, warnings=tuple(ignored(args, s)))


def _overrides(asked: Sequence[str], saved: dict[str, Any], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The ``--set`` fields of this run: those asked, or a resumed run's own (read back from its run.json, so that
    the cases still to measure are the ones its records were measured with). A resume asked for other fields of an
    experiment it already measured is refused: its records would mix two configs under one."""
    try:
        mine = experiments.parse_settings(asked, list(names))
        # the saved fields as the command line would give them, typed the same way (JSON keeps tuples as lists)
        kept = experiments.parse_settings([f"{e}.{k}={v!r}" for e, fields in saved.get("settings", {}).items()
                                           if e in names for k, v in fields.items()], list(names))
    except experiments.BadSetting as err:
        raise BadInput(str(err)) from None
    measured = set(saved.get("experiments") or ())
    differ = sorted(e for e in set(mine) | set(kept) if e in measured and mine.get(e, kept.get(e)) != kept.get(e))
    if asked and differ:
        said = "; ".join(f"{e}: " + (", ".join(f"{k}={v!r}" for k, v in kept[e].items()) if e in kept else "none")
                         for e in differ)
        raise BadInput(f"--set changes what the resumed run measured ({said}); resume without --set, or start a "
                       "new folder with --out")
    return {**kept, **mine}


def _check_numbers(args: argparse.Namespace) -> None:
    if args.resume and args.out and args.out != args.resume:
        raise BadInput("--resume DIR already names the result folder; drop --out")
    if args.devices is not None and args.devices < 1:
        raise BadInput(f"--devices must be at least 1, got {args.devices}")
    if args.devices is not None and args.devices > MAX_HOST_DEVICES:
        raise BadInput(f"--devices {args.devices}: at most {MAX_HOST_DEVICES} host devices (XLA takes seconds and "
                       "hundreds of MB per thousand, and they share this machine's cores)")
    if args.processes is not None and args.processes < 1:
        raise BadInput(f"--processes must be at least 1, got {args.processes}")
    if args.processes is not None and args.processes > max_processes():
        raise BadInput(f"--processes {args.processes}: this machine holds at most {max_processes()} JAX processes "
                       f"({PROCESSES_PER_CORE} per core, {PROCESS_BYTES / 1e9:.1f} GB each)")
    if args.budget_s is not None and not args.budget_s > 0:
        raise BadInput(f"--budget-s must be a positive number of seconds, got {args.budget_s:g}")
    if args.target and not args.dry_run:
        raise BadInput("--target names the GPU a --dry-run plans for; add --dry-run")


def _saved(resume: str) -> dict[str, Any]:
    """The resumed run's config (run.json), read without JAX."""
    from jaxgpu.records import results

    try:
        with warnings.catch_warnings():  # a cut last line: the runner sets it aside and says so
            warnings.simplefilter("ignore")
            config = results.read_run(resume).meta.get("config", {})
    except results.ResultsError as err:
        raise BadInput(str(err)) from None
    kinds = {"devices": int, "processes": int, "seed": int, "experiments": list, "compile_for": str, "backend": str,
             "profile": str, "allocator": str, "settings": dict}  # what a resume reads back
    wrong = [k for k, v in (config.items() if isinstance(config, dict) else ())
             if k in kinds and v is not None and not isinstance(v, kinds[k])]
    if not isinstance(config, dict) or wrong:
        raise BadInput(f"{resume}/run.json: its config cannot be read back ({', '.join(wrong) or 'not a table'}); "
                       "start a new folder with --out")
    return dict(config)


def _gpu_name(flag: str, name: str) -> str:
    """The hardware table's name of the GPU ``name`` reads as ("h100" -> "H100 SXM")."""
    from jaxgpu.ground import hardware

    try:
        return hardware.find_gpu(name).name
    except KeyError as err:
        raise BadInput(f"{flag}: {err.args[0]}") from None


def _compile_target(name: str) -> str:
    """The ``jaxgpu.pricing.targets`` name of the GPU ``name`` reads as (the same resolver as --target's)."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import targets

    card = hardware.GPUS[_gpu_name("--compile-for", name)]
    if card.compiled is None:
        stand_in = hardware.GPUS[card.stand_in].compiled.name
        raise BadInput(f"--compile-for: no XLA:GPU target for the {card.name}, whose prices stand in from the "
                       f"{card.stand_in}'s plan (--compile-for {stand_in}); compile targets: "
                       + ", ".join(f"{t.name} ({t.hardware})" for t in targets.TARGETS.values()))
    return card.compiled.name


def _check_processes(s: RunSettings) -> None:
    """--processes N, where an experiment that reads it cannot run its job over N (``Experiment.processes``)."""
    if s.processes is None:
        return
    for name in experiments.reads_processes(s.experiments):
        why = experiments.load(name).processes(experiments.config(name, s.profile, "cpu", s.overrides.get(name)),
                                               s.processes)
        if why:
            raise BadInput(f"--processes {s.processes}: {why}")


def ignored(args: argparse.Namespace, s: RunSettings) -> list[str]:
    """The flags this command line sets that nothing will read, each with why (a warning, not an error)."""
    out = []
    if args.devices is not None and s.backend == "gpu":
        out.append("--devices sets CPU host devices; a GPU run uses the GPUs JAX sees")
    if args.processes is not None and not experiments.reads_processes(s.experiments):
        readers = experiments.reads_processes(experiments.names())
        out.append(f"--processes is read by {', '.join(readers)}, which {'is' if len(readers) == 1 else 'are'} not "
                   "selected")
    if args.allocator and s.backend == "gpu":  # a compile-only run is a CPU run: the allocator is read
        out.append("--allocator sets the host allocator of a CPU run")
    if s.dry_run:
        out += [f"{flag} does nothing with --dry-run (nothing runs)" for flag, on in
                (("--out", args.out), ("--resume", args.resume), ("--profile-trace", args.profile_trace),
                 ("--budget-s", args.budget_s), ("--no-report", args.no_report)) if on]
    if s.compiled and args.budget_s is not None:
        out.append("--budget-s orders timed cases; --compile-for times nothing")
    if s.dry_run and s.target and s.compiled:
        out.append(f"--target plans a timed run; --compile-for plans the compiles for {s.compile_for}")
    return out


def max_processes() -> int:
    """How many jax.distributed worker processes this machine can hold at once."""
    from jaxgpu.ground import devices

    mem = devices.host_memory_bytes() or 0
    return max(2, min(PROCESSES_PER_CORE * devices.cpu_count(), mem // PROCESS_BYTES))
