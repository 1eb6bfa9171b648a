"""transfer, measured: host<->device copies, an on-device copy, and an MLP step fed from the host or resident."""

from __future__ import annotations

import jax
import optax

from jaxgpu.kernels import mlp, stream

from experiments.contract import RunContext
from experiments.transfer import Config


def copy_on_device(nbytes: int, ctx: RunContext, target_s: float) -> dict[str, float]:
    arrs = stream.stream_arrays(nbytes // 4, "float32", jax.sharding.SingleDeviceSharding(ctx.device))
    res = stream.bench_stream("copy", arrs, "jit", target_s=target_s)
    # Same counting as a transfer: bytes of one copy (not STREAM's read + write).
    return res.timing.metrics(gbytes_per_s=res.gbytes_per_s / 2)


def mlp_step(feed: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    t, _ = mlp.step_throughput(mlp.MLP(widths=cfg.widths, n_out=10), optax.adamw(1e-3), cfg.input_dim, cfg.batch,
                               "fp32", ctx.device, cfg.target_s, host_fed=feed == "host_fed")
    return {**t.metrics(), "batch_bytes": float(cfg.batch * (cfg.input_dim * 4 + 4)),
            "samples_per_s": t.per_s(cfg.batch)}


def transfer(direction: str, nbytes: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    return stream.bench_transfer(nbytes, direction, ctx.device, cfg.target_s).metrics()
