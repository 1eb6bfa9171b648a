"""serial_parallel, measured: the multiply-adds each way and the recurrence, each checked against numpy."""

from __future__ import annotations

import jax
import numpy as np

from jaxgpu.ground import timing
from jaxgpu.kernels import serial

from experiments.contract import RunContext
from experiments.serial_parallel import Config


def independent(variant: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    x = serial.inputs(n, ctx.seed)
    ref = serial.reference(x)
    if variant == "python_loop":
        xs = x.tolist()
        got = np.asarray(serial.python_loop(xs))
        t = timing.time_host(serial.python_loop, xs, target_s=cfg.target_s, min_iters=3)
    else:
        xd = jax.device_put(x, ctx.device)
        fn = serial.program(variant)
        got = np.asarray(fn(xd))
        t = timing.time_jitted(fn, xd, target_s=cfg.target_s, min_iters=3)
    if not np.allclose(got, ref, rtol=1e-6, atol=1e-6):
        raise ArithmeticError(f"{variant} n={n}: wrong result; timing discarded")
    return t.metrics(ns_per_element=t.median_s / n * 1e9)


def recurrence(variant: str, n: int, cfg: Config, ctx: RunContext) -> dict[str, float]:
    fn = serial.recurrence(variant, n)
    x, a, b = jax.device_put((np.ones(1, np.float32), *serial.coefficients()), ctx.device)
    got = np.asarray(fn(x, a, b))
    err = float(np.max(np.abs(got - serial.recurrence_reference(n))))
    if not err < 1e-3:
        raise ArithmeticError(f"recurrence {variant} n={n}: off by {err:.1e}; timing discarded")
    t = timing.time_jitted(fn, x, a, b, target_s=cfg.target_s, min_iters=3)
    return t.metrics(ns_per_element=t.median_s / n * 1e9, max_abs_error=err)
