"""The report's view of each experiment: ``section(pairs)`` from ``(Run, Record)`` pairs.

A view module imports no JAX, Flax or Optax (the measuring modules in ``experiments`` do),
so a report can be built from result folders on a machine without them; ``load`` imports
one view when it is asked for.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import experiments


def load(name: str) -> ModuleType:
    """The view module of a registered experiment."""
    if name not in experiments.REGISTRY:
        raise experiments.UnknownExperiment(f"unknown experiment {name!r}; known: {', '.join(experiments.names())}")
    return importlib.import_module(f"experiments.views.{name}")
