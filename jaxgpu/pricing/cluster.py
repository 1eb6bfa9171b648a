"""Pricing spread over a Ray cluster (the ``ray`` extra: ``pip install 'jaxgpu[ray]'``): what ``workers.each`` does
in processes of one machine, on the nodes of a cluster people already run, for a search too large for one machine
(``layouts.best_layouts(..., ray=ADDRESS)``, the model command's ``--best --ray ADDRESS``).

The calls whose answers this machine's cache holds are read here first, as ``workers.each`` reads them; the rest run
as Ray tasks of one CPU each, kept off any GPU (``JAX_PLATFORMS=cpu``: a plan is compiled for the card, never run)
with this process's ``XLA_FLAGS``. The tasks keep their plans and answers in the cache folder this process uses (its
``XDG_CACHE_HOME``): on one machine's cluster, or one whose nodes share that folder's file system, no plan is compiled
twice; elsewhere each node keeps its own. ``address``: "local" (a cluster of this machine, started for the call and
stopped after), "auto" (the cluster this machine has joined: ``ray start``), or a head's "host:6379" or
"ray://host:10001".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.pricing import targets
from jaxgpu.pricing import workers as pool


def each(task: Callable[..., Any], calls: Sequence[dict[str, Any]], address: str) -> list:
    """``task(**kw)`` for each ``kw`` of ``calls``, in their order, over the Ray cluster at ``address`` (those
    cached here read first). ``task`` is a module-level function of a package the nodes have installed. The first
    call to raise, in ``calls``' order, raises here once every call is done.

    Raises:
      RuntimeError: Ray is not installed, or the cluster cannot be reached.
    """
    out: list[Any] = [None] * len(calls)
    failed: dict[int, BaseException] = {}
    todo = []
    for i, kw in enumerate(calls):
        try:
            with pool.cached_only():
                out[i] = task(**kw)
        except pool.NotCached:
            todo.append(i)
        except Exception as err:  # noqa: BLE001 - raised in order, below
            failed[i] = err
    if todo:
        _remote(task, calls, todo, address, out, failed)
    if failed:
        raise failed[min(failed)]
    return out


def _remote(task: Callable[..., Any], calls: Sequence[dict[str, Any]], todo: list[int], address: str, out: list,
            failed: dict[int, BaseException]) -> None:
    try:
        import ray
    except ImportError:
        raise RuntimeError("Ray is not installed here: pip install 'jaxgpu[ray]' (or ray)") from None
    cache = targets.plan_cache().root.parent.parent  # the XDG_CACHE_HOME its plans are kept under
    env = {"JAX_PLATFORMS": "cpu", "XDG_CACHE_HOME": str(cache), "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=None if address == "local" else address, runtime_env={"env_vars": env},
                     include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RuntimeError(f"no Ray cluster at {address!r}: {err}") from None
    try:
        remote = ray.remote(num_cpus=1)(_call)
        refs = {i: remote.remote(task, calls[i]) for i in todo}
        for i, ref in refs.items():
            try:
                out[i] = ray.get(ref)
            except ray.exceptions.RayTaskError as err:
                failed[i] = err.as_instanceof_cause()
    finally:
        if started:
            ray.shutdown()


def _call(task: Callable[..., Any], kw: dict[str, Any]) -> Any:
    return task(**kw)
