"""gpu_model, priced: a published case's program compiled for its GPU and for this CPU, each plan priced."""

from __future__ import annotations

import contextlib

from jaxgpu.ground import precision
from jaxgpu.pricing import published, roofline


def price(case_id: str) -> dict[str, float]:
    case = next(c for c in published.CASES if c.id == case_id)
    out = {"published_s": case.published_s}
    if published.is_step(case):
        return out | _step(case)
    # a whole training step's program compiles in minutes for this CPU (seconds for XLA:GPU): its CPU plan is left
    # out, and the CPU plan's error is the other kinds' alone
    plans = (("", "auto"),) if case.kind == "train" else (("", "auto"), ("cpu_plan_", "cpu"))
    with precision.enable_x64() if published.needs_x64(case) else contextlib.nullcontext():
        fn, args = published.program(case)  # a float64 spec made outside the scope would be float32
        for prefix, plan in plans:
            p = roofline.predict(fn, *args, on=case.gpu, plan=plan)
            t, lo, hi = published.seconds(case, p, roofline.GPU_KERNEL_S, roofline.GPU_LAUNCH_S)
            out.update({f"{prefix}predicted_s": t, f"{prefix}lower_s": lo, f"{prefix}upper_s": hi,
                        f"{prefix}error": published.error(t, case)})
            if plan == "auto":
                # 1: XLA:GPU's plan for the case's GPU was priced; 0: this CPU's plan stood in for it
                out.update(gpu_plan=float(p.plan.startswith("xla:gpu")), launches=float(p.kernels),
                           flops_plan=p.flops, bytes_plan=p.bytes)
    return out


def _step(case: published.Case) -> dict[str, float]:
    """A whole step over GPUs, priced by ``plan_model`` on XLA:GPU's plan (there is no CPU plan of it to compare:
    this CPU has not the devices): its time, bounds, and what the plan says of memory and collectives."""
    m = published.plan_step(case)
    out = {"predicted_s": m.seconds, "lower_s": m.lower_s, "upper_s": m.upper_s,
           "error": published.error(m.seconds, case), "gpu_plan": float(m.plan.startswith("xla:gpu")),
           "fits": float(m.fits), "bytes_per_device": m.bytes_per_device, "comm_s": m.comm_s,
           "overlapped_s": m.overlapped_s, "internode_s": getattr(m, "internode_s", 0.0), "mfu": m.mfu}
    if case.kind == "train":
        out |= published.memory_share(case, m.bytes_per_device)
    if case.peak_gib:  # the run's measured peak a GPU, against XLA's plan of the step
        measured = case.peak_gib * 2**30
        out |= {"measured_bytes": measured, "memory_error": m.bytes_per_device / measured - 1}
    if case.plausible:
        # what the source leaves unstated, priced each plausible way: the spread the choice alone makes
        seconds = [m.seconds, *(published.plan_step(case, alt).seconds for alt in case.plausible)]
        out |= {"plausible_low_s": min(seconds), "plausible_high_s": max(seconds)}
    return out


# ---- the summary's programs ----------------------------------------------------------------------------------
# The report's answer-first table sets this machine's measured figure beside a GPU's; these are the programs
# behind its GPU column, each the same JAX program the study times on the CPU (at the sizes named), priced on
# XLA:GPU's plan for the GPU as the published cases are.


def _headline_program(name: str, size: int):
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpu.ground import data
    from jaxgpu.kernels import matmul, mlp, stream

    S = jax.ShapeDtypeStruct
    if name in ("matmul_fp32", "matmul_bf16"):
        dtype = jnp.float32 if name == "matmul_fp32" else jnp.bfloat16
        return matmul.jax_matmul(name.split("_")[1]), (S((size, size), dtype), S((size, size), dtype)), 2.0 * size**3
    if name == "triad_fp32":
        return jax.jit(stream.stream_kernel("triad")), (S((size,), jnp.float32),) * 3, 12.0 * size
    # the training experiment's steps: its throughput sweep (3 layers, batch 1024, 784 inputs) and its
    # time-to-target students (2 layers, batch 256, on data.teacher's 64 inputs)
    if name == "train_step":
        widths, batch, inputs = (size,) * 3, 1024, 784
    elif name == "to_target_step":
        widths, batch, inputs = (size, size), 256, 64
    else:
        raise ValueError(f"no summary program {name!r}")
    model, opt = mlp.MLP(widths=widths), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), inputs))
    x, y = data.synthetic(8, inputs)  # only the dtypes are read
    args = (state, S((batch, inputs), x.dtype), S((batch,), y.dtype))
    return jax.jit(mlp.train_step_fn(model, opt)), args, float(batch)


def headline(name: str, size: int, gpu: str) -> dict[str, float]:
    """A summary program priced on ``gpu``: seconds per call (a call as the study times it, dispatch
    included) with bounds, the plan priced, and the work one call does (FLOPs, bytes or samples)."""
    fn, args, work = _headline_program(name, size)
    p = roofline.predict(fn, *args, on=gpu)
    return {"predicted_s": p.estimate_s, "lower_s": p.lower_s, "upper_s": p.upper_s, "work": work,
            "gpu_plan": float(p.plan.startswith("xla:gpu")), "launches": float(p.kernels),
            "flops_plan": p.flops, "bytes_plan": p.bytes}
