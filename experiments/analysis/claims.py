"""The explainer's claims as data, each with the rule that decides its verdict and the thresholds it uses.

The one home of the claims: which experiments test each claim is written here (``Claim.experiments``),
and an experiment's claims are derived from it (``for_experiment``). It sits with the study, above the
library: the library measures, this interprets.

A rule reads records only, through ``Evidence`` (the door that logs which experiments it read), with
its claim's ``thresholds``, and returns a ``Verdict``: one of ``VERDICTS``, the deciding figure in words,
and for a claim that needs a backend that was not run, how to run it. The thresholds are data: the
rule's text is generated from them (``Claim.rule_text``), so what the report prints beside a verdict
is what the rule applied. Nothing here is typed by hand but the claims, their thresholds and the
texts' wording.

Records compiled for a GPU that was not run (``mode: compiled``) never reach a rule's
measured figures: the rules see measured records only, and the claims whose verdict
compile-time facts can inform (which libraries, how many bytes, which collectives) add them
through their ``compiled`` hook, labelled; a verdict that rests on them says so (``basis``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxgpu.records.results import Record, Run

from experiments.analysis import derive
from experiments.analysis.evidence import Evidence, MissingField, covers

# "inconclusive": the figure's spread (its quartiles) straddles a threshold, so the grade would be a coin toss.
VERDICTS = ("supported", "supported with caveats", "contradicted", "inconclusive", "not run")
GPU_HINT = "needs a GPU run: python -m experiments.run --backend gpu (or scripts/gpu_check.sh), then merge"

Pairs = list[tuple[Run, Record]]


@dataclasses.dataclass(frozen=True)
class Verdict:
    verdict: str
    evidence: str
    basis: str = "measured"  # "compiled" when the verdict rests on a program compiled, not run

    @property
    def shown(self) -> str:
        """The verdict as the ledger prints it."""
        return self.verdict + (" (from a compiled plan, not run)" if self.basis == "compiled" else "")


Thresholds = dict[str, float]


Read = tuple[str, dict[str, Any] | None]


def _r(experiment: str, **params: Any) -> Read:
    """A read: the records of ``experiment`` whose params include ``params``."""
    return (experiment, params)


def _info(experiment: str) -> Read:
    """A read of what ``experiment`` recorded about the machine (run.json ``info``), not of its cases."""
    return (experiment, None)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim of the explainer, the records its rule reads, and the rule.

    ``reads``: every request the rule may make of its evidence (an experiment and the params its records
    must include); the rule may ask for narrower ones, never wider (tests/test_claims.py). They decide the
    ledger's links and which cases a budgeted run measures first. ``rule(evidence, thresholds)`` decides
    from measured records; ``compiled(evidence, verdict, thresholds)`` adds what programs compiled for a
    GPU (not run) show. ``template`` is the rule in words, with a ``{name}`` for each threshold it applies.
    """

    id: str
    text: str
    reads: tuple[Read, ...]
    template: str
    rule: Callable[[Evidence, Thresholds], Verdict]
    compiled: Callable[[Evidence, Verdict, Thresholds], Verdict] | None = None
    thresholds: Thresholds = dataclasses.field(default_factory=dict)

    @property
    def experiments(self) -> tuple[str, ...]:
        """The experiments the rule reads, in the order its reads name them."""
        return tuple(dict.fromkeys(e for e, _ in self.reads))

    @property
    def rule_text(self) -> str:
        """The rule as the report prints it, its thresholds filled in."""
        return self.template.format(**self.thresholds)


def _not_run(what: str) -> Verdict:
    return Verdict("not run", f"no {what} records; {GPU_HINT}" if "GPU" in what else f"no {what} records")


def _grade(value: float, good: float, caveat: float, evidence: str) -> Verdict:
    if value >= good:
        return Verdict("supported", evidence)
    return Verdict("supported with caveats" if value >= caveat else "contradicted", evidence)


def _grade_spread(ratio: tuple[float, float, float], good: float, caveat: float, evidence: str) -> Verdict:
    """``_grade`` of a ratio with its spread (low, median, high): where low and high grade differently the
    threshold lies inside the noise, and the verdict says so rather than follow the median."""
    lo, mid, hi = ratio
    v_lo, v_hi = _grade(lo, good, caveat, evidence), _grade(hi, good, caveat, evidence)
    if v_lo.verdict != v_hi.verdict:
        cut = good if hi >= good > lo else caveat
        return Verdict("inconclusive", f"{evidence} (quartile spread {lo:.2f}-{hi:.2f}x straddles {cut:g}x)")
    return v_lo


def _c01(e, th):
    # the GPU run describes its own host's CPU too: that is the CPU beside this GPU
    gpu = e.ok("devices", "gpu", role="accelerator")
    cpu = e.ok("devices", "gpu", role="cpu") or e.ok("devices", role="cpu")
    if not (cpu and gpu):
        return _not_run("GPU devices")
    ratio = gpu[0].metrics["parallel_lanes"] / cpu[0].metrics["parallel_lanes"]
    return _grade(ratio, th["good"], th["caveat"],
                  f"GPU {gpu[0].metrics['parallel_lanes']:.0f} vs CPU {cpu[0].metrics['parallel_lanes']:.0f} "
                                  f"parallel fp32 lanes ({ratio:.0f}x); CPU cores {cpu[0].metrics['cores']:.0f}")


def _c02(e, th):
    # the widest MLP step whose time splits: when its dots alone ran longer than the whole step (fused
    # into it they can run faster), the share of time they take inside cannot be read by subtraction
    recs = sorted(e.ok("op_mix", model="mlp"), key=lambda r: r.params["width"])
    if not recs:
        return _not_run("op_mix")
    split = [r for r in recs if r.metrics["dot_time_share"] <= 1.0]
    if not split:
        r = recs[-1]
        return Verdict("inconclusive", f"matmul {r.metrics['dot_flop_share']:.0%} of FLOPs; its time share is not "
                                       f"separable (the dots alone took {r.metrics['dot_time_share']:.0%} of the step)")
    r = split[-1]
    f, t = r.metrics["dot_flop_share"], r.metrics["dot_time_share"]
    ev = f"matmul {f:.0%} of FLOPs, {t:.0%} of time ({r.backend}, width {r.params['width']})"
    if f >= th["flops"] and t >= th["time"]:
        return Verdict("supported", ev)
    return Verdict("supported with caveats" if f >= th["flops"] else "contradicted", ev)


