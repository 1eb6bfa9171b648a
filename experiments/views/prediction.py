"""How well does the roofline predict? Every timed record's own-backend prediction against its measurement,
and what the same programs should take on GPUs that were not run. Imports no JAX.

Each timed JAX record carries XLA's count of its program's work (``flops_xla``, ``bytes_xla``). The
prediction for the record's own backend uses roofs measured in the same run: the best matmul rate
(per preset where the precision sweep has it), the best fused elementwise rate (the roofline's FMA
chain), the best STREAM bandwidth, and the cost of one call of a trivial program (the serial
experiment's N=1 case). For GPUs not run, the same counts meet achievable GPU roofs
(``jaxgpu.prediction.roofs_for``): a prediction, labelled so; once a GPU run is merged, its own
records turn the prediction for its GPU into an error.
"""

from __future__ import annotations

import dataclasses
import statistics

from jaxgpu import hardware, presets, results
from jaxgpu import prediction as predict
from jaxgpu import report as rp

# which roof a record's FLOPs meet: its matrix products', or fused elementwise arithmetic's
_ELEMENTWISE = {"serial_parallel", "bandwidth"}
# compiled loops: a step per element of n
_LOOPS = ("fori_loop", "scan")
# communication is not a roofline's business: a collective's time is links and latency, not FLOPs and DRAM
_NOT_MODELLED = {"collectives"}
# variants that only mean something on a host: a program split over host devices that share the cores, the
# same program in a fresh process under each host allocator. A GPU twin does not repeat them.
_HOST_ONLY = {("bandwidth", "sharded"), ("bandwidth", "process")}
GPUS = ("H100 SXM", "H200 SXM", "A100 80GB", "L4", "RTX 4090")


def measured_roofs(run: results.Run, recs: list[results.Record]) -> predict.Roofs | None:
    """A run's roofs, from its own best records; None where the run lacks one of them."""
    ok = [r for r in recs if r.status == "ok" and not r.compiled]
    mm = [r.metrics["gflops"] for r in ok if r.experiment == "matmul" and r.params.get("impl") == "jax"
          and "gflops" in r.metrics]
    mm += [r.metrics["gflops"] for r in ok if r.experiment == "roofline" and r.params.get("kind") == "matmul"]
    fma = [r.metrics["gflops"] for r in ok if r.experiment == "roofline" and r.params.get("kind") == "fma"]
    # the memory roof is DRAM's as a kernel that computes sees it: the STREAM triad at the run's largest
    # arrays (past the last-level cache; smaller sizes a large cache serves faster, and a plain copy
    # can take a memcpy path no computing kernel gets)
    stream = [r for r in ok if r.experiment == "bandwidth" and r.params.get("impl") == "jax"
              and r.params.get("variant") != "process" and r.params.get("kernel") == "triad"
              and r.params.get("dtype") == "float32"]
    big = max((r.params["n"] for r in stream), default=None)
    bw = [r.metrics["gbytes_per_s"] for r in stream if r.params["n"] == big]
    tiny = [r.metrics["time_s_median"] for r in ok if r.experiment == "serial_parallel"
            and r.params.get("variant") == "vectorized" and r.params.get("n", 99) <= 10]
    loops = [r.metrics["time_s_median"] / r.params["n"] for r in ok if r.experiment == "serial_parallel"
             and r.params.get("variant") in _LOOPS and r.params.get("n", 0) >= 1000]
    if not (mm and fma and bw and tiny):
        return None
    flops = {"fp32": max(mm) * 1e9, "elementwise": max(fma) * 1e9}
    for name, p in presets.PRESETS.items():  # the sweep's best rate of each preset, where it has one
        best = [r.metrics["gflops"] for r in ok if r.experiment == "precision" and r.params.get("preset") == name
                and r.params.get("impl") == "jax" and "gflops" in r.metrics]
        if best and name != "fp32":
            flops[name] = max(best) * 1e9
    return predict.Roofs(run.label, flops, max(bw) * 1e9, min(tiny), f"measured in {run.path.name}",
                         min(loops) if loops else 0.0)


