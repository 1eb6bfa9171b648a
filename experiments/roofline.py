"""roofline: GFLOP/s vs arithmetic intensity against the roof drawn from this run's own measurements (C09).

Points: an elementwise chain of k fused multiply-adds per element (intensity k/4 FLOP per
byte), a matvec (0.5 FLOP/byte) and an fp32 matmul (n/6 FLOP/byte). The roof is
min(peak compute, bandwidth x intensity), with peak compute = the matmul point and
bandwidth = the best low-intensity point, both measured in the same run; on a GPU the
datasheet roof is drawn too.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxgpu import memory
from jaxgpu import report as rp

from experiments.case import Case, Cost, RunContext

BENCHMARK_VERSION = 1
CLAIMS = ("C09",)
DESCRIPTION = "arithmetic-intensity sweep (FMA chain, matvec, matmul) against the measured and datasheet roofline"


@dataclasses.dataclass(frozen=True)
class Config:
    ks: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)  # FMAs per element: intensity k/4 FLOP/byte
    n: int = 1 << 26  # elements (256 MiB in, 256 MiB out: beyond what a 2-core slice of an L3 holds)
    matvec_n: int = 8192
    matmul_n: int = 2048
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(ks=(1, 16), n=1 << 16, matvec_n=256, matmul_n=128, target_s=0.01),
    ("quick", "cpu"): Config(ks=(1, 4, 16, 64, 256), n=1 << 25),
    # k stops at 1024 (256 FLOP/byte): far past the ridge, and an unrolled chain of 4096 runs for minutes.
    ("full", "cpu"): Config(ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024), n=1 << 27, matvec_n=16384, matmul_n=4096,
                            target_s=0.5),
    # on the GPU too k stops at 1024, 18x the H200's fp32 ridge (14 FLOP/byte by datasheet)
    ("quick", "gpu"): Config(ks=(1, 4, 16, 64, 256, 1024), n=1 << 28, matvec_n=16384, matmul_n=8192, target_s=0.1),
    ("full", "gpu"): Config(ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), n=1 << 28, matvec_n=16384,
                            matmul_n=8192, target_s=0.3),
}


def _fma(k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    return memory.bench_fma(k, cfg.n, ctx.device, cfg.target_s).metrics()


def _matvec(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return memory.bench_matvec(cfg.matvec_n, ctx.device, cfg.target_s).metrics()


def _matmul(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return memory.matmul_point(cfg.matmul_n, ctx.device, cfg.target_s).metrics()


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    n, v, mm = cfg.n, cfg.matvec_n, cfg.matmul_n
    # each FMA case draws its input on the device and copies input and output to the host for the check
    out = [Case({"kind": "fma", "k": k, "n": n}, functools.partial(_fma, k, cfg, ctx),
                Cost(compiles=2 + k // 64, flops=2.0 * k * n, dtype="elementwise", bytes=8.0 * n,
                     target_s=cfg.target_s, min_iters=3, host_bytes=8.0 * n, device_rng_bytes=4.0 * n),
                key=k == min(cfg.ks))
           for k in cfg.ks]
    out.append(Case({"kind": "matvec", "n": v}, functools.partial(_matvec, cfg, ctx),
                    Cost(compiles=0, gemm_compiles=1, flops=2.0 * v * v, bytes=4.0 * v * v, target_s=cfg.target_s, min_iters=3,
                         rng_bytes=4.0 * v * v, host_bytes=4.0 * v * v, host_flops=512.0 * v), key=True))
    out.append(Case({"kind": "matmul", "n": mm}, functools.partial(_matmul, cfg, ctx),
                    Cost(compiles=0, gemm_compiles=1, flops=2.0 * mm**3, bytes=12.0 * mm * mm, target_s=cfg.target_s,
                         host_flops=2.0 * min(mm, 512) * mm * mm, rng_bytes=8.0 * mm * mm, host_bytes=12.0 * mm * mm),
                    key=True))
    return out


def roof(pairs_of_run) -> tuple[float | None, float | None]:
    """(bandwidth GB/s, peak GFLOP/s) measured in one run: best point under 1 FLOP/byte, and the matmul."""
    low = [x.metrics["gbytes_per_s"] for x in pairs_of_run if x.metrics["intensity_flop_per_byte"] <= 1.0]
    mm = [x.metrics["gflops"] for x in pairs_of_run if x.params["kind"] == "matmul"]
    return (max(low) if low else None), (max(mm) if mm else None)


def section(pairs: list[rp.Pair]) -> rp.Section:

    sec = rp.Section("The roofline: when do the cores wait?", "roofline", CLAIMS)
    fig = rp.Figure(figsize=(7.0, 4.4), dpi=100)
    ax = fig.add_subplot()
    notes = []
    for label, (run, recs) in rp.by_run(rp.ok(pairs)).items():
        bw, peak = roof(recs)
        pts = sorted((x.metrics["intensity_flop_per_byte"], x.metrics["gflops"], x.params["kind"]) for x in recs)
        (line,) = ax.plot([p[0] for p in pts if p[2] == "fma"], [p[1] for p in pts if p[2] == "fma"], "-o",
                          markersize=4, label=f"{label} FMA chain")
        for xi, yi, kind in pts:
            if kind != "fma":
                ax.plot([xi], [yi], "s", color=line.get_color(), markersize=6)
                ax.annotate(kind, (xi, yi), fontsize=7, xytext=(4, -8), textcoords="offset points")
        if bw and peak:
            xs = [2.0**e for e in range(-4, 13)]
            ax.plot(xs, [min(peak, bw * x) for x in xs], "--", color=line.get_color(), linewidth=1,
                    label=f"{label} measured roof ({bw:.0f} GB/s, {peak:.0f} GFLOP/s)")
        hw = run.meta.get("hardware") or {}
        dpeak, dbw = (hw.get("tflops") or {}).get("fp32"), hw.get("memory_bw_gbps")
        if dpeak and dbw:
            xs = [2.0**e for e in range(-4, 13)]
            ax.plot(xs, [min(dpeak * 1e3, dbw * x) for x in xs], ":", color="0.4", linewidth=1,
                    label=f"{label} datasheet roof (fp32)")
        notes.append(_takeaway(label, recs, bw, peak, hw))
    rp.finish(fig, ax, xlabel="arithmetic intensity (FLOP per byte of memory traffic)", ylabel="GFLOP/s",
              title="roofline: measured points against the roof", logx=True, logy=True)
    sec.plots.append(rp.Plot("roofline", fig, " ".join(n for n in notes if n)))
    rows = [[run.label, x.params["kind"], x.params.get("k", "-"), rp.fmt(x.metrics["intensity_flop_per_byte"]),
             rp.fmt(x.metrics["gflops"]), rp.fmt(x.metrics["gbytes_per_s"]), rp.fmt(x.metrics["time_s_median"] * 1e3)]
            for run, x in rp.ok(pairs)]
    sec.tables.append(rp.Table(["run", "kind", "k", "FLOP/byte", "GFLOP/s", "GB/s", "median ms"], rows,
                               "Roofline points"))
    return sec


def _takeaway(label, recs, bw, peak, hw) -> str:
    if not (bw and peak):
        return ""
    ridge = peak / bw
    low = [x for x in recs if x.metrics["intensity_flop_per_byte"] <= 1.0]
    worst = min(low, key=lambda x: x.metrics["gflops"] / peak)
    text = (f"On {label} the measured ridge point is {ridge:.1f} FLOP/byte ({peak:.0f} GFLOP/s over {bw:.0f} GB/s). "
            f"A memory-bound op ({worst.params['kind']}, {worst.metrics['intensity_flop_per_byte']:.2g} FLOP/byte) "
            f"ran at {worst.metrics['gflops'] / peak:.1%} of peak compute: there the cores wait on memory")
    dpeak, dbw = (hw.get("tflops") or {}).get("fp32"), hw.get("memory_bw_gbps")
    if dpeak and dbw:
        text += f"; datasheet ridge {dpeak * 1e3 / dbw:.1f} FLOP/byte (fp32), {hw['tflops'].get('bf16', 0) * 1e3 / dbw:.0f} (bf16)"
    return text + "."