def _c03(e, th):
    recs = e.ok("matmul", case="worked_example")
    if not recs:
        return _not_run("worked-example")
    exact = [r for r in recs if r.metrics["exact"] == 1.0]
    return Verdict("supported" if len(exact) == len(recs) else "contradicted",
                   f"[[19,22],[43,50]] exact in {len(exact)} of {len(recs)} backend x dtype cases")


def _c04(e, th):
    sp = derive.core_speedups(e.ok("threads"))  # over the one-core record of the same runs
    if len(sp) < 2:
        return _not_run("multi-core threads (with the one-core baseline)")
    k = max(sp)
    s = sp[k]["matmul_speedup"]
    return _grade(s / k, th["good"], th["caveat"], f"matmul {s:.2f}x faster on {k} cores than on 1 "
                                   f"(elementwise {sp[k]['elementwise_speedup']:.2f}x)")


def _side(e: Evidence, backend: str, experiment: str, **params) -> list:
    """The ``ok`` records of ``experiment`` with ``params`` on ``backend``: of the GPU run that holds them, or of the
    CPU run beside it (any run's without a GPU run)."""
    grun, crun = e.paired(experiment, **params)
    return e.of(grun if backend == "gpu" else crun).ok(experiment, backend, **params)


def _times(e, backend, kind, variant):
    return {r.params["n"]: r.metrics["time_s_median"]
            for r in _side(e, backend, "serial_parallel", kind=kind, variant=variant)}


def _c05(e, th):
    cv, gv = _times(e, "cpu", "independent", "vectorized"), _times(e, "gpu", "independent", "vectorized")
    cs, gs = _times(e, "cpu", "recurrence", "scan"), _times(e, "gpu", "recurrence", "scan")
    if not (cv and gv):
        return _not_run("GPU serial_parallel")
    ns = sorted(set(cv) & set(gv))
    ser = sorted(set(cs) & set(gs))
    if len(ns) < 2 or not ser:
        return Verdict("not run", "needs the vectorised op at two sizes and the serial recurrence on both backends")
    small_cpu = cv[ns[0]] < gv[ns[0]]
    big_gpu = gv[ns[-1]] < cv[ns[-1]]
    serial_cpu = cs[ser[-1]] < gs[ser[-1]]
    ev = (f"N={ns[0]}: CPU {cv[ns[0]] * 1e6:.0f} us vs GPU {gv[ns[0]] * 1e6:.0f} us; N={ns[-1]}: CPU "
          f"{cv[ns[-1]] * 1e3:.2f} ms vs GPU {gv[ns[-1]] * 1e3:.2f} ms; serial recurrence winner: "
          f"{'CPU' if serial_cpu else 'GPU'}")
    hits = small_cpu + big_gpu + serial_cpu
    return Verdict("supported" if hits == 3 else "supported with caveats" if hits >= 2 else "contradicted", ev)


def _c06(e, th):
    cv, gv = _times(e, "cpu", "independent", "vectorized"), _times(e, "gpu", "independent", "vectorized")
    py = _times(e, "cpu", "independent", "python_loop")
    if not (cv and gv):
        n = max(set(py) & set(cv), default=None)
        extra = f"; on CPU alone vectorised beat the serial Python loop {py[n] / cv[n]:.0f}x at N={n}" if n else ""
        return Verdict("not run", GPU_HINT + extra)
    n = max(set(cv) & set(gv))
    ratio = derive.time_ratio(_one(e, "cpu", n), _one(e, "gpu", n))
    return _grade_spread(ratio, th["good"], th["caveat"], f"GPU {ratio[1]:.0f}x faster than CPU at N={n} (vectorised)")


def _one(e, backend: str, n: int) -> dict:
    recs = _side(e, backend, "serial_parallel", kind="independent", variant="vectorized", n=n)
    return recs[0].metrics


def _c07(e, th):
    # the teacher task: a time to target that grows with the model, tens of seconds on a CPU at the largest
    def times(b):
        return {r.params["width"]: r.metrics["time_s_to_target"]
                for r in _side(e, b, "training", case="to_target")}

    cpu, gpu = times("cpu"), times("gpu")
    both = sorted(set(cpu) & set(gpu))
    if not both:
        extra = f"; on CPU alone: {', '.join(f'width {w} {t:.1f} s' for w, t in sorted(cpu.items()))}" if cpu else ""
        return Verdict("not run", f"no GPU time-to-target records; {GPU_HINT}{extra}")
    w = both[-1]
    grow = ", ".join(f"width {x}: {cpu[x] / gpu[x]:.1f}x" for x in both)
    return _grade(cpu[w] / gpu[w], th["good"], th["caveat"],
                  f"time to the target accuracy at width {w}: CPU {cpu[w]:.3g} s, GPU "
                                          f"{gpu[w]:.3g} s ({cpu[w] / gpu[w]:.1f}x; by width: {grow})")


def _c08(e, th):
    compared = ("on_device_copy", "host_to_device")
    recs = [r for d in compared for r in e.ok("transfer", "gpu", direction=d)]
    if not recs:
        return _not_run("GPU transfer")
    big = max(r.params["bytes"] for r in recs)
    at = {r.params["direction"]: r.metrics["gbytes_per_s"] for r in recs if r.params["bytes"] == big}
    if not {"on_device_copy", "host_to_device"} <= set(at):
        return Verdict("not run", f"the GPU transfer records at {big} bytes lack "
                                  f"{', '.join(sorted({'on_device_copy', 'host_to_device'} - set(at)))}")
    ratio = at["on_device_copy"] / at["host_to_device"]
    return _grade(ratio, th["good"], th["caveat"],
                  f"on-device copy {at.get('on_device_copy', 0):.0f} GB/s vs host->device "
                                 f"{at.get('host_to_device', 0):.1f} GB/s ({ratio:.0f}x)")


