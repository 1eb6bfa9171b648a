"""The study's experiments, by name.

The registry maps a name (the ``--only`` name, and a record's ``experiment``) to the
module that runs it; a module is imported only when it is used, so ``--list`` and a
typo in ``--only`` answer without starting JAX.

Each module defines:
  ``BENCHMARK_VERSION``   bumped when its method changes
  ``CLAIMS``              the claim IDs (../shared/CLAIMS.md) it tests
  ``DESCRIPTION``         one line for ``--list``
  ``Config``              a frozen dataclass; ``config(profile, platform)`` picks tiny/quick/full
  ``cases(cfg, ctx)``     the cases to measure, as ``experiments.runner.Case`` objects
  ``section(pairs)``      the report section, from ``(Run, Record)`` pairs only
  ``info(ctx)``           (optional) facts about the run worth keeping in run.json
  ``attachments(ctx, dir)`` (optional) writes files a reader can open; returns their paths
"""

from __future__ import annotations

import importlib
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
# --devices unset gets this many host devices (XLA's virtual CPU devices; measured here,
# 8 of them left single-device matmul and triad timings within 4% of 1 device).
MULTI_DEVICE = ("collectives", "data_parallel", "tensor_parallel")
DEFAULT_HOST_DEVICES = 4

PROFILES = ("tiny", "quick", "full")


class UnknownExperiment(KeyError):
    pass


def names() -> list[str]:
    return list(REGISTRY)


def parse_only(only: str | None) -> list[str]:
    """The experiments named in ``--only a,b`` (all when None), in registry order."""
    if not only:
        return names()
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in REGISTRY]
    if unknown or not wanted:
        raise UnknownExperiment(
            f"unknown experiment {', '.join(map(repr, unknown)) or repr(only)}; known: {', '.join(names())}")
    return [n for n in names() if n in wanted]


def load(name: str) -> ModuleType:
    try:
        return importlib.import_module(REGISTRY[name])
    except KeyError:
        raise UnknownExperiment(f"unknown experiment {name!r}; known: {', '.join(names())}") from None
