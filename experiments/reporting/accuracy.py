"""The report's section "How well does the roofline predict?": each run's timed records against the model's
bound on its own roofs, the outliers' causes, and the same programs predicted on GPUs that were not run
(a merged GPU run's measurements beside its prediction). Imports no JAX."""

from __future__ import annotations

import statistics

from jaxgpu.ground import hardware
from jaxgpu.pricing import roofline
from jaxgpu.records import figures, labels, results

import experiments
from experiments.analysis.pricing import (
    GPUS,
    compiled_plan,
    errors,
    gpu_runs,
    measured_on,
    measured_roofs,
    measured_s,
    on_a_gpu,
    own_plans,
    predicted_s,
    pricing_of,
)


def section(runs: list[results.Run]) -> figures.Section | None:
    sec = figures.Section("How well does the roofline predict?", "prediction")
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
        notes.append(check_sentence(run, errs, roofs))
        one = [e for e in errs if pricing_of(e[0].experiment).kernel_level]
        if one:
            notes.append(f"Where a program is one kernel ({', '.join(sorted({e[0].experiment for e in one}))}): "
                         f"{len(one)} cases, median error {statistics.median(abs(e[2] - 1) for e in one):.0%}, "
                         f"{sum(0.5 <= e[2] <= 2 for e in one) / len(one):.0%} within 2x.")
        gpu_rows += _on_gpus(run, errs, runs)
    if not rows:
        return None
    sec.paragraphs += notes
    sec.tables.append(figures.Table(["run", "experiment", "cases", "median error", "within 2x", "worst case"], rows,
                               "Measured against predicted on the run's own roofs: each program's compiled plan "
                               "priced kernel by kernel (a product at the rate the run's sweep measured at its size, "
                               "any other kernel at the bandwidth its bytes met in the STREAM sweep) plus one call's "
                               "overhead; a record without a plan, from its XLA counts as one kernel"))
    if gpu_rows:
        sec.tables.append(figures.Table(["from run", "experiment", "cases", *[f"{g} (predicted)" for g in GPUS]],
                                        gpu_rows,
                                   "Predicted, not run: the same programs' total seconds on each GPU, each priced "
                                   "kernel by kernel on XLA:GPU's H200 plan where the run compiled one (the H200's "
                                   "own; standing in for the others), else on its XLA counts, at datasheet roofs x "
                                   "achievable shares (jaxgpu.predict); a merged GPU run's measured total follows "
                                   "its prediction"))
    return sec


def check(errs) -> tuple[int, float, float]:
    """(cases, median |measured / predicted - 1|, share within 2x) of (record, predicted, ratio) triples."""
    if not errs:
        return 0, 0.0, 0.0
    return (len(errs), statistics.median(abs(e[2] - 1) for e in errs),
            sum(0.5 <= e[2] <= 2 for e in errs) / len(errs))


def _planned(planned: int, n: int) -> str:
    if planned == n:
        return "Each was priced on the plan the run compiled."
    if planned == 0:
        return ("The run kept no compiled plans (it predates plans.jsonl): each was priced on XLA's counts as one "
                "kernel.")
    return f"{planned} of them were priced on the plan the run compiled, the rest on XLA's counts as one kernel."


def _wake(roofs: roofline.Roofs) -> str:
    at, wake = roofs.split()
    return (f", {wake * 1e6:.0f} us for the thread pool to wake once a program has a kernel of {at / 1e3:,.0f} kB or "
            "more (the jump in its STREAM curve)") if wake else ""


def check_sentence(run: results.Run, errs, roofs: roofline.Roofs) -> str:
    """The CPU check in one paragraph: over the run's device programs (its host-only variants, which time the
    host's allocator or devices sharing its cores, apart), how far the model's time missed the measured."""
    device = [e for e in errs if on_a_gpu(e[0])]
    host = [e for e in errs if not on_a_gpu(e[0])]
    n, med, within = check(device)
    planned = sum(bool(own_plans(run, e[0])) for e in device)
    text = (f"On {run.label}, over {n} timed programs of {len({e[0].experiment for e in device})} experiments, the "
            f"model's time missed the measured median by {med:.0%} (median |measured / predicted - 1|); {within:.0%} "
            f"lie within 2x. {_planned(planned, n)} "
            f"The run's roofs: {roofs.flops['fp32'] / 1e9:,.0f} GFLOP/s fp32 matmul at its best, "
            f"{roofs.flops['elementwise'] / 1e9:,.0f} GFLOP/s elementwise, {roofs.bandwidth / 1e9:,.1f} GB/s from "
            f"DRAM, {roofs.overhead_s * 1e6:.0f} us a call{_wake(roofs)}, with its sweeps' rates by size.")
    noise = " ".join(filter(None, (exp.pricing.noise([r for r in run.records if r.experiment == exp.name])
                                   for exp in map(experiments.load, experiments.names()) if exp.pricing.noise)))
    if noise:
        text += (f" For scale, {noise} (\"Does the machine keep its speed?\"): a perfect model, its roofs timed at "
                 "one moment and the case at another, would miss by about that much.")
    if host:
        hn, hmed, hwithin = check(host)
        text += (f" Apart: {hn} host-only variants ({'; '.join(sorted({_case(e[0]) for e in host}))}), which time the "
                 f"host (its allocator, devices sharing its cores) more than a program: median {hmed:.0%}, "
                 f"{hwithin:.0%} within 2x.")
    return text


def _case(r: results.Record) -> str:
    return f"{r.experiment} {labels.case_label(r.params, ('impl',))}"


def _why(r: results.Record, pred: float, roofs: roofline.Roofs) -> str:
    measured = measured_s(r)
    cause = pricing_of(r.experiment).cause(r.params)
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
    gpu_kind = {name for _, name in gpu_runs(runs)}
    plans = {name: compiled_plan(runs, name) for name in GPUS}
    rows, by_exp = [], {}
    for r, _, _ in errs:
        if on_a_gpu(r):
            by_exp.setdefault(r.experiment, []).append(r)
    for exp, recs in sorted(by_exp.items()):
        cells = []
        for name in GPUS:
            roofs = roofline.roofs_for(hardware.GPUS[name])
            preds = {r.key: predicted_s(r, roofs, own=False, plan=plans.get(name), run=run, gpu=name) for r in recs}
            cell = labels.fmt(sum(preds.values()))
            measured = measured_on(runs, name) if name in gpu_kind else {}
            both = [k for k in preds if k in measured]
            if both:
                cell += (f" (measured {labels.fmt(sum(measured[k] for k in both))} over {len(both)} cases: "
                         f"{sum(measured[k] for k in both) / sum(preds[k] for k in both):.2g}x)")
            cells.append(cell)
        rows.append([run.path.name, exp, len(recs), *cells])
    return rows