def _c09(e, th):
    # On real train steps: do the memory-bound ops (everything but the matmuls) take a share of the time
    # far above their share of the FLOPs? Then the cores wait on memory while they run. "Never" is
    # universal: one step where they do is a counterexample. A step whose dots alone ran longer than the
    # whole step cannot be split by subtraction and is left out.
    steps = [r for r in e.ok("op_mix") if "dot_time_share" in r.metrics]
    if not steps:
        return _not_run("op_mix")
    split = [(r, 1 - r.metrics["dot_flop_share"], 1 - r.metrics["dot_time_share"]) for r in steps
             if r.metrics["dot_time_share"] <= 1.0]
    if not split:
        return Verdict("inconclusive", "no step's time splits into matmul and the rest (the dots alone ran longer "
                                       "than each whole step)")
    waits = [(r, f, t) for r, f, t in split if t >= th["wait_time"] and t >= th["wait_factor"] * f]
    r, f, t = max(waits or split, key=lambda x: x[2] - x[1])
    name = f"{r.params['model'].replace('transformer_block', 'transformer block')} width {r.params['width']}"
    ev = (f"{r.backend}, {name}: the ops outside matmul did {f:.1%} of the step's FLOPs in {t:.0%} of its time "
          f"({len(split)} of {len(steps)} steps split)") + _under_roof(e, r)
    if waits:
        return Verdict("contradicted", ev)  # a sliver of the work holds the step up: the cores wait
    calm = all(t <= th["slack_factor"] * f + th["slack"] for _, f, t in split)
    return Verdict("supported" if calm else "supported with caveats", ev)


def _under_roof(e: Evidence, step: Record) -> str:
    """Where the step sits under the roofline measured in the same runs (its FLOP/s against min(peak, bw x I))."""
    roof = e.ok("roofline", step.backend)
    mm = [r.metrics["gflops"] for r in roof if r.params["kind"] == "matmul"]
    bw = [r.metrics["gbytes_per_s"] for r in roof if r.metrics["intensity_flop_per_byte"] <= 1.0]
    m = step.metrics
    if not (mm and bw and m.get("flops_xla") and m.get("bytes_xla")):
        return ""
    intensity = m["flops_xla"] / m["bytes_xla"]
    bound = min(max(mm), max(bw) * intensity)
    achieved = m["flops_xla"] / m["time_s_median"] / 1e9
    return f"; the step ran at {achieved / bound:.0%} of its roofline bound ({intensity:.0f} FLOP/byte)"


def _c10(e, th):
    # training needs much more than the weights: XLA's own count of a train step against an inference step of
    # the same model; and the estimator holds within 15% of XLA on the shapes it was read from and on held-out ones
    ratio = [r.metrics["memory_ratio"] for r in e.ok("inference", case="train_vs_infer")]
    val = e.ok("memory_fit", case="mlp_train")
    fitted = [r for r in val if not r.params.get("held_out")]
    held = [r for r in val if r.params.get("held_out")]
    if not (ratio and fitted):
        return _not_run("inference (train vs infer) or memory_fit")
    within = lambda rs: sum(abs(r.metrics["prediction_error"]) <= th["tolerance"] for r in rs)
    ev = (f"a train step needs {min(ratio):.1f}x the memory of an inference step (XLA's count); the estimator held "
          f"within {th['tolerance']:.0%} of XLA on {within(fitted)}/{len(fitted)} fitted"
          + (f" and {within(held)}/{len(held)} held-out configs" if held else " configs (none held out)"))
    t7 = e.ok("memory_fit", case="transformer", model="7B", preset="bf16", mode="train")
    i7 = e.ok("memory_fit", case="transformer", model="7B", preset="bf16", mode="inference")
    if t7 and i7:
        ev += (f"; estimated 7B bf16: {i7[0].metrics['bytes_predicted'] / 1e9:.0f} GB to serve, "
               f"{t7[0].metrics['bytes_predicted'] / 1e9:.0f} GB to train with Adam")
    if min(ratio) < th["ratio"]:
        return Verdict("contradicted", ev)
    if not held:  # the estimator's half is untested out of sample: not a grade
        return Verdict("inconclusive", ev)
    holds = within(fitted) == len(fitted) and within(held) == len(held)
    return Verdict("supported" if holds else "supported with caveats", ev)


def _c11(e, th):
    recs = e.ok("tensor_parallel", data=1)
    if not recs:
        return _not_run("tensor_parallel")
    backend = max(recs, key=lambda r: r.params["model"]).backend
    by_m = {r.params["model"]: r.metrics for r in recs if r.backend == backend}
    m = max(by_m)
    if m < 2 or 1 not in by_m:
        return Verdict("not run", f"tensor_parallel ran on 1 device only ({backend}); "
                                  "run with --devices 4 on CPU or on several GPUs")
    share = by_m[m]["bytes_measured"] / by_m[1]["bytes_measured"]
    same = all(v["rel_error"] < th["rel_error"] for v in by_m.values())
    ev = (f"{backend}: split over {m} devices, each holds {share:.0%} of the 1-device train step "
          f"(1/{m} = {1 / m:.0%}); outputs {'equal' if same else 'differ'} (worst rel. error "
          f"{max(v['rel_error'] for v in by_m.values()):.0e})")
    if not same:
        return Verdict("contradicted", ev)
    return Verdict("supported" if share <= th["share"] / m else "supported with caveats" if share < th["caveat"]
                   else "contradicted", ev)


def _c12(e, th):
    recs = {r.params["preset"]: r for r in e.ok("precision", "gpu", case="sweep", impl="jax")
            if r.params["n"] == max((x.params["n"] for x in e.ok("precision", "gpu", case="sweep", impl="jax")),
                                    default=0)}
    if "bf16" not in recs or "fp32" not in recs:
        return _not_run("GPU precision")
    ratio = derive.time_ratio(recs["fp32"].metrics, recs["bf16"].metrics)
    return _grade_spread(ratio, th["good"], th["caveat"], f"bf16 Tensor Core matmul {ratio[1]:.1f}x fp32 (HIGHEST) at "
                                      f"n={recs['bf16'].params['n']}")


