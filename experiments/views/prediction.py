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


def _dtype(rec: results.Record, own: bool) -> str:
    """The roof key of a record: its preset (own roofs are per preset; a GPU's per hardware dtype), else fp32
    for programs of matrix products and elementwise for the rest."""
    preset = rec.params.get("preset")
    if rec.experiment == "precision" and preset in presets.PRESETS:
        return preset if own else presets.PRESETS[preset].hardware_dtype
    if rec.experiment in _ELEMENTWISE or (rec.experiment == "roofline" and rec.params.get("kind") == "fma"):
        return "elementwise"
    return "fp32"


def _steps(r: results.Record) -> int:
    return r.params.get("n", 0) if r.experiment == "serial_parallel" and r.params.get("variant") in _LOOPS else 0


def timed(recs) -> list[results.Record]:
    return [r for r in recs if r.status == "ok" and not r.compiled and r.params.get("impl", "jax") == "jax"
            and r.experiment not in _NOT_MODELLED and {"time_s_median", "flops_xla", "bytes_xla"} <= set(r.metrics)]


def errors(run: results.Run, recs: list[results.Record]) -> list[tuple[results.Record, float, float]]:
    """(record, predicted s, measured / predicted) for each timed record of a run, on the run's own roofs."""
    roofs = measured_roofs(run, recs)
    if roofs is None:
        return []
    out = []
    for r in timed(recs):
        p = predict.bound(r.metrics["flops_xla"], r.metrics["bytes_xla"], roofs, _dtype(r, own=True),
                          loop_steps=_steps(r))
        out.append((r, p.lower_s, r.metrics["time_s_median"] / p.lower_s))
    return out


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
    measured = r.metrics["time_s_median"]
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
    rows, by_exp = [], {}
    for r, _, _ in errs:
        by_exp.setdefault(r.experiment, []).append(r)
    for exp, recs in sorted(by_exp.items()):
        cells = []
        for name in GPUS:
            roofs = predict.roofs_for(hardware.GPUS[name])
            preds = {r.key: predict.bound(r.metrics["flops_xla"], r.metrics["bytes_xla"], roofs,
                                          _dtype(r, own=False), loop_steps=_steps(r)).lower_s for r in recs}
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
        if spec and not g.compiled and g.meta.get("mode") != "predicted":
            out.append((g, spec.name))
    return out


def gpu_of(runs: list[results.Run], default: str = "H200 SXM") -> str:
    """The GPU the CPU runs' programs are predicted on: a merged GPU run's own (so its measurements turn
    the predictions into errors), else ``default``."""
    return next((name for _, name in _gpu_runs(runs)), default)


def measured_on(runs: list[results.Run], gpu: str) -> dict[str, float]:
    """Median time per case key that a merged run of ``gpu`` measured."""
    return {r.key: r.metrics["time_s_median"] for g, name in _gpu_runs(runs) if name == gpu
            for r in g.records if r.status == "ok" and "time_s_median" in r.metrics}


def predicted_pairs(runs: list[results.Run], gpu: str = "H200 SXM") -> list[tuple[results.Run, results.Record]]:
    """The timed records of each CPU run as they are predicted on ``gpu`` (times only; every other metric
    dropped), in a run labelled predicted and paired with its CPU run: what the ledger's rules see when
    they are asked what the GPU would show."""
    hw = hardware.GPUS[gpu]
    roofs = predict.roofs_for(hw)
    out = []
    for run in runs:
        if run.env.get("backend") != "cpu" or run.compiled:
            continue
        env = {**run.env, "backend": "gpu", "device_kind": f"NVIDIA {hw.name}, predicted"}
        twin = results.Run(run.path.with_name(f"{run.path.name}-predicted-{hw.name.split()[0].lower()}"),
                           {**run.meta, "env": env, "mode": "predicted"}, ())
        for r in timed(run.records):
            t = predict.bound(r.metrics["flops_xla"], r.metrics["bytes_xla"], roofs, _dtype(r, own=False),
                              loop_steps=_steps(r)).lower_s
            rec = results.Record(r.experiment, r.params, {"time_s_median": t, "time_s_q25": t, "time_s_q75": t},
                                 run_id=r.run_id, backend="gpu", device_kind=env["device_kind"])
            out.append((twin, rec))
    return out
