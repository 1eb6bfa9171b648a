"""The gpu_model section of the report: each published GPU measurement beside its prediction, and how far
the report's predicted GPU figures can be trusted. Imports no JAX."""

from __future__ import annotations

import re

from jaxgpu.pricing import published
from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View

_BY_ID = {c.id: c for c in published.CASES}
def as_published(case: published.Case, seconds: float) -> float:
    """Seconds per call in the unit the source gave its figure in."""
    if case.unit in published.RATES:
        return case.work / seconds / published.RATES[case.unit]
    return seconds * (1e3 if case.unit == "ms" else 1e6)


SERVING = ("decode", "prefill")
# decoders' training steps again by the model's size (its parameters): the issue's "small and huge models lean"
SIZES = (("train, under 1B parameters", 0.0, 1e9), ("train, 1B to 20B", 1e9, 20e9), ("train, 20B and over", 20e9, 1e15))


def size_row(case: published.Case) -> str | None:
    """The row of ``SIZES`` a decoder's training step counts in, None for any other case."""
    from jaxgpu.ground import decoders

    if case.kind != "train" or case.program[0] not in ("train", "step"):
        return None
    n = decoders.find(case.program[1]).params()
    return next(name for name, lo, hi in SIZES if lo <= n < hi)


def _bound_errors(m: dict) -> dict:
    """A record's errors of its bounds beside its estimate's: (bound / published - 1)."""
    return {f"{b}_error": m[f"{b}_s"] / m["published_s"] - 1 for b in ("lower", "upper")
            if m.get(f"{b}_s") and m.get("published_s")}


def scores(pairs: list[labels.Pair], metric: str = "error") -> dict[str, dict[str, float]]:
    """``published.summary`` of the errors over all scored cases, per kind and per row (the latest record of each
    case; calibration cases are left out): today's prices, in sample (the development set), under the kinds' and
    rows' own names, and out of sample, each case's first price, under the same names with ``_first``. ``metric``:
    "error" (the estimate's), "lower_error" (the lower bound's), "cpu_plan_error" (the estimate on this CPU's plan,
    which has no first prices: its ``_first`` rows are empty)."""
    latest = {x.params["case"]: x for _, x in labels.ok(pairs, "gpu_model") if x.params["case"] in _BY_ID}
    recs = [(_BY_ID[k], x.metrics | _bound_errors(x.metrics)) for k, x in latest.items()
            if not _BY_ID[k].calibration]
    recs = [(c, m) for c, m in recs if metric in m]
    # a step whose plan holds more than its run's share of the card is another program than the one that ran: out of
    # every row but its own until a setting closes the gap
    over = over_memory(pairs)
    out = {OVER: published.summary([m[metric] for c, m in recs if c.id in over])}
    recs = [(c, m) for c, m in recs if c.id not in over]
    out["all"] = published.summary([m[metric] for _, m in recs])
    for row in ROWS[1:]:
        out[row] = published.summary([m[metric] for c, m in recs if row in rows_of(c)])
    # measured peaks of memory a GPU against XLA's plan: bytes, whichever bound the time row reads
    out[published.PEAK] = published.summary([m["memory_error"] for _, m in recs if "memory_error" in m])
    # the first prices are data, not records: quoted beside a run's own check of the published cases, not without one
    return out | first_scores(metric == "error" and bool(recs), over)


# the row of the steps whose plan holds more than their run could (Case.memory_fraction of the card): left out of the
# others, as the priced program is not the one that ran
OVER = "plan over its run's memory"


def over_memory(pairs: list[labels.Pair]) -> set[str]:
    """The cases whose latest record's plan holds more than their run's share of the card (``over_allowed`` > 1)."""
    latest = {x.params["case"]: x for _, x in labels.ok(pairs, "gpu_model") if x.params["case"] in _BY_ID}
    return {k for k, x in latest.items() if x.metrics.get("over_allowed", 0) > 1}