def _c13(e, th):
    backends = sorted({r.backend for r in e.ok("precision", case="sweep", impl="jax")}, key=lambda b: b != "gpu")
    if not backends:
        return _not_run("precision")
    b = backends[0]
    sweep = e.ok("precision", b, case="sweep", impl="jax")
    speedups = derive.precision_speedups(sweep)  # over the fp32 record at the same n
    names = ("bf16", "fp16", "int8")
    n = max((r.params["n"] for r in sweep if (r.params["preset"], r.params["n"]) in speedups), default=None)
    if n is None:
        return _not_run("precision (with the fp32 baseline)")
    at = {r.params["preset"]: r.metrics for r in sweep if r.params["n"] == n}
    sp = {k: speedups[(k, n)] for k in names if (k, n) in speedups}
    if len(sp) < 3:
        return Verdict("not run", f"{b} n={n}: no speed-up for {', '.join(k for k in names if k not in sp)}")
    faster = [k for k in names if sp[k][0] > th["speedup"]]  # faster even at the slow end of the spread
    unsure = [k for k in names if sp[k][0] <= th["speedup"] < sp[k][2]]
    small_err = all(at[k]["rel_error"] < th["error"] for k in names)
    ev = (f"{b} n={n}: " + ", ".join(f"{k} {sp[k][1]:.1f}x ({sp[k][0]:.2f}-{sp[k][2]:.2f}), error "
                                      f"{at[k]['rel_error']:.0e}" for k in names)) + _cpu_features(e.runs_of(sweep), b)
    if unsure:
        return Verdict("inconclusive", ev + f"; within the noise of {th['speedup']:g}x: {', '.join(unsure)}")
    if len(faster) == 3 and small_err:
        return Verdict("supported", ev)
    return Verdict("supported with caveats" if faster and small_err else "contradicted",
                   ev + (f"; not faster: {', '.join(k for k in names if k not in faster)}" if len(faster) < 3 else ""))


def _cpu_features(runs: list[Run], backend: str) -> str:
    """On a CPU, what decides whether bf16 and int8 are faster: its matrix features (AMX tiles, AVX-512 BF16 and
    VNNI), as the runs the deciding records came from recorded them."""
    if backend != "cpu":
        return ""
    seen = {r.env.get("cpu_features") for r in runs}
    if seen in ({None}, set()):
        return "; the run did not record its CPU's matrix features (AMX, AVX-512 BF16/VNNI), which decide this"
    feats = " ".join(sorted(f for f in seen if f is not None)).split()
    amx = [f for f in feats if f.startswith("amx")]
    dots = [f for f in feats if f in ("avx512_bf16", "avx512_vnni", "avx_vnni", "avx512_fp16")]
    if amx:
        return f"; the CPU has AMX tiles ({', '.join(amx)}), on which XLA:CPU multiplies bf16 and int8"
    if dots:
        return f"; the CPU has no AMX tiles, only dot instructions ({', '.join(dots)})"
    return "; the CPU has neither AMX tiles nor AVX-512 BF16/VNNI: its bf16 and int8 products are widened"


def _c14(e, th):
    # two halves: fewer digits lose precision (the bf16 accumulator), and fewer digits cost less (a
    # memory-bound kernel moves more values per second when each takes fewer bytes)
    acc = {(r.params["dtype"], r.params["accumulator"]): r.metrics["rel_error"]
           for r in e.ok("precision", case="accumulate")}
    if ("bfloat16", "bfloat16") not in acc:
        return _not_run("number-format")
    loss = acc[("bfloat16", "bfloat16")]
    ev = (f"a bf16 accumulator lost {loss:.0%} of a sum that fp32 kept to "
          f"{acc.get(('float32', 'float32'), float('nan')):.0e}; bf16 into fp32: "
          f"{acc.get(('bfloat16', 'float32'), float('nan')):.0e}")
    triad = {r.params["dtype"]: r for r in e.ok("bandwidth", kernel="triad", impl="jax", variant="jit")}
    if not {"float32", "bfloat16"} <= set(triad) or triad["float32"].params["n"] != triad["bfloat16"].params["n"]:
        return Verdict("inconclusive", ev + "; the cost half needs the bandwidth experiment's fp32 and bf16 triads")
    per = derive.time_ratio(triad["float32"].metrics, triad["bfloat16"].metrics)  # same element count
    ev += (f"; the same memory-bound triad over bf16 values took 2 bytes a value, not 4, and ran "
           f"{per[1]:.2f}x as many values per second ({per[0]:.2f}-{per[2]:.2f})")
    if per[2] <= th["caveat"]:
        return Verdict("contradicted", ev)  # fewer digits did not cost less
    cost = _grade_spread(per, th["good"], th["caveat"], ev)
    if cost.verdict == "inconclusive":
        return cost
    return Verdict("supported" if cost.verdict == "supported" and loss > th["loss"] else "supported with caveats", ev)


def _c15(e, th):
    recs = e.ok("compiler")
    chain = next((r for r in recs if r.params["program"] == "gelu_chain"), None)
    if chain is None:
        return _not_run("compiler")
    speedup = chain.metrics["speedup"]
    libs = sum(r.metrics["library_calls"] for r in recs)
    ev = (f"jit {speedup:.1f}x op-by-op on {chain.backend}; {int(chain.metrics['fusions_after'])} "
          f"fusion(s); {int(libs)} library call(s) in the optimized HLO")
    if speedup < th["floor"]:
        return Verdict("contradicted", ev)  # the compiler stack did not make the hardware more usable
    gpu = [r for r in recs if r.backend == "gpu"]
    if gpu:
        calls = sum(r.metrics["library_calls"] for r in gpu)
        return Verdict("supported" if calls and speedup >= th["good"] else "supported with caveats", ev)
    # the library half needs a GPU program (measured, or compiled: see _c15_compiled)
    return Verdict("inconclusive", ev + "; cuBLAS/cuDNN " + GPU_HINT)


def _c16(e, th):
    # decided on each backend run: the weakest grade stands, every backend's figures shown
    by_backend = {}
    for r in e.ok("inference", case="train_vs_infer"):
        by_backend.setdefault(r.backend, r)
    if not by_backend:
        return _not_run("inference")
    verdicts = []
    for b in sorted(by_backend, key=lambda b: b != "gpu"):
        m = by_backend[b].metrics
        ev = (f"{b}: train/inference {m['time_ratio']:.1f}x time, {m.get('flops_ratio', float('nan')):.1f}x FLOPs, "
              f"{m['memory_ratio']:.1f}x memory")
        if "flops_ratio" not in m:  # no FLOP count on this backend: not graded on time alone
            verdicts.append(Verdict("not run", f"{b}: no FLOP count of the two steps"))
            continue
        verdicts.append(_grade(min(m["time_ratio"], m["flops_ratio"]), th["good"], th["caveat"], ev))
    worst = max(verdicts, key=lambda v: VERDICTS.index(v.verdict))
    return Verdict(worst.verdict, "; ".join(v.evidence for v in verdicts) + _transformer_steps(e))


