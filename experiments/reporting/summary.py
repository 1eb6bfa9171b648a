"""The report's answer first: what a GPU buys, in a handful of rows, each this machine's measured figure beside a
GPU's, the factor, and where the GPU's figure came from (measured, compiled or predicted, with the prediction's
error on published GPU measurements of its kind). Computed from the records; imports no JAX.

A GPU figure is the merged GPU run's measurement where one ran the same case; else the ``gpu_model`` experiment's
price of the same program on XLA:GPU's plan (``case: headline``); else nothing (the row says what would fill it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxgpu.ground import hardware
from jaxgpu.records import figures, labels, results


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the answer: ``here`` on this machine (measured), ``gpu`` on the GPU, ``factor`` GPU over here
    (a rate's ratio, or here's seconds over the GPU's), and ``basis``: how the GPU figure was had."""

    topic: str
    here: str
    gpu: str
    factor: str
    basis: str  # "measured" | "compiled, not run" | "predicted, not run" | "estimated" | "not run"
    source: str  # where each figure came from, in a sentence
    here_value: float | None = None
    gpu_value: float | None = None
    unit: str = ""
    checked: str = ""  # how far such a prediction was off on published GPU measurements ("median error 6% ...")

    @property
    def shown(self) -> str:
        """The GPU figure's provenance as the table's last column shows it."""
        return f"{self.basis} ({self.checked})" if self.checked else self.basis

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "shown": self.shown}


Pair = tuple[results.Run, results.Record]


def _cpu(pairs: Sequence[Pair]) -> list[Pair]:
    return [(r, x) for r, x in pairs if r.env.get("backend") == "cpu" and not r.compiled and not r.predicted
            and x.status == "ok" and not x.compiled]


def _largest(pairs: Sequence[Pair], experiment: str, size, priced: Sequence[int] = (), **params) -> Pair | None:
    """The record of the largest case; of those at a size in ``priced`` (the sizes the GPU figure was priced
    at) where there is one, so that both columns are the same program."""
    found = [p for p in labels.ok(pairs, experiment, **params)]
    same = [p for p in found if size(p[1].params) in priced]
    return max(same or found, key=lambda p: size(p[1].params)) if found else None


def _priced(pairs: Sequence[Pair], program: str, gpu: str) -> list[int]:
    return [x.params["size"] for _, x in labels.ok(pairs, "gpu_model", case="headline", program=program, gpu=gpu)]


def _headline(pairs: Sequence[Pair], program: str, gpu: str, size: int | None = None) -> results.Record | None:
    """The gpu_model price of a summary program on ``gpu``: at ``size`` where it has one, else its largest."""
    found = [x for _, x in labels.ok(pairs, "gpu_model", case="headline", program=program, gpu=gpu)]
    same = [x for x in found if x.params.get("size") == size]
    return max(same or found, key=lambda x: x.params["size"]) if found else None


def _measured_gpu(pairs: Sequence[Pair], key: str) -> Pair | None:
    return next(((r, x) for r, x in pairs if r.env.get("backend") == "gpu" and not r.compiled and not r.predicted
                 and x.status == "ok" and x.key == key), None)


def _checked(scores: dict, kind: str) -> str:
    s = scores.get(kind) or {}
    if not s.get("cases"):
        return ""
    return f"median error {s['median_abs_error']:.0%} on {int(s['cases'])} published {kind} cases"


def _error_of(scores: dict, kind: str) -> str:
    s = scores.get(kind) or {}
    if not s.get("cases"):
        return "not yet checked against published GPU measurements"
    return (f"such predictions missed published {kind} measurements by a median {s['median_abs_error']:.0%}, "
            f"{s['within_2x']:.0%} within 2x ({int(s['cases'])} cases)")


def _factor(gpu: float | None, here: float | None) -> str:
    if not gpu or not here:
        return "-"
    f = gpu / here
    return f"{f:,.0f}x" if f >= 100 else f"{f:.3g}x"


def _rate_row(topic: str, cpu: Pair | None, metric: str, unit: str, scale: float, gpu_name: str, pairs, program: str,
              kind: str, scores: dict, shape: str, size: int | None = None) -> Row | None:
    """A rate measured here beside the same program's rate on the GPU (measured there, else predicted)."""
    if cpu is None:
        return None
    run, x = cpu
    here = x.metrics[metric]
    measured = _measured_gpu(pairs, x.key)
    if measured:
        g = measured[1].metrics[metric]
        return Row(topic, f"{labels.si(here * scale, unit)}", f"{labels.si(g * scale, unit)}", _factor(g, here),
                   "measured",
                   f"{shape}: measured in {run.path.name} and in {measured[0].path.name}", here * scale, g * scale,
                   unit)
    h = _headline(pairs, program, gpu_name, size)
    if h is None:
        return Row(topic, labels.si(here * scale, unit), "-", "-", "not run",
                   f"{shape}: measured in {run.path.name}; no GPU run and no gpu_model price of it", here * scale)
    g = h.metrics["work"] / h.metrics["predicted_s"]  # FLOP/s, B/s or samples/s: the unit the row shows
    plan, scores = _plan(h, scores)
    return Row(topic, labels.si(here * scale, unit), labels.si(g, unit), _factor(g, here * scale), "predicted, not run",
               f"{shape}: measured in {run.path.name}; predicted on {gpu_name}, not run (the same program at "
               f"{_size(h)} on {plan}; {_error_of(scores, kind)})", here * scale, g, unit,
               _checked(scores, kind))


