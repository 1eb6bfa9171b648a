"""memory_fit, measured: the estimator against XLA's memory analysis of each train step, the device's own
peak where it can be read, what does not fit, and XLA:GPU's plan of the same steps (--compile-for)."""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import optax

from jaxgpu.ground import devices, timing
from jaxgpu.ground.decoders import Decoder
from jaxgpu.kernels import mlp
from jaxgpu.pricing import fit
from jaxgpu.records.results import DoesNotFit

from experiments.contract import RunContext
from experiments.memory_fit import Config


def validate(widths, batch, preset, cfg: Config, ctx: RunContext) -> dict[str, float]:
    est = fit.mlp_train(cfg.input_dim, widths, 10, batch, "adamw", preset)
    available = devices.device_memory_bytes(ctx.device)
    if available and est.total > available:
        raise DoesNotFit(f"predicted {est.total / 1e9:.1f} GB, {available / 1e9:.1f} GB available")
    model = mlp.MLP(widths=widths, n_out=10)
    opt = optax.adamw(1e-3)
    in_use_before = _stats(ctx.device).get("bytes_in_use", 0)

    def init():
        return mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim)

    # XLA's memory analysis needs the step's shapes, not its values: the state is made only where the step runs
    # (a GPU's own peak), and an initialiser run op by op would compile a program per layer shape
    where = jax.sharding.SingleDeviceSharding(ctx.device)
    specs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=where), jax.eval_shape(init))
    step = mlp.make_train_step(model, opt, preset)
    x = jax.device_put(jnp.ones((batch, cfg.input_dim), jnp.float32), ctx.device)
    y = jax.device_put(jnp.zeros((batch,), jnp.int32), ctx.device)
    compiled = step.lower(specs, x, y).compile()
    measured = timing.memory_bytes(compiled)
    out = {"bytes_predicted": float(est.total), "bytes_measured": float(measured),
           "prediction_error": est.total / measured - 1, "params": float(est.params / 4),
           "temp_bytes_measured": float(compiled.memory_analysis().temp_size_in_bytes),
           "activation_phase_bytes": float(est.activations),
           "gradient_phase_bytes": float(est.gradients),
           **{f"lowering_{k}": float(v) for k, v in dataclasses.asdict(fit.LOWERINGS[preset]).items()}}
    if ctx.platform == "gpu":
        state = jax.device_put(init(), ctx.device)
        peak = device_peak_bytes(ctx.device, lambda: jax.block_until_ready(step(state, x, y)), in_use_before)
        if peak is not None:
            out["peak_bytes"] = float(peak)
    return out


def _stats(device) -> dict:
    try:
        return device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - not every backend has them (CPU: None)
        return {}


def device_peak_bytes(device, run, in_use_before: int) -> int | None:
    """The device memory ``run()`` took at its peak, above ``in_use_before`` (bytes in use before
    its inputs were made), from the allocator's statistics; None where they cannot tell.

    The allocator keeps one high-water mark for the whole process, and JAX offers no way to
    reset it: a step whose peak stays below an earlier one (a large matmul before it) leaves
    the mark where it was, and that mark says nothing about the step. Only a step that
    raises the mark is measured.
    """
    mark = _stats(device).get("peak_bytes_in_use")
    run()
    after = _stats(device).get("peak_bytes_in_use")
    if mark is None or after is None or after <= mark:
        return None
    return after - in_use_before


def too_big(cfg: Config, ctx: RunContext) -> dict[str, float]:
    est = fit.mlp_train(cfg.input_dim, cfg.too_big, 10, 1024, "adamw", "fp32")
    available = devices.device_memory_bytes(ctx.device) or 0
    if est.total > available:
        raise DoesNotFit(f"predicted {est.total / 1e9:.0f} GB, {available / 1e9:.1f} GB available; not compiled")
    return {"bytes_predicted": float(est.total)}


@contextlib.contextmanager
def stderr_kept(keep: str = "out of memory"):
    """The process's stderr (file descriptor 2, where XLA's C++ logging writes) held in a file inside; yields a list
    that holds, after, the first line of it mentioning ``keep``, which alone is passed on to stderr."""
    import os
    import sys
    import tempfile

    found: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield found
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            lines = held.read().decode(errors="replace").splitlines()
            found += [line.strip() for line in lines if keep in line.lower()][:1]
            if found:
                print(found[0], file=sys.stderr)


def overallocate(ctx: RunContext) -> dict[str, float]:
    available = devices.device_memory_bytes(ctx.device) or 0
    want = int(available * 1.1)
    if ctx.platform == "cpu":
        raise DoesNotFit(f"needs {want / 1e9:.1f} GB, {available / 1e9:.1f} GB of host memory available: "
                         "predicted, not "
                         "attempted on CPU (the OS would kill the process rather than refuse the allocation)")
    try:
        with stderr_kept() as said:  # the allocator prints its whole state (every bin and chunk) as it refuses
            x = jax.device_put(jnp.zeros((want // 4,), jnp.float32), ctx.device)
            x.block_until_ready()
    except Exception as err:  # noqa: BLE001 - the allocator's refusal is the measurement
        # the limit is JAX's allocator pool (75% of the card by default: XLA_PYTHON_CLIENT_MEM_FRACTION), not
        # the card: the refusal says how much past the pool, which a caller can raise
        raise DoesNotFit(f"needs {want / 1e9:.1f} GB, {available / 1e9:.1f} GB in JAX's allocator pool (its "
                         f"bytes_limit, a share of the card's memory): "
                         f"{(str(err).splitlines() or [''])[0][:160]}"
                         + (f" (the allocator: {said[0][:160]})" if said else "")) from None
    del x
    return {"bytes_measured": float(want)}


def table(t: Decoder, preset: str, mode: str) -> dict[str, float]:
    if mode == "train":
        parts = fit.transformer_train(t, preset)
        state = parts["state"]
    else:
        parts = fit.transformer_inference(t, preset)
        state = parts["weights"]
    total = sum(parts.values())
    out = {"params": float(t.formula_params()), "bytes_predicted": float(total), "state_bytes": float(state)}
    for gb in fit.GPU_MEMORY_GB:
        out[f"fits_{gb}gb"] = float(fit.fits(total, gb))
    return out


def plan(widths, batch, preset, cfg: Config, ctx: RunContext) -> dict[str, float]:
    """The estimate against XLA:GPU's own memory plan of the train step, and where that plan fits."""
    from jaxgpu.pricing import targets

    dev = ctx.target_devices(1)[0]
    model, opt = mlp.MLP(widths=widths, n_out=10), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), cfg.input_dim))
    plan = targets.compile_plan(mlp.make_train_step(model, opt, preset), targets.specs_like(state, dev),
                                targets.spec((batch, cfg.input_dim), "float32", dev), targets.spec((batch,), "int32",
                                                                                                   dev))
    est = fit.mlp_train(cfg.input_dim, widths, 10, batch, "adamw", preset).total
    out = {**plan.metrics(), "bytes_predicted": float(est), "prediction_error": est / plan.total_bytes - 1}
    for gb in fit.GPU_MEMORY_GB:
        out[f"fits_{gb}gb"] = float(fit.fits(plan.total_bytes, gb))
    return out