# the rows of the accuracy table: all, the kinds, serving (decode and prefill together), training steps again by what
# their runs spanned or were (published.GROUPS), decoders' steps by size; each a case's rows_of
ROWS = ("all", *published.KINDS, "serving", *published.GROUPS, *(name for name, _, _ in SIZES))


def rows_of(case: published.Case) -> tuple[str, ...]:
    """The rows of ``ROWS`` a scored case counts in."""
    return ("all", case.kind, *(("serving",) if case.kind in SERVING else ()), *published.groups(case),
            *((size,) if (size := size_row(case)) else ()))


def first_scores(priced: bool = True, over: set[str] = frozenset()) -> dict[str, dict[str, float]]:
    """Out of sample: the first prices (``published.out_of_sample``), each against its published figure, by row
    (``ROWS`` with ``_first``), the cases ``over`` their run's memory in their own row (``OVER``); a measured peak's
    first memory price against it. Empty rows where ``priced`` is false (a metric no first price has)."""
    got, first = published.first_prices(), published.out_of_sample() if priced else {}
    errors = {c.id: first[c.id] / c.published_s - 1 for c in published.scored() if c.id in first}
    out = {f"{row}_first": published.summary([e for k, e in errors.items() if k not in over
                                              and row in rows_of(_BY_ID[k])]) for row in ROWS}
    out[f"{OVER}_first"] = published.summary([e for k, e in errors.items() if k in over])
    out[f"{published.PEAK}_first"] = published.summary(
        [got[c.id]["first_memory_bytes"] / (c.peak_gib * 2**30) - 1 for c in published.scored()
         if c.id in first and c.id not in over and got[c.id].get("first_memory_bytes") and c.peak_gib])
    return out


def _first_said(first: dict[str, float], over: dict[str, float]) -> str:
    """What the first prices are and how far they missed (``first``: their summary; ``over``: the summary of those
    whose plan holds more than their run could, left out of it), how many cases have one, by which rule, and why the
    others have none."""
    got, n = published.first_prices(), len(published.out_of_sample())
    scored = len(published.scored())
    apart = (f" ({_cases(over['cases'])} whose plan holds more than their run could hold apart, in a row of their "
             "own)" if over.get("cases") else "")
    return (f"Out of sample, {_said(first)}{apart}: each case's first price, the model's price before any change it "
            f"could have informed. The rule: {published.OUT_OF_SAMPLE}. {n} of the {scored} scored cases have one; the "
            f"other {scored - n} are in sample, each saying why in jaxgpu/pricing/first_prices.json (the code that "
            "prices it entered with it, or an earlier case prices the same program). Every recorded first price is "
            "priced again from git history by python -m experiments.first_price --reproduce CASE (its recipe: the "
            f"commit, the case's files, the call); {sum('corrected' in e for e in got.values())} were corrected so, "
            "each keeping the value it had.")


def _guided_table(guided: list[published.Case]) -> figures.Table:
    """The changes to the model that published cases guided, a row a change: the commit, what it changed, and the
    cases marked guided by it: those a case's ``guided`` names, and those whose printed price the change moved by
    more than 5 points (``moved`` in first_prices.json, listed by ``python -m experiments.first_price --moved``;
    the commit is the priced run's that printed the move, its message naming the change)."""
    by: dict[str, tuple[str, list[str]]] = {}
    for c in guided:
        for commit, what in published.guided_changes(c):
            by.setdefault(commit, (what, []))[1].append(c.id)
    for case, entry in published.first_prices().items():
        for m in entry.get("moved", ()):
            if m.get("guided"):
                ids = by.setdefault(m["change"], (f"moved printed prices by more than 5 points: {_clause(m['what'])}",
                                                  []))[1]
                if case not in ids:
                    ids.append(case)
    return figures.Table(["change", "what it changed", "cases looked at"],
                         [[commit, what or "-", ", ".join(sorted(ids))] for commit, (what, ids) in by.items()],
                         "The changes to the model made while looking at published cases' errors (a case's guided "
                         "field names them), and the committed priced runs that printed a case's price moved by more "
                         "than 5 points since it was last printed (python -m experiments.first_price --moved; such a "
                         "commit's message names the change that moved it), each case marked guided by it: those "
                         "cases' prices since are in sample; their first prices, from before, are not")