def _transformer_steps(e: Evidence) -> str:
    """A decoder's measured train step against its decode step (the transformer experiment), as a clause: per
    token, the train step's time and the bytes it holds over the decode step's."""
    by = {}
    for r in e.ok("transformer", mode="train") + e.ok("transformer", mode="serve"):
        if "case" not in r.params:
            by.setdefault((r.backend, r.params["model"]), {})[r.params["mode"]] = r
    pairs = [(k, v) for k, v in by.items() if {"train", "serve"} <= set(v)]
    if not pairs:
        return ""
    (b, model), v = pairs[0]
    t, s = v["train"].metrics, v["serve"].metrics
    per_token = s["tokens_per_s"] / t["tokens_per_s"]  # seconds per token trained over seconds per token decoded
    return (f"; {b}, {model}: a train step took {per_token:.2g}x a decode step's time per token and held "
            f"{t['bytes_measured'] / s['bytes_measured']:.1f}x its memory")


def _c17(e, th):
    # an "unsupported" agreement case (one device: nothing to split) is no evidence either way
    agree = e.records("data_parallel", "ok", "failed", case="agreement")
    if not agree:
        return _not_run("data_parallel")
    bad = [r for r in agree if r.status != "ok"]
    dist = e.records("distributed", "ok", "failed")
    parts = [f"{len(agree) - len(bad)}/{len(agree)} data-parallel runs (pmap, jit + sharding, shard_map) match one "
             f"device to {max((r.metrics['rel_error'] for r in agree if r.status == 'ok'), default=float('nan')):.0e}"]
    if dist:
        d = dist[0]
        parts.append(f"{d.params['processes']} processes (jax.distributed) " + (
            f"match one process to {d.metrics['rel_error']:.0e}" if d.status == "ok" else f"{d.status}: {d.reason}"))
    # how they work together: the all-reduce that data parallelism sums its gradients with, at its largest size
    reduce = max(e.ok("collectives", collective="all_reduce"), key=lambda r: r.params["bytes"], default=None)
    if reduce is not None:
        parts.append(f"an all-reduce of {reduce.params['bytes'] / 1e6:.3g} MB over {reduce.params['devices']} "
                     f"{reduce.backend} devices ran at {reduce.metrics['gbytes_per_s']:.1f} GB/s bus bandwidth")
    strong = [r for r in e.ok("data_parallel", case="strong", variant="jit_sharding") if r.params["devices"] > 1]
    if bad or any(r.status != "ok" for r in dist):
        return Verdict("contradicted", "; ".join(parts))
    gpu = [r for r in strong if r.backend == "gpu"]
    if gpu:
        top = max(gpu, key=lambda r: r.params["devices"])
        parts.append(f"strong scaling on {top.params['devices']} GPUs: {top.metrics['speedup']:.2f}x "
                     f"({top.metrics['efficiency']:.0%} efficiency)")
        return _grade(top.metrics["efficiency"], th["good"], th["caveat"], "; ".join(parts))
    if not strong:  # nothing measured of how it scales
        return Verdict("inconclusive", "; ".join(parts) + "; no scaling measured")
    top = max(strong, key=lambda r: r.params["devices"])
    parts.append(f"{top.params['devices']} CPU host devices sharing the same cores "
                 f"ran at {top.metrics['speedup']:.2f}x one device: working together is shown, speed-up needs "
                 "several real GPUs")
    return Verdict("supported with caveats", "; ".join(parts))


def _c18(e, th):
    # hardware plus software: the GPU's matmul, through the libraries XLA calls, reaching half the datasheet
    # peak; and the whole train step far faster than on the CPU beside it
    # each from the GPU run that holds it: a GPU check's parts are runs of their own
    grun, crun = e.paired("precision", case="sweep", impl="jax", preset="bf16")
    if grun is None:
        return _not_run("GPU")
    env = grun.env
    ev = (f"{env.get('device_kind')} with driver {env.get('driver_version', '?')}, jax {env.get('jax')}, "
          f"plugins {env.get('jax_plugins')}")
    sweep = e.of(grun).ok("precision", "gpu", case="sweep", impl="jax", preset="bf16")
    top = max(sweep, key=lambda r: r.params["n"], default=None)
    libs = e.info(grun, "matmul").get("jax_dot", "?")
    trun, tcpu = e.paired("training", case="throughput", impl="jax")
    thr = {(r.backend, r.params["width"]): r.metrics["samples_per_s"]
           for side in (trun, tcpu) for r in e.of(side).ok("training", case="throughput", impl="jax")}
    widths = sorted(w for b, w in thr if b == "gpu" and ("cpu", w) in thr)
    if top is None or "peak_fraction" not in top.metrics or not widths:
        return Verdict("not run", ev + "; needs the GPU run's bf16 matmul and a training width measured on both")
    frac = top.metrics["peak_fraction"]
    speed = thr[("gpu", widths[-1])] / thr[("cpu", widths[-1])]
    ev += (f"; bf16 matmul through {libs} at {frac:.0%} of the datasheet peak (n={top.params['n']}); the train "
           f"step at width {widths[-1]} {speed:.0f}x the CPU's")
    hits = (frac >= th["peak"]) + (speed >= th["speedup"])
    return Verdict(("contradicted", "supported with caveats", "supported")[hits], ev)


# ---------------------------------------------------------------- compile-time evidence (--compile-for)


def _target(e: Evidence) -> str:
    runs = e.runs
    return f"{runs[0].env.get('device_kind', 'the GPU') if runs else 'the GPU'}, compiled, not run"


def _with(v: Verdict, extra: str) -> Verdict:
    return dataclasses.replace(v, evidence=f"{v.evidence}; {extra}")


