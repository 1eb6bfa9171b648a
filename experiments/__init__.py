"""The study's experiments, by name.

The registry maps a name (the ``--only`` name, and a record's ``experiment``) to the
module that runs it; a module is imported only when it is used, so ``--list`` and a
typo in ``--only`` answer without starting JAX.

Each module measures; its report section lives apart, in ``experiments.views.<name>``
(``section(pairs)``, from ``(Run, Record)`` pairs only, importing no JAX). Each module defines:
  ``BENCHMARK_VERSION``   bumped when its method changes
  ``CLAIMS``              the claim IDs it tests, derived from ``experiments.claims`` (their one home)
  ``DESCRIPTION``         one line for ``--list``
  ``Config``              a frozen dataclass: what one run of the experiment measures
  ``PROFILES``            ``{(profile, platform): Config}``; platform "any" where it does not matter
  ``cases(cfg, ctx)``     the cases to measure, as ``experiments.case.Case`` objects, each with its
                          ``Cost`` (what ``--dry-run`` and ``--budget-s`` plan with); building them
                          starts no JAX backend
  ``info(ctx)``           (optional) facts about the run worth keeping in run.json
  ``attachments(ctx, dir)`` (optional) writes files a reader can open; returns their paths
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import types
import typing
from collections.abc import Sequence
from types import ModuleType

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
}

# Experiments that compare device counts. On CPU a run that selects one and leaves
# --devices unset gets this many host devices (XLA's virtual CPU devices, which share the
# machine's cores).
MULTI_DEVICE = ("collectives", "data_parallel", "tensor_parallel")
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
        raise UnknownExperiment(f"unknown experiment {', '.join(map(repr, unknown))}; known: {', '.join(names())}")
    return [n for n in names() if n in wanted]


def load(name: str) -> ModuleType:
    try:
        return importlib.import_module(REGISTRY[name])
    except KeyError:
        raise UnknownExperiment(f"unknown experiment {name!r}; known: {', '.join(names())}") from None


def config(name: str, profile: str, platform: str, overrides: dict[str, object] | None = None):
    """The experiment's ``Config`` for a profile on a platform, with ``overrides`` (field -> value) applied."""
    table = load(name).PROFILES
    cfg = table.get((profile, platform), table.get((profile, "any")))
    if cfg is None:
        raise KeyError(f"{name} has no {profile!r} profile for {platform}")
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
        cls = load(exp).Config
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