def _dtype(rec: results.Record, own: bool, plan: dict[str, str] | None = None) -> str:
    """The roof key of a record: its preset (own roofs are per preset; a GPU's per hardware dtype, or the
    wider one its compiled ``plan`` widens the preset to), else fp32 for programs of matrix products and
    elementwise for the rest."""
    preset = rec.params.get("preset")
    if rec.experiment == "precision" and preset in presets.PRESETS:
        return preset if own else (plan or {}).get(preset, presets.PRESETS[preset].hardware_dtype)
    if rec.experiment in _ELEMENTWISE or (rec.experiment == "roofline" and rec.params.get("kind") == "fma"):
        return "elementwise"
    return "fp32"


def _steps(r: results.Record) -> int:
    return r.params.get("n", 0) if r.experiment == "serial_parallel" and r.params.get("variant") in _LOOPS else 0


def timed_as(r: results.Record) -> tuple[str, float, float, float] | None:
    """What a record timed, as the model prices it: (the time metric, calls of the program, FLOPs and bytes
    XLA counted per call); None for a record the model cannot price. A time to target is ``steps`` calls
    of the train step; every other time is one call of the program whose counts the record carries."""
    m = r.metrics
    if {"time_s_to_target", "steps", "step_flops_xla", "step_bytes_xla"} <= set(m):
        return "time_s_to_target", m["steps"], m["step_flops_xla"], m["step_bytes_xla"]
    if {"time_s_median", "bytes_xla"} <= set(m):  # XLA leaves out the FLOPs of a program without any (a copy)
        return "time_s_median", 1.0, m.get("flops_xla", 0.0), m["bytes_xla"]
    return None


def timed(recs) -> list[results.Record]:
    """The records the model prices: JAX programs timed with XLA's counts, but not what crosses a bus (a
    collective; a step whose batch is fed from the host), for which a roofline has no roof."""
    return [r for r in recs if r.status == "ok" and not r.compiled and r.params.get("impl", "jax") == "jax"
            and r.experiment not in _NOT_MODELLED and r.params.get("feed") != "host_fed" and timed_as(r) is not None]


def on_a_gpu(r: results.Record) -> bool:
    """Whether a CPU record's program means something on one GPU (not a host-only variant: ``_HOST_ONLY``)."""
    return (r.experiment, r.params.get("variant")) not in _HOST_ONLY


def predicted_s(r: results.Record, roofs: predict.Roofs, own: bool = True, plan: dict[str, str] | None = None) -> float:
    """The model's lower bound on what ``r`` timed, on ``roofs`` (``own``: the roofs of the record's own run,
    keyed per preset; else a GPU's, keyed per hardware dtype, as its compiled ``plan`` has them)."""
    _, calls, flops, nbytes = timed_as(r)
    return calls * predict.bound(flops, nbytes, roofs, _dtype(r, own, plan), loop_steps=_steps(r)).lower_s


def compiled_plan(runs: list[results.Run], gpu: str) -> dict[str, str]:
    """Per precision preset, the roof a merged compile-only run of ``gpu`` says its matmul meets: a preset
    XLA:GPU widens before the product (fp8 e5m2 to 16 bits, say) runs at the wider format's rate, not at the
    datasheet's for its own. Empty without such a run: then each preset meets its own format's roof."""
    out = {}
    for run in runs:
        hw = run.hardware
        if not run.compiled or hw is None or hw.name != gpu:
            continue
        for r in run.records:
            if r.experiment == "precision" and r.status == "ok" and r.params.get("preset") in presets.PRESETS:
                bits = 32 if r.metrics.get("upcast_to_fp32") else int(r.metrics.get("upcast_bits", 0))
                if bits:
                    out[r.params["preset"]] = "fp32" if bits >= 32 else "bf16"
    return out


def measured_s(r: results.Record) -> float:
    return r.metrics[timed_as(r)[0]]


def errors(run: results.Run, recs: list[results.Record]) -> list[tuple[results.Record, float, float]]:
    """(record, predicted s, measured / predicted) for each timed record of a run, on the run's own roofs: the
    record's own ``time_s_predicted`` where the run stored it, else computed here the same way."""
    roofs = measured_roofs(run, recs)
    if roofs is None:
        return []
    out = []
    for r in timed(recs):
        p = r.metrics.get("time_s_predicted") or predicted_s(r, roofs)
        out.append((r, p, measured_s(r) / p))
    return out