def _clause(text: str, most: int = 110) -> str:
    """A commit message's first line cut at a word within ``most`` characters (the table's column stays narrow)."""
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0].rstrip(",;:(") + " ..."


def _num(x: float) -> str:
    """A figure in its source's unit: whole numbers with thousands separators from 100 up."""
    return f"{x:,.0f}" if abs(x) >= 100 else labels.fmt(x)


def _said(s: dict[str, float]) -> str:
    if not s.get("cases"):
        return "no cases"
    return (f"median error {s['median_abs_error']:.0%}, {s['within_15']:.0%} within 15%, predictions "
            f"{_lean(s['bias'])} ({_cases(s['cases'])})")


def _lean(bias: float) -> str:
    """The geometric mean of predicted / published in words: "4% fast", "6% slow"."""
    return f"{abs(1 - bias):.0%} {'fast' if bias < 1 else 'slow'} on the geometric mean"


def _cases(n: float) -> str:
    return f"{int(n)} case{'' if int(n) == 1 else 's'}"


def band(s: dict[str, float]) -> str:
    """A kind's interval of predicted / published in words ("0.77x to 1.08x"), or why it has none."""
    if "ratio_low" in s:
        return f"{s['ratio_low']:.2f}x to {s['ratio_high']:.2f}x"
    return f"none: {_cases(s.get('cases', 0))}, fewer than {published.MIN_INTERVAL_CASES}" if s.get("cases") \
        else "no cases"


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    good = labels.ok(pairs, "gpu_model")
    sec = figures.Section("How good is the GPU column? Predictions against published GPU measurements", "gpu_model")
    sec.paragraphs += labels.not_ok(pairs)
    if not good:
        return sec
    latest = {x.params["case"]: x for _, x in good if x.params["case"] in _BY_ID}
    gpu_plans = sum(x.metrics.get("gpu_plan", 0) for x in latest.values())
    s, old = scores(pairs), scores(pairs, "cpu_plan_error")
    guided, first = [c for c in published.CASES if c.guided], published.first_prices()
    plan = ("XLA:GPU's own plan for the case's GPU, compiled on this CPU" if gpu_plans == len(latest) else
            f"XLA:GPU's own plan for {int(gpu_plans)} of {len(latest)} cases (the rest on this CPU's plan: the "
            "gpu-compile extra was missing or failed)")
    sec.paragraphs.insert(0,
        f"Every GPU figure this report predicts comes from jaxgpu.predict: {plan}, priced kernel by kernel on the "
        "GPU's datasheet peaks times the share each kind of kernel reaches on that card (published kernel-level "
        "measurements: docs/research/calibration.md). Checked against figures others measured on real A100, H100, "
        f"H200 and B200 GPUs (predicted, not run here). {_first_said(s['all_first'], s[OVER + '_first'])} "
        f"In sample, today's prices of the same scored cases (the development set, whose errors shaped the model): "
        f"{_said(s['all'])}; the first table gives each kind both ways, and the second the changes that cases "
        "guided. "
        "Priced on this CPU's compiled program instead (how the GPU column was predicted before), in sample: "
        f"{_said(old['all'])}" + ("; whole training steps left out, minutes each to compile here"
                                  if s["train"].get("cases") and not old["train"].get("cases") else "") + ".")
    sec.paragraphs[1:1] = [said for said in [_calibration_said(latest)] if said]
    rows, points = [], []
    for key, x in sorted(latest.items(), key=lambda kv: (published.KINDS.index(_BY_ID[kv[0]].kind), kv[0])):
        c, m = _BY_ID[key], x.metrics
        pred = as_published(c, m["predicted_s"])
        lo, hi = sorted((as_published(c, m["lower_s"]), as_published(c, m["upper_s"])))
        f = first.get(key, {})
        role = ("calibration" if c.calibration else "first price out of sample" if f.get("first_price_s")
                else "in sample")
        by = [commit for commit, _ in published.guided_changes(c)] + [m["change"] for m in f.get("moved", ())
                                                                       if m.get("guided")]
        if by:
            role += f"; guided {', '.join(dict.fromkeys(by))}"
        cpu = f"{m['cpu_plan_error']:+.0%}" if "cpu_plan_error" in m else "-"
        first_error = (f"{f['first_price_s'] / c.published_s - 1:+.0%} (at {f['priced_at']}"
                       f"{', corrected' if 'corrected' in f else ''})" if f.get("first_price_s") else "in sample")
        rows.append([c.id, c.gpu, c.workload, f"{_num(c.published)} {c.unit}", f"{_num(pred)} ({_num(lo)}-"
                     f"{_num(hi)})", f"{m['error']:+.0%}", first_error, cpu, role, c.source])
        points.append((c.kind, c.published_s, m["predicted_s"], m.get("cpu_plan_predicted_s"),
                       None if c.calibration else f.get("first_price_s")))
    sec.tables.append(_by_kind(s, scores(pairs, "lower_error")))
    sec.tables.append(_guided_table(guided))
    sec.tables.append(figures.Table(["case", "GPU", "workload", "published", "predicted (bounds)", "error",
                                     "first price: error", "error on the CPU plan", "role", "source"], rows, _CAPTION))
    if (steps := _steps_table(latest)).rows:
        sec.tables.append(steps)
    sec.plots.append(figures.Plot("gpu_model", _figure(points),
                             f"Out of sample, the first prices on XLA:GPU's plan: {_said(s['all_first'])}, "
                             f"{published.INTERVAL:.0%} of them {band(s['all_first'])} the measured. In sample, "
                             f"today's prices of the same cases: {_said(s['all'])}; on this CPU's plan: "
                             f"{_said(old['all'])}."))
    return sec


