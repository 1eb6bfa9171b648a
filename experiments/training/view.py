"""The training section of the report: figures, tables and takeaways from its records alone.

training: a Flax + Optax MLP on the digits set per precision preset; throughput and MFU vs width.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette, results

from experiments.contract import Headline, Seen, View

# the kind of program an MLP's step is, for the summary's check against published measurements: none is of it (the
# published training cases are transformer steps), so its GPU figures say that no published case checks them
MLP = "mlp"


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Training an MLP: precision, throughput, time to accuracy", "training", seen.claims)
    good = labels.ok(pairs)
    curves = [(r, x) for r, x in good if x.params.get("case") == "curve"]
    runs_ = [(r, x) for r, x in good if x.params.get("case") == "run"]
    if curves:
        sec.plots.append(_curves_plot(curves, runs_))
    targets = [(r, x) for r, x in good if x.params.get("case") == "to_target"]
    if targets:
        sec.plots.append(_to_target_plot(targets))
    sec.tables.append(_runs_table(runs_))
    sec.paragraphs += _fp16_notes(runs_)
    thr = [(r, x) for r, x in good if x.params.get("case") == "throughput"]
    if thr:
        sec.plots.append(_throughput_plot(thr))
    _ratio(sec, runs_)
    _to_target(sec, targets, [(r, x) for r, x in labels.ok(seen.measured) if x.params.get("case") == "to_target"])
    sec.paragraphs += labels.not_ok(list(seen.measured))
    return sec


def _curves_plot(curves: list[labels.Pair], runs_: list[labels.Pair]) -> figures.Plot:
    """Loss and accuracy per precision, against seconds of training."""
    # against seconds of training (compile apart), not epochs: what "days into hours" is about
    fig = figures.Figure(figsize=(8.5, 4.8), dpi=100)
    ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    machines = len({palette.machine(r) for r, _ in curves})
    for label, (run, recs) in labels.by_run(curves).items():
        for v in labels.first_seen(x.params["variant"] for x in recs):
            pts = sorted((x.metrics["train_s"], x.metrics["loss"], x.metrics["accuracy"]) for x in recs
                         if x.params["variant"] == v and x.metrics.get("train_s", 0) > 0)
            if pts:
                color, gid = palette.colour_of(palette.machine(run), v, machines)
                mark = palette.marker(v) if machines > 1 else "None"  # machines by colour, precisions by marker
                for ax, i in ((ax1, 1), (ax2, 2)):
                    ax.plot([p[0] for p in pts], [p[i] for p in pts], "-", marker=mark, markersize=3, color=color,
                            gid=gid, label=f"{label} {v}")
    ax1.set_yscale("log")
    ax1.set_ylabel("train loss")
    ax2.set_ylabel("test accuracy")
    ax2.set_ylim(0.8, 1.0)
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xlabel("seconds of training (compile apart)")
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("digits MLP per precision, against time", fontsize=10)
    figures.legend_below(fig, ax2)
    return figures.Plot("training_curves", fig, _curve_takeaway(runs_))


def _runs_table(runs_: list[labels.Pair]) -> figures.Table:
    rows = []
    for run, x in runs_:
        m = x.metrics
        rows.append([run.label, x.params["variant"], labels.fmt(m["accuracy"]), labels.fmt(m.get("time_s_to_target")),
                     labels.fmt(m.get("time_s_to_target_with_compile")), labels.fmt(m["samples_per_s"]),
                     labels.fmt(m.get("mfu")),
                     labels.fmt(m["grad_zero_fraction"]), int(m["nonfinite_steps"]), int(m["skipped_steps"])])
    return figures.Table(["run", "variant", "test acc.", "s to target", "s to target + compile", "samples/s",
                                "MFU", "zero grads", "non-finite steps", "skipped (scaler)"], rows,
                               "Per run (seconds exclude compilation unless named)")


def _fp16_notes(runs_: list[labels.Pair]) -> list[str]:
    """What fp16 does to the gradients, with and without loss scaling."""
    out = []
    for run, recs in labels.by_run(runs_).values():
        by = {x.params["variant"]: x.metrics for x in recs}
        m = by.get("fp32", {})
        if "fp16_to_zero_fraction" not in m:
            continue
        text = (f"{labels.said(run)}: of the non-zero fp32 gradients at initialisation, "
                f"{m['fp16_to_zero_fraction']:.2%} "
                f"would round to zero in fp16 and {m['fp16_subnormal_fraction']:.2%} would be subnormal (median "
                f"|g| {m['fp16_grad_abs_median']:.1e}).")
        raw = by.get("fp16")
        if raw:
            text += (f" fp16 without loss scaling reached {raw['accuracy']:.1%} test accuracy (fp32: "
                     f"{m['accuracy']:.1%}) with {int(raw['nonfinite_steps'])} "
                     f"non-finite steps and {raw['grad_zero_fraction']:.1%} zero gradient entries "
                     f"(with scaling: {by.get('fp16_scaled', {}).get('grad_zero_fraction', float('nan')):.1%}).")
        out.append(text)
    return out


def _throughput_plot(thr: list[labels.Pair]) -> figures.Plot:
    """Train-step throughput against width, JAX and its peer."""
    series = []
    notes = []
    for label, (run, recs) in labels.by_run(thr).items():
        for impl in ("jax", "torch"):
            pts = sorted((x.params["width"], x.metrics["samples_per_s"]) for x in recs if x.params["impl"] == impl)
            if pts:
                series.append(figures.Series.of(f"{label} {impl}", pts, style=figures.style(run),
                                                machine=palette.machine(run), variant=impl))
        by = {(x.params["width"], x.params["impl"]): x for x in recs}
        w = max(x.params["width"] for x in recs)
        j = by.get((w, "jax"))
        if j:
            note = (f"{labels.opener(run)} at width {w} (batch {j.params['batch']}, {j.params['depth']} hidden "
                    f"layers) a JAX train step took {j.metrics['time_s_median'] * 1e3:.1f} ms")
            if "mfu" in j.metrics:
                note += f", {j.metrics['gflops']:,.0f} GFLOP/s, MFU {j.metrics['mfu']:.0%}"
            t = by.get((w, "torch"))
            if t:
                note += (f"; the same MLP in PyTorch took {t.metrics['time_s_median'] * 1e3:.1f} ms "
                         f"(JAX {t.metrics['time_s_median'] / j.metrics['time_s_median']:.2f}x as fast)")
            notes.append(note + "." + _behind(by, run.meta.get("info", {}).get("matmul", {})))
    fig = figures.line_plot(series, xlabel="hidden width", ylabel="samples/s (train step)",
                       title="train-step throughput vs width, synthetic data")
    return figures.Plot("training_throughput", fig, " ".join(notes))


def _to_target_plot(pairs) -> figures.Plot:
    """Time to target drawn: seconds to the target accuracy by the student's width, per run (a predicted run dashed)."""
    series, parts = [], []
    for label, (run, recs) in labels.by_run(pairs).items():
        pts = sorted((x.params["width"], x.metrics["time_s_to_target"]) for x in recs)
        series.append(figures.Series.of(label, pts, style=figures.style(run), machine=palette.machine(run)))
        parts.append(f"{labels.said(run)}: " + ", ".join(f"width {w:,}: {labels.si(t, 's')}" for w, t in pts))
    target = pairs[0][1].params["target"]
    fig = figures.line_plot(series, xlabel="student width (2 hidden layers)",
                       ylabel=f"seconds to {target:.0%} test accuracy",
                       title=f"C07: time to {target:.0%} accuracy on the teacher task (compile apart)")
    return figures.Plot("training_to_target", fig, f"Time to {target:.0%}: " + "; ".join(parts) + ".")


