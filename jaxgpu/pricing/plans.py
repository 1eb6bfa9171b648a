"""The compiled plans a run keeps beside its records, so that a report can price them without JAX.

A timed record says what was measured and how much work XLA counted (``flops_xla``, ``bytes_xla``); the
model that predicts its time (``jaxgpu.pricing.roofline.price``) needs more: the program's kernels, their shapes
and their launches. While a case runs, ``jaxgpu.ground.timing`` collects every program it compiles; ``of_case``
keeps the one whose counts the record carries, and returns its plans:

    "xla:cpu" (or "xla:gpu"): the program as the run's own backend compiled it, the plan that was timed
    "xla:gpu h200":           the same program compiled for an H200 by XLA:GPU on this machine (the
                              gpu-compile extra), with its GEMMs as cuBLAS calls
    "xla:gpu h200, triton gemm": the same with Triton GEMM fusions (a GPU's autotuner keeps the faster); a run
                              of the full profile compiles it, a quick one leaves it out (``of_case``'s
                              ``triton``): it costs half a minute of a quick run's five

The runner writes them to ``plans.jsonl`` (``jaxgpu.records.results.RunWriter``); ``Run.plans`` reads them back.
A plan is a fact about a compile, like ``flops_xla``; a prediction made from it is never stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.ground.launches import Kernel

# the GPU targets (jaxgpu.pricing.targets) a CPU run compiles its timed programs for: the H200, whose plan the
# report's GPU twins price (the GPU this project's device tool lends)
GPU_TARGETS = (hardware.GPUS[hardware.DEFAULT_GPU].compiled.name,)
# XLA:GPU's compile time grows with a loop's trip count (a fori_loop of 1e5 steps: 1.2 s, of 1e6: 11 s, on the
# 2-core machine this project runs on): a program launching more kernels than this is not compiled for a GPU,
# and its twin is priced from its counts
GPU_PLAN_MAX_LAUNCHES = 50_000
# counts that join a record to the program it timed
_COUNTS = (("flops_xla", "bytes_xla"), ("step_flops_xla", "step_bytes_xla"))


def compact(kernels: Iterable[Kernel]) -> list[list]:
    """The kernels as lists (``Kernel.to_list``), kernels alike in everything but their name merged into one
    with their launches added: a train step's forty small elementwise fusions become a handful of rows."""
    merged: dict[tuple, Kernel] = {}
    for k in kernels:
        key = (k.flops, k.bytes, k.is_dot, k.gemm, k.dtype, k.precision, k.scope, k.transcendentals, k.powers,
               k.group)
        seen = merged.get(key)
        merged[key] = k if seen is None else dataclasses.replace(seen, count=seen.count + k.count)
    return [k.to_list() for k in merged.values()]


def on_one_machine(kernels: Iterable[Kernel], devices: int) -> list[Kernel]:
    """One device's kernels of a call that spans ``devices`` host devices of one CPU, as the machine runs them: the
    devices share its cores and its memory, so each kernel does ``devices`` times the work at once (a 4-way
    sharded triad moves what the whole triad moves, through the same DRAM)."""
    return [dataclasses.replace(k, flops=k.flops * devices, bytes=k.bytes * devices,
                                transcendentals=k.transcendentals * devices, powers=k.powers * devices)
            for k in kernels]


def expand(rows: Sequence[list]) -> list[Kernel]:
    return [Kernel.from_list(v) for v in rows]


def _counts(metrics: dict[str, float]) -> tuple[float, float] | None:
    for f, b in _COUNTS:
        if metrics.get(b):
            return metrics.get(f) or 0.0, metrics[b]
    return None


def timed_program(metrics: dict[str, float], programs: Sequence[Any]) -> Any | None:
    """The program (``jaxgpu.ground.timing.Program``) whose counts are the record's (XLA's, or its kernels' by trip
    count): the one it timed; None where no program or several different ones match."""
    from jaxgpu.ground import timing

    want = _counts(metrics)
    if want is None:
        return None
    from jaxgpu.ground import launches

    hits = []
    for p in programs:
        # the record's counts are XLA's, or (a scanned program, whose loop body XLA counts once) its kernels'
        flops, nbytes, _ = timing.work_counts(p.compiled)
        counted = [(flops or 0.0, nbytes)] if nbytes is not None else []
        counted.append(launches.program_counts(p.compiled.as_text()))
        if any(_close(b, want[1]) and _close(f, want[0]) for f, b in counted):
            hits.append(p)
    texts = {p.compiled.as_text() for p in hits}
    return hits[-1] if len(texts) == 1 else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def of_program(program: Any, backend: str, gpus: Sequence[str] = (), triton: bool = True) -> list[dict]:
    """The plans of one compiled program: its own (``backend``'s) and, for each target in ``gpus``,
    XLA:GPU's (both GEMM choices where it has products; cuBLAS's alone without ``triton``). A GPU plan that
    cannot be compiled here, or would take long to (``GPU_PLAN_MAX_LAUNCHES``), is left out."""
    from jaxgpu.ground import launches

    hlo = program.compiled.as_text()
    ks = launches.kernels(hlo)
    out = [{"plan": f"xla:{backend}", "loop_steps": launches.loop_steps(hlo), "kernels": compact(ks)}]
    if launches.devices(hlo) > 1:  # the kernels are one device's share of the call (absent: one device)
        out[0]["devices"] = launches.devices(hlo)
    if program.fn is None or not gpus or sum(k.count for k in ks) > GPU_PLAN_MAX_LAUNCHES:
        return out
    import jax

    from jaxgpu.ground import precision

    # a program timed inside a float64 scope is compiled again inside one: outside, its float64 would be float32
    wide = any(getattr(a, "dtype", None) is not None and a.dtype.itemsize == 8 for a in jax.tree.leaves(program.specs))
    with precision.enable_x64() if wide else contextlib.nullcontext():
        out += _gpu_plans(program, gpus, triton)
    return out


def _gpu_plans(program: Any, gpus: Sequence[str], triton: bool) -> list[dict]:
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline, targets

    out = []
    for name in gpus:
        hw = hardware.GPUS[targets.target(name).hardware]
        for choice in (False, True) if triton else (False,):
            try:
                ks, steps, label = roofline.plan_for(program.fn, *program.specs, on=hw, plan="gpu",
                                                       triton_gemm=choice)
            except Exception:  # noqa: BLE001 - a program XLA:GPU will not take is priced from its counts instead
                break
            out.append({"plan": label, "loop_steps": steps, "kernels": compact(ks)})
            if not any(k.is_dot for k in ks):
                break  # no GEMM: the Triton choice changes nothing
    return out


def of_case(metrics: dict[str, float], programs: Sequence[Any], backend: str, gpus: Sequence[str] = (),
            triton: bool = True) -> list[dict]:
    """The plans of the program a record timed (``timed_program``), or none where it is not known."""
    program = timed_program(metrics, programs)
    return [] if program is None else of_program(program, backend, gpus, triton)


def gpu_targets(backend: str, mode: str) -> tuple[str, ...]:
    """The GPU targets a run compiles its timed programs for: ``GPU_TARGETS`` for a measured CPU run where
    XLA:GPU can compile here, else none (a GPU run times the GPU itself)."""
    if backend != "cpu" or mode != "measured":
        return ()
    from jaxgpu.pricing import targets

    return () if targets.unavailable() else GPU_TARGETS
