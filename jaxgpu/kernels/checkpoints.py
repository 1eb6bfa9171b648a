"""A step's recompute policy by name: ``remat(layer, name)`` wraps a layer in ``jax.checkpoint`` as the name says, and
``tag(x, name)`` names a tensor a framework's policy saves (``jaxgpu.ground.remat.TAGS``).

A name is "none", a ``jax.checkpoint_policies`` policy without arguments (``decoders.REMAT_POLICIES``), or a framework's
(``jaxgpu.ground.remat.POLICIES``: its no-argument base and the names it saves, ``save_from_both_policies`` of the two).
A tag is applied only while a layer whose policy saves that name is traced: JAX lowers a name inside a checkpoint as a
reduce_precision to the tensor's own type (nothing, once XLA simplifies it), which would still change the program's
text, and so the cached plan's key, of every step that saves no name.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import jax
from jax.ad_checkpoint import checkpoint_name

from jaxgpu.ground import remat as frameworks

_SAVED: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("saved", default=())


def tag(x: Any, name: str) -> Any:
    """``x`` named ``name`` where the layer being traced saves that name, else ``x`` itself."""
    return checkpoint_name(x, name) if name in _SAVED.get() else x


def policy(name: str) -> Callable | None:
    """The ``jax.checkpoint`` policy ``name`` says (None: no layer remat at all).

    Raises:
      KeyError: a framework's name this program cannot run (``frameworks.check``).
      AttributeError: a name that is no policy of ``jax.checkpoint_policies``.
    """
    p = jax.checkpoint_policies
    framework = frameworks.check(name)
    if framework is None:
        return None if name == "none" else getattr(p, name)
    if framework.base == "none":
        return None
    named = p.save_only_these_names(*framework.names) if framework.names else None
    base = getattr(p, framework.base) if framework.base else None
    if base and named:
        return p.save_from_both_policies(base, named)
    return base or named or p.nothing_saveable


def remat(layer: Callable, name: str) -> Callable:
    """``layer`` with its backward pass recomputing what the policy ``name`` does not save (itself where none is
    recomputed), the tensors the policy saves by name tagged while it is traced."""
    chosen = policy(name)
    if chosen is None:
        return layer
    framework = frameworks.check(name)
    names = framework.names if framework else ()

    def named(*args):
        token = _SAVED.set(names)
        try:
            return layer(*args)
        finally:
            _SAVED.reset(token)

    return jax.checkpoint(named, policy=chosen)