def _plan(h: results.Record, scores: dict) -> tuple[str, dict]:
    """Which plan priced a summary program, and the published check of predictions priced that way: XLA:GPU's
    own, or (without the gpu-compile extra) this CPU's standing in for it, whose check is the CPU plan's."""
    if h.metrics.get("gpu_plan", 1.0):
        return "XLA:GPU's plan", scores
    return ("this CPU's plan standing in for XLA:GPU's (install the gpu-compile extra for the GPU's own)",
            scores.get("cpu_plan", {}))


def _size(x: results.Record) -> str:
    n = x.params.get("size")
    prog = x.params.get("program", "")
    if prog.startswith("matmul"):
        return f"{n:,}x{n:,}"
    if prog.startswith("triad"):
        return f"{n:,} floats"
    return f"width {n:,}"


def rows(runs: Sequence[results.Run], pairs: Sequence[Pair], gpu: str) -> list[Row]:
    """The summary's rows from the merged ``pairs`` of ``runs``; a row whose figures no run holds is left out."""
    from experiments.gpu_model.view import scores as gpu_model_scores

    cpu = _cpu(pairs)
    scores = gpu_model_scores(list(pairs))
    # the same cases priced on this CPU's plan: what a run without the gpu-compile extra predicts with
    scores["cpu_plan"] = gpu_model_scores(list(pairs), "cpu_plan_error")
    out: list[Row | None] = []
    # 1. a big matrix multiply, fp32 both sides
    mm = _largest(cpu, "matmul", lambda p: p.get("n", 0), _priced(pairs, "matmul_fp32", gpu), impl="jax",
                  shape="square")
    out.append(_rate_row("A big matrix multiply (fp32)", mm, "gflops", "FLOP/s", 1e9, gpu, pairs, "matmul_fp32",
                         "gemm", scores, f"a {mm[1].params['n']:,}x{mm[1].params['n']:,} matmul here" if mm else "",
                         mm[1].params["n"] if mm else None))
    # 2. the same in bf16: Tensor Cores on the GPU, whatever the CPU has
    bf = _largest(cpu, "precision", lambda p: p.get("n", 0), _priced(pairs, "matmul_bf16", gpu), case="sweep",
                  preset="bf16", impl="jax")
    out.append(_rate_row("The same in bf16 (Tensor Cores)", bf, "gflops", "FLOP/s", 1e9, gpu, pairs, "matmul_bf16",
                         "gemm", scores, f"a {bf[1].params['n']:,}x{bf[1].params['n']:,} bf16 matmul here" if bf
                         else "", bf[1].params["n"] if bf else None))
    # 3. memory bandwidth: the STREAM triad over arrays past the caches
    tr = _largest(cpu, "bandwidth", lambda p: p.get("n", 0), kernel="triad", variant="jit", dtype="float32",
                  impl="jax")
    row = _rate_row("Memory bandwidth (STREAM triad)", tr, "gbytes_per_s", "B/s", 1e9, gpu, pairs, "triad_fp32",
                    "memory", scores, f"a triad over {tr[1].params['n']:,} floats here" if tr else "",
                    tr[1].params["n"] if tr else None)
    if row is not None and row.basis.startswith("predicted"):  # the model's bandwidth share is an H200's copy
        row = dataclasses.replace(row, source=row.source + "; the model's share of datasheet bandwidth (4.3 of 4.8 "
                                  "TB/s) was set from a copy measured on an H200 (jaxgpu.pricing.roofline."
                                  "BANDWIDTH_FRACTION), so on an H200 this row restates that measurement")
    out.append(row)
    # 4. a train step
    ts = _largest(cpu, "training", lambda p: p.get("width", 0), _priced(pairs, "train_step", gpu), case="throughput",
                  impl="jax")
    if ts:
        out.append(_rate_row(f"A training step (MLP, 3 layers of {ts[1].params['width']:,})", ts, "samples_per_s",
                             "samples/s", 1.0, gpu, pairs, "train_step", "train", scores,
                             f"batch {ts[1].params['batch']:,} here", ts[1].params["width"]))
    out.append(_to_target(cpu, pairs, gpu, scores))
    # the compiled rows from the card's own compile-only run where one is merged (two cards' plans differ in size)
    own = [(r, x) for r, x in pairs if not r.compiled or (r.hardware is not None and r.hardware.name == gpu)]
    compiled = own if any(r.compiled for r, _ in own) else pairs
    out.append(_model_memory(cpu, compiled, runs))
    out.append(_several(compiled))
    return [r for r in out if r is not None]