def _to_target(sec: figures.Section, pairs, ran) -> None:
    """The time a student of each width takes to the target accuracy on the teacher task, per run (``ran``: those
    that ran, for the table), and per width the speed-up of each GPU run over the CPU run of its machine
    (``results.cpu_partner``)."""
    if not pairs:
        return
    rows = [[run.label, x.params["width"], f"{x.params['target']:.0%}", labels.fmt(x.metrics["time_s_to_target"]),
             labels.fmt(x.metrics["time_s_to_target_with_compile"]), int(x.metrics["epochs"]),
             labels.fmt(x.metrics["accuracy"])]
            for run, x in sorted(ran, key=lambda p: (p[0].label, p[1].params["width"]))]
    sec.tables.append(figures.Table(["run", "width", "target", "s to target", "s with compile", "epochs", "accuracy"],
                                    rows,
                               "Claim C07: a two-layer MLP learning a teacher network's labels to the target test "
                               "accuracy (compilation apart, then included)"))
    runs = list({id(r): r for r, _ in pairs}.values())
    for run, recs in labels.by_run(pairs).values():
        times = ", ".join(f"width {x.params['width']}: {x.metrics['time_s_to_target']:.3g} s"
                          for x in sorted(recs, key=lambda x: x.params["width"]))
        text = f"{labels.opener(run)} the time to {recs[0].params['target']:.0%} on the teacher task was {times}"
        partner = results.cpu_partner(run, runs) if run.env.get("backend") == "gpu" else None
        if partner is not None:
            cpu = {x.params["width"]: x.metrics["time_s_to_target"] for r, x in pairs if r is partner}
            both = [x for x in recs if x.params["width"] in cpu]
            if both:
                text += "; against the CPU (" + partner.path.name + "): " + ", ".join(
                    f"{cpu[x.params['width']] / x.metrics['time_s_to_target']:.1f}x at width {x.params['width']}"
                    for x in sorted(both, key=lambda x: x.params["width"]))
        sec.paragraphs.append(text + ".")