def annotate(run: results.Run) -> tuple[predict.Roofs | None, list[results.Record]]:
    """The run's roofs and its records, each timed one carrying ``time_s_predicted`` on those roofs (what a
    run stores when it ends; the roofs are its own best records, known only then)."""
    recs = list(run.records)
    roofs = measured_roofs(run, recs)
    if roofs is None:
        return None, recs
    priced = {id(r) for r in timed(recs)}
    return roofs, [dataclasses.replace(r, metrics={**r.metrics, "time_s_predicted": predicted_s(r, roofs)})
                   if id(r) in priced else r for r in recs]


def section(runs: list[results.Run]) -> rp.Section | None:
    sec = rp.Section("How well does the roofline predict?", "prediction")
    rows, notes, gpu_rows = [], [], []
    for run in runs:
        errs = errors(run, list(run.records))
        if not errs:
            continue
        roofs = measured_roofs(run, list(run.records))
        by_exp: dict[str, list] = {}
        for r, pred, ratio in errs:
            by_exp.setdefault(r.experiment, []).append((r, pred, ratio))
        for exp, items in sorted(by_exp.items()):
            dev = [abs(ratio - 1) for _, _, ratio in items]
            worst = max(items, key=lambda i: abs(i[2] - 1))
            rows.append([run.label, exp, len(items), f"{statistics.median(dev):.0%}",
                         f"{sum(0.5 <= i[2] <= 2 for i in items) / len(items):.0%}",
                         f"{_case(worst[0])}: {worst[2]:.2g}x ({_why(worst[0], worst[1], roofs)})"])
        dev = [abs(ratio - 1) for _, _, ratio in errs]
        notes.append(f"On {run.label}, over {len(errs)} timed cases of {len(by_exp)} experiments, the roofline bound "
                     f"from XLA's own counts and the run's measured roofs ({roofs.flops['fp32'] / 1e9:.0f} GFLOP/s "
                     f"matmul, {roofs.flops['elementwise'] / 1e9:.0f} elementwise, {roofs.bandwidth / 1e9:.1f} GB/s, "
                     f"{roofs.overhead_s * 1e6:.0f} us a call) missed the median time by {statistics.median(dev):.0%} "
                     f"(median |measured / predicted - 1|); {sum(0.5 <= e[2] <= 2 for e in errs) / len(errs):.0%} "
                     "of cases lie within 2x.")
        one = [e for e in errs if e[0].experiment in KERNEL_LEVEL]
        if one:
            notes.append(f"Where a program is one kernel ({', '.join(sorted({e[0].experiment for e in one}))}): "
                         f"{len(one)} cases, median error {statistics.median(abs(e[2] - 1) for e in one):.0%}, "
                         f"{sum(0.5 <= e[2] <= 2 for e in one) / len(one):.0%} within 2x.")
        gpu_rows += _on_gpus(run, errs, runs)
    if not rows:
        return None
    sec.paragraphs += notes
    sec.tables.append(rp.Table(["run", "experiment", "cases", "median error", "within 2x", "worst case"], rows,
                               "Measured against predicted on the run's own roofs (predicted = max(FLOPs / roof, "
                               "bytes / bandwidth) + one call's overhead)"))
    if gpu_rows:
        sec.tables.append(rp.Table(["from run", "experiment", "cases", *[f"{g} (predicted)" for g in GPUS]], gpu_rows,
                                   "Predicted, not run: the same programs' total seconds on each GPU, from the CPU "
                                   "program's counts and datasheet roofs x achievable shares (jaxgpu.predict); a "
                                   "merged GPU run's measured total follows its prediction"))
    return sec


def _case(r: results.Record) -> str:
    return r.experiment + " " + " ".join(f"{k}={v}" for k, v in r.params.items() if k not in ("impl", "dtype"))[:48]


# What the roofline leaves out, by the kind of program a record timed.
_CAUSES = {("serial_parallel", "fori_loop"): "a serial loop, priced at the run's fastest step",
           ("serial_parallel", "scan"): "a serial loop, priced at the run's fastest step",
           ("serial_parallel", "closed_form"): "pow, a transcendental that XLA counts as one FLOP",
           ("bandwidth", "sharded"): "split over host devices that share the same cores",
           ("bandwidth", "loop"): "a compiled loop of kernels",
           ("inference", None): "several kernels per call, each with its own overhead",
           ("op_mix", None): "a train step of many kernels, each with its own overhead"}
