"""The transformer section of the report: the smallest configs measured here, and every config's train and serve
steps as XLA:GPU plans them for 1 and 8 GPUs (compiled, not run). Imports no JAX."""

from __future__ import annotations

import statistics

from jaxgpu.ground import hardware
from jaxgpu.records import figures, labels, palette

from experiments.contract import Headline, Seen, View

CARDS_GB = (24, 40, 80, 141)
USABLE = 0.75  # jaxgpu.pricing.sharded.USABLE_FRACTION: JAX's default share of a card


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Transformers from 124M to 70B: train and serve", "transformer", seen.claims)
    good = [(r, x) for r, x in labels.ok(pairs, "transformer") if "mode" in x.params and "case" not in x.params]
    ran = [(r, x) for r, x in labels.ok(seen.measured, "transformer") if "mode" in x.params and "case" not in x.params]
    rows, notes = [], []
    for run, x in sorted(ran, key=lambda p: (p[0].label, p[1].params["model"], p[1].params["mode"])):
        m = x.metrics
        rows.append([run.label, x.params["model"], x.params["mode"], f"{x.params['batch']} x {x.params['seq']}",
                     labels.si(m["time_s_median"], "s"), labels.si(m["tokens_per_s"], "tokens/s"),
                     f"{m['mfu']:.0%}" if "mfu" in m else "-", labels.si(m["bytes_measured"], "B")])
    for label, (_run, recs) in labels.by_run(ran).items():
        for x in recs:
            if x.params["mode"] == "train":
                notes.append(f"On {label} a {x.params['model']} train step ({x.params['batch']} x {x.params['seq']} "
                             f"tokens) took {labels.si(x.metrics['time_s_median'], 's')}: "
                             f"{labels.si(x.metrics['tokens_per_s'], 'tokens/s')}"
                             + (f", {x.metrics['mfu']:.0%} of the device's peak (MFU)" if "mfu" in x.metrics else "")
                             + f", holding {labels.si(x.metrics['bytes_measured'], 'B')} by XLA's count.")
    if good:
        sec.plots.append(figures.Plot("transformer_steps", _steps_figure(good), " ".join(notes) or "-"))
    if rows:
        sec.paragraphs += notes
        sec.tables.append(figures.Table(["run", "model", "step", "batch x tokens", "median", "tokens/s", "MFU",
                                    "memory (XLA)"], rows,
                                   "Measured here: one train step (AdamW) and one decode step, checked first"))
    sec.paragraphs += labels.not_ok([(r, x) for r, x in pairs if x.experiment == "transformer" and not x.compiled])
    return sec


def _steps_figure(good) -> figures.Figure:
    """Tokens per second of each measured step, a bar per run (a predicted run hatched, its label saying so)."""
    cases = labels.first_seen((x.params["model"], x.params["mode"]) for _, x in good)
    groups = labels.by_run(good)
    fig = figures.Figure(figsize=(7.0, 3.6), dpi=100)
    ax = fig.add_subplot()
    width = 0.8 / max(len(groups), 1)
    for i, (label, (run, recs)) in enumerate(groups.items()):
        at = {(x.params["model"], x.params["mode"]): x.metrics.get("tokens_per_s") for x in recs}
        xs = [(j + i * width, at[c]) for j, c in enumerate(cases) if at.get(c)]
        key = palette.machine(run)
        palette.tag(ax.bar([p[0] for p in xs], [p[1] for p in xs], width=width * 0.95, label=label,
                           **figures.bar_style(palette.machine_color(key), run)), f"machine:{key}")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))], [f"{m} {mode}" for m, mode in cases],
                  fontsize=8)
    return figures.finish(fig, ax, ylabel="tokens/s", logy=True, grid="y", legend="below",
                          title="tokens per second: train step (all tokens at once) and decode step (one per sequence)")


