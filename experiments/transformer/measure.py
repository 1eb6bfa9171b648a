"""transformer, measured and compiled: the library's decoder (jaxgpu.kernels.transformer) trained and served here, and
planned for N GPUs by XLA:GPU (jaxgpu.plan_model)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import decoders, launches, timing
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import planner, sharded

CARDS_GB = (24, 40, 80, 141)  # the memory sizes a fit is asked of (L4 / RTX 4090, A100 40GB, H100 / A100 80GB, H200)


def measured(name: str, mode: str, cfg, ctx) -> dict[str, float]:
    c = decoders.MODELS[name]
    key = jax.random.key(ctx.seed)
    # one program each for the initialiser and the checks' loss and forward pass: run op by op, each would
    # compile a program per op and shape (seconds of a quick run)
    params = jax.device_put(jax.jit(tf.init, static_argnums=(0, 2))(c, key), ctx.device)
    b, t = cfg.measure_batch, cfg.measure_seq
    tokens = jax.device_put(jax.random.randint(jax.random.key(ctx.seed + 1), (b, t + 1), 0, c.vocab), ctx.device)
    compute = jnp.float32 if ctx.platform == "cpu" else jnp.bfloat16  # a CPU has no faster bf16 product to use
    if mode == "train":
        step, opt = tf.train_step(c, compute=compute)
        fn = jax.jit(lambda s, x: (lambda p, o, lv: ((p, o), lv))(*step(*s, x)), donate_argnums=(0,))
        state = (params, jax.device_put(opt.init(params), ctx.device))
        compiled, compile_s = timing.compile_timed(fn, state, tokens)
        flops_xla, bytes_xla = timing.cost_analysis(compiled)
        before = float(jax.jit(tf.loss, static_argnums=(0, 3, 4))(c, params, tokens, compute))
        state, after = compiled(state, tokens)  # checked before timing: a finite loss that one step lowered
        state, after = compiled(state, tokens)
        if not np.isfinite(float(after)) or not float(after) < before:
            raise ArithmeticError(f"train step: loss {before:.4f} -> {float(after):.4f} on the same batch")
        t_, _ = timing.time_stateful(compiled, state, tokens, target_s=cfg.target_s, min_iters=3)
        n_tokens, model_flops = b * t, 6.0 * c.params() * b * t
    else:
        dstep = tf.decode_step(c, compute=compute)
        _, cache_specs, _, _ = tf.decode_specs(c, b, t, dtype=jnp.float32)
        cache = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), cache_specs)
        _check_decode(c, dstep, params, cache, tokens, compute)
        fn = jax.jit(lambda cache, p, tok, i: (lambda lg, cc: (cc, lg))(*dstep(p, cache, tok, i)),
                     donate_argnums=(0,))
        cache = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype), ctx.device), cache_specs)
        token, index = tokens[:, :1], jnp.int32(t // 2)
        compiled, compile_s = timing.compile_timed(fn, cache, params, token, index)
        flops_xla, bytes_xla = timing.cost_analysis(compiled)
        t_, _ = timing.time_stateful(compiled, cache, params, token, index, target_s=cfg.target_s, min_iters=3)
        n_tokens, model_flops = b, 2.0 * c.params() * b
    out = t_.metrics(tokens_per_s=t_.per_s(n_tokens), gflops=t_.per_s(model_flops, 1e9), params=float(c.params()),
                     bytes_measured=float(timing.memory_bytes(compiled)))
    out["compile_s"] = compile_s
    # XLA's cost analysis counts a loop's body once, and the layers run in a scan: the counts a prediction
    # prices are the compiled program's kernels, each times the trip count of the loop around it
    ks = launches.kernels(compiled.as_text())
    if ks:
        out.update(flops_xla=float(sum(k.flops * k.count for k in ks)), bytes_xla=float(sum(k.bytes * k.count
                                                                                              for k in ks)))
    elif flops_xla and bytes_xla:
        out.update(flops_xla=flops_xla, bytes_xla=bytes_xla)
    peak = ctx.hardware.peak_flops("fp32" if compute == jnp.float32 else "bf16") if ctx.hardware else None
    if peak:
        out["mfu"] = out["gflops"] * 1e9 / peak
    return out


def _check_decode(c, dstep, params, cache, tokens, compute) -> None:
    """Decoding a prefix token by token into an empty cache gives the forward pass's last logits."""
    n = 8
    logits = None
    for i in range(n):
        logits, cache = dstep(params, cache, tokens[:, i:i + 1], jnp.int32(i))
    ref = jax.jit(tf.forward, static_argnums=(0, 3, 4))(c, params, tokens[:, :n], compute)[:, -1]
    err = float(jnp.linalg.norm(logits[:, -1] - ref) / jnp.linalg.norm(ref))
    if not err < 1e-3:
        raise ArithmeticError(f"decode step: logits after {n} tokens differ from the forward pass by {err:.1e}")


def plan(name: str, mode: str, n: int, cfg, ctx) -> dict[str, float]:
    c = decoders.MODELS[name]
    seq = min(2048, c.max_seq)
    batch = cfg.train_batch if mode.startswith("train") else cfg.serve_batch
    p = planner.plan_model(name, ctx.hardware.name, mode=mode, batch=batch, seq=seq, devices=n)
    st = planner.default_settings(mode)  # what plan_model ran the step with, for the report to say
    out = {"bytes_compiled": p.bytes_per_device, "bytes_predicted": p.estimate_bytes,
           "prediction_error": p.estimate_bytes / p.bytes_per_device - 1, "params": float(c.params()),
           "batch": float(batch), "seq": float(seq), "predicted_step_s": p.seconds, "predicted_lower_s": p.lower_s,
           "predicted_upper_s": p.upper_s, "predicted_comm_s": p.comm_s, "predicted_tokens_per_s": p.tokens_per_s,
           "predicted_mfu": p.mfu, "gpu_plan": float(p.plan.startswith("xla:gpu")),
           "dot_flop_share": p.matmul_flop_share, "predicted_dot_time_share": p.matmul_time_share,
           # 1 where tensor parallelism can cut the attention by heads over n devices; else XLA keeps it whole
           "heads_split": float(c.heads % n == 0 and c.kv_heads % n == 0),
           "remat": float(st.remat != "none"), "flash": float(st.flash), "scanned": float(st.scan),
           "fp8": float(st.matmul == "fp8"),
           # where one layer's scores were a twentieth of the plan: bytes_compiled is of the step's twin whose attention
           # runs this many queries at a time (what a fused kernel holds nearer); 0: of the step as written
           "query_block": float(p.query_block)}
    out.update({f"fits_{gb}gb": float(p.bytes_per_device <= sharded.USABLE_FRACTION * gb * 1e9) for gb in CARDS_GB})
    # XLA's memory split and the predicted time by kind of kernel: the step figure of the report's section
    out.update({f"memory_{part}_bytes": v for part, v in p.memory_split.items()})
    out.update({f"time_{kind.replace(' ', '_')}_s": v for kind, v in p.time_split.items()})
    for op, (count, nbytes) in p.collectives.items():
        out[f"{op.replace('-', '_')}_count"], out[f"{op.replace('-', '_')}_bytes"] = float(count), float(nbytes)
    return out
