"""What an experiment hands the runner: cases to measure, what each costs, and the run they belong to.

Below the runner and the experiments alike (it imports no experiment, and no JAX), so an
experiment module can name ``Case`` without importing the runner that imports it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxgpu import hardware


@dataclasses.dataclass(frozen=True)
class Cost:
    """What one case does, in the terms ``experiments.plan`` turns into seconds on a machine.

    A timed case runs ``warmup`` calls, then repeats until ``target_s`` of samples and at
    least ``min_iters`` calls are in (``jaxgpu.timing.repeat``); ``calls`` counts the other
    calls it makes (a reference check, a fixed number of training steps).

    One call moves ``bytes`` through device memory and does ``flops`` in ``dtype`` (a
    ``Hardware.tflops`` key, or "elementwise" for fused non-matmul arithmetic), plus
    ``loop_steps`` iterations of a compiled loop (which XLA:GPU drives from the host) and
    ``dispatches`` separate program calls (op by op: one per op). ``on_host``: the timed call
    is numpy or Python on the host (a peer), at the host's rates; ``per_call_s`` is host time
    per call that no rate covers (a Python loop's interpreter).

    ``compiles`` counts small programs XLA compiles (an op, a fused elementwise loop),
    ``gemm_compiles`` programs built around matrix products (whose GEMMs XLA:GPU autotunes),
    ``step_compiles`` whole train steps. Host work outside the device: ``host_flops`` of
    numpy float64 reference products, ``host_bytes`` copied (transfers, ``np.asarray`` of
    results), ``rng_bytes`` of random numbers numpy draws, ``device_rng_bytes`` that
    ``jax.random`` draws; ``fixed_s`` is anything else measured beforehand (a subprocess start).
    """

    compiles: int = 1
    gemm_compiles: int = 0
    step_compiles: int = 0
    flops: float = 0.0
    dtype: str = "fp32"
    bytes: float = 0.0
    loop_steps: float = 0.0
    dispatches: int = 1
    per_call_s: float = 0.0
    on_host: bool = False
    target_s: float = 0.0
    min_iters: int = 5
    max_iters: int = 10_000
    warmup: int = 2
    calls: int = 1
    host_flops: float = 0.0
    host_bytes: float = 0.0
    rng_bytes: float = 0.0
    device_rng_bytes: float = 0.0
    fixed_s: float = 0.0

    @classmethod
    def none(cls) -> Cost:
        """A case that only computes on the host a handful of numbers (a table row, a format)."""
        return cls(compiles=0, min_iters=0, warmup=0, calls=0)


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: its params (the axes compared) and a function returning its metrics.

    ``key`` marks the cases a claim's verdict rests on: a run with a time budget measures
    every experiment's key cases before the rest.
    """

    params: dict[str, Any]
    run: Callable[[], dict[str, float]]
    cost: Cost = Cost()
    key: bool = False


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What an experiment needs to know about the run it is part of."""

    platform: str  # "cpu" or "gpu"
    profile: str
    device_kind: str
    n_devices: int
    hardware: hardware.Hardware | None
    seed: int = 0
    processes: int | None = None  # --processes, for the distributed experiment
    mode: str = "measured"  # or "compiled": for ``target``, which this machine only compiles for
    target: Any = None  # a jaxgpu.targets.GpuTarget in compiled mode

    @property
    def device(self):
        from jaxgpu import devices  # starts JAX: only a case's run() asks for the device

        return devices.devices_of(self.platform)[0]

    def target_devices(self, n: int = 1) -> tuple:
        """``n`` compile-only devices of the target (compiled mode): programs are placed on them, never run."""
        from jaxgpu import targets

        return targets.devices(self.target.name, n)
