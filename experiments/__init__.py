"""The study's experiments, by name: the registry.

Each experiment is one folder, ``experiments/<name>/`` (see ``experiments.contract``): its spec
(``EXPERIMENT``, importing no JAX), its measuring code (``measure.py``) and its report section
(``view.py``, importing no JAX). The registry maps a name (the ``--only`` name, and a record's
``experiment``) to that folder; a folder is imported only when it is used, so ``--list``, ``--dry-run``
and a typo in ``--only`` answer without JAX. Adding an experiment is one folder and one line here
(docs/adding-an-experiment.md).

The layers, by data flow (tests/test_architecture.py keeps them so):
  ``experiments.harness``    plans and runs cases, writes records (no JAX of its own)
  ``experiments.analysis``   derived figures, the claims and their rules, the prediction model (no JAX)
  ``experiments.reporting``  builds and renders the report from records (no JAX)
  ``experiments.run`` and ``experiments.report`` are the command lines that join them.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import types
import typing
from collections.abc import Sequence

from experiments.contract import Experiment, View

REGISTRY: dict[str, str] = {
    "devices": "experiments.devices",
    "matmul": "experiments.matmul",
    "precision": "experiments.precision",
    "bandwidth": "experiments.bandwidth",
    "roofline": "experiments.roofline",
    "transfer": "experiments.transfer",
    "memory_fit": "experiments.memory_fit",
    "training": "experiments.training",
    "inference": "experiments.inference",
    "op_mix": "experiments.op_mix",
    "serial_parallel": "experiments.serial_parallel",
    "threads": "experiments.threads",
    "compiler": "experiments.compiler",
    "collectives": "experiments.collectives",
    "data_parallel": "experiments.data_parallel",
    "tensor_parallel": "experiments.tensor_parallel",
    "distributed": "experiments.distributed",
    "gpu_model": "experiments.gpu_model",
    "transformer": "experiments.transformer",
    "drift": "experiments.drift",
}

# On CPU a run that selects a multi-device experiment (``Experiment.multi_device``) and leaves
# --devices unset gets this many host devices (XLA's virtual CPU devices, which share the
# machine's cores).
DEFAULT_HOST_DEVICES = 4

PROFILES = ("tiny", "quick", "full")


class UnknownExperiment(KeyError):
    pass


class BadSetting(ValueError):
    """A ``--set EXPERIMENT.FIELD=VALUE`` that names no field, or a value of the wrong type."""


def names() -> list[str]:
    return list(REGISTRY)


def parse_only(only: str | None) -> list[str]:
    """The experiments named in ``--only a,b`` (all when None), in registry order."""
    if only is None:
        return names()
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    if not wanted:
        raise UnknownExperiment(f"--only {only!r} names no experiment; known: {', '.join(names())}")
    unknown = [w for w in wanted if w not in REGISTRY]
    if unknown:
        import difflib

        near = [m for w in unknown for m in difflib.get_close_matches(w.lower(), names(), n=1, cutoff=0.6)]
        hint = f"did you mean {', '.join(near)}? " if near else ""
        raise UnknownExperiment(f"unknown experiment {', '.join(map(repr, unknown))}; {hint}"
                                f"known: {', '.join(names())}")
    return [n for n in names() if n in wanted]


def load(name: str) -> Experiment:
    """The spec of a registered experiment (imports its folder's ``__init__``, never its measuring code)."""
    try:
        module = importlib.import_module(REGISTRY[name])
    except KeyError:
        raise UnknownExperiment(f"unknown experiment {name!r}; known: {', '.join(names())}") from None
    spec = module.EXPERIMENT
    if not isinstance(spec, Experiment) or spec.name != name:
        raise TypeError(f"{REGISTRY[name]}.EXPERIMENT must be an experiments.contract.Experiment named {name!r}")
    return spec


def view(name: str) -> View:
    """The report view of a registered experiment (``experiments.<name>.view.VIEW``)."""
    load(name)  # an unknown name fails here, with the known ones
    view = importlib.import_module(f"{REGISTRY[name]}.view").VIEW
    if not isinstance(view, View):
        raise TypeError(f"{REGISTRY[name]}.view.VIEW must be an experiments.contract.View")
    return view


def multi_device() -> list[str]:
    """The experiments that compare device counts."""
    return [n for n in names() if load(n).multi_device]


def reads_processes(selected) -> list[str]:
    """Of ``selected``, the experiments that read ``--processes`` (``Experiment.processes``)."""
    return [n for n in selected if load(n).processes is not None]


def gpu_parts() -> dict[int, list[str]]:
    """The GPU check's parts and the experiments each measures (``Experiment.gpu_part``), the first part first."""
    out: dict[int, list[str]] = {}
    for n in names():
        if load(n).gpu_part:
            out.setdefault(load(n).gpu_part, []).append(n)
    return dict(sorted(out.items()))


def host_check() -> list[str]:
    """The experiments the GPU check also runs on the lent machine's CPU (``Experiment.in_host_check``)."""
    return [n for n in names() if load(n).in_host_check]


def config(name: str, profile: str, platform: str, overrides: dict[str, object] | None = None):
    """The experiment's config for a profile on a platform, with ``overrides`` (field -> value) applied."""
    cfg = load(name).config_for(profile, platform)
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def parse_settings(settings: Sequence[str], selected: Sequence[str]) -> dict[str, dict[str, object]]:
    """``["matmul.sizes=(64, 128)", ...]`` -> ``{"matmul": {"sizes": (64, 128)}}``, each checked against the
    experiment's ``Config`` fields and their types.

    Raises:
      BadSetting: a malformed setting, an experiment not selected, an unknown field or a wrong type.
    """
    out: dict[str, dict[str, object]] = {}
    for s in settings:
        target, sep, text = s.partition("=")
        exp, dot, field = target.strip().partition(".")
        if not (sep and dot and exp and field):
            raise BadSetting(f"--set {s!r}: expected EXPERIMENT.FIELD=VALUE, e.g. matmul.sizes=(256,512)")
        if exp not in REGISTRY:
            raise BadSetting(f"--set {s!r}: unknown experiment {exp!r}; known: {', '.join(names())}")
        if exp not in selected:
            raise BadSetting(f"--set {s!r}: {exp} is not among the experiments of this run")
        cls = load(exp).config
        hints = typing.get_type_hints(cls)
        known = [f.name for f in dataclasses.fields(cls)]
        if field not in known:
            raise BadSetting(f"--set {s!r}: {exp} has no field {field!r}; its fields: {', '.join(known) or 'none'}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()  # a bare word: a string
        value = _tuples(value)
        hint = hints[field]
        if not _conforms(value, hint):
            raise BadSetting(f"--set {s!r}: {exp}.{field} takes {_type_name(hint)}, got {value!r}")
        out.setdefault(exp, {})[field] = float(value) if hint is float and isinstance(value, int) else value
    return out


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def _conforms(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(args) == len(value) and all(_conforms(v, a) for v, a in zip(value, args))
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else False


def _type_name(hint) -> str:
    return getattr(hint, "__name__", None) if isinstance(hint, type) else str(hint).replace("typing.", "")
