"""The prediction model's view of the records: every timed record's own-backend prediction, and what the
same programs should take on GPUs that were not run (the report's predicted twins). Imports no JAX.

A prediction is recomputed whenever records are read, never written into them: results.jsonl holds
what was measured, and a twin record says ``mode: predicted``.

Each timed JAX record carries XLA's count of its program's work (``flops_xla``, ``bytes_xla``). The
prediction for the record's own backend uses roofs measured in the same run: the best matmul rate
(per preset where the precision sweep has it), the best fused elementwise rate (the roofline's FMA
chain), the best STREAM bandwidth, and the cost of one call of a trivial program (the serial
experiment's N=1 case). For GPUs not run, the same counts meet achievable GPU roofs
(``jaxgpu.pricing.roofline.roofs_for``): a prediction, labelled so; once a GPU run is merged, its own
records turn the prediction for its GPU into an error.
"""

from __future__ import annotations

import dataclasses

from jaxgpu.ground import hardware, presets
from jaxgpu.pricing import roofline
from jaxgpu.records import results

import experiments
from experiments.contract import Pricing

# the GPUs every CPU run's programs are predicted on, in the report's table
GPUS = tuple(name for name, hw in hardware.GPUS.items() if hw.in_report)  # the cards the report prices


def pricing_of(experiment: str) -> Pricing:
    """How an experiment's programs are priced (its spec's ``pricing``); a record of an experiment no longer
    registered is priced as a program of matrix products."""
    try:
        return experiments.load(experiment).pricing
    except experiments.UnknownExperiment:
        return Pricing()


def measured_roofs(run: results.Run, recs: list[results.Record]) -> roofline.Roofs | None:
    """A run's roofs, from its own best records, with the curves its sweeps measured (the rate of a product
    by its FLOPs, per roof key; the bandwidth of a kernel by its bytes), each point named by its case so
    that a case is never priced on its own point; None where the run lacks one of them. Each experiment's
    records give their part (``Pricing.roofs``); this folds the parts."""
    ok = [r for r in recs if r.status == "ok" and not r.compiled]
    parts = [exp.pricing.roofs([r for r in ok if r.experiment == exp.name])
             for exp in map(experiments.load, experiments.names()) if exp.pricing.roofs is not None]
    rates: dict[str, list[float]] = {}
    gemm: dict[str, list] = {}
    for part in parts:
        for key, got in part.rates.items():
            rates.setdefault(key, []).extend(got)
        for key, got in part.gemm_curve.items():
            gemm.setdefault(key, []).extend(got)
    bw = [x for part in parts for x in part.bandwidth]
    tiny = [x for part in parts for x in part.call_s]
    loops = [x for part in parts for x in part.loop_step_s]
    if not (rates.get("fp32") and rates.get("elementwise") and bw and tiny):
        return None
    flops = {key: max(got) for key, got in rates.items() if got}
    # a kernel's bandwidth by the bytes it moves, less the call's overhead, which the program pays once (a KB-sized
    # kernel costs what splitting it over the cores costs: tens of microseconds here)
    call = min(tiny)
    curve = tuple((b, b / max(t - call, 0.1 * t), key) for part in parts for b, t, key in part.bandwidth_curve)
    return roofline.Roofs(run.label, flops, max(bw), call, f"measured in {run.path.name}", min(loops) if loops else 0.0,
                          gemm_curve={k: tuple(v) for k, v in gemm.items()}, bandwidth_curve=curve)


def _dtype(rec: results.Record, own: bool, plan: dict[str, str] | None = None) -> str:
    """The roof key of a record: its preset (own roofs are per preset; a GPU's per hardware dtype, or the
    wider one its compiled ``plan`` widens the preset to), else fp32 for programs of matrix products and
    elementwise for the rest."""
    preset = rec.params.get("preset")
    roof = pricing_of(rec.experiment).roof_of(rec.params)
    if roof == "preset" and preset in presets.PRESETS:
        return preset if own else (plan or {}).get(preset, presets.PRESETS[preset].hardware_dtype)
    return "elementwise" if roof == "elementwise" else "fp32"


def _steps(r: results.Record) -> int:
    steps = pricing_of(r.experiment).loop_steps
    return steps(r.params) if steps else 0


def timed_as(r: results.Record) -> tuple[str, float, float, float] | None:
    """What a record timed, as the model prices it: (the time metric, calls of the program, FLOPs and bytes
    XLA counted per call); None for a record the model cannot price. A time to target is ``steps`` calls
    of the train step; every other time is one call of the program whose counts the record carries (a loop
    program timed per kernel, bandwidth's loop variant: 1 / ``kernels_per_call`` of one)."""
    m = r.metrics
    if {"time_s_to_target", "steps", "step_flops_xla", "step_bytes_xla"} <= set(m):
        return "time_s_to_target", m["steps"], m["step_flops_xla"], m["step_bytes_xla"]
    if {"time_s_median", "bytes_xla"} <= set(m):  # XLA leaves out the FLOPs of a program without any (a copy)
        # a time per kernel of a loop program (bandwidth's loop variant) is a fraction of one call
        return "time_s_median", 1.0 / m.get("kernels_per_call", 1.0), m.get("flops_xla", 0.0), m["bytes_xla"]
    return None