def _models_said(e: Evidence) -> str:
    """What XLA:GPU plans for real decoders on one GPU (the transformer experiment's compiled records): each
    model's serve and train bytes, in a clause; "" without such records."""
    one = {(r.params["model"], r.params["mode"]): r.metrics["bytes_compiled"]
           for r in e.ok("transformer", case="plan", devices=1)}
    models = [m for m in dict.fromkeys(m for m, _ in one) if (m, "train") in one and (m, "serve") in one]
    if not models:
        return ""
    return ("XLA:GPU's plans for real decoders on one GPU (train: AdamW, batch 8; serve: batch 8 of one decode "
            "step): " + ", ".join(f"{m} {_gb(one[(m, 'serve')])} to serve and {_gb(one[(m, 'train')])} to train"
                                  for m in models[-3:]))


def _gb(nbytes: float) -> str:
    gb = nbytes / 1e9
    return f"{gb:,.0f} GB" if gb >= 100 else f"{gb:.3g} GB"


def _decoder_step(e: Evidence):
    """The largest decoder's one-GPU train step as XLA:GPU plans it (the transformer experiment), or None."""
    plans = [r for r in e.ok("transformer", case="plan", mode="train", devices=1) if "dot_flop_share" in r.metrics]
    return max(plans, key=lambda r: r.metrics["params"]) if plans else None


def _c02_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    r = _decoder_step(e)
    if r is None:
        return v
    m = r.metrics
    return _with(v, f"in XLA:GPU's plan of a {r.params['model']} train step ({_target(e)}), matrix products are "
                    f"{m['dot_flop_share']:.1%} of the FLOPs and, predicted, {m['predicted_dot_time_share']:.0%} of "
                    "the device time")


def _c09_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    r = _decoder_step(e)
    if r is None:
        return v
    f, t = 1 - r.metrics["dot_flop_share"], 1 - r.metrics["predicted_dot_time_share"]
    return _with(v, f"predicted, not run: in XLA:GPU's plan of a {r.params['model']} train step ({_target(e)}) the "
                    f"ops outside matrix products do {f:.1%} of the FLOPs in {t:.0%} of the time"
                    + (" (the cores would wait on memory there)" if t >= th["wait_time"] and t >= th["wait_factor"] * f
                       else ""))


def _c10_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    plans = [r for r in e.ok("memory_fit", case="plan") if "prediction_error" in r.metrics]
    models = _models_said(e)
    if models:
        v = _with(v, models) if v.verdict != "not run" else Verdict("supported with caveats", models, "compiled")
    if not plans:
        return v
    within = sum(abs(r.metrics["prediction_error"]) <= th["tolerance"] for r in plans)
    nowhere = [r for r in plans if not any(r.metrics.get(k) for k in r.metrics if k.startswith("fits_"))]
    extra = (f"against XLA:GPU's own plans ({_target(e)}) the estimator held within {th['tolerance']:.0%} on "
             f"{within}/{len(plans)}"
             + (f", and {len(nowhere)} step(s) of {max(r.metrics['bytes_compiled'] for r in nowhere) / 1e9:.0f} GB "
                "fit no GPU listed" if nowhere else ""))
    if v.verdict == "supported" and within < len(plans):
        # the claim holds; the estimator's byte counts, read off XLA:CPU, do not carry over
        return Verdict("supported with caveats", f"{v.evidence}; {extra}", "compiled")
    return _with(v, extra)


def _c11_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    train = {(r.params["model"], r.params["devices"]): r.metrics
             for r in e.ok("transformer", case="plan", mode="train")}
    big = [m for m, n in train if n > 1 and (m, 1) in train and not train[(m, 1)].get("fits_141gb")]
    if big:  # the largest decoder that one GPU cannot train: what each of N holds
        m = big[-1]
        n = max(k for mm, k in train if mm == m)
        v = _with(v, f"XLA:GPU's plan for {m} training: {train[(m, 1)]['bytes_compiled'] / 1e9:.0f} GB on one GPU, "
                     f"{train[(m, n)]['bytes_compiled'] / 1e9:.0f} GB each on {n} ({_target(e)})")
    by_m = {r.params["model"]: r.metrics["bytes_compiled"] for r in e.ok("tensor_parallel", case="plan", data=1)}
    if 1 not in by_m or len(by_m) < 2:
        return v
    m = max(by_m)
    share = by_m[m] / by_m[1]
    extra = f"XLA:GPU plans {share:.0%} of the one-GPU step per device on {m} GPUs ({_target(e)})"
    if v.verdict == "not run":  # memory only: a compiled plan cannot check the outputs
        return Verdict("supported with caveats" if share < th["caveat"] else "contradicted",
                       extra + "; outputs not checked (nothing ran)", "compiled")
    return _with(v, extra)


