"""drift, measured: three small programs compiled once per process and timed again at each moment, each
output checked against numpy before its time is kept."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import timing

from experiments.contract import RunContext
from experiments.drift import Config

_SCALE = 3.0


@functools.cache
def _program(program: str, n: int, m: int, seed: int, device) -> tuple:
    """(compiled, args, expected output as float64, rtol): inputs are arguments, so XLA folds nothing."""
    rng = np.random.default_rng(seed)
    if program == "matmul":
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        fn = jax.jit(lambda a, b: jnp.matmul(a, b, precision="highest"))
        args = tuple(jax.device_put(x, device) for x in (a, b))
        want, rtol = a.astype(np.float64) @ b.astype(np.float64), 1e-4
    elif program == "triad":
        x, y = (rng.standard_normal(m, dtype=np.float32) for _ in range(2))
        fn = jax.jit(lambda s, x, y: x + s * y)
        args = (jax.device_put(np.float32(_SCALE), device), *(jax.device_put(v, device) for v in (x, y)))
        want, rtol = x.astype(np.float64) + _SCALE * y.astype(np.float64), 1e-6
    else:
        fn = jax.jit(lambda x: x + 1.0)
        args = (jax.device_put(np.float32(rng.standard_normal()), device),)
        want, rtol = np.float64(args[0]) + 1.0, 1e-6
    return fn.lower(*args).compile(), args, want, rtol


def probe(program: str, cfg: Config, ctx: RunContext) -> dict[str, float]:
    compiled, args, want, rtol = _program(program, cfg.matmul_n, cfg.triad_n, ctx.seed, ctx.device)
    got = np.asarray(compiled(*args), np.float64)
    if not np.allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max(initial=1.0))):
        raise ArithmeticError(f"drift {program}: wrong result; timing discarded")
    return timing.time_compiled(compiled, [args], target_s=cfg.target_s).metrics()
