"""The matmul section of the report: figures, tables and takeaways from its records alone.

matmul: fp32 GFLOP/s vs size for JAX and its peers, against the peak; the 2x2 worked example.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Headline, Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Matrix multiplication (fp32)", "matmul", seen.claims)
    sweep = [(r, x) for r, x in labels.ok(pairs, "matmul") if x.params.get("shape") == "square"]
    series, limits, lines = [], [], []
    for label, (run, recs) in labels.by_run(sweep).items():
        impls = sorted({x.params["impl"] for x in recs}, key=lambda i: (i != "jax", i))
        for impl in impls:
            pts = sorted((x.params["n"], x.metrics["gflops"], x.metrics) for x in recs if x.params["impl"] == impl)
            flops = [2.0 * n**3 for n, _, _ in pts]
            series.append(figures.Series(
                f"{label} {impl}", [p[0] for p in pts], [p[1] for p in pts], style=figures.style(run),
                machine=palette.machine(run), variant=impl,
                lo=[f / m.get("time_s_q75", m["time_s_max"]) / 1e9 for f, (_, _, m) in zip(flops, pts)],
                hi=[f / m.get("time_s_q25", m["time_s_min"]) / 1e9 for f, (_, _, m) in zip(flops, pts)]))
        hw = run.hardware
        if hw and hw.peak_gflops("fp32"):
            limits.append(figures.Limit(f"{label} fp32 peak ({hw.kind}) {hw.peak_gflops('fp32'):,.0f} GFLOP/s",
                                   hw.peak_gflops("fp32")))
        lines.append(_peer_takeaway(label, run, recs))
    if series:
        fig = figures.line_plot(series, xlabel="n (square n x n x n)", ylabel="GFLOP/s", limits=limits,
                           title="fp32 matmul throughput (precision=highest); band: interquartile range of repeats")
        sec.plots.append(figures.Plot("matmul_gflops", fig, " ".join(line for line in lines if line)))
    sec.tables.append(_sweep_table(labels.ok(list(seen.measured), "matmul")))
    sec.tables.append(_worked_table(list(seen.measured)))
    for label, (run, _) in labels.by_run(list(seen.measured)).items():
        info = run.meta.get("info", {}).get("matmul")
        if info:
            sec.paragraphs.append(f"Libraries on {label}: " + "; ".join(f"{k}: {v}" for k, v in info.items()) + ".")
    return sec


def _peer_takeaway(label: str, run, recs) -> str:
    jax_pts = {x.params["n"]: x.metrics["gflops"] for x in recs if x.params["impl"] == "jax"}
    if not jax_pts:
        return ""
    peers = {}
    for x in recs:
        if x.params["impl"] != "jax" and x.params["n"] in jax_pts:
            peers.setdefault(x.params["n"], {})[x.params["impl"]] = x.metrics["gflops"]
    n = max(jax_pts)
    text = f"{labels.opener(run, comma=True)} JAX reached {jax_pts[n]:,.0f} GFLOP/s at n={n}"
    hw = run.hardware
    peak = hw.peak_gflops("fp32") if hw else None
    if peak:
        text += f" ({jax_pts[n] / peak:.0%} of the {'estimated' if hw.estimate else 'datasheet'} peak)"
    common = sorted(m for m in peers if peers[m])
    if common:
        m = max(common)
        best = max(peers[m], key=peers[m].get)
        ratio = jax_pts[m] / peers[m][best]
        text += f"; at n={m} JAX ran at {ratio:.0%} of the best peer ({best}, {peers[m][best]:,.0f} GFLOP/s)"
        if len(common) > 1:
            text += " (JAX / best peer by n: " + ", ".join(
                f"{c}: {jax_pts[c] / max(peers[c].values()):.0%}" for c in common if c >= 256) + ")"
        if ratio < 0.9:
            info = run.meta.get("info", {}).get("matmul", {})
            text += (f", more than 10% behind: the kernels differ (JAX's dot ran as {info.get('jax_dot', '?')}, "
                     f"{best} through {info.get(best + '_blas', '?')})")
    if peak and max(jax_pts.values()) > peak:
        text += "; the measured rate exceeds the estimate, so the cores ran above their nominal clock"
    return text + "."


def _sweep_table(pairs) -> figures.Table:
    rows = []
    for run, x in sorted(pairs, key=lambda p: (p[0].label, p[1].params.get("shape", ""), p[1].params.get("m", 0),
                                               p[1].params.get("impl", ""))):
        if "impl" not in x.params:
            continue
        p, m = x.params, x.metrics
        rows.append([run.label, p["impl"], f"{p['m']}x{p['k']}x{p['n']}", labels.fmt(m["time_s_median"] * 1e3),
                     f"{labels.fmt(m['time_s_min'] * 1e3)}-{labels.fmt(m['time_s_max'] * 1e3)}", int(m["n_iters"]),
                     labels.fmt(m["gflops"]), labels.fmt(m.get("peak_fraction")), labels.fmt(m["rel_error"])])
    return figures.Table(["run", "impl", "m x k x n", "median ms", "min-max ms", "iters", "GFLOP/s", "of peak",
                     "rel. error"], rows, "Every timed matmul (fp32, precision=highest); rel. error vs numpy float64")


def _worked_table(pairs) -> figures.Table:
    rows = []
    for run, x in pairs:
        if x.experiment != "matmul" or x.params.get("case") != "worked_example":
            continue
        if x.status == "ok":
            rows.append([run.label, x.params["dtype"], labels.fmt(x.metrics["top_left"]),
                         "exact" if x.metrics["exact"] == 1.0 else f"off by {labels.fmt(x.metrics['max_abs_error'])}"])
        else:
            rows.append([run.label, x.params["dtype"], "-", f"{x.status}: {x.reason}"])
    return figures.Table(["run", "dtype", "top-left (1*5 + 2*7)", "[[19,22],[43,50]]"], rows,
                    "Claim C03: the explainer's worked example on every dtype (low precision accumulates in "
                    "fp32/int32)")


def headline(ask):
    """The summary's first row: a big fp32 matrix multiply here and on the GPU."""
    mm = ask.largest("matmul", lambda p: p.get("n", 0), "matmul_fp32", impl="jax", shape="square")
    n = mm[1].params["n"] if mm else None
    return ask.rate_row("A big matrix multiply (fp32)", mm, "gflops", "FLOP/s", 1e9, "matmul_fp32", "gemm",
                        f"a {n:,}x{n:,} matmul here" if mm else "", n, lambda s: f"{s:,}x{s:,}")


VIEW = View(section, None, headlines=(Headline(1, headline),))