# Where a program is one kernel, the bound has least to leave out: the experiments it is judged on.
KERNEL_LEVEL = ("matmul", "precision", "bandwidth", "roofline")


def _why(r: results.Record, pred: float, roofs: predict.Roofs) -> str:
    measured = measured_s(r)
    cause = _CAUSES.get((r.experiment, r.params.get("variant"))) or _CAUSES.get((r.experiment, None))
    if cause:
        return cause
    if measured < 20 * roofs.overhead_s:
        return "dispatch-bound: a few calls' overhead"
    return "slower than the best of its kind" if measured > pred else "faster than the roof predicts"


def _on_gpus(run: results.Run, errs, runs) -> list[list]:
    """Per experiment: the seconds its timed cases should take on each GPU (sum over cases), and where a
    merged GPU run measured the same cases, the measured sum beside the prediction for that GPU."""
    if run.env.get("backend") != "cpu":
        return []
    gpu_kind = {name for _, name in _gpu_runs(runs)}
    plans = {name: compiled_plan(runs, name) for name in GPUS}
    rows, by_exp = [], {}
    for r, _, _ in errs:
        if on_a_gpu(r):
            by_exp.setdefault(r.experiment, []).append(r)
    for exp, recs in sorted(by_exp.items()):
        cells = []
        for name in GPUS:
            roofs = predict.roofs_for(hardware.GPUS[name])
            preds = {r.key: predicted_s(r, roofs, own=False, plan=plans.get(name)) for r in recs}
            cell = rp.fmt(sum(preds.values()))
            measured = measured_on(runs, name) if name in gpu_kind else {}
            both = [k for k in preds if k in measured]
            if both:
                cell += (f" (measured {rp.fmt(sum(measured[k] for k in both))} over {len(both)} cases: "
                         f"{sum(measured[k] for k in both) / sum(preds[k] for k in both):.2g}x)")
            cells.append(cell)
        rows.append([run.path.name, exp, len(recs), *cells])
    return rows


def _gpu_runs(runs: list[results.Run]) -> list[tuple[results.Run, str]]:
    """The merged GPU runs that measured (not compiled, not predicted), with their hardware table name."""
    out = []
    for g in runs:
        spec = hardware.gpu_spec(g.env.get("device_kind", "")) if g.env.get("backend") == "gpu" else None
        if spec and not g.compiled and not g.predicted:
            out.append((g, spec.name))
    return out


def gpu_of(runs: list[results.Run], default: str = "H200 SXM") -> str:
    """The GPU the CPU runs' programs are predicted on: a merged GPU run's own (so its measurements turn
    the predictions into errors), else ``default``."""
    return next((name for _, name in _gpu_runs(runs)), default)


def measured_on(runs: list[results.Run], gpu: str) -> dict[str, float]:
    """The time per case key that a merged run of ``gpu`` measured (what the model prices: see ``timed_as``)."""
    return {r.key: measured_s(r) for g, name in _gpu_runs(runs) if name == gpu
            for r in g.records if r.status == "ok" and timed_as(r) is not None}


# rates a prediction carries over, scaled by measured time / predicted time (the same work in less time)
_RATES = ("gflops", "gbytes_per_s", "samples_per_s")
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
                          benchmark_version=r.benchmark_version)


def predicted_pairs(runs: list[results.Run], gpu: str = "H200 SXM") -> list[tuple[results.Run, results.Record]]:
    """The timed records of each CPU run as they are predicted on ``gpu`` (``predicted_record``), in a run
    labelled predicted (``mode: predicted``, the GPU's datasheet as its hardware) and paired with its CPU
    run: what a figure draws beside the measured series, and what the ledger's rules see when they are
    asked what the GPU would show."""
    hw = hardware.GPUS[gpu]
    roofs = predict.roofs_for(hw)
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
            out.append((twin, predicted_record(r, predicted_s(r, roofs, own=False, plan=plan), env["device_kind"])))
    return out
