"""The experiment contract: what an experiment hands the rest of the study, typed.

An experiment is one folder, ``experiments/<name>/``:

- ``__init__.py``, its *spec*: ``EXPERIMENT = Experiment(...)`` with its config, profiles, the
  cases it measures and what each costs. It imports no JAX (``--list`` and ``--dry-run`` read it
  on machines without JAX), and names its measuring code only through ``Deferred``.
- ``measure.py``: the functions a case runs (JAX, Flax, Optax live here). It never imports a
  view, the analysis or the report.
- ``view.py``: ``VIEW = View(section, compiled)``, the experiment's report section drawn from
  records alone. It imports no JAX.

This module sits below every layer (the harness that plans and runs cases, the analysis,
the report) and imports nothing of the study's, so each of them can name these types.
docs/adding-an-experiment.md walks through a new one.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.records.results import Unsupported


@dataclasses.dataclass(frozen=True)
class Cost:
    """What one case does, in the terms ``experiments.harness.budget`` turns into seconds on a machine.

    A timed case runs ``warmup`` calls, then repeats until ``target_s`` of samples and at
    least ``min_iters`` calls are in (``jaxgpu.ground.timing.repeat``); ``calls`` counts the other
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

    ``key`` marks the cases a claim's verdict rests on: a run with a time budget measures them
    before the rest. The run sets it from the claims' declared reads (``experiments.analysis.claims
    .rests_on``, which ``python -m experiments.run`` hands the harness), so an experiment does not.
    """

    params: dict[str, Any]
    run: Callable[[], dict[str, float]]
    cost: Cost = Cost()
    key: bool = False
    # The params of a case of the same experiment whose work this one reads from the process (a training
    # curve's point reads its run's training): skipped when that case is skipped, and priced at that case's
    # cost where an earlier process measured it (a resumed run), since this one then redoes its work.
    needs: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What an experiment needs to know about the run it is part of."""

    platform: str  # "cpu" or "gpu"
    device_kind: str
    n_devices: int
    hardware: hardware.Hardware | None
    seed: int = 0
    processes: int | None = None  # --processes, for the distributed experiment
    mode: str = "measured"  # or "compiled": for ``target``, which this machine only compiles for
    target: Any = None  # a jaxgpu.pricing.targets.GpuTarget in compiled mode
    triton_plans: bool = False  # the study's config (harness.settings.Study): a timed program's plans with Triton GEMMs

    @property
    def device(self):
        from jaxgpu.ground import devices  # starts JAX: only a case's run() asks for the device

        return devices.devices_of(self.platform)[0]

    def target_devices(self, n: int = 1) -> tuple:
        """``n`` compile-only devices of the target (compiled mode): programs are placed on them, never run."""
        from jaxgpu.pricing import targets

        return targets.devices(self.target.name, n)


class Deferred:
    """An experiment's measuring module, imported when one of its functions is first called.

    ``_measure = Deferred("experiments.matmul.measure")``; ``_measure.run_one`` is then a callable
    that imports the module and calls its ``run_one``: a spec builds its cases from it without
    importing JAX, and the import happens when a case runs.
    """

    def __init__(self, module: str):
        self.module = module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        return functools.partial(_call, self.module, name)

    def __repr__(self) -> str:
        return f"Deferred({self.module!r})"