_CAPTION = ("Predicted, not run: error = predicted time / published time - 1 (+50%: the prediction is 1.5x slower "
            "than the measurement). First price: the model's error on the case before any change it informed, at the "
            "commit named. Calibration cases set a share of the model (jaxgpu.ground.calibration) and are not scored.")


def _calibration_said(latest: dict) -> str:
    """The calibration's one out-of-sample check: the whole steps first-priced before it (``BEFORE_CALIBRATION``),
    their first prices' error against today's."""
    first = published.first_prices()
    ids = [i for i in published.BEFORE_CALIBRATION if i in latest and first.get(i, {}).get("first_price_s")]
    if not ids:
        return ""
    then = published.summary([first[i]["first_price_s"] / _BY_ID[i].published_s - 1 for i in ids])
    now = published.summary([latest[i].metrics["error"] for i in ids])
    return (f"The calibration's only out-of-sample evidence: {len(ids)} whole steps (B200, H200 and A100 runs, fp8 "
            "and over nodes among them) were added and first-priced before each card's shares replaced the H100's "
            f"(issue #62): at their first prices, {_said(then)}; today, {_said(now)}. The other cases were in the "
            "project while its model was developed.")


def _settings_said(settings: tuple) -> str:
    """A step's settings as the case sets them, its XLA flags as its script writes them (--xla_gpu_...=true)."""
    said = [f"network {v:g} Gb/s a GPU" if k == "network" else f"{k}={v}" for k, v in settings if k != "xla"]
    flags = [f"--{name}={str(value).lower() if isinstance(value, bool) else value}" for k, pairs in settings
             if k == "xla" for name, value in pairs]
    return ", ".join(said + (["XLA flags " + " ".join(flags)] if flags else [])) or "defaults"