def _behind(by: dict, libs: dict) -> str:
    """Where JAX's step trails torch's, whether the matrix products or the rest of the step lose the time:
    each step's dots are timed alone on the same products (``dot_time_s``)."""
    parts = []
    for w in sorted({w for w, _ in by}):
        j, t = by.get((w, "jax")), by.get((w, "torch"))
        if not (j and t) or j.metrics["time_s_median"] <= t.metrics["time_s_median"]:
            continue
        if "dot_time_s" not in j.metrics or "dot_time_s" not in t.metrics:
            parts.append(f"at width {w} JAX trails ({t.metrics['time_s_median'] / j.metrics['time_s_median']:.2f}x); "
                         "its dots were not timed apart in this run")
            continue
        jd, td = j.metrics["dot_time_s"], t.metrics["dot_time_s"]
        jr, tr = j.metrics["time_s_median"] - jd, t.metrics["time_s_median"] - td
        if jr < 0 or tr < 0:  # products timed alone ran longer than a whole step: no split to read
            parts.append(f"at width {w} JAX trails ({t.metrics['time_s_median'] / j.metrics['time_s_median']:.2f}x); "
                         f"its dots alone took {jd * 1e3:.1f} ms against torch's {td * 1e3:.1f} ms, but one of them "
                         "took longer alone than its whole step, so the time does not split this way here")
            continue
        where = "the matrix products" if jd - td >= jr - tr else "the rest of the step (updates, activations)"
        parts.append(f"at width {w} JAX trails ({t.metrics['time_s_median'] / j.metrics['time_s_median']:.2f}x): its "
                     f"dots alone took {jd * 1e3:.1f} ms against torch's {td * 1e3:.1f} ms for the same products, the "
                     f"rest of the step {jr * 1e3:.1f} against {tr * 1e3:.1f} ms, so {where} lose the time")
    kernels = (f" (the same run's matmul: XLA's dot as {libs['jax_dot']}, torch through {libs['torch_blas']})"
               if {"jax_dot", "torch_blas"} <= set(libs) else "")
    return (" Where JAX is behind, measured: " + "; ".join(parts) + kernels + ".") if parts else ""


