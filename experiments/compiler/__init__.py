"""compiler: what XLA does under JAX: op-by-op vs jit, compile vs run, fusion, library calls."""

from __future__ import annotations

import dataclasses
import functools

from experiments.contract import Case, Cost, Deferred, Experiment, RunContext

_measure = Deferred(f"{__name__}.measure")


# the ops of _measure.gelu_chain, each dispatched alone op by op
N_CHAIN_OPS = 9


@dataclasses.dataclass(frozen=True)
class Config:
    chain_n: int = 1 << 20
    layer: tuple[int, int, int] = (512, 1024, 1024)  # batch, in, out
    target_s: float = 0.2


PROFILES = {
    ("tiny", "any"): Config(chain_n=1 << 10, layer=(8, 16, 16), target_s=0.01),
    ("quick", "cpu"): Config(),
    ("full", "cpu"): Config(),
    ("quick", "gpu"): Config(chain_n=1 << 24, layer=(4096, 4096, 4096), target_s=0.1),
    ("full", "gpu"): Config(chain_n=1 << 24, layer=(4096, 4096, 4096)),
}

# The eager and jitted results are each checked against numpy float64: at XLA's DEFAULT
# precision an fp32 matmul runs as TF32 on Ampere/Hopper (about 1e-3 relative error at
# k=4096), and two TF32 GEMMs need not agree with each other bit for bit.
TOLERANCE = {"gelu_chain": 1e-5, "mlp_layer": 5e-3}


def cases(cfg: Config, ctx: RunContext) -> list[Case]:
    b, i, o = cfg.layer
    work = {"gelu_chain": Cost(compiles=1, dispatches=N_CHAIN_OPS, bytes=8.0 * N_CHAIN_OPS * cfg.chain_n,
                               target_s=2 * cfg.target_s, rng_bytes=4.0 * cfg.chain_n, host_bytes=16.0 * cfg.chain_n),
            "mlp_layer": Cost(compiles=3, gemm_compiles=1, dispatches=4, flops=2.0 * b * i * o,
                              bytes=4.0 * (b * i + i * o + 2 * b * o),
                              target_s=2 * cfg.target_s, rng_bytes=4.0 * (b * i + i * o),
                              host_flops=2.0 * min(b, 512) * i * o,
                              host_bytes=8.0 * b * o)}
    return [Case({"program": name}, functools.partial(_measure.program, name, cfg, ctx), work[name])
            for name in ("gelu_chain", "mlp_layer")]


def compiled_cases(cfg: Config, ctx: RunContext) -> list[Case]:
    return [Case({"program": name}, functools.partial(_measure.plan, name, cfg, ctx),
                 Cost(compiles=1, gemm_compiles=int(name == "mlp_layer"), min_iters=0, warmup=0, calls=0))
            for name in ("gelu_chain", "mlp_layer")]


EXPERIMENT = Experiment(
    name="compiler", gpu_part=1, benchmark_version=2,  # 2: the layer's float64 reference on one BLAS thread
    config=Config, profiles=PROFILES, cases=cases, compiled_cases=compiled_cases,
    info=_measure.info, attachments=_measure.attachments,
    # each hook compiles both programs (the library calls, then the lowering chain): a kernel and a GEMM, twice
    info_cost=Cost(compiles=2, gemm_compiles=2, min_iters=0, warmup=0, calls=0),
    description="op-by-op vs jit, compile vs run and amortisation, fusion counts and bytes, library calls, "
                "lowering chain")