def _call(module: str, name: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


def one_device_case(params: dict[str, Any], what: str, ctx: RunContext) -> Case:
    """A case of work split over devices in a run that has one: recorded ``unsupported`` with ``what`` it
    would have shown and how to give it more devices, at no cost."""
    return Case(params, functools.partial(_one_device, what, ctx.device_kind), Cost.none())


def _one_device(what: str, device_kind: str):
    raise Unsupported(f"{what} (this run has one {device_kind}); run with --devices N on CPU, or on a machine "
                      "with several GPUs")


CaseBuilder = Callable[[Any, RunContext], list[Case]]


@dataclasses.dataclass(frozen=True)
class RoofParts:
    """What an experiment's records give the model's roofs for their run (``Pricing.roofs``); the analysis folds
    every experiment's parts into one ``jaxgpu.pricing.roofline.Roofs``.

    Attributes:
      rates: roof key -> the rates measured for it (FLOP/s; transcendental and pow ops per second for
        "transcendental" and "power"): "fp32" (a product's), "elementwise", a precision preset's name. The best is
        the roof.
      bandwidth: bytes/s a computing kernel reached from DRAM; the best is the memory roof.
      call_s: seconds of one call of a trivial program; the least is the overhead a call pays.
      loop_step_s: seconds a compiled loop takes per step; the least is priced per step of a loop.
      gemm_curve: roof key -> (FLOPs, FLOP/s, case key) of each product timed: the rate by size.
      bandwidth_curve: (bytes, seconds, case key) of each memory-bound kernel timed: the bandwidth by bytes, once
        a call's overhead is taken out (by the fold, which knows it).
    """

    rates: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    bandwidth: tuple[float, ...] = ()
    call_s: tuple[float, ...] = ()
    loop_step_s: tuple[float, ...] = ()
    gemm_curve: Mapping[str, tuple[tuple[float, float, str], ...]] = dataclasses.field(default_factory=dict)
    bandwidth_curve: tuple[tuple[float, float, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Pricing:
    """How the model prices an experiment's timed programs, and what its records give the model.

    Attributes:
      modelled: whether a roofline can price its programs at all (a collective's time is links and latency; a
        drift probe is the machine's noise).
      roof: the roof a program's FLOPs meet when it is priced from its counts: "product" (the fp32 matrix
        product's), "elementwise" (fused arithmetic's) or "preset" (its precision preset's); a function of the
        case's params where it depends on the case.
      loop_steps: ``loop_steps(params)``: the steps of a compiled serial loop the program runs, priced per step.
      causes: what the model leaves out of a case that misses, by its ``variant`` param (None: every case), for
        the report's worst-case column.
      kernel_level: its programs are one kernel each, where the bound has least to leave out: the model is judged
        on them apart.
      roofs: ``roofs(records) -> RoofParts``: what its ok records of one run give that run's roofs.
      widened: ``widened(records) -> {preset: roof key}``: from a compile-only run's records, the presets XLA:GPU
        widens before the product, with the roof they then meet.
      noise: ``noise(records) -> str``: a clause saying how much the machine's own timings move over the run
        (what a model's error is read against); "" where the records say nothing.
      unsteady: ``unsteady(records) -> str``: a clause saying what moved too far over the run for its timings to
        stand as the machine's (another job on its cores); "" where the run was steady or the records say nothing.
    """

    modelled: bool = True
    roof: str | Callable[[dict[str, Any]], str] = "product"
    loop_steps: Callable[[dict[str, Any]], int] | None = None
    causes: Mapping[str | None, str] = dataclasses.field(default_factory=dict)
    kernel_level: bool = False
    roofs: Callable[[list], RoofParts] | None = None
    widened: Callable[[list], dict[str, str]] | None = None
    noise: Callable[[list], str] | None = None
    unsteady: Callable[[list], str] | None = None

    def roof_of(self, params: dict[str, Any]) -> str:
        return self.roof(params) if callable(self.roof) else self.roof

    def cause(self, params: dict[str, Any]) -> str | None:
        return self.causes.get(params.get("variant")) or self.causes.get(None)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One experiment, as the harness, the analysis and the report see it.

    Attributes:
      name: the ``--only`` name, a record's ``experiment`` and the folder's name.
      description: one line for ``--list``.
      benchmark_version: bumped when the method changes (a merged report warns when runs differ).
      config: the frozen dataclass of what one run measures (``--set`` checks fields against it).
      profiles: ``{(profile, platform): config}``; platform "any" where it does not matter.
      cases: ``cases(cfg, ctx)``, the cases to measure with their costs; building them starts no
        JAX backend.
      compiled_cases: ``--compile-for``: the cases that compile this experiment's programs for a
        GPU on this CPU (``RunContext.mode == "compiled"``); None where only timing can answer.
      run_first: measured before every other experiment of a run (a device's memory high-water
        mark can only be read while it is still low).
      multi_device: compares device counts; on a CPU a run selecting it gets host devices.
      host_only: values of the ``variant`` param whose programs only mean something on a host
        (split over host devices sharing the cores; a fresh process per host allocator): a GPU
        prediction gives them no twin.
      in_host_check: the GPU check (scripts/gpu_check.sh) also runs it on the lent machine's CPU.
      gpu_part: the part of the GPU check that measures it on the lent GPU, the most valuable first (1: the summary's
        rates and the claims on products, precision, memory and the libraries; 2: the train step; 3: the other
        claims' cases; 4: alone, as it reads the device's high-water mark); 0: it has no case on a measured GPU.
      processes: reads ``--processes`` (a job over that many processes): ``processes(cfg, n) -> why not`` (None
        where ``n`` processes can run ``cfg``'s job).
      spread: its cases are measured in groups of one ``moment`` param, spread evenly through the run from its
        start to its end (the same programs timed again: how the machine's speed drifts).
      info: ``info(ctx) -> dict``: facts about the machine worth keeping in run.json (measured runs).
      attachments: ``attachments(ctx, out_dir) -> [paths]``: files a reader can open (measured runs).
      info_cost: what ``info`` and ``attachments`` do together (their compiles, a peer's import), planned like a case:
        a measured run calls them before its first case, inside its budget.
      pricing: how the model prices its programs and what its records give the model (``Pricing``).
    """

    name: str
    description: str
    benchmark_version: int
    config: type
    profiles: Mapping[tuple[str, str], Any]
    cases: CaseBuilder
    compiled_cases: CaseBuilder | None = None
    run_first: bool = False
    multi_device: bool = False
    host_only: frozenset[str] = frozenset()
    in_host_check: bool = True
    gpu_part: int = 0
    processes: Callable[[Any, int], str | None] | None = None
    spread: bool = False
    info: Callable[[RunContext], dict[str, Any]] | None = None
    attachments: Callable[[RunContext, Path], list[str]] | None = None
    info_cost: Cost = Cost.none()
    pricing: Pricing = Pricing()

    def config_for(self, profile: str, platform: str) -> Any:
        """The profile's config on a platform ("any" where the platform does not matter).

        Raises:
          KeyError: the experiment has no such profile.
        """
        cfg = self.profiles.get((profile, platform), self.profiles.get((profile, "any")))
        if cfg is None:
            raise KeyError(f"{self.name} has no {profile!r} profile for {platform}")
        return cfg


@dataclasses.dataclass(frozen=True)
class Seen:
    """What a view is given to draw: its experiment's measured records with their runs (``measured``), the report's
    predicted twins of them apart (``predicted``: the same programs priced on a GPU, not run; their runs say
    ``predicted``), and the IDs of the claims that read the experiment (``claims``). A figure draws ``drawn`` (the
    twins labelled and dashed); a table or a takeaway's sum reads ``measured`` only."""

    measured: tuple = ()
    predicted: tuple = ()
    claims: tuple[str, ...] = ()

    @property
    def drawn(self) -> list:
        return [*self.measured, *self.predicted]


@dataclasses.dataclass(frozen=True)
class Headline:
    """A row the experiment gives the report's summary (the answer first): ``row(ask)`` returns it, or None where
    the records hold no figure for it. ``ask`` is the summary's ``Ask``: the merged records, the GPU compared with
    and the helpers that make a row. ``rank`` orders the summary's rows (smaller first)."""

    rank: int
    row: Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class View:
    """An experiment's report section, drawn from ``(Run, Record)`` pairs only.

    Attributes:
      section: ``section(seen) -> jaxgpu.records.figures.Section`` from what the report gives it (``Seen``: the
        measured records, the predicted twins apart, the claims that read it).
      compiled: ``compiled(section, pairs)`` adds what runs compiled for a GPU planned
        (``mode: compiled``); None: the report lists them in a plain table.
      headlines: the rows it gives the summary.
      gpu_prices: ``gpu_prices(pairs, program, gpu) -> [record]``: the experiment's records pricing a summary
        program on a GPU (their params ``size``, metrics ``work``, ``predicted_s``), for other experiments'
        headlines.
      scores: ``scores(pairs, metric) -> {kind: summary}``: how far such prices missed published GPU measurements,
        per kind of program.
    """

    section: Callable[[list], Any]
    compiled: Callable[[Any, list], None] | None = None
    headlines: tuple[Headline, ...] = ()
    gpu_prices: Callable[[list, str, str], list] | None = None
    scores: Callable[..., dict] | None = None
