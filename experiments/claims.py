"""The explainer's claims (../shared/CLAIMS.md) as data, each with the rule that decides its verdict.

The one home of the claims: which experiments test each claim is written here, and each
experiment's ``CLAIMS`` is derived from it (``for_experiment``). It sits with the study,
above the library: the library measures, this interprets.

A rule reads records only (``(Run, Record)`` pairs of every run being reported) and
returns a ``Verdict``: one of ``VERDICTS``, the deciding figure in words, and for a claim
that needs a backend that was not run, how to run it. Nothing here is typed by hand but
the claims and the thresholds, which the report prints next to each verdict.

Records compiled for a GPU that was not run (``mode: compiled``) never reach a rule's
measured figures: the rules see measured records only, and the claims whose verdict
compile-time facts can inform (which libraries, how many bytes, which collectives) add them
through their ``compiled`` hook, labelled; a verdict that rests on them says so (``basis``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from jaxgpu.results import Record, Run, cpu_partner

VERDICTS = ("supported", "supported with caveats", "contradicted", "not run")
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


@dataclasses.dataclass(frozen=True)
class Claim:
    id: str
    text: str
    experiments: tuple[str, ...]
    rule_text: str
    rule: Callable[[Pairs], Verdict]
    compiled: Callable[[Pairs, Verdict], Verdict] | None = None  # adds compile-time evidence to a verdict


def _ok(pairs: Pairs, experiment: str, backend: str | None = None, **params) -> list[Record]:
    return [r for _, r in pairs if r.experiment == experiment and r.status == "ok"
            and (backend is None or r.backend == backend) and all(r.params.get(k) == v for k, v in params.items())]


def _paired(pairs: Pairs) -> tuple[Run | None, Run | None]:
    """(a GPU run, the CPU run beside it: its own host's where the records have one), or (None,
    None) without a GPU run."""
    runs = list({id(r): r for r, _ in pairs}.values())
    gpu = next((r for r in runs if r.env.get("backend") == "gpu"), None)
    return (gpu, cpu_partner(gpu, runs)) if gpu is not None else (None, None)


def _of(pairs: Pairs, run: Run | None) -> Pairs:
    """The pairs of one run (all of them when there is no pairing to make)."""
    return pairs if run is None else [(r, x) for r, x in pairs if r is run]


def _not_run(what: str) -> Verdict:
    return Verdict("not run", f"no {what} records; {GPU_HINT}" if "GPU" in what else f"no {what} records")


def _grade(value: float, good: float, caveat: float, evidence: str) -> Verdict:
    if value >= good:
        return Verdict("supported", evidence)
    return Verdict("supported with caveats" if value >= caveat else "contradicted", evidence)


def _c01(p):
    # the GPU run describes its own host's CPU too: that is the CPU beside this GPU
    gpu = _ok(p, "devices", "gpu", role="accelerator")
    cpu = _ok(p, "devices", "gpu", role="cpu") or _ok(p, "devices", role="cpu")
    if not (cpu and gpu):
        return _not_run("GPU devices")
    ratio = gpu[0].metrics["parallel_lanes"] / cpu[0].metrics["parallel_lanes"]
    return _grade(ratio, 100, 10, f"GPU {gpu[0].metrics['parallel_lanes']:.0f} vs CPU {cpu[0].metrics['parallel_lanes']:.0f} "
                                  f"parallel fp32 lanes ({ratio:.0f}x); CPU cores {cpu[0].metrics['cores']:.0f}")


def _c02(p):
    recs = sorted(_ok(p, "op_mix", model="mlp"), key=lambda r: r.params["width"])
    if not recs:
        return _not_run("op_mix")
    r = recs[-1]
    f, t = r.metrics["dot_flop_share"], r.metrics["dot_time_share"]
    ev = f"matmul {f:.0%} of FLOPs, {t:.0%} of time ({r.backend}, width {r.params['width']})"
    if f >= 0.9 and t >= 0.5:
        return Verdict("supported", ev)
    return Verdict("supported with caveats" if f >= 0.9 else "contradicted", ev)


def _c03(p):
    recs = _ok(p, "matmul", case="worked_example")
    if not recs:
        return _not_run("worked-example")
    exact = [r for r in recs if r.metrics["exact"] == 1.0]
    return Verdict("supported" if len(exact) == len(recs) else "contradicted",
                   f"[[19,22],[43,50]] exact in {len(exact)} of {len(recs)} backend x dtype cases")


def _c04(p):
    recs = sorted(_ok(p, "threads"), key=lambda r: r.params["workers"])
    if len(recs) < 2:
        return _not_run("multi-core threads")
    last = recs[-1]
    k, s = last.params["workers"], last.metrics.get("matmul_speedup", 1.0)
    return _grade(s / k, 0.7, 0.3, f"matmul {s:.2f}x faster on {k} cores than on 1 "
                                   f"(elementwise {last.metrics.get('elementwise_speedup', 1):.2f}x)")


def _times(p, backend, kind, variant):
    grun, crun = _paired(p)
    p = _of(p, grun if backend == "gpu" else crun)
    return {r.params["n"]: r.metrics["time_s_median"] for r in _ok(p, "serial_parallel", backend, kind=kind,
                                                                  variant=variant)}


def _c05(p):
    cv, gv = _times(p, "cpu", "independent", "vectorized"), _times(p, "gpu", "independent", "vectorized")
    cs, gs = _times(p, "cpu", "recurrence", "scan"), _times(p, "gpu", "recurrence", "scan")
    if not (cv and gv):
        return _not_run("GPU serial_parallel")
    ns = sorted(set(cv) & set(gv))
    small_cpu = cv[ns[0]] < gv[ns[0]]
    big_gpu = gv[ns[-1]] < cv[ns[-1]]
    ser = sorted(set(cs) & set(gs))
    serial_cpu = bool(ser) and cs[ser[-1]] < gs[ser[-1]]
    ev = (f"N={ns[0]}: CPU {cv[ns[0]] * 1e6:.0f} us vs GPU {gv[ns[0]] * 1e6:.0f} us; N={ns[-1]}: CPU "
          f"{cv[ns[-1]] * 1e3:.2f} ms vs GPU {gv[ns[-1]] * 1e3:.2f} ms; serial recurrence winner: "
          f"{'CPU' if serial_cpu else 'GPU'}")
    hits = small_cpu + big_gpu + serial_cpu
    return Verdict("supported" if hits == 3 else "supported with caveats" if hits >= 2 else "contradicted", ev)


def _c06(p):
    cv, gv = _times(p, "cpu", "independent", "vectorized"), _times(p, "gpu", "independent", "vectorized")
    py = _times(p, "cpu", "independent", "python_loop")
    if not (cv and gv):
        n = max(set(py) & set(cv), default=None)
        extra = f"; on CPU alone vectorised beat the serial Python loop {py[n] / cv[n]:.0f}x at N={n}" if n else ""
        return Verdict("not run", GPU_HINT + extra)
    n = max(set(cv) & set(gv))
    return _grade(cv[n] / gv[n], 10, 2, f"GPU {cv[n] / gv[n]:.0f}x faster than CPU at N={n} (vectorised)")


def _c07(p):
    grun, crun = _paired(p)

    def t(b):
        r = _ok(_of(p, grun if b == "gpu" else crun), "training", b, case="run", variant="fp32")
        return r[0].metrics.get("time_s_to_target") if r else None

    cpu, gpu = t("cpu"), t("gpu")
    if cpu is None or gpu is None:
        return _not_run("GPU training")
    return _grade(cpu / gpu, 10, 2, f"time to 95% on digits: CPU {cpu:.2f} s, GPU {gpu:.2f} s ({cpu / gpu:.1f}x)")


def _c08(p):
    recs = {r.params["direction"]: r for r in _ok(p, "transfer", "gpu") if "direction" in r.params}
    if not recs:
        return _not_run("GPU transfer")
    big = max(r.params["bytes"] for r in recs.values())
    at = {r.params["direction"]: r.metrics["gbytes_per_s"] for _, r in p if r.experiment == "transfer"
          and r.backend == "gpu" and r.status == "ok" and r.params.get("bytes") == big}
    ratio = at.get("on_device_copy", 0) / at.get("host_to_device", float("inf"))
    return _grade(ratio, 5, 1.5, f"on-device copy {at.get('on_device_copy', 0):.0f} GB/s vs host->device "
                                 f"{at.get('host_to_device', 0):.1f} GB/s ({ratio:.0f}x)")


def _c09(p):
    out = []
    for backend in ("gpu", "cpu"):
        recs = _ok(p, "roofline", backend)
        mm = [r.metrics["gflops"] for r in recs if r.params["kind"] == "matmul"]
        low = [r for r in recs if r.metrics["intensity_flop_per_byte"] <= 1.0]
        if mm and low:
            worst = min(r.metrics["gflops"] for r in low) / max(mm)
            out.append((backend, worst))
    if not out:
        return _not_run("roofline")
    backend, frac = out[0]
    ev = "; ".join(f"{b}: memory-bound op at {f:.1%} of peak compute" for b, f in out)
    # The claim says cores never wait; a memory-bound op far below peak shows they do.
    return Verdict("contradicted" if frac < 0.10 else "supported with caveats", ev)


def _c10(p):
    val = [r for r in _ok(p, "memory_fit", case="mlp_train")]
    t7 = _ok(p, "memory_fit", case="transformer", model="7B", preset="bf16", mode="train")
    i7 = _ok(p, "memory_fit", case="transformer", model="7B", preset="bf16", mode="inference")
    if not (val and t7 and i7):
        return _not_run("memory_fit")
    within = sum(abs(r.metrics["prediction_error"]) <= 0.15 for r in val)
    ev = (f"7B bf16: {i7[0].metrics['bytes_predicted'] / 1e9:.0f} GB to serve, "
          f"{t7[0].metrics['bytes_predicted'] / 1e9:.0f} GB to train with Adam; estimator within 15% of XLA on "
          f"{within}/{len(val)} configs")
    more = t7[0].metrics["bytes_predicted"] > 2 * i7[0].metrics["bytes_predicted"]
    return Verdict("supported" if more and within == len(val) else "supported with caveats" if more else "contradicted",
                   ev)


def _c11(p):
    recs = [r for r in _ok(p, "tensor_parallel") if r.params["data"] == 1]
    if not recs:
        return _not_run("tensor_parallel")
    backend = max(recs, key=lambda r: r.params["model"]).backend
    by_m = {r.params["model"]: r.metrics for r in recs if r.backend == backend}
    m = max(by_m)
    if m < 2 or 1 not in by_m:
        return Verdict("not run", f"tensor_parallel ran on 1 device only ({backend}); "
                                  "run with --devices 4 on CPU or on several GPUs")
    share = by_m[m]["bytes_measured"] / by_m[1]["bytes_measured"]
    same = all(v["rel_error"] < 1e-5 for v in by_m.values())
    ev = (f"{backend}: split over {m} devices, each holds {share:.0%} of the 1-device train step "
          f"(1/{m} = {1 / m:.0%}); outputs {'equal' if same else 'differ'} (worst rel. error "
          f"{max(v['rel_error'] for v in by_m.values()):.0e})")
    if not same:
        return Verdict("contradicted", ev)
    return Verdict("supported" if share <= 1.4 / m else "supported with caveats" if share < 0.75 else "contradicted",
                   ev)


def _c12(p):
    recs = {r.params["preset"]: r for r in _ok(p, "precision", "gpu", case="sweep", impl="jax")
            if r.params["n"] == max((x.params["n"] for x in _ok(p, "precision", "gpu", case="sweep")), default=0)}
    if "bf16" not in recs or "fp32" not in recs:
        return _not_run("GPU precision")
    s = recs["fp32"].metrics["time_s_median"] / recs["bf16"].metrics["time_s_median"]
    return _grade(s, 5, 2, f"bf16 Tensor Core matmul {s:.1f}x fp32 (HIGHEST) at n={recs['bf16'].params['n']}")


def _c13(p):
    backends = sorted({r.backend for _, r in p if r.experiment == "precision"}, key=lambda b: b != "gpu")
    if not backends:
        return _not_run("precision")
    b = backends[0]
    sweep = _ok(p, "precision", b, case="sweep", impl="jax")
    n = max(r.params["n"] for r in sweep)
    at = {r.params["preset"]: r.metrics for r in sweep if r.params["n"] == n}
    faster = [k for k in ("bf16", "fp16", "int8") if k in at and at[k].get("speedup", 0) > 1.1]
    small_err = all(at[k]["rel_error"] < 2e-2 for k in ("bf16", "fp16", "int8") if k in at)
    ev = (f"{b} n={n}: " + ", ".join(f"{k} {at[k].get('speedup', float('nan')):.1f}x, error {at[k]['rel_error']:.0e}"
                                      for k in ("bf16", "fp16", "int8") if k in at))
    if len(faster) == 3 and small_err:
        return Verdict("supported", ev)
    return Verdict("supported with caveats" if faster and small_err else "contradicted",
                   ev + (f"; not faster: {', '.join(k for k in ('bf16', 'fp16', 'int8') if k not in faster)}"
                         if len(faster) < 3 else ""))


def _c14(p):
    acc = {(r.params["dtype"], r.params["accumulator"]): r.metrics["rel_error"]
           for r in _ok(p, "precision", case="accumulate")}
    if not acc:
        return _not_run("number-format")
    loss = acc.get(("bfloat16", "bfloat16"), 0.0)
    ev = (f"a bf16 accumulator lost {loss:.0%} of a sum that fp32 kept to "
          f"{acc.get(('float32', 'float32'), float('nan')):.0e}; bf16 into fp32: "
          f"{acc.get(('bfloat16', 'float32'), float('nan')):.0e}")
    return Verdict("supported" if loss > 0.1 else "supported with caveats", ev)


def _c15(p):
    recs = _ok(p, "compiler")
    if not recs:
        return _not_run("compiler")
    chain = next((r for r in recs if r.params["program"] == "gelu_chain"), recs[0])
    libs = sum(r.metrics["library_calls"] for r in recs)
    ev = (f"jit {chain.metrics['speedup']:.1f}x op-by-op on {chain.backend}; {int(chain.metrics['fusions_after'])} "
          f"fusion(s); {int(libs)} library call(s) in the optimized HLO")
    gpu = [r for r in recs if r.backend == "gpu"]
    if gpu:
        return Verdict("supported" if sum(r.metrics["library_calls"] for r in gpu) else "supported with caveats", ev)
    return Verdict("supported with caveats", ev + "; cuBLAS/cuDNN " + GPU_HINT)


def _c16(p):
    # decided on each backend run: the weakest grade stands, every backend's figures shown
    by_backend = {}
    for r in _ok(p, "inference", case="train_vs_infer"):
        by_backend.setdefault(r.backend, r)
    if not by_backend:
        return _not_run("inference")
    verdicts = []
    for b in sorted(by_backend, key=lambda b: b != "gpu"):
        m = by_backend[b].metrics
        ev = (f"{b}: train/inference {m['time_ratio']:.1f}x time, {m.get('flops_ratio', float('nan')):.1f}x FLOPs, "
              f"{m['memory_ratio']:.1f}x memory")
        verdicts.append(_grade(min(m["time_ratio"], m.get("flops_ratio", 0)), 2, 1.2, ev))
    worst = max(verdicts, key=lambda v: VERDICTS.index(v.verdict))
    return Verdict(worst.verdict, "; ".join(v.evidence for v in verdicts))


def _c17(p):
    # an "unsupported" agreement case (one device: nothing to split) is no evidence either way
    agree = [r for _, r in p if r.experiment == "data_parallel" and r.params.get("case") == "agreement"
             and r.status in ("ok", "failed")]
    if not agree:
        return _not_run("data_parallel")
    bad = [r for r in agree if r.status != "ok"]
    dist = [r for _, r in p if r.experiment == "distributed" and r.status in ("ok", "failed")]
    parts = [f"{len(agree) - len(bad)}/{len(agree)} data-parallel runs (pmap, jit + sharding, shard_map) match one "
             f"device to {max((r.metrics['rel_error'] for r in agree if r.status == 'ok'), default=float('nan')):.0e}"]
    if dist:
        d = dist[0]
        parts.append(f"{d.params['processes']} processes (jax.distributed) " + (
            f"match one process to {d.metrics['rel_error']:.0e}" if d.status == "ok" else f"{d.status}: {d.reason}"))
    strong = [r for r in _ok(p, "data_parallel", case="strong", variant="jit_sharding") if r.params["devices"] > 1]
    if bad or any(r.status != "ok" for r in dist):
        return Verdict("contradicted", "; ".join(parts))
    gpu = [r for r in strong if r.backend == "gpu"]
    if gpu:
        top = max(gpu, key=lambda r: r.params["devices"])
        parts.append(f"strong scaling on {top.params['devices']} GPUs: {top.metrics['speedup']:.2f}x "
                     f"({top.metrics['efficiency']:.0%} efficiency)")
        return _grade(top.metrics["efficiency"], 0.7, 0.3, "; ".join(parts))
    if strong:
        top = max(strong, key=lambda r: r.params["devices"])
        parts.append(f"{top.params['devices']} CPU host devices sharing the same cores "
                     f"ran at {top.metrics['speedup']:.2f}x one device: working together is shown, speed-up needs "
                     "several real GPUs")
    return Verdict("supported with caveats", "; ".join(parts))


def _c18(p):
    gpu_runs = {id(r): r for r, x in p if x.backend == "gpu"}
    if not gpu_runs:
        return _not_run("GPU")
    run = next(iter(gpu_runs.values()))
    env = run.env
    return Verdict("supported with caveats", f"{env.get('device_kind')} with driver {env.get('driver_version', '?')}, "
                                             f"jax {env.get('jax')}, plugins {env.get('jax_plugins')}")


# ---------------------------------------------------------------- compile-time evidence (--compile-for)


def _target(p: Pairs) -> str:
    return f"{p[0][0].env.get('device_kind', 'the GPU')}, compiled, not run"


def _with(v: Verdict, extra: str) -> Verdict:
    return dataclasses.replace(v, evidence=f"{v.evidence}; {extra}")


def _c10_compiled(p: Pairs, v: Verdict) -> Verdict:
    plans = [r for r in _ok(p, "memory_fit", case="plan") if "prediction_error" in r.metrics]
    if not plans:
        return v
    within = sum(abs(r.metrics["prediction_error"]) <= 0.15 for r in plans)
    nowhere = [r for r in plans if not any(r.metrics.get(k) for k in r.metrics if k.startswith("fits_"))]
    extra = (f"against XLA:GPU's own plans ({_target(p)}) the estimator held within 15% on {within}/{len(plans)}"
             + (f", and {len(nowhere)} step(s) of {max(r.metrics['bytes_compiled'] for r in nowhere) / 1e9:.0f} GB "
                "fit no GPU listed" if nowhere else ""))
    if v.verdict == "supported" and within < len(plans):
        # the claim holds; the estimator's byte counts, read off XLA:CPU, do not carry over
        return Verdict("supported with caveats", f"{v.evidence}; {extra}", "compiled")
    return _with(v, extra)


def _c11_compiled(p: Pairs, v: Verdict) -> Verdict:
    by_m = {r.params["model"]: r.metrics["bytes_compiled"] for r in _ok(p, "tensor_parallel", case="plan", data=1)}
    if 1 not in by_m or len(by_m) < 2:
        return v
    m = max(by_m)
    share = by_m[m] / by_m[1]
    extra = f"XLA:GPU plans {share:.0%} of the one-GPU step per device on {m} GPUs ({_target(p)})"
    if v.verdict == "not run":  # memory only: a compiled plan cannot check the outputs
        return Verdict("supported with caveats" if share < 0.75 else "contradicted",
                       extra + "; outputs not checked (nothing ran)", "compiled")
    return _with(v, extra)


def _c12_compiled(p: Pairs, v: Verdict) -> Verdict:
    plans = _ok(p, "precision", case="plan")
    if not plans:
        return v
    n = max(r.params["n"] for r in plans)
    kept = [r.params["preset"] for r in plans if r.params["n"] == n and not r.metrics.get("upcast_bits")
            and r.params["preset"] in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8")]
    wide = [r.params["preset"] for r in plans if r.params["n"] == n and r.metrics.get("upcast_bits")]
    return _with(v, f"XLA:GPU gives {', '.join(kept) or 'no low-precision preset'} Tensor Core GEMMs in their own "
                    f"format" + (f", widens {', '.join(wide)}" if wide else "") + f" ({_target(p)})")


def _c15_compiled(p: Pairs, v: Verdict) -> Verdict:
    plans = _ok(p, "compiler") + _ok(p, "op_mix", case="plan") + _ok(p, "precision", case="plan")
    libs = sum(m for r in plans for k, m in r.metrics.items()
               if k.startswith("calls_cu"))  # cuBLAS, cuBLASLt, cuDNN, cuSOLVER
    if not plans:
        return v
    extra = f"{int(libs)} NVIDIA library call(s) in the GPU programs ({_target(p)})"
    if v.verdict == "supported with caveats" and libs and "jit" in v.evidence:
        # jit measured on the CPU; the vendor libraries from XLA:GPU's plan
        return Verdict("supported", v.evidence.split("; cuBLAS/cuDNN")[0] + "; " + extra, "compiled")
    return _with(v, extra)


def _c17_compiled(p: Pairs, v: Verdict) -> Verdict:
    plans = [r for r in _ok(p, "data_parallel", case="plan", variant="jit_sharding") if r.params["devices"] > 1]
    if not plans:
        return v
    r = max(plans, key=lambda r: r.params["devices"])
    return _with(v, f"on {r.params['devices']} GPUs XLA:GPU inserts {int(r.metrics.get('all_reduce_count', 0))} "
                    f"all-reduce(s) of {r.metrics.get('all_reduce_bytes', 0) / 1e6:.1f} MB for "
                    f"{r.metrics['gradient_bytes'] / 1e6:.1f} MB of gradients ({_target(p)})")


CLAIMS: tuple[Claim, ...] = (
    Claim("C01", "A CPU has a few powerful cores; a GPU thousands of simple ones.", ("devices",),
          "supported if the GPU has >= 100x the CPU's parallel fp32 lanes (caveats >= 10x)", _c01),
    Claim("C02", "Deep learning is mostly multiply-adds, mostly matrix multiplication.", ("op_mix",),
          "supported if matmul is >= 90% of FLOPs and >= 50% of time of the widest MLP step", _c02),
    Claim("C03", "[[1,2],[3,4]] x [[5,6],[7,8]]: the top-left entry is 1*5 + 2*7 = 19.", ("matmul",),
          "supported if the product is exact on every backend and dtype tried", _c03),
    Claim("C04", "Every output entry is independent, so the work parallelises.", ("threads",),
          "supported if matmul speed-up on N cores >= 0.7 N (caveats >= 0.3 N)", _c04),
    Claim("C05", "One hard problem: the fast single worker wins; a million easy ones: the crowd.", ("serial_parallel",),
          "supported if the CPU wins the smallest N and the serial recurrence and the GPU the largest N", _c05),
    Claim("C06", "A CPU computes mostly serially, a GPU in parallel, so far faster.", ("serial_parallel", "matmul"),
          "supported if the GPU is >= 10x the CPU at the largest vectorised N (caveats >= 2x)", _c06),
    Claim("C07", "GPUs turn days of training into hours.", ("training",),
          "supported if GPU time to 95% accuracy is >= 10x shorter (caveats >= 2x)", _c07),
    Claim("C08", "VRAM is the GPU's desk: data being worked on must sit there.", ("transfer",),
          "supported if an on-device copy is >= 5x faster than host->device (caveats >= 1.5x)", _c08),
    Claim("C09", "Bandwidth keeps the cores fed, so cores never wait.", ("bandwidth", "roofline"),
          "contradicted if a memory-bound op runs below 10% of measured peak compute", _c09),
    Claim("C10", "A model must fit in VRAM; training needs much more than the weights.", ("memory_fit",),
          "supported if training a 7B model needs > 2x its serving memory and the estimator holds within 15% of XLA",
          _c10, _c10_compiled),
    Claim("C11", "Models too large for one GPU are split across several.", ("tensor_parallel",),
          "supported if per-device memory falls with device count and outputs are unchanged", _c11, _c11_compiled),
    Claim("C12", "Tensor Cores do whole tiles at once, much faster than ordinary cores.", ("precision",),
          "supported if GPU bf16 matmul is >= 5x fp32 (HIGHEST) (caveats >= 2x)", _c12, _c12_compiled),
    Claim("C13", "Lower precision is faster and smaller at a small cost in accuracy.", ("precision", "training"),
          "supported if bf16, fp16 and int8 are each > 1.1x fp32 with error < 2e-2 (caveats: some are)", _c13),
    Claim("C14", "Numbers can be stored with fewer digits; fewer digits cost less.", ("precision",),
          "supported if the bf16 accumulator visibly loses a sum fp32 keeps (> 10% error)", _c14),
    Claim("C15", "CUDA and libraries like cuDNN make the hardware usable.", ("compiler",),
          "supported if jit beats op-by-op and the GPU program calls vendor libraries (caveats: CPU only)", _c15, _c15_compiled),
    Claim("C16", "Training and inference both run on GPUs; training is the heavier job.", ("inference", "training"),
          "supported if a train step costs >= 2x an inference step in time and FLOPs (caveats >= 1.2x)", _c16),
    Claim("C17", "Several GPUs work together on one job.", ("data_parallel", "collectives", "distributed"),
          "supported if data-parallel training matches one device and scales", _c17, _c17_compiled),
    Claim("C18", "NVIDIA GPUs power AI through hardware plus software.", ("devices", "compiler"),
          "shown with caveats from the environment of a GPU run next to its measured advantage", _c18),
)


def for_experiment(name: str) -> tuple[str, ...]:
    """The IDs of the claims an experiment tests, in claim order."""
    return tuple(c.id for c in CLAIMS if name in c.experiments)


def ledger(pairs: Pairs) -> list[tuple[Claim, Verdict]]:
    """Every claim with the verdict its rule gives on these records (compiled ones through the hook)."""
    measured = [(r, x) for r, x in pairs if not x.compiled]
    compiled = [(r, x) for r, x in pairs if x.compiled]
    out = []
    for c in CLAIMS:
        try:
            v = c.rule(measured)
            if compiled and c.compiled:
                v = c.compiled(compiled, v)
        except (KeyError, ValueError, ZeroDivisionError, IndexError) as err:
            v = Verdict("not run", f"records incomplete for the rule ({type(err).__name__}: {err})")
        out.append((c, v))
    return out