def _steps_table(latest: dict) -> figures.Table:
    """Each published training step as priced: its settings, its memory a GPU on XLA's plan against what the source's
    run could hold of its card, and the spread of its price over the settings its source leaves unstated."""
    rows = []
    for key, x in sorted(latest.items()):
        c, m = _BY_ID[key], x.metrics
        if c.kind != "train" or "plan_share" not in m:
            continue
        held = f"{m['allowed_share']:.0%}: {_memory_said(c)}"
        over = m["over_allowed"] - 1
        verdict = "fits" if over <= 0 else f"over by {over:.0%}"
        if "plausible_low_s" in m:
            ends = sorted(as_published(c, m[f"plausible_{end}_s"]) for end in ("low", "high"))
            spread = f"{_num(ends[0])} to {_num(ends[1])} {c.unit} ({len(c.plausible) + 1} settings)"
        elif re.search(r"(remat|optimizer)[^;]* not stated", c.setup):
            spread = "a setting unstated, priced one way (see the case's setup)"
        else:
            spread = "settings stated"
        peak = (f"{c.peak_gib:g} GiB{' ' + c.peak_counts if c.peak_counts else ''}: {m['memory_error']:+.0%}"
                if "memory_error" in m else "-")
        rows.append([c.id, _settings_said(c.program[6]),
                     f"{labels.si(m['bytes_per_device'], 'B')} ({m['plan_share']:.0%} of "
                     f"{labels.si(m['card_bytes'], 'B')})",
                     held, verdict, peak, spread])
    return figures.Table(["case", "settings priced", "a GPU on XLA's plan (of the card)", "the run could hold",
                          "plan vs run", "measured peak: plan's error", "over unstated settings"], rows,
                         "Compiled and priced, not run: each training step with its source's settings where the "
                         "step's settings can say them, and the share of its card the run could hold, as its script "
                         "sets it (each case's memory_source quotes the line and says where it stands). The card's "
                         "bytes are as the device reports them (its compile target's MiB). A plan over what its run "
                         "could hold is XLA's plan of this project's program "
                         "of the step, compiled here, not the source's program under its own XLA: the gap is their "
                         "difference. Where a source leaves a setting unstated, the case names its choice in its "
                         "setup, and the last column prices the plausible others too. Measured peak: the run's own "
                         "reading of its peak a GPU (what the figure counts, where its source says) against XLA's "
                         "plan. llm.c's steps are priced as one GPU's program, its memory not read, and are not "
                         "here.")


def _memory_said(c: published.Case) -> str:
    """What let a run hold its share of the card, briefly: JAX's variable set in its script (the line and where it
    stands are the case's ``memory_source``), or the allocator's name, or JAX's default where the source says
    nothing."""
    if not c.memory_fraction:
        return "not stated (JAX's default)"
    if re.search(r"'[^']*XLA_PYTHON_CLIENT_MEM_FRACTION[^']*'", c.memory_source):
        return "XLA_PYTHON_CLIENT_MEM_FRACTION in its script"
    return c.memory_source.split(":")[0]