def _to_target(cpu, pairs, gpu: str, scores: dict) -> Row | None:
    tt = _largest(cpu, "training", lambda p: p.get("width", 0), case="to_target")
    if tt is None:
        return None
    run, x = tt
    here, width = x.metrics["time_s_to_target"], x.params["width"]
    topic = f"Time to {x.params['target']:.0%} accuracy (MLP width {width:,}, learning a teacher network's labels)"
    measured = _measured_gpu(pairs, x.key)
    if measured:
        g = measured[1].metrics["time_s_to_target"]
        return Row(topic, labels.si(here, "s"), labels.si(g, "s"), _factor(here, g), "measured",
                   f"measured in {run.path.name} and {measured[0].path.name}", here, g, "s")
    h = _headline(pairs, "to_target_step", gpu, width)
    if h is None or "steps" not in x.metrics:
        return Row(topic, labels.si(here, "s"), "-", "-", "not run", f"measured in {run.path.name}", here, None, "s")
    g = x.metrics["steps"] * h.metrics["predicted_s"]
    plan, scores = _plan(h, scores)
    return Row(topic, labels.si(here, "s"), labels.si(g, "s"), _factor(here, g), "predicted, not run",
               f"measured in {run.path.name} ({x.metrics['steps']:,.0f} steps, compile apart); predicted on {gpu}, "
               f"not run: the same steps on {plan} ({_error_of(scores, 'train')})", here, g, "s",
               _checked(scores, "train"))