def compiled(sec: figures.Section, pairs: list[labels.Pair]) -> None:
    """Every config on 1 and 8 GPUs of a target: bytes per device against the cards, the estimate's error,
    collectives and the predicted step (compiled, not run)."""
    plans = [(r, x) for r, x in labels.ok(pairs, "transformer", case="plan")]
    if not plans:
        return
    run = plans[0][0]
    gpu = run.hardware.name if run.hardware else run.machine
    by = {(x.params["model"], x.params["mode"], x.params["devices"]): x for _, x in plans}
    models = labels.first_seen(x.params["model"] for _, x in plans)
    sec.plots.insert(0, figures.Plot("transformer_memory", _figure(by, models, gpu), _takeaway(by, models, gpu)))
    parts = _parts(by, run.hardware.memory_gb if run.hardware else None)
    if parts:  # records of benchmark_version 3 and later carry XLA's memory split and the time by kind of kernel
        sec.plots.insert(1, figures.Plot("transformer_parts", figures.step_figure(
            parts, f"Where a 7B model's memory and time go, compiled for {gpu} (predicted, not run)", shares=True),
            _parts_takeaway(parts, gpu)))
    rows = []
    for (model, mode, n), x in by.items():
        m = x.metrics
        comm = sum(v for k, v in m.items() if k.endswith("_bytes") and not k.startswith(("bytes", "memory_")))
        rows.append([model, mode, n, f"{int(m['batch'])} x {int(m['seq']):,}", labels.si(m["bytes_compiled"], "B"),
                     f"{m['prediction_error']:+.0%}", ", ".join(f"{gb} GB" for gb in CARDS_GB if m[f"fits_{gb}gb"])
                     or "none", labels.si(comm, "B"), labels.si(m["predicted_step_s"], "s"),
                     labels.si(m["predicted_tokens_per_s"], "tokens/s"), f"{m['predicted_mfu']:.0%}"])
    sec.tables.append(figures.Table(
        ["model", "step", "GPUs", "batch x tokens", "per GPU (XLA:GPU)", "estimate error", f"fits ({USABLE:.0%} of)",
         "collectives", "step", "tokens/s", "MFU"], rows,
        f"Compiled for {gpu}: train = AdamW, fp32 master weights, bf16 products, split fsdp; serve = one decode step, "
        "bf16 weights and KV cache, tensor parallel. Step times predicted, not run (collectives at the datasheet "
        "link bandwidth)"))


def _figure(by: dict, models: list[str], gpu: str) -> figures.Figure:
    fig = figures.Figure(figsize=(8.0, 4.2), dpi=100)
    ax = fig.add_subplot()
    xs = range(len(models))
    for (mode, n), style in {("train", 1): "-o", ("train", 8): "-s", ("serve", 1): "-o", ("serve", 8): "-s"}.items():
        pts = [(i, by[(m, mode, n)].metrics["bytes_compiled"] / 1e9) for i, m in enumerate(models)
               if (m, mode, n) in by]
        if pts:  # what the step is for by colour, how many GPUs by marker
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=palette.variant_color(mode),
                    gid=f"variant:{mode}", label=f"{mode}, {n} GPU{'s' if n > 1 else ''} (per GPU)", markersize=4)
    for gb in CARDS_GB:
        ax.axhline(USABLE * gb, color=palette.REFERENCE, linewidth=0.8, linestyle=":", gid="reference")
        ax.annotate(f"{gb} GB card", (-0.4, USABLE * gb), fontsize=7, color="0.3", ha="left",
                    va="bottom")  # at the small models' end, clear of the large models' lines
    ax.set_xticks(list(xs), models, rotation=30, ha="right", fontsize=8)
    return figures.finish(fig, ax, ylabel="GB per GPU (XLA:GPU's plan)", logy=True, grid="y", legend="below",
                          title=f"What each model holds per GPU, compiled for {gpu} (dotted: 75% of each card)")


# the steps the report splits by kind: a 7B model trained and served on 1 and 8 GPUs
PARTS, PART_MODES = ("llama-7b",), ("train", "serve")


def _parts(by: dict, memory_gb: float | None) -> list:
    """The steps of ``PARTS`` whose records carry XLA's memory split and the time by kind, as
    ``figures.step_figure`` draws them (a row per model, step and GPU count)."""
    from types import SimpleNamespace

    out = []
    for (model, mode, n), x in by.items():
        m = x.metrics
        if model in PARTS and mode in PART_MODES and "memory_temporaries_bytes" in m:
            out.append(SimpleNamespace(
                gpu=f"{model} {mode}", devices=n, capacity=USABLE * memory_gb * 1e9 if memory_gb else None,
                memory_split={k: m[f"memory_{k}_bytes"] for k in ("arguments", "outputs", "temporaries", "aliased")},
                time_split={k.replace("_", " "): v for k, v in ((key[5:-2], m[key]) for key in m
                                                                if key.startswith("time_") and key.endswith("_s"))}))
    return sorted(out, key=lambda p: (PARTS.index(p.gpu.split()[0]), p.gpu, p.devices))


