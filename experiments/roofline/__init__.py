"""roofline: GFLOP/s vs arithmetic intensity against the roof drawn from this run's own measurements.

Points: an elementwise chain of k fused multiply-adds per element (intensity k/4 FLOP per
byte), a chain of exp/log steps (ops XLA counts as one FLOP each, which cost a core many: the
rate the prediction model prices them at), a matvec (0.5 FLOP/byte) and an fp32 matmul (n/6 FLOP/byte). The roof is
min(peak compute, bandwidth x intensity), with peak compute = the matmul point and
bandwidth = the best low-intensity point, both measured in the same run; on a GPU the
datasheet roof is drawn too.
"""

from __future__ import annotations

import dataclasses
import functools

from experiments.contract import Case, Cost, Deferred, Experiment, Pricing, RoofParts, RunContext

_measure = Deferred(f"{__name__}.measure")


@dataclasses.dataclass(frozen=True)
class Config:
    ks: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)  # FMAs per element: intensity k/4 FLOP/byte
    n: int = 1 << 26  # elements (256 MiB in, 256 MiB out: beyond what a 2-core slice of an L3 holds)
    matvec_n: int = 8192
    matmul_n: int = 2048
    target_s: float = 0.2
    transcendental_k: int = 16  # softplus steps per element (2 transcendental ops each), and pow steps (1) ...
    transcendental_n: int = 1 << 22  # ... over 16 MiB: compute-bound at any size past the caches


PROFILES = {
    ("tiny", "any"): Config(ks=(1, 16), n=1 << 16, matvec_n=256, matmul_n=128, target_s=0.01, transcendental_k=2,
                            transcendental_n=1 << 12),
    ("quick", "cpu"): Config(ks=(1, 4, 16, 64, 256), n=1 << 25),
    # k stops at 1024 (256 FLOP/byte): far past the ridge, and an unrolled chain of 4096 runs for minutes.
    ("full", "cpu"): Config(ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024), n=1 << 27, matvec_n=16384, matmul_n=4096,
                            target_s=0.5),
    # on the GPU too k stops at 1024, 18x the H200's fp32 ridge (14 FLOP/byte by datasheet)
    ("quick", "gpu"): Config(ks=(1, 4, 16, 64, 256, 1024), n=1 << 28, matvec_n=16384, matmul_n=8192, target_s=0.1),
    ("full", "gpu"): Config(ks=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), n=1 << 28, matvec_n=16384,
                            matmul_n=8192, target_s=0.3),
}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    n, v, mm = cfg.n, cfg.matvec_n, cfg.matmul_n
    # each FMA case draws its input on the device and copies input and output to the host for the check
    out = [Case({"kind": "fma", "k": k, "n": n}, functools.partial(_measure.fma, k, cfg, ctx),
                Cost(compiles=2 + k // 64, flops=2.0 * k * n, dtype="elementwise", bytes=8.0 * n,
                     target_s=cfg.target_s, min_iters=3, host_bytes=8.0 * n, device_rng_bytes=4.0 * n))
           for k in cfg.ks]
    tk, tn = cfg.transcendental_k, cfg.transcendental_n
    # a transcendental op costs a CPU core about 90 elementwise FLOPs' time (1.1 G/s against 89 GFLOP/s here)
    out.append(Case({"kind": "transcendental", "k": tk, "n": tn}, functools.partial(_measure.transcendental, cfg, ctx),
                    Cost(compiles=2, flops=2.0 * tk * tn * 90, dtype="elementwise", bytes=8.0 * tn,
                         target_s=cfg.target_s, min_iters=3, host_bytes=8.0 * tn, device_rng_bytes=4.0 * tn)))
    # a pow, about five exps' time here (0.23 G/s)
    out.append(Case({"kind": "power", "k": tk, "n": tn}, functools.partial(_measure.power, cfg, ctx),
                    Cost(compiles=2, flops=tk * tn * 450.0, dtype="elementwise", bytes=8.0 * tn,
                         target_s=cfg.target_s, min_iters=3, host_bytes=8.0 * tn, device_rng_bytes=4.0 * tn)))
    out.append(Case({"kind": "matvec", "n": v}, functools.partial(_measure.matvec, cfg, ctx),
                    Cost(compiles=0, gemm_compiles=1, flops=2.0 * v * v, bytes=4.0 * v * v, target_s=cfg.target_s,
                         min_iters=3,
                         rng_bytes=4.0 * v * v, host_bytes=4.0 * v * v, host_flops=512.0 * v)))
    out.append(Case({"kind": "matmul", "n": mm}, functools.partial(_measure.matmul, cfg, ctx),
                    Cost(compiles=0, gemm_compiles=1, flops=2.0 * mm**3, bytes=12.0 * mm * mm, target_s=cfg.target_s,
                         host_flops=2.0 * min(mm, 512) * mm * mm, rng_bytes=8.0 * mm * mm, host_bytes=12.0 * mm * mm)))
    return out


def _roofs(recs: list) -> RoofParts:
    """The elementwise roof (the FMA chain), the transcendental and pow rates, and the product's rate by size."""
    def of(kind: str, metric: str, scale: float = 1.0) -> tuple[float, ...]:
        return tuple(r.metrics[metric] * scale for r in recs if r.params.get("kind") == kind and metric in r.metrics)

    products = [r for r in recs if r.params.get("kind") == "matmul" and "gflops" in r.metrics]
    return RoofParts(rates={"fp32": of("matmul", "gflops", 1e9), "elementwise": of("fma", "gflops", 1e9),
                            "transcendental": of("transcendental", "transcendentals_per_s"),
                            "power": of("power", "powers_per_s")},
                     gemm_curve={"fp32": tuple((r.metrics["flops_xla"], r.metrics["gflops"] * 1e9, r.key)
                                               for r in products if "flops_xla" in r.metrics)})


EXPERIMENT = Experiment(
    name="roofline", gpu_part=3, benchmark_version=2,  # 2: the matvec's float64 reference on one BLAS thread
    config=Config, profiles=PROFILES, cases=cases,
    description="arithmetic-intensity sweep (FMA chain, exp/log and pow chains, matvec, matmul) against the measured "
                "and datasheet roofline",
    pricing=Pricing(roof=lambda params: "elementwise" if params.get("kind") == "fma" else "product",
                    kernel_level=True, roofs=_roofs))