def _by_kind(est: dict, low: dict) -> figures.Table:
    """Per kind of published case, out of sample first (the first prices), then in sample (today's prices, the
    development set), and the lower bound's miss."""
    def med(s: dict) -> str:
        return f"{s['median_abs_error']:.0%}" if s.get("cases") else "-"

    def n(s: dict) -> str:
        return str(int(s.get("cases", 0)))

    kinds = [k for k in published.KINDS if est[k].get("cases")]
    if all(k in kinds for k in SERVING):
        kinds.append("serving")
    kinds += [g for g in (*published.GROUPS, *(name for name, _, _ in SIZES), published.PEAK, OVER)
              if est[g].get("cases")]
    rows = []
    for kind in kinds:
        e, f = est[kind], est[f"{kind}_first"]
        rows.append([" + ".join(SERVING) if kind == "serving" else kind, n(f), med(f),
                     f"{f['bias']:.2f}x" if f.get("cases") else "-", band(f) if f.get("cases") else "-",
                     n(e), med(e), f"{e['bias']:.2f}x", f"{e['within_15']:.0%}", f"{e['within_25']:.0%}", band(e),
                     "-" if kind == published.PEAK else med(low.get(kind, {}))])
    share = f"{published.INTERVAL:.0%} of cases"
    return figures.Table(["kind", "out of sample: cases", "median |error|", "bias", share, "in sample: cases",
                          "median |error|", "bias", "within 15%", "within 25%", share, "lower bound: median |error|"],
                         rows,
                         "Predicted, not run, by kind of published case: single kernels (gemm, memory) and whole steps "
                         "(train, decode, prefill). Out of sample: each case's first price, the model's before any "
                         "change it could have informed; in sample: today's prices, the development set whose errors "
                         "shaped the model. Bias: the geometric mean of predicted / published (below 1x the "
                         f"predictions lean fast). {published.INTERVAL:.0%} of cases: the empirical interval of "
                         f"predicted / published (its 5th to 95th percentile), none for fewer than "
                         f"{published.MIN_INTERVAL_CASES} cases (decode and prefill pooled in serving). The lower "
                         "bound prices each kernel at its binding roof alone. Beside the kinds, training steps count "
                         "again in rows of their own: those whose runs spanned several nodes (each compiled whole over "
                         "all its GPUs), LoRA or QLoRA fine-tunes, runs in pipeline stages, over expert- or context-"
                         "parallel groups, and models that are not decoders (ViT, T5); decoders' steps again by the "
                         "model's parameters (under 1B, 1B to 20B, 20B and over); "
                         f"{published.PEAK}: a run's measured peak a GPU against "
                         f"the bytes of XLA's plan of its step (bytes, not time); {OVER}: the steps whose plan holds "
                         "more of the card than their run could, another program than the one that ran, left out of "
                         "every other row (the steps table says by how much).")


def _figure(points) -> figures.Figure:
    fig = figures.Figure(figsize=(6.5, 5.2), dpi=100)
    ax = fig.add_subplot()
    markers = dict(zip(published.KINDS, "osD^v"))
    lo = min(min(v for v in p[1:] if v) for p in points)
    hi = max(max(v for v in p[1:] if v) for p in points)
    ax.plot([lo, hi], [lo, hi], "-", color=palette.REFERENCE, lw=0.8, label="predicted = published", gid="reference")
    ax.fill_between([lo, hi], [lo / 2, hi / 2], [lo * 2, hi * 2], color="0.9", label="within 2x")
    for kind in published.KINDS:
        pts = [p for p in points if p[0] == kind]
        if pts:
            ax.plot([p[1] for p in pts], [p[2] for p in pts], markers[kind], ls="", label=f"{kind}, XLA:GPU plan",
                    color=palette.variant_color("XLA:GPU plan"), gid="variant:XLA:GPU plan")
            cpu = [p for p in pts if p[3]]
            if cpu:
                ax.plot([p[1] for p in cpu], [p[3] for p in cpu], markers[kind], ls="", mfc="none",
                        label=f"{kind}, CPU plan", color=palette.variant_color("CPU plan"), gid="variant:CPU plan")
    first = [p for p in points if p[4]]
    if first:  # out of sample: each case's first price, whatever its kind
        ax.plot([p[1] for p in first], [p[4] for p in first], "x", ls="", ms=5,
                label="first price (out of sample), XLA:GPU plan", color=palette.variant_color("first price"),
                gid="variant:first price")
    ax.set_xscale("log")
    ax.set_yscale("log")
    figures.finish(fig, ax, xlabel="published seconds per call (measured by others)",
              ylabel="predicted seconds per call (not run)", title="The GPU model against published measurements",
              legend="below")
    return fig


def gpu_prices(pairs: list[labels.Pair], program: str, gpu: str) -> list:
    """The prices of a summary program on ``gpu`` (``case: headline``), one per size."""
    return [x for _, x in labels.ok(pairs, "gpu_model", case="headline", program=program, gpu=gpu)]


VIEW = View(section, None, gpu_prices=gpu_prices, scores=scores)