def _parts_takeaway(parts: list, gpu: str) -> str:
    said = []
    for p in parts:
        total = sum(p.time_split.values())
        if total:
            kind = max(p.time_split, key=p.time_split.get)
            said.append(f"{p.gpu} on {p.devices}: {p.time_split[kind] / total:.0%} of its time in {kind}")
    return (f"Compiled for the {gpu}, not run (XLA:GPU's memory plan; the time priced by kind of kernel): "
            + "; ".join(said) + ".")


def _takeaway(by: dict, models: list[str], gpu: str) -> str:
    def fits(model, mode, n, gb=141):
        x = by.get((model, mode, n))
        return x is not None and x.metrics[f"fits_{gb}gb"]

    train1 = [m for m in models if fits(m, "train", 1)]
    train8 = [m for m in models if not fits(m, "train", 1) and fits(m, "train", 8)]
    never = [m for m in models if (m, "train", 8) in by and not fits(m, "train", 8)]
    serve1 = [m for m in models if fits(m, "serve", 1)]
    errs = [abs(x.metrics["prediction_error"]) for x in by.values()]
    train = [x.metrics["prediction_error"] for (_, mode, _), x in by.items() if mode.startswith("train")]
    whole = sorted({m for (m, mode, n), x in by.items() if n > 1 and mode in ("serve", "prefill")
                    and x.metrics.get("heads_split") == 0.0})
    parts = [f"Compiled for the {gpu}, not run: on one 141 GB card (75% usable) training fits "
             f"{', '.join(train1) or 'none'}; 8 GPUs (fsdp) add {', '.join(train8) or 'none'}"]
    if never:
        parts.append(f"{', '.join(never)} does not fit even on 8 at this batch without activation checkpointing")
    parts.append(f"serving (batch and context as listed) fits {', '.join(serve1) or 'none'} on one card")
    if errs:
        why = []
        med = statistics.median(train) if train else 0.0
        if med > 0.05:
            why.append(f"for training it counts more than XLA:GPU keeps (median {med:+.0%}): Korthikanti et al.'s "
                       "activations, of which the step recomputes its norms, MLP activation and loss in the backward "
                       "pass")
        elif med < -0.05:
            why.append(f"for training it counts less than XLA:GPU keeps (median {med:+.0%}): the logits over the "
                       "vocabulary and the backward pass's scratch, which it leaves out")
        if whole:
            why.append(f"split over 8 GPUs, {', '.join(whole)} hold far more than 1/8 each: their attention heads do "
                       "not divide by 8, so tensor parallelism keeps those weights and caches whole on every GPU, "
                       "which the estimate (the model divided by the GPUs) ignores")
        parts.append(f"jaxgpu.fit's estimate missed XLA:GPU's plans by a median {statistics.median(errs):.0%} "
                     f"(worst {max(errs):.0%})" + (": " + "; ".join(why) if why else ""))
    return "; ".join(parts) + "."


