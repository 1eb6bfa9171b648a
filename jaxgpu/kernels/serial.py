"""Serial vs parallel: the same N independent multiply-adds done one at a time or all at once,
and a truly serial recurrence.

y_i = a * x_i + b, four ways: a Python loop over scalars; ``lax.fori_loop`` writing one
element per iteration (serial inside one compiled program); one vectorised array op;
``vmap`` of the scalar function. And x_{t+1} = a * x_t + b, where step t needs step t-1:
``lax.scan`` (serial), ``lax.associative_scan`` (parallel prefix over affine maps, more
total work), and the closed form.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import workload

A, B = 1.0001, 0.5

VARIANTS = workload.SERIAL_VARIANTS
RECURRENCE = workload.RECURRENCES


def inputs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)


def reference(x: np.ndarray) -> np.ndarray:
    return A * x.astype(np.float64) + B


def python_loop(xs: list[float]) -> list[float]:
    return [A * v + B for v in xs]


def _scalar(v):
    return A * v + B


def program(variant: str):
    """A jitted function of x (fp32 array) for a variant other than ``python_loop``."""
    if variant == "vectorized":
        return jax.jit(lambda x: A * x + B)
    if variant == "vmap":
        return jax.jit(jax.vmap(_scalar))
    if variant == "fori_loop":
        def f(x):
            return jax.lax.fori_loop(0, x.shape[0], lambda i, y: y.at[i].set(_scalar(x[i])), jnp.empty_like(x))

        return jax.jit(f)
    raise ValueError(f"unknown variant {variant!r}")


def recurrence(variant: str, n: int):
    """A jitted ``f(x, a, b)``: the n states of x_{t+1} = a x_t + b from x_0 = x[0].

    ``a`` and ``b`` are arguments (0-d arrays), not constants: built from constants, the
    associative scan's inputs and the closed form's powers would be folded into the program at
    compile time, and the timing would leave out the work it claims to measure.
    """
    if variant == "scan":
        def f(x, a, b):
            def step(c, _):
                c = a * c + b
                return c, c

            return jax.lax.scan(step, x[0], None, length=n)[1]
    elif variant == "associative_scan":
        def f(x, a, b):
            # Each step is the affine map c -> a c + b; composing maps is associative.
            ma = jnp.broadcast_to(a, (n,))
            mb = jnp.broadcast_to(b, (n,))

            def compose(left, right):
                return left[0] * right[0], right[0] * left[1] + right[1]

            pa, pb = jax.lax.associative_scan(compose, (ma, mb))
            return pa * x[0] + pb
    elif variant == "closed_form":
        def f(x, a, b):
            t = jnp.arange(1, n + 1, dtype=jnp.float32)
            at = jnp.power(a, t)
            return at * x[0] + b * (1 - at) / (1 - a)
    else:
        raise ValueError(f"unknown recurrence variant {variant!r}")
    return jax.jit(f)


def coefficients(a: float = 0.999, b: float = 0.001) -> tuple:
    """The recurrence's a and b as the 0-d fp32 arrays ``recurrence``'s programs take."""
    return np.float32(a), np.float32(b)


def recurrence_reference(n: int, a: float = 0.999, b: float = 0.001, x0: float = 1.0) -> np.ndarray:
    t = np.arange(1, n + 1, dtype=np.float64)
    return a**t * x0 + b * (1 - a**t) / (1 - a)
