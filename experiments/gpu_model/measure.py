"""gpu_model, priced: a published case's program compiled for its GPU and for this CPU, each plan priced."""

from __future__ import annotations

import contextlib

from jaxgpu import precision, prediction, published


def price(case_id: str) -> dict[str, float]:
    case = next(c for c in published.CASES if c.id == case_id)
    out = {"published_s": case.published_s}
    with precision.enable_x64() if published.needs_x64(case) else contextlib.nullcontext():
        fn, args = published.program(case)  # a float64 spec made outside the scope would be float32
        for prefix, plan in (("", "auto"), ("cpu_plan_", "cpu")):
            p = prediction.predict(fn, *args, on=case.gpu, plan=plan)
            t, lo, hi = published.seconds(case, p, prediction.GPU_KERNEL_S, prediction.GPU_LAUNCH_S)
            out.update({f"{prefix}predicted_s": t, f"{prefix}lower_s": lo, f"{prefix}upper_s": hi,
                        f"{prefix}error": published.error(t, case)})
            if plan == "auto":
                # 1: XLA:GPU's plan for the case's GPU was priced; 0: this CPU's plan stood in for it
                out.update(gpu_plan=float(p.plan.startswith("xla:gpu")), launches=float(p.kernels),
                           flops_plan=p.flops, bytes_plan=p.bytes)
    return out
