"""What a GPU buys your step: any JAX function and its argument shapes, priced on every GPU of the hardware table.

``on_gpus(step, *specs)`` answers "which of these GPUs holds this step, and how long would it take there?" for a
program given as ``jax.ShapeDtypeStruct``s (nothing is allocated, so a 70B step is as cheap to ask about as a
small one). Per GPU: the bytes one device holds (XLA:GPU's own memory plan for that GPU where the gpu-compile
extra can compile it here, else XLA:CPU's plan of the same program standing in, and the row says which), whether
that fits the card's memory after the share JAX's allocator leaves unused, the predicted seconds with their
bounds (``jaxgpu.predict``), and what binds the step. With ``measure=True`` a first row times the step on this
machine, on random inputs of those shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.pricing import sharded


@dataclasses.dataclass(frozen=True)
class GpuRow:
    """One device's answer. ``bytes_per_device``: what the step holds on one device (arguments, outputs and
    temporaries, less what XLA aliases), from ``memory_plan``; ``fits``: within ``USABLE_FRACTION`` of its
    memory; ``seconds`` (with ``lower_s``, ``upper_s``) per call of the step, predicted, or measured here;
    ``binds``: "compute", "memory" or "launches"; ``plan``: the program priced ("xla:gpu h200", or
    "xla:cpu, estimate (why)"); ``memory_plan``: the same for the bytes."""

    device: str
    memory_gb: float
    bytes_per_device: float
    fits: bool
    seconds: float
    lower_s: float
    upper_s: float
    binds: str
    plan: str
    memory_plan: str
    measured: bool = False


@dataclasses.dataclass(frozen=True)
class OnGpus:
    """The rows of ``on_gpus``; a notebook shows them as a table."""

    rows: tuple[GpuRow, ...]

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, device: str) -> GpuRow:
        return next(r for r in self.rows if r.device == device)

    def table(self):
        from jaxgpu.records import figures, labels

        return figures.Table(
            ["device", "memory", "step holds", "fits", "seconds per step", "bounds", "binds", "figures from"],
            [[r.device, labels.si(r.memory_gb * 1e9, "B"), labels.si(r.bytes_per_device, "B"),
              "yes" if r.fits else "no",
              labels.si(r.seconds, "s"), f"{labels.si(r.lower_s, 's')} - {labels.si(r.upper_s, 's')}", r.binds,
              "measured here" if r.measured else f"predicted, not run: {r.plan}; memory: {r.memory_plan}"]
             for r in self.rows],
            f"A step on each GPU (fits: within {sharded.USABLE_FRACTION:.0%} of the card, JAX's default share)")

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def as_dicts(self) -> list[dict]:
        return [dataclasses.asdict(r) for r in self.rows]


def _memory(step: Callable, specs: Sequence[Any], hw: hardware.Hardware) -> tuple[float, str]:
    """Bytes one device holds and whose plan says so: XLA:GPU's for ``hw`` where it compiles here, else XLA:CPU's."""
    import jax

    from jaxgpu.ground import timing
    from jaxgpu.pricing import targets

    devs, label = sharded.compile_devices(hw, 1)
    if devs is not None:
        return float(targets.compile_plan(step, *targets.specs_like(list(specs), devs[0])).total_bytes), label
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), list(specs))
    compiled = (step if hasattr(step, "lower") else jax.jit(step)).lower(*shapes).compile()
    return float(timing.memory_bytes(compiled)), f"xla:cpu, estimate ({label})"


def _random_like(specs: Sequence[Any]) -> list[Any]:
    """Inputs of the specs' shapes and dtypes, random (never zeros XLA could fold or a cache could flatter)."""
    import jax
    import jax.numpy as jnp

    leaves, tree = jax.tree.flatten(list(specs))
    keys = jax.random.split(jax.random.key(0), max(len(leaves), 1))
    out = []
    for k, s in zip(keys, leaves):
        if jnp.issubdtype(s.dtype, jnp.floating):
            out.append(jax.random.normal(k, s.shape, jnp.float32).astype(s.dtype))
        elif jnp.issubdtype(s.dtype, jnp.integer):
            out.append(jax.random.randint(k, s.shape, 0, 8).astype(s.dtype))
        elif jnp.issubdtype(s.dtype, jax.dtypes.prng_key):
            out.append(jax.random.split(k, s.shape) if s.shape else k)
        else:
            out.append(jnp.ones(s.shape, s.dtype))
    return jax.tree.unflatten(tree, out)