def timed(recs) -> list[results.Record]:
    """The records the model prices: JAX programs timed with XLA's counts, but not what crosses a bus (a
    collective; a step whose batch is fed from the host), for which a roofline has no roof."""
    return [r for r in recs if r.status == "ok" and not r.compiled and r.params.get("impl", "jax") == "jax"
            and pricing_of(r.experiment).modelled and r.params.get("feed") != "host_fed" and timed_as(r) is not None]


def on_a_gpu(r: results.Record) -> bool:
    """Whether a CPU record's program means something on one GPU (not one of its experiment's host-only
    variants: ``Experiment.host_only``)."""
    return r.params.get("variant") not in experiments.load(r.experiment).host_only


def own_plans(run: results.Run, r: results.Record) -> list[tuple[list, int, str]]:
    """The plan the record timed, as its run compiled it (``jaxgpu.pricing.plans``): [(kernels, loop steps, name)], or
    [] where the run kept none (an older run; a record whose program was not found). A call over several host
    devices of a CPU is priced as the one machine runs it (``plans.on_one_machine``)."""
    backend = run.env.get("backend", "cpu")
    name = f"xla:{backend}"
    p = run.plans.get(r.key, {}).get(name)
    if not p:
        return []
    ks = _kernels(p)
    if backend == "cpu" and p.get("devices", 1) > 1:
        from jaxgpu.pricing import plans

        ks = plans.on_one_machine(ks, p["devices"])
    return [(ks, p["loop_steps"], name)]


def gpu_plans(run: results.Run, r: results.Record, gpu: str) -> list[tuple[list, int, str]]:
    """XLA:GPU's plans of the record's program that its (CPU) run compiled: those of ``gpu``'s own target
    where the run has them, else another target's standing in (named so); both GEMM choices where there
    are two. [] where the run compiled none (no gpu-compile extra)."""
    have = run.plans.get(r.key, {})
    gpus = sorted({n.split(",")[0] for n in have if n.startswith("xla:gpu ")})
    if not gpus:
        return []
    target, _ = roofline.plan_target(hardware.GPUS[gpu])
    own = f"xla:gpu {target}" if target else None
    use = own if own in gpus else gpus[0]
    tail = "" if use == own else f", standing in for the {gpu}"
    return [(_kernels(p), p["loop_steps"], name + tail) for name, p in have.items() if name.split(",")[0] == use]


def _kernels(p: dict) -> list:
    from jaxgpu.pricing import plans

    return plans.expand(p["kernels"])


def priced(r: results.Record, roofs: roofline.Roofs, plans: list[tuple[list, int, str]], own: bool = True,
           plan: dict[str, str] | None = None) -> tuple[float, str]:
    """(seconds, plan priced) of what ``r`` timed on ``roofs``: its compiled ``plans`` priced kernel by kernel
    (``jaxgpu.pricing.roofline.price``; the cheapest where XLA:GPU had two GEMM choices, as its autotuner keeps the
    faster), never on the case's own point of the run's curves; without a plan, its XLA counts as one kernel
    (``bound``: a lower bound, "counts")."""
    _, calls, flops, nbytes = timed_as(r)
    if plans:
        best = min((roofline.price(ks, roofs, loop_steps=steps, exclude=r.key if own else "").estimate_s, name)
                   for ks, steps, name in plans)
        return calls * best[0], best[1]
    return calls * roofline.bound(flops, nbytes, roofs, _dtype(r, own, plan), loop_steps=_steps(r),
                                 exclude=r.key if own else "").lower_s, "counts"


def predicted_s(r: results.Record, roofs: roofline.Roofs, own: bool = True, plan: dict[str, str] | None = None,
                run: results.Run | None = None, gpu: str | None = None) -> float:
    """The model's time for what ``r`` timed, on ``roofs`` (``own``: the roofs of the record's own run ``run``,
    priced on the plan it timed; else ``gpu``'s, priced on XLA:GPU's plan where ``run`` compiled one, or on
    the record's counts with the roof its compiled ``plan`` names)."""
    plans = [] if run is None else (own_plans(run, r) if own else gpu_plans(run, r, gpu or roofs.name))
    return priced(r, roofs, plans, own, plan)[0]


def compiled_plan(runs: list[results.Run], gpu: str) -> dict[str, str]:
    """Per precision preset, the roof a merged compile-only run of ``gpu`` says its matmul meets: a preset
    XLA:GPU widens before the product (fp8 e5m2 to 16 bits, say) runs at the wider format's rate, not at the
    datasheet's for its own. Empty without such a run: then each preset meets its own format's roof."""
    out: dict[str, str] = {}
    for run in runs:
        hw = run.hardware
        if not run.compiled or hw is None or hw.name != gpu:
            continue
        for exp in map(experiments.load, experiments.names()):
            if exp.pricing.widened is not None:
                out.update(exp.pricing.widened([r for r in run.records if r.experiment == exp.name
                                                and r.status == "ok"]))
    return out