def _c12_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    plans = e.ok("precision", case="plan")
    if not plans:
        return v
    n = max(r.params["n"] for r in plans)
    kept = [r.params["preset"] for r in plans if r.params["n"] == n and not r.metrics.get("upcast_bits")
            and r.params["preset"] in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8")]
    wide = [r.params["preset"] for r in plans if r.params["n"] == n and r.metrics.get("upcast_bits")]
    return _with(v, f"XLA:GPU gives {', '.join(kept) or 'no low-precision preset'} Tensor Core GEMMs in their own "
                    f"format" + (f", widens {', '.join(wide)}" if wide else "") + f" ({_target(e)})")


def _c15_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    plans = e.ok("compiler") + e.ok("op_mix", case="plan") + e.ok("precision", case="plan")
    libs = sum(m for r in plans for k, m in r.metrics.items()
               if k.startswith("calls_cu"))  # cuBLAS, cuBLASLt, cuDNN, cuSOLVER
    if not plans:
        return v
    extra = f"{int(libs)} NVIDIA library call(s) in the GPU programs ({_target(e)})"
    if v.verdict == "inconclusive" and libs and "jit" in v.evidence:
        # jit measured on the CPU; the vendor libraries from XLA:GPU's plan
        return Verdict("supported", v.evidence.split("; cuBLAS/cuDNN")[0] + "; " + extra, "compiled")
    return _with(v, extra)


def _c17_compiled(e: Evidence, v: Verdict, th: Thresholds) -> Verdict:
    plans = [r for r in e.ok("data_parallel", case="plan", variant="jit_sharding") if r.params["devices"] > 1]
    if not plans:
        return v
    r = max(plans, key=lambda r: r.params["devices"])
    return _with(v, f"on {r.params['devices']} GPUs XLA:GPU inserts {int(r.metrics.get('all_reduce_count', 0))} "
                    f"all-reduce(s) of {r.metrics.get('all_reduce_bytes', 0) / 1e6:.1f} MB for "
                    f"{r.metrics['gradient_bytes'] / 1e6:.1f} MB of gradients ({_target(e)})")


# Each claim: its id, the explainer's words, the records its rule reads (no wider: the door logs every request
# and tests/test_claims.py holds each rule to its reads), the rule in words with its thresholds as fields, the
# rule, its compile-time hook, and the thresholds.
CLAIMS: tuple[Claim, ...] = (
    Claim("C01", "A CPU has a few powerful cores; a GPU thousands of simple ones.",
          (_r("devices", role="accelerator"), _r("devices", role="cpu")),
          "supported if the GPU has >= {good:g}x the CPU's parallel fp32 lanes (caveats >= {caveat:g}x)", _c01,
          thresholds={"good": 100, "caveat": 10}),
    Claim("C02", "Deep learning is mostly multiply-adds, mostly matrix multiplication.",
          (_r("op_mix", model="mlp"), _r("transformer", case="plan", mode="train", devices=1)),
          "supported if matmul is >= {flops:.0%} of FLOPs and >= {time:.0%} of time of the widest MLP step whose "
          "time splits (caveats: FLOPs only; contradicted: < {flops:.0%} of FLOPs)", _c02, _c02_compiled,
          thresholds={"flops": 0.9, "time": 0.5}),
    Claim("C03", "[[1,2],[3,4]] x [[5,6],[7,8]]: the top-left entry is 1*5 + 2*7 = 19.",
          (_r("matmul", case="worked_example"),),
          "supported if the product is exact on every backend and dtype tried", _c03),
    Claim("C04", "Every output entry is independent, so the work parallelises.",
          (_r("threads"),),
          "supported if matmul speed-up on N cores >= {good:g} N (caveats >= {caveat:g} N)", _c04,
          thresholds={"good": 0.7, "caveat": 0.3}),
    Claim("C05", "One hard problem: the fast single worker wins; a million easy ones: the crowd.",
          (_r("serial_parallel", kind="independent", variant="vectorized"),
           _r("serial_parallel", kind="recurrence", variant="scan")),
          "supported if the CPU wins the smallest N and the serial recurrence and the GPU the largest N (caveats: 2 "
          "of the 3; contradicted: fewer)", _c05),
    Claim("C06", "A CPU computes mostly serially, a GPU in parallel, so far faster.",
          (_r("serial_parallel", kind="independent", variant="vectorized"),
           _r("serial_parallel", kind="independent", variant="python_loop")),
          "supported if the GPU is >= {good:g}x the CPU at the largest vectorised N (caveats >= {caveat:g}x)", _c06,
          thresholds={"good": 10, "caveat": 2}),
    Claim("C07", "GPUs turn days of training into hours.",
          (_r("training", case="to_target"),),
          "supported if the GPU reaches the teacher task's target accuracy >= {good:g}x sooner at the widest model "
          "(caveats >= {caveat:g}x)", _c07, thresholds={"good": 10, "caveat": 2}),
    Claim("C08", "VRAM is the GPU's desk: data being worked on must sit there.",
          (_r("transfer", direction="on_device_copy"), _r("transfer", direction="host_to_device")),
          "supported if an on-device copy is >= {good:g}x faster than host->device (caveats >= {caveat:g}x)", _c08,
          thresholds={"good": 5, "caveat": 1.5}),
    Claim("C09", "Bandwidth keeps the cores fed, so cores never wait.",
          (_r("op_mix"), _r("roofline"), _r("transformer", case="plan", mode="train", devices=1)),
          "contradicted if in any measured train step the ops outside matmul take >= {wait_time:.0%} of the time and "
          ">= {wait_factor:g}x their FLOP share (cores wait on memory); supported if in every step their time share "
          "<= {slack_factor:g}x their FLOP share + {slack:.0%}; caveats between", _c09, _c09_compiled,
          thresholds={"wait_time": 0.1, "wait_factor": 10, "slack_factor": 2, "slack": 0.05}),
    Claim("C10", "A model must fit in VRAM; training needs much more than the weights.",
          (_r("inference", case="train_vs_infer"), _r("memory_fit", case="mlp_train"),
           _r("memory_fit", case="transformer", model="7B", preset="bf16", mode="train"),
           _r("memory_fit", case="transformer", model="7B", preset="bf16", mode="inference"),
           _r("memory_fit", case="plan"), _r("transformer", case="plan", devices=1)),
          "supported if a train step needs >= {ratio:g}x the memory of an inference step (XLA's count) and the "
          "estimator holds within {tolerance:.0%} of XLA on fitted and held-out configs (caveats: it misses some; "
          "contradicted below {ratio:g}x)", _c10, _c10_compiled, thresholds={"ratio": 2, "tolerance": 0.15}),
    Claim("C11", "Models too large for one GPU are split across several.",
          (_r("tensor_parallel", data=1), _r("transformer", case="plan", mode="train")),
          "supported if outputs are unchanged (rel. error < {rel_error:g}) and each of m devices holds <= {share:g}/m "
          "of the one-device step's memory (caveats: < {caveat:.0%}; contradicted: more, or outputs differ)", _c11,
          _c11_compiled, thresholds={"rel_error": 1e-5, "share": 1.4, "caveat": 0.75}),
    Claim("C12", "Tensor Cores do whole tiles at once, much faster than ordinary cores.",
          (_r("precision", case="sweep", impl="jax"), _r("precision", case="plan")),
          "supported if GPU bf16 matmul is >= {good:g}x fp32 (HIGHEST) (caveats >= {caveat:g}x)", _c12, _c12_compiled,
          thresholds={"good": 5, "caveat": 2}),
    Claim("C13", "Lower precision is faster and smaller at a small cost in accuracy.",
          (_r("precision", case="sweep", impl="jax"),),
          "supported if bf16, fp16 and int8 are each > {speedup:g}x fp32 (at the slow end of the quartile spread) "
          "with error < {error:g} (caveats: some are; inconclusive: a spread straddles {speedup:g}x)", _c13,
          thresholds={"speedup": 1.1, "error": 2e-2}),
    Claim("C14", "Numbers can be stored with fewer digits; fewer digits cost less.",
          (_r("precision", case="accumulate"), _r("bandwidth", kernel="triad", impl="jax", variant="jit")),
          "supported if a bf16 accumulator loses > {loss:.0%} of a sum fp32 keeps and a memory-bound triad moves "
          ">= {good:g}x the values per second in bf16 (caveats >= {caveat:g}x; contradicted if bf16 is no faster per "
          "value)", _c14, thresholds={"loss": 0.1, "good": 1.5, "caveat": 1.0}),
    Claim("C15", "CUDA and libraries like cuDNN make the hardware usable.",
          (_r("compiler"), _r("op_mix", case="plan"), _r("precision", case="plan")),
          "supported if jit is >= {good:g}x op-by-op and the GPU program calls vendor libraries (caveats: CPU only; "
          "contradicted if jit runs below {floor:g}x op-by-op)", _c15, _c15_compiled,
          thresholds={"good": 1.5, "floor": 1.0}),
    Claim("C16", "Training and inference both run on GPUs; training is the heavier job.",
          (_r("inference", case="train_vs_infer"), _r("transformer", mode="train"), _r("transformer", mode="serve")),
          "supported if a train step costs >= {good:g}x an inference step in time and FLOPs (caveats >= {caveat:g}x)",
          _c16, thresholds={"good": 2, "caveat": 1.2}),
    Claim("C17", "Several GPUs work together on one job.",
          (_r("data_parallel", case="agreement"), _r("collectives", collective="all_reduce"), _r("distributed"),
           _r("data_parallel", case="strong", variant="jit_sharding"),
           _r("data_parallel", case="plan", variant="jit_sharding")),
          "supported if every data-parallel implementation matches one device and GPUs scale at >= {good:.0%} "
          "efficiency (caveats >= {caveat:.0%}, or CPU host devices that cannot show a speed-up; contradicted: a "
          "mismatch or < {caveat:.0%})", _c17, _c17_compiled, thresholds={"good": 0.7, "caveat": 0.3}),
    Claim("C18", "NVIDIA GPUs power AI through hardware plus software.",
          (_r("precision", case="sweep", impl="jax", preset="bf16"), _r("training", case="throughput", impl="jax"),
           _info("matmul")),
          "supported if the GPU's bf16 matmul reaches >= {peak:.0%} of its datasheet peak through the libraries XLA "
          "calls and its train step is >= {speedup:g}x the CPU's (caveats: one of the two; contradicted: neither)",
          _c18, thresholds={"peak": 0.5, "speedup": 10}),
)


def by_id(cid: str) -> Claim:
    """The claim with this ID.

    Raises:
      KeyError: no claim has it.
    """
    for c in CLAIMS:
        if c.id == cid:
            return c
    raise KeyError(f"no claim {cid!r}; known: {', '.join(c.id for c in CLAIMS)}")


def rests_on(experiment: str, params: dict[str, Any]) -> bool:
    """Whether a verdict rests on this case: some claim reads the records of ``experiment`` with these params.
    A budgeted run measures these cases first (``experiments.run`` hands this to the harness)."""
    return any(e == experiment and covers(want, params) for c in CLAIMS for e, want in c.reads if want is not None)


def for_experiment(name: str) -> tuple[str, ...]:
    """The IDs of the claims an experiment tests, in claim order."""
    return tuple(c.id for c in CLAIMS if name in c.experiments)


def decide(claim: Claim, measured: Evidence, compiled: Evidence | None = None,
           thresholds: Thresholds | None = None) -> tuple[Verdict, frozenset[str]]:
    """The claim's verdict on this evidence (compiled records through its hook), and the experiments its
    rule read. A record lacking a field the rule reads gives "not run"; any other error is the rule's."""
    v, log = decide_logged(claim, measured, compiled, thresholds)
    return v, frozenset(e for e, _ in log.reads)


def decide_logged(claim: Claim, measured: Evidence, compiled: Evidence | None = None,
                  thresholds: Thresholds | None = None):
    """``decide``, with the door's whole log of what the rule (and its compiled hook) asked for."""
    th = claim.thresholds if thresholds is None else thresholds
    e = measured.fresh()
    try:
        v = claim.rule(e, th)
        if compiled is not None and compiled.runs and claim.compiled:
            v = claim.compiled(_sharing(compiled, e), v, th)
    except MissingField as err:
        v = Verdict("not run", f"records incomplete for the rule: {err}")
    return v, e.log


def _sharing(evidence: Evidence, other: Evidence) -> Evidence:
    """``evidence``'s records, logging what is read into ``other``'s log."""
    out = evidence.fresh()
    out.log = other.log
    return out


def ledger(pairs: Pairs) -> list[tuple[Claim, Verdict]]:
    """Every claim with the verdict its rule gives on these records (compiled ones through the hook)."""
    measured = Evidence([(r, x) for r, x in pairs if not x.compiled])
    compiled = Evidence([(r, x) for r, x in pairs if x.compiled])
    return [(c, decide(c, measured, compiled)[0]) for c in CLAIMS]


def as_markdown() -> str:
    """docs/claims.md: every claim, the experiments that test it and the rule that decides it, from ``CLAIMS``
    (a test keeps the page equal to this)."""
    lines = ["# The claims the study tests", "",
             'jaxgpu tests what a popular explainer, "How does a GPU work for deep learning?" (Amit Shekhar, Outcome '
             "School, https://outcomeschool.com/blog/how-does-a-gpu-work-for-deep-learning), tells its readers. Each "
             "claim below is our paraphrase, with a stable ID; the report's ledger gives each a verdict computed by "
             "the rule beside it from the measured records (`experiments/analysis/claims.py`, where this page is "
             "generated from: `python -c \"from experiments.analysis import claims; print(claims.as_markdown(), "
             "end='')\" > docs/claims.md`).", "",
             "| ID | the claim | tested by | the rule |", "|---|---|---|---|"]
    for c in CLAIMS:
        lines.append(f"| {c.id} | {c.text} | {', '.join(f'`{e}`' for e in c.experiments)} | "
                     f"{c.rule_text.replace('|', '/')} |")
    lines += ["", "Verdicts: " + ", ".join(f"*{v}*" for v in VERDICTS) + ". \"Inconclusive\": the figure's spread (its "
              "quartiles) straddles a threshold. A verdict that rests on a program compiled for a GPU, not run on "
              "one, says so."]
    return "\n".join(lines) + "\n"