def on_gpus(step: Callable, *specs: Any, gpus: Sequence[str] | None = None, measure: bool = False,
            target_s: float = 0.3) -> OnGpus:
    """``step(*specs)`` on every GPU of the hardware table (or those named in ``gpus``, any spelling
    ``hardware.find_gpu`` reads): one ``GpuRow`` each, predicted, never run; with ``measure``, a first row
    timed on this machine (compile apart, warm-up, repeats), on random inputs of the specs' shapes.

    ``specs`` are ``jax.ShapeDtypeStruct``s (or arrays: only their shapes and dtypes are read), in a pytree as
    the step takes them. One device per GPU: a step sharded over several is priced per device by compiling
    it with its shardings (``jaxgpu.pricing.targets``).

    Raises:
      KeyError: a name in ``gpus`` is no GPU of the hardware table.
    """
    from jaxgpu.pricing import roofline

    hws = [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values())
    rows = []
    if measure:
        rows.append(_measured_here(step, specs, target_s))
    for hw in hws:
        nbytes, mem_plan = _memory(step, specs, hw)
        p = roofline.predict(step, *specs, on=hw)
        rows.append(GpuRow(hw.name, hw.memory_gb, nbytes, nbytes <= sharded.USABLE_FRACTION * hw.device_bytes,
                           p.estimate_s, p.lower_s, p.upper_s, p.bound, p.plan, mem_plan))
    return OnGpus(tuple(rows))


def _measured_here(step: Callable, specs: Sequence[Any], target_s: float) -> GpuRow:
    import jax

    from jaxgpu.ground import devices, timing

    args = _random_like(specs)
    jitted = step if hasattr(step, "lower") else jax.jit(step)
    t = timing.time_jitted(jitted, *args, target_s=target_s)
    nbytes = float(timing.memory_bytes(jitted.lower(*args).compile()))
    dev = jax.devices()[0]
    mem = (devices.host_memory_bytes() or 0) / 1e9 if dev.platform == "cpu" else \
        (dev.memory_stats() or {}).get("bytes_limit", 0) / 1e9
    name = f"this {dev.platform} ({dev.device_kind})"
    return GpuRow(name, mem, nbytes, nbytes <= mem * 1e9, t.median_s, t.quantile_s(0.25), t.quantile_s(0.75),
                  "-", "measured", "xla memory analysis", measured=True)


# The decoder's planner moved to jaxgpu.pricing.planner in December 2026, and how a split step's plan is read (its
# kinds of memory, the share of a card JAX takes) to jaxgpu.pricing.sharded: their names are found here still, with a
# warning. name -> the module it lives in now
_MOVED = {**dict.fromkeys(("ModelPlan", "NotPriced", "MODES", "NODE", "plan_model", "fewest", "model_on_gpus",
                           "fewest_on_gpus", "formula_vs_plan", "default_settings", "split_of", "mesh_words",
                           "SCORES_SHARE", "QUERY_BLOCK_BYTES", "MIN_QUERY_BLOCK"), "planner"),
          **dict.fromkeys(("KINDS", "MEMORY_PARTS", "USABLE_FRACTION"), "sharded")}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib
        import warnings

        now = _MOVED[name]
        warnings.warn(f"jaxgpu.pricing.sizing.{name} is now jaxgpu.pricing.{now}.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(f"jaxgpu.pricing.{now}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