def _curve_takeaway(runs_) -> str:
    parts = []
    for run, recs in labels.by_run(runs_).values():
        acc = {x.params["variant"]: x.metrics["accuracy"] for x in recs}
        tt = {x.params["variant"]: x.metrics.get("time_s_to_target") for x in recs}
        if "fp32" in acc:
            text = f"{labels.opener(run)} fp32 reached {acc['fp32']:.1%} test accuracy"
            if tt.get("fp32"):
                text += f" (95% after {tt['fp32']:.2f} s of training)"
            others = [f"{v} {a - acc['fp32']:+.1%}" for v, a in acc.items() if v != "fp32"]
            parts.append(text + "; against it: " + ", ".join(others) + ".")
    return " ".join(parts)


def _ratio(sec: figures.Section, runs_) -> None:
    cpu = {x.params["variant"]: x for r, x in runs_ if x.backend == "cpu"}
    gpu = {x.params["variant"]: x for r, x in runs_ if x.backend == "gpu"}
    for v in ("fp32", "bf16"):
        if v in cpu and v in gpu and "time_s_to_target" in cpu[v].metrics and "time_s_to_target" in gpu[v].metrics:
            c, g = cpu[v].metrics, gpu[v].metrics
            sec.paragraphs.append(
                f"Time to {cpu[v].params['widths']}-MLP 95% accuracy ({v}): CPU {c['time_s_to_target']:.2f} s, GPU "
                f"{g['time_s_to_target']:.2f} s: {c['time_s_to_target'] / g['time_s_to_target']:.1f}x "
                f"(with compilation: {c['time_s_to_target_with_compile'] / g['time_s_to_target_with_compile']:.1f}x). "
                "This tiny model cannot fill a GPU; the throughput sweep shows how the ratio grows with width.")


def throughput_headline(ask):
    """A train step here and on the GPU, samples per second."""
    ts = ask.largest("training", lambda p: p.get("width", 0), "train_step", case="throughput", impl="jax")
    if ts is None:
        return None
    width = ts[1].params["width"]
    return ask.rate_row(f"A training step (MLP, 3 layers of {width:,})", ts, "samples_per_s", "samples/s", 1.0,
                        "train_step", MLP, f"batch {ts[1].params['batch']:,} here", width)


def to_target_headline(ask):
    """Time to the target accuracy here, and the same steps on the GPU."""
    tt = ask.largest("training", lambda p: p.get("width", 0), case="to_target")
    if tt is None:
        return None
    run, x = tt
    here, width = x.metrics["time_s_to_target"], x.params["width"]
    topic = f"Time to {x.params['target']:.0%} accuracy (MLP width {width:,}, learning a teacher network's labels)"
    measured = ask.measured_gpu(x.key)
    if measured:
        g = measured[1].metrics["time_s_to_target"]
        return ask.Row(topic, labels.si(here, "s"), labels.si(g, "s"), ask.factor(here, g), "measured",
                       f"measured in {run.path.name} and {measured[0].path.name}", here, g, "s")
    h = ask.price("to_target_step", width)
    if h is None or "steps" not in x.metrics:
        return ask.Row(topic, labels.si(here, "s"), "-", "-", "not run", f"measured in {run.path.name}", here, None,
                       "s")
    g = x.metrics["steps"] * h.metrics["predicted_s"]
    plan, error, checked, missed, band = ask.plan(h, MLP)
    return ask.Row(topic, labels.si(here, "s"), labels.si(g, "s"), ask.factor(here, g, missed), "predicted, not run",
                   f"measured in {run.path.name} ({x.metrics['steps']:,.0f} steps, compile apart); predicted on "
                   f"{ask.gpu}, not run: the same steps on {plan} ({error})", here, g, "s", checked, ask.plan_of(h),
                   band)


VIEW = View(section, None, headlines=(Headline(4, throughput_headline), Headline(5, to_target_headline)))