def measured_s(r: results.Record) -> float:
    return r.metrics[timed_as(r)[0]]


def errors(run: results.Run, recs: list[results.Record]) -> list[tuple[results.Record, float, float]]:
    """(record, predicted s, measured / predicted) for each timed record of a run, on the run's own roofs
    (recomputed from the records each time: a record's ``time_s_predicted``, which older runs stored, is
    not read)."""
    roofs = measured_roofs(run, recs)
    if roofs is None:
        return []
    out = []
    for r in timed(recs):
        p = predicted_s(r, roofs, run=run)
        out.append((r, p, measured_s(r) / p))
    return out


def gpu_runs(runs: list[results.Run]) -> list[tuple[results.Run, str]]:
    """The merged GPU runs that measured (not compiled, not predicted), with their hardware table name."""
    out = []
    for g in runs:
        spec = hardware.gpu_spec(g.env.get("device_kind", "")) if g.env.get("backend") == "gpu" else None
        if spec and not g.compiled and not g.predicted:
            out.append((g, spec.name))
    return out


def gpu_of(runs: list[results.Run], default: str = hardware.DEFAULT_GPU) -> str:
    """The GPU the CPU runs' programs are predicted on: a merged GPU run's own (so its measurements turn
    the predictions into errors), else the card of the one compile-only run merged, else ``default``."""
    measured = next((name for _, name in gpu_runs(runs)), None)
    compiled = {g.hardware.name for g in runs if g.compiled and g.hardware is not None}
    # a compile-only run of one card alone (compiled-h100, say): its programs are that card's
    return measured or (compiled.pop() if len(compiled) == 1 and default not in compiled else default)


def measured_on(runs: list[results.Run], gpu: str) -> dict[str, float]:
    """The time per case key that a merged run of ``gpu`` measured (what the model prices: see ``timed_as``)."""
    return {r.key: measured_s(r) for g, name in gpu_runs(runs) if name == gpu
            for r in g.records if r.status == "ok" and timed_as(r) is not None}


# rates a prediction carries over, scaled by measured time / predicted time (the same work in less time)
_RATES = ("gflops", "gbytes_per_s", "samples_per_s", "tokens_per_s")
# counts of the work, which do not depend on the hardware
_COUNTS = ("flops_xla", "bytes_xla", "steps", "step_flops_xla", "step_bytes_xla", "intensity_flop_per_byte")


def predicted_record(r: results.Record, t: float, device_kind: str) -> results.Record:
    """``r`` as it would read on a device that took ``t`` seconds for what it timed: its times, rates and
    work counts; nothing else (errors, losses and memory are not the model's to predict)."""
    metric = timed_as(r)[0]
    scale = measured_s(r) / t
    m = {k: r.metrics[k] * scale for k in _RATES if k in r.metrics}
    m.update({k: r.metrics[k] for k in _COUNTS if k in r.metrics})
    if metric == "time_s_median":
        m.update({k: t for k in ("time_s_median", "time_s_min", "time_s_max", "time_s_q25", "time_s_q75")})
    else:
        m[metric] = t
    return results.Record(r.experiment, r.params, m, run_id=r.run_id, backend="gpu", device_kind=device_kind,
                          benchmark_version=r.benchmark_version, mode="predicted")


def predicted_pairs(runs: list[results.Run], gpu: str = hardware.DEFAULT_GPU
                    ) -> list[tuple[results.Run, results.Record]]:
    """The timed records of each CPU run as they are predicted on ``gpu`` (``predicted_record``), in a run
    labelled predicted (``mode: predicted``, the GPU's datasheet as its hardware) and paired with its CPU
    run: what a figure draws beside the measured series, and what the ledger's rules see when they are
    asked what the GPU would show."""
    hw = hardware.GPUS[gpu]
    roofs = roofline.roofs_for(hw)
    plan = compiled_plan(runs, gpu)
    out = []
    for run in runs:
        if run.env.get("backend") != "cpu" or run.compiled:
            continue
        # the host stays (a twin pairs with its CPU run like a GPU with its host); the rest described the CPU run
        env = {**{k: run.env[k] for k in ("cpu_model", "cpu_cores", "host_memory_bytes") if k in run.env},
               "backend": "gpu", "device_kind": f"NVIDIA {hw.name}, predicted", "n_devices": 1}
        twin = results.Run(run.path.with_name(f"{run.path.name}-predicted-{hw.name.split()[0].lower()}"),
                           {**run.meta, "env": env, "mode": "predicted", "hardware": dataclasses.asdict(hw)}, ())
        for r in filter(on_a_gpu, timed(run.records)):
            t = predicted_s(r, roofs, own=False, plan=plan, run=run, gpu=gpu)
            out.append((twin, predicted_record(r, t, env["device_kind"])))
    return out
