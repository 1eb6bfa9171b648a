"""The bandwidth section of the report: figures, tables and takeaways from its records alone.

bandwidth: STREAM copy/scale/add/triad as jitted JAX programs, against peers and the HBM datasheet.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxgpu.records import figures, labels, palette

from experiments.contract import Headline, Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Memory bandwidth (STREAM)", "bandwidth", seen.claims)
    good = labels.ok(pairs)
    series, limits, notes = [], [], []
    for label, (run, recs) in labels.by_run(good).items():
        jit = sorted((x.params["n"] * 4, x.metrics["gbytes_per_s"]) for x in recs
                     if x.params["kernel"] == "triad" and x.params["variant"] == "jit"
                     and x.params["dtype"] == "float32")
        if jit:
            series.append(figures.Series(f"{label} JAX triad (jit)", [p[0] for p in jit], [p[1] for p in jit],
                                         style=figures.style(run), machine=palette.machine(run),
                                         variant="JAX triad (jit)"))
        for x in recs:
            if x.params["variant"] != "jit" and x.params["kernel"] == "triad" and x.params["dtype"] == "float32":
                name = x.params["impl"] if x.params["impl"] != "jax" else f"JAX {x.params['variant']}"
                name += f" ({x.params['allocator']} malloc)" if "allocator" in x.params else ""
                series.append(figures.Series(f"{label} {name}", [x.params["n"] * 4], [x.metrics["gbytes_per_s"]],
                                             style="x" if run.predicted else "s", machine=palette.machine(run),
                                             variant=name))
        hw = run.hardware
        if hw and hw.memory_bw_gbps:
            limits.append(figures.Limit(f"{label} HBM datasheet {hw.memory_bw_gbps:,.0f} GB/s", hw.memory_bw_gbps))
        notes.append(_takeaway(label, run, recs))
    if series:
        fig = figures.line_plot(series, xlabel="array size (each of 3 arrays)", ylabel="GB/s (STREAM counting)",
                                xunit="B",
                           title="triad a = b + s*c: bandwidth vs size, JAX variants and peers", limits=limits,
                           logy=len({run.env.get("backend") for run, _ in good}) > 1)  # a GPU's is 100x a CPU's
        sec.plots.append(figures.Plot("bandwidth_triad", fig, " ".join(n for n in notes if n)))
    rows = []
    for run, x in sorted(labels.ok(seen.measured), key=lambda p: (p[0].label, p[1].params["n"], p[1].params["kernel"],
                                                           p[1].params["impl"])):
        m = x.metrics
        variant = x.params["variant"] + (f" ({x.params['allocator']} malloc)" if "allocator" in x.params else "")
        rows.append([run.label, x.params["impl"], variant, x.params["kernel"], x.params["dtype"],
                     labels.fmt(x.params["n"] * np.dtype(x.params["dtype"]).itemsize / 1e6),
                     labels.fmt(m["gbytes_per_s"]),
                     labels.fmt(m.get("peak_fraction")), labels.fmt(m.get("page_faults_per_call"))])
    sec.tables.append(figures.Table(["run", "impl", "variant", "kernel", "dtype", "MB/array", "GB/s", "of HBM peak",
                                "page faults/call"], rows, "Every STREAM measurement"))
    sec.paragraphs += labels.not_ok(list(seen.measured))
    return sec


def _takeaway(label: str, run, recs) -> str:
    triad = [x for x in recs if x.params["kernel"] == "triad" and x.params["dtype"] == "float32"]
    if not triad:
        return ""
    n = max(x.params["n"] for x in triad)
    at = [x for x in triad if x.params["n"] == n]
    jax_recs = [x for x in at if x.params["impl"] == "jax" and x.params["variant"] != "process"]
    peers = [x for x in at if x.params["impl"] != "jax"]
    if not jax_recs:
        return ""
    plain = next((x for x in jax_recs if x.params["variant"] == "jit"), jax_recs[0])
    best = max(jax_recs, key=lambda x: x.metrics["gbytes_per_s"])
    allocator = run.env.get("allocator")
    text = (f"{labels.opener(run)} at {n * 4 / 1e6:.0f} MB per array the plain JAX triad moved "
            f"{plain.metrics['gbytes_per_s']:.1f} GB/s" + (f" (host allocator: {allocator})" if allocator else "")
            + f", the best JAX variant ({best.params['variant']}) {best.metrics['gbytes_per_s']:.1f} GB/s")
    pages = n * 4 / 4096
    if peers:
        peer = max(peers, key=lambda x: x.metrics["gbytes_per_s"])
        ratio = best.metrics["gbytes_per_s"] / peer.metrics["gbytes_per_s"]
        text += f", {ratio:.0%} of the best peer ({peer.params['impl']}, {peer.metrics['gbytes_per_s']:.1f} GB/s)"
        faults = plain.metrics.get("page_faults_per_call", 0)
        if ratio < 0.8 and faults:
            text += (f"; every plain JAX call took {faults:.0f} minor page faults ({faults / pages:.2f} per 4,096-byte "
                     f"page of its output), the peer {peer.metrics.get('page_faults_per_call', 0):.0f}")
    text += _allocators(at, pages)
    hw = run.hardware
    if hw and hw.memory_bw_gbps:
        text += (f"; {best.metrics['gbytes_per_s'] / hw.memory_bw_gbps:.0%} of the {hw.memory_bw_gbps:,.0f} GB/s "
                 "datasheet")
    info = run.meta.get("info", {}).get("bandwidth", {})
    llc = info.get("llc_bytes")
    if llc and n * 4 < 4 * llc:
        text += (f" (arrays are {n * 4 / llc:.1f}x the {llc / 1e6:.0f} MB last-level cache the OS reports, "
                 "capped by this profile; --profile full uses at least 4x)")
    return text + "."


def _allocators(at, pages: float) -> str:
    """The triad in a fresh process under each host allocator: the cause and the cure, as far as they show."""
    by = {x.params.get("allocator"): x.metrics for x in at if x.params["variant"] == "process"}
    if not {"system", "tuned"} <= set(by):
        return ""
    s, t = by["system"], by["tuned"]
    fs, ft = s.get("page_faults_per_call", 0), t.get("page_faults_per_call", 0)
    text = (f". In a fresh process with glibc's malloc as it comes the triad ran {s['gbytes_per_s']:.1f} GB/s with "
            f"{fs:.0f} page faults per call ({fs / pages:.2f} per page of its output); with the tuned settings "
            f"(arenas capped, no mmap, no trimming) {t['gbytes_per_s']:.1f} GB/s with {ft:.0f}")
    speedup = t["gbytes_per_s"] / s["gbytes_per_s"]
    if speedup > 1.5 and fs > 10 * max(ft, 1):
        text += (f": {speedup:.1f}x, so faulting in a freshly mapped output on every call, not DRAM, set the "
                 "plain triad's speed")
    elif speedup < 1.1:
        text += ": the allocator made no difference here"
    return text


def headline(ask):
    """Memory bandwidth: the STREAM triad over arrays past the caches."""
    tr = ask.largest("bandwidth", lambda p: p.get("n", 0), kernel="triad", variant="jit", dtype="float32", impl="jax")
    n = tr[1].params["n"] if tr else None
    row = ask.rate_row("Memory bandwidth (STREAM triad)", tr, "gbytes_per_s", "B/s", 1e9, "triad_fp32", "memory",
                       f"a triad over {n:,} floats here" if tr else "", n, "{:,} floats".format)
    if row is not None and row.basis.startswith("predicted"):  # the model's bandwidth share is an H200's copy
        row = dataclasses.replace(row, source=row.source + "; the model's share of datasheet bandwidth (4.3 of 4.8 "
                                  "TB/s) was set from a copy measured on an H200 (jaxgpu.pricing.roofline."
                                  "BANDWIDTH_FRACTION), so on an H200 this row restates that measurement")
    return row


VIEW = View(section, None, headlines=(Headline(3, headline),))
