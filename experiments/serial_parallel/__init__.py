"""serial_parallel: the professor and the students measured.

N independent multiply-adds done serially and in parallel, on each backend, and a
recurrence where every step needs the one before it.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu.ground import workload

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RoofParts, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = tuple(10**k for k in range(0, 8))
    python_max: int = 10**7
    fori_max: int = 10**6
    recurrence_sizes: tuple[int, ...] = (10, 1000, 10**5, 10**6)
    target_s: float = 0.1


PROFILES = {
    ("tiny", "any"): Config(sizes=(1, 100), python_max=100, fori_max=100, recurrence_sizes=(10, 100), target_s=0.005),
    ("quick", "cpu"): Config(python_max=10**6),
    ("full", "cpu"): Config(sizes=tuple(10**k for k in range(0, 9)), target_s=0.3),
    # XLA:GPU drives each loop iteration from the host (a 1e7-step scan took 81.6 s on a GPU in a
    # public JAX issue): loops stop at 1e4 (fori) and 1e5 (recurrences) steps there
    ("quick", "gpu"): Config(sizes=tuple(10**k for k in range(0, 9)), python_max=10**4, fori_max=10**4,
                             recurrence_sizes=(10, 1000, 10**5), target_s=0.05),
    ("full", "gpu"): Config(sizes=tuple(10**k for k in range(0, 9)), python_max=10**4, fori_max=10**4,
                            recurrence_sizes=(10, 1000, 10**5)),
}

# CPython's list comprehension of a multiply-add: 25-46 ns per element in the committed CPU
# reference run (reports/cpu-reference, python_loop ns_per_element)
PYTHON_S_PER_ELEMENT = 45e-9


def _cost(kind: str, variant: str, n: int, cfg: Config) -> Cost:
    common = dict(target_s=cfg.target_s, min_iters=3, rng_bytes=4.0 * n, host_bytes=16.0 * n)
    if variant == "python_loop":
        return Cost(compiles=0, on_host=True, per_call_s=n * PYTHON_S_PER_ELEMENT, **common)
    if variant in ("fori_loop", "scan"):
        return Cost(loop_steps=n, bytes=8.0 * n, **common)
    if variant == "associative_scan":  # log2(n) levels of slices: a compile that grows with them
        return Cost(compiles=max(1, n.bit_length() // 2), bytes=8.0 * n * n.bit_length(), **common)
    return Cost(bytes=8.0 * n, **common)


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    out = []
    for n in cfg.sizes:
        for v in workload.SERIAL_VARIANTS:
            if (v == "python_loop" and n > cfg.python_max) or (v == "fori_loop" and n > cfg.fori_max):
                continue
            out.append(Case({"kind": "independent", "variant": v, "n": n},
                            functools.partial(_measure.independent, v, n, cfg, ctx), _cost("independent", v, n, cfg)))
    for n in cfg.recurrence_sizes:
        for v in workload.RECURRENCES:
            out.append(Case({"kind": "recurrence", "variant": v, "n": n}, functools.partial(_measure.recurrence, v, n,
                                                                                            cfg, ctx),
                            _cost("recurrence", v, n, cfg)))
    return out


# compiled loops: a step per element of n
_LOOPS = ("fori_loop", "scan")


def _roofs(recs: list) -> RoofParts:
    """One call's overhead (the vectorised program over a handful of elements) and a compiled loop's step."""
    return RoofParts(call_s=tuple(r.metrics["time_s_median"] for r in recs if r.params.get("variant") == "vectorized"
                                  and r.params.get("n", 99) <= 10),
                     loop_step_s=tuple(r.metrics["time_s_median"] / r.params["n"] for r in recs
                                       if r.params.get("variant") in _LOOPS and r.params.get("n", 0) >= 1000))


def _loop_steps(params: dict) -> int:
    return params.get("n", 0) if params.get("variant") in _LOOPS else 0


_LOOP = "a serial loop, its steps priced at the run's fastest loop step"


EXPERIMENT = Experiment(
    name="serial_parallel", gpu_part=3, benchmark_version=2, config=Config, profiles=PROFILES, cases=cases,
    description="N multiply-adds: Python loop, fori_loop, vectorised, vmap; serial recurrence: scan vs "
                "associative scan",
    pricing=Pricing(roof="elementwise", loop_steps=_loop_steps, roofs=_roofs,
                    causes={"fori_loop": _LOOP, "scan": _LOOP,
                            "closed_form": "pow, at the rate of the roofline's pow chain (XLA counts one FLOP)",
                            "associative_scan": "dozens of small kernels, some split over the cores, some not"}))
