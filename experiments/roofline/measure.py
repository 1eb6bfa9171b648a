"""roofline, measured: an FMA chain per intensity, an exp/log chain, a pow chain, a matvec and a matmul, each through
jaxgpu.kernels.stream."""

from __future__ import annotations

from jaxgpu.kernels import chains

from experiments.contract import RunContext
from experiments.roofline import Config


def fma(k: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    return chains.bench_fma(k, cfg.n, ctx.device, cfg.target_s).metrics()


def transcendental(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return chains.bench_transcendental(cfg.transcendental_k, cfg.transcendental_n, ctx.device, cfg.target_s).metrics()


def power(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return chains.bench_power(cfg.transcendental_k, cfg.transcendental_n, ctx.device, cfg.target_s).metrics()


def matvec(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return chains.bench_matvec(cfg.matvec_n, ctx.device, cfg.target_s).metrics()


def matmul(cfg: Config, ctx: RunContext) -> dict[str, float]:
    return chains.matmul_point(cfg.matmul_n, ctx.device, cfg.target_s).metrics()