def _cards(nbytes: float) -> str:
    """The smallest card of the table that holds ``nbytes`` within JAX's default share of it, else how many of the
    largest (the plans' rule: ``USABLE``)."""
    fits = [g.name for g in sorted(hardware.GPUS.values(), key=lambda g: g.memory_gb)
            if nbytes <= USABLE * g.memory_gb * 1e9]
    if fits:
        return f"one {fits[0]} ({hardware.GPUS[fits[0]].memory_gb:g} GB, {USABLE:.0%} usable) or larger"
    big = max(hardware.GPUS.values(), key=lambda g: g.memory_gb)
    n = int(-(-nbytes // (USABLE * big.memory_gb * 1e9)))
    return f"{n} or more {big.name} ({big.memory_gb:g} GB each, {USABLE:.0%} usable)"


def headline(ask):
    """What a 7B model needs to serve and to train, and where that fits: XLA:GPU's plans for Llama-2 7B where a
    compiled run holds them, else ``jaxgpu.pricing.fit``'s estimate (the memory_fit experiment's records)."""
    plans = {(x.params["mode"], x.params["devices"]): (r, x)
             for r, x in labels.ok(ask.compiled, "transformer", case="plan", model="llama-7b")}
    if ("serve", 1) in plans and ("train", 1) in plans:
        return _model_plans(ask, plans)
    serve = next((x for _, x in labels.ok(ask.cpu, "memory_fit", case="transformer", model="7B", mode="inference",
                                          preset="bf16")), None)
    train = next((x for _, x in labels.ok(ask.cpu, "memory_fit", case="transformer", model="7B", mode="train",
                                          preset="bf16")), None)
    if serve is None or train is None:
        return None
    s, t = serve.metrics["bytes_predicted"], train.metrics["bytes_predicted"]
    host = ask.host_memory()
    here = (f"{labels.si(host, 'B')} of memory: serves it, cannot train it" if host and s <= host < t else
            f"{labels.si(host, 'B')} of memory: " + ("serves and trains it" if host and t <= host else "too small")
            if host else "-")
    # a newcomer's run has no compiled plans of the 7B (the transformer experiment compiles them with --compile-for):
    # the formula's figure at batch 1 stands in, and the row says why it differs from the committed study's
    return ask.Row("A 7B model (Llama-2 shape): to serve / to train", here,
                   f"serve {labels.si(s, 'B')}: {_cards(s)}; train {labels.si(t, 'B')}: {_cards(t)} (formula, batch 1 "
                   "x 4,096 tokens)", "-", "estimated",
                   "jaxgpu.fit's estimate (weights, gradients, AdamW state, activations; bf16, batch 1, 4,096 "
                   "tokens), checked against XLA's memory plans in the memory_fit section. It is smaller than the "
                   "committed study's row: that one is XLA:GPU's own plan of a larger batch (python -m "
                   "experiments.run --compile-for h200 compiles it), which also holds the logits over the vocabulary "
                   "and the backward pass's scratch", None, t, "B")



def _settings(x) -> str:
    """The step settings a plan record was compiled with, as a clause (", no remat, flash attention, scanned
    layers"); "" for a record made before plans said so."""
    m = x.metrics
    if "flash" not in m:
        return ""
    return (f", {'a remat policy' if m['remat'] else 'no remat'}, {'flash' if m['flash'] else 'XLA'} attention, "
            f"{'scanned' if m['scanned'] else 'unrolled'} layers" + (", fp8 products" if m.get("fp8") else ""))


def _model_plans(ask, plans: dict):
    run, serve = plans[("serve", 1)]
    train = plans[("train", 1)][1]
    gpu = run.hardware.name if run.hardware else run.machine
    s, t = serve.metrics["bytes_compiled"], train.metrics["bytes_compiled"]
    host = ask.host_memory()
    here = (f"this machine's {labels.si(host, 'B')} of RAM " + ("serves and trains it" if t <= host else
                                                                "serves it, cannot train it" if s <= host else
                                                                "is too small to serve it at this batch, or to train "
                                                                "it") if host else "-")
    split = {n: x.metrics["bytes_compiled"] for (mode, n), (_, x) in plans.items() if mode == "train" and n > 1}
    hw = run.hardware
    usable = USABLE * hw.memory_gb * 1e9 if hw else float("inf")
    gpu_text = (f"serve {labels.si(s, 'B')}: " + (f"fits one {gpu}" if s <= usable else "more than one")
                + f"; train {labels.si(t, 'B')}: " + (f"fits one {gpu}" if t <= usable else "more than one"))
    if split:
        n = max(split)
        gpu_text += f" (split over {n}, {labels.si(split[n], 'B')} each)"
    return ask.Row("A 7B model (Llama-2 7B): to serve / to train", here, gpu_text, "-", "compiled, not run",
                   f"XLA:GPU's memory plans compiled for {gpu} in {run.path.name} (not run): serve = one decode step, "
                   f"batch {int(serve.metrics['batch'])} against {int(serve.metrics['seq']):,}-token KV caches, bf16"
                   f"{_settings(serve)}; train = one AdamW step, batch {int(train.metrics['batch'])} x "
                   f"{int(train.metrics['seq']):,} tokens, fp32 master weights and bf16 products{_settings(train)}; "
                   f"a card fits a step within {USABLE:.0%} of its "
                   "memory (JAX's default share). The ledger's C10 also quotes jaxgpu.fit's estimate at batch 1 "
                   "(smaller)", s, t, "B")


VIEW = View(section, compiled, headlines=(Headline(6, headline),))
