"""Independent pricings run side by side: each card of a search, each count of a table, in worker processes.

A plan compiles on one or two cores for 1-60 s, and most of a search's plans do not depend on each other: each card's
fewest GPUs, each count of the model command's table. ``each`` runs such calls in ``workers`` processes (spawned, each
with its own JAX; the plan cache on disk is theirs too, so no plan is compiled twice). Calls whose answers are all in
the plan cache are answered first, in this process (``cached_only``): a cached answer starts no worker and imports no
JAX. What the serving simulator and the layout search price goes through the same door.

Imports no JAX.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_ONLY_CACHED = contextvars.ContextVar("only_cached", default=False)


class NotCached(Exception):  # noqa: N818 - a signal, as StopIteration is, not a failure
    """Raised by a pricing under ``cached_only`` where its answer is not in the plan cache."""


@contextlib.contextmanager
def cached_only() -> Iterator[None]:
    """Within it, a pricing whose answer is not cached raises ``NotCached`` rather than compiling or pricing."""
    token = _ONLY_CACHED.set(True)
    try:
        yield
    finally:
        _ONLY_CACHED.reset(token)


def only_cached() -> bool:
    """Whether the pricing under way may only read answers (``cached_only``)."""
    return _ONLY_CACHED.get()


def cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


# memory a worker may take: a process pricing Llama-3 70B's train step over 64 H100s (scanned layers, compiled from an
# empty cache) peaked at 0.51 GB resident on this project's 2-core VM, as did Llama-3 8B's over 4 H100s (GNU time's
# maximum resident set); twice that each, for steps compiled with their layers unrolled
WORKER_BYTES = 1e9


def default_workers(meminfo: str = "/proc/meminfo") -> int:
    """The workers a search takes unless told: the cores, but no more than the memory available holds at
    ``WORKER_BYTES`` each (where the OS says how much is available; at least one)."""
    try:
        text = open(meminfo).read()
    except OSError:
        return cores()
    free = next((int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("MemAvailable:")), 0)
    return max(1, min(cores(), int(free // WORKER_BYTES))) if free else cores()


def each(task: Callable[..., Any], calls: Sequence[dict[str, Any]], workers: int = 1) -> list:
    """``task(**kw)`` for each ``kw`` of ``calls``, in their order: those whose answers are cached here and now, the
    rest in up to ``workers`` spawned processes (1: here, one after another). ``task`` is a module-level function
    (a worker imports it by name) and what it returns can be pickled. The first call to raise, in ``calls``' order,
    raises here once every call is done.

    Raises:
      ValueError: ``workers`` below 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    out: list[Any] = [None] * len(calls)
    failed: dict[int, BaseException] = {}
    todo = []
    for i, kw in enumerate(calls):
        try:
            with cached_only():
                out[i] = task(**kw)
        except NotCached:
            todo.append(i)
        except Exception as err:  # noqa: BLE001 - raised in order, below
            failed[i] = err
    if len(todo) == 1 or workers == 1:
        for i in todo:
            try:
                out[i] = task(**calls[i])
            except Exception as err:  # noqa: BLE001 - raised in order, below
                failed[i] = err
    elif todo:
        _spawned(task, calls, todo, min(workers, len(todo)), out, failed)
    if failed:
        raise failed[min(failed)]
    return out


def _spawned(task: Callable[..., Any], calls: Sequence[dict[str, Any]], todo: list[int], workers: int, out: list,
             failed: dict[int, BaseException]) -> None:
    """``todo``'s calls in ``workers`` spawned processes (fork would copy a started JAX, which is not safe)."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_compile_only) as pool:
        futures = {pool.submit(task, **calls[i]): i for i in todo}
        for future in concurrent.futures.as_completed(futures):
            i = futures[future]
            try:
                out[i] = future.result()
            except Exception as err:  # noqa: BLE001 - raised in order, by each
                failed[i] = err


def _compile_only() -> None:
    """A worker compiles for GPUs and runs nothing: on a machine with a GPU, its JAX keeps off the card (each JAX
    process would take 75% of it)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