def _cards(nbytes: float) -> str:
    fits = [g.name for g in sorted(hardware.GPUS.values(), key=lambda g: g.memory_gb) if nbytes <= g.memory_gb * 1e9]
    if fits:
        return f"one {fits[0]} ({hardware.GPUS[fits[0]].memory_gb:g} GB) or larger"
    big = max(hardware.GPUS.values(), key=lambda g: g.memory_gb)
    n = int(-(-nbytes // (big.memory_gb * 1e9)))
    return f"{n} or more {big.name} ({big.memory_gb:g} GB each)"


def _model_memory(cpu, pairs, runs) -> Row | None:
    """What a 7B model needs to serve and to train, and where that fits: XLA:GPU's plans for Llama-2 7B where a
    compiled run holds them (the transformer experiment), else ``jaxgpu.pricing.fit``'s estimate."""
    plans = {(x.params["mode"], x.params["devices"]): (r, x) for r, x in labels.ok(pairs, "transformer", case="plan",
                                                                               model="llama-7b")}
    if ("serve", 1) in plans and ("train", 1) in plans:
        return _model_plans(plans, runs)
    serve = next((x for _, x in labels.ok(cpu, "memory_fit", case="transformer", model="7B", mode="inference",
                                     preset="bf16")), None)
    train = next((x for _, x in labels.ok(cpu, "memory_fit", case="transformer", model="7B", mode="train",
                                     preset="bf16")), None)
    if serve is None or train is None:
        return None
    s, t = serve.metrics["bytes_predicted"], train.metrics["bytes_predicted"]
    host = next((r.env.get("host_memory_bytes") for r in runs if r.env.get("backend") == "cpu" and not r.compiled
                 and r.env.get("host_memory_bytes")), None)
    here = (f"{labels.si(host, 'B')} of memory: serves it, cannot train it" if host and s <= host < t else
            f"{labels.si(host, 'B')} of memory: " + ("serves and trains it" if host and t <= host else "too small")
            if host else "-")
    return Row("A 7B model (Llama-2 shape): to serve / to train", here,
               f"serve {labels.si(s, 'B')}: {_cards(s)}; train {labels.si(t, 'B')}: {_cards(t)}", "-", "estimated",
               "jaxgpu.fit's estimate (weights, gradients, AdamW state, activations; bf16, batch 1, 4,096 tokens), "
               "checked against XLA's memory plans in the memory_fit section", None, t, "B")


def _model_plans(plans: dict, runs) -> Row:
    run, serve = plans[("serve", 1)]
    train = plans[("train", 1)][1]
    gpu = run.hardware.name if run.hardware else run.machine
    s, t = serve.metrics["bytes_compiled"], train.metrics["bytes_compiled"]
    host = next((r.env.get("host_memory_bytes") for r in runs if r.env.get("backend") == "cpu" and not r.compiled
                 and r.env.get("host_memory_bytes")), None)
    here = (f"this machine's {labels.si(host, 'B')} of RAM " + ("serves and trains it" if t <= host else
                                                            "serves it, cannot train it" if s <= host else
                                                            "is too small to serve it at this batch, or to train it")
            if host else "-")
    split = {n: x.metrics["bytes_compiled"] for (mode, n), (_, x) in plans.items() if mode == "train" and n > 1}
    hw = run.hardware
    usable = USABLE * hw.memory_gb * 1e9 if hw else float("inf")
    gpu_text = (f"serve {labels.si(s, 'B')}: " + (f"fits one {gpu}" if s <= usable else "more than one")
                + f"; train {labels.si(t, 'B')}: " + (f"fits one {gpu}" if t <= usable else "more than one"))
    if split:
        n = max(split)
        gpu_text += f" (split over {n}, {labels.si(split[n], 'B')} each)"
    return Row("A 7B model (Llama-2 7B): to serve / to train", here, gpu_text, "-", "compiled, not run",
               f"XLA:GPU's memory plans compiled for {gpu} in {run.path.name} (not run): serve = one decode step, "
               f"batch {int(serve.metrics['batch'])} against {int(serve.metrics['seq']):,}-token KV caches, bf16; "
               f"train = one AdamW step, batch {int(train.metrics['batch'])} x {int(train.metrics['seq']):,} tokens, "
               f"fp32 master weights and bf16 products; a card fits a step within {USABLE:.0%} of its memory "
               f"(JAX's default share). The ledger's C10 also quotes jaxgpu.fit's estimate at batch 1 (smaller)",
               s, t, "B")


# JAX preallocates this share of a GPU's memory (jaxgpu.pricing.sizing.USABLE_FRACTION): a card fits a step within it
USABLE = 0.75


def _several(pairs) -> Row | None:
    """Splitting one model over devices: memory per device at the most devices against one."""
    def ratio(recs, metric):
        by = {x.params.get("model"): x.metrics.get(metric) for x in recs if x.params.get("data") == 1}
        n = max((k for k in by if by.get(k)), default=1)
        return (n, by[1] / by[n]) if n > 1 and by.get(1) else None

    here_recs = [x for _, x in labels.ok(_cpu(pairs), "tensor_parallel")]
    gpu_recs = [x for r, x in labels.ok(pairs, "tensor_parallel") if r.compiled and r.env.get("backend") == "gpu"]
    here, there = ratio(here_recs, "bytes_measured"), ratio(gpu_recs, "bytes_compiled")
    if here is None and there is None:
        return None
    gpu_run = next((r for r, x in labels.ok(pairs, "tensor_parallel") if r.compiled), None)
    return Row("Splitting a model over devices (tensor parallel MLP)",
               f"{here[0]} host devices: {here[1]:.2g}x less memory each" if here else "-",
               f"{there[0]} GPUs: {there[1]:.2g}x less memory each" if there else "-",
               "-", "compiled, not run" if there else "not run",
               "memory per device from XLA's own plans: measured on the CPU's host devices (which share its cores, so "
               "they buy no speed)" + (f", and compiled for 8 GPUs in {gpu_run.path.name} (not run)" if gpu_run
                                       else ""),
               here[1] if here else None, there[1] if there else None, "x")


def table(rows_: Sequence[Row], machine: str, gpu: str) -> figures.Table:
    return figures.Table(["what", f"here ({machine})", f"{gpu}", "GPU / here", "GPU figure"],
                    [[r.topic, r.here, r.gpu, r.factor, r.shown] for r in rows_],
                    "What a GPU buys: this machine measured; the GPU measured, compiled or predicted (open a row "
                    "for where its figures come from)", details=[r.source + "." for r in rows_],
                    details_title="Where each figure comes from", id="summary-table")


def readme_block(summary: dict, ledger: list[dict], report: str = "reports/study/report.md") -> str:
    """The README's answer: the summary table and the ledger's counts as ``summary.json`` and ``ledger.json``
    beside a report hold them (a test keeps the README's copy equal to the committed study's)."""
    from experiments.analysis.claims import VERDICTS

    rows = summary["rows"]
    lines = [f"| what | here ({summary['machine']}) | {summary['gpu']} | GPU / here | GPU figure |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['topic']} | {r['here']} | {r['gpu']} | {r['factor']} | {r['shown']} |" for r in rows]
    counts = {v: sum(it["verdict"] == v for it in ledger) for v in VERDICTS}
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    lines += ["", f"Of the explainer's {len(ledger)} claims, on the committed runs: **{said}** "
              f"([the ledger]({report}#ledger))."]
    return "\n".join(lines)
