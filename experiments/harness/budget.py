"""How long a run will take, before it runs: a model of the machine applied to each case's ``Cost``.

``python -m experiments.run --dry-run`` prints this plan without starting JAX, for this
machine's CPU or for a GPU in the hardware table (an H200 unless told otherwise), and a
budgeted run (``--budget-s``) shares its time out by it. Each run also records its own
plan next to the seconds each experiment really took (run.json ``timing``), so the model
is checked against every run, GPU runs included.

The model, per case: compiles x the machine's compile time, then the device calls, each
``max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) + dispatch + loop steps``,
then host work (float64 references, random draws, copies) at the host's rates. The
machine constants below are leads, named with where they come from; where a run shows
them wrong, change them here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from jaxgpu.ground import hardware
from jaxgpu.pricing import roofline

from experiments.contract import Case, Cost


@dataclasses.dataclass(frozen=True)
class Machine:
    """The rates a plan is made with (seconds, FLOP/s and bytes/s are achievable figures, not peaks)."""

    name: str
    platform: str
    hardware: hardware.Hardware | None
    kernel_compile_s: float  # XLA compile of a small program (one op, a fused elementwise loop)
    gemm_compile_s: float  # XLA compile of a program of matrix products (autotuned on a GPU)
    step_compile_s: float  # XLA compile of a whole train step (forward, backward, optimizer)
    dispatch_s: float  # host overhead of one call of a compiled program
    loop_step_s: float  # one iteration of a compiled loop (driven from the host on GPU)
    flop_efficiency: float  # share of the datasheet or estimated peak a large matmul reaches
    elementwise_efficiency: float  # share of the fp32 peak that fused elementwise arithmetic reaches
    bandwidth_gbps: float  # device memory, bytes read + written
    host_gflops: float  # numpy float64 matrix products on the host
    host_gbps: float  # host copies and device<->host transfers
    rng_gbps: float  # numpy random draws (float32 output bytes per second)
    device_rng_gbps: float  # jax.random draws on the device
    experiment_setup_s: float  # an experiment's first case: imports, data, first compiles of shared helpers
    startup_s: float  # Python, JAX and the backend starting
    slowdown: float = 1.0  # every estimate times this: a plan checked against constants that prove too fast

    def case_seconds(self, cost: Cost) -> float:
        """Estimated wall seconds of one case."""
        return self.slowdown * self._case_seconds(cost)

    def setup_seconds(self) -> float:
        """Estimated wall seconds an experiment's first case adds (imports, data, shared compiles)."""
        return self.slowdown * self.experiment_setup_s

    def _case_seconds(self, cost: Cost) -> float:
        if cost.on_host:  # numpy or Python on the host: float64-class rates, host memory
            compute = cost.flops / (self.host_gflops * 1e9)
            memory = cost.bytes / (self.host_gbps * 1e9)
            call = max(compute, memory) + cost.per_call_s
        else:
            peak, eff = None, self.flop_efficiency
            if self.hardware is not None and cost.dtype == "elementwise":
                peak, eff = self.hardware.peak_flops("fp32"), self.elementwise_efficiency
            elif self.hardware is not None:
                peak = self.hardware.peak_flops(cost.dtype) or self.hardware.peak_flops("fp32")
            compute = cost.flops / (peak * eff) if peak and cost.flops else 0.0
            memory = cost.bytes / (self.bandwidth_gbps * 1e9) if cost.bytes else 0.0
            call = max(compute, memory) + self.dispatch_s * cost.dispatches + cost.loop_steps * self.loop_step_s \
                + cost.per_call_s
        # jaxgpu.ground.timing.repeat: until target_s and min_iters are both met, at most max_iters calls
        timed = min(max(cost.target_s, cost.min_iters * call), cost.max_iters * call) \
            if (cost.target_s or cost.min_iters) else 0.0
        compiles = (cost.compiles * self.kernel_compile_s + cost.gemm_compiles * self.gemm_compile_s
                    + cost.step_compiles * self.step_compile_s)
        return (compiles + timed + (cost.warmup + cost.calls) * call + cost.host_flops / (self.host_gflops * 1e9)
                + cost.host_bytes / (self.host_gbps * 1e9) + cost.rng_bytes / (self.rng_gbps * 1e9)
                + cost.device_rng_bytes / (self.device_rng_gbps * 1e9) + cost.fixed_s)


# GPU constants. The GPU's own figures have one home, jaxgpu.pricing.roofline (the shares of its
# datasheet peaks a large bf16 matmul and a device copy reach, the host's cost of a launch and of a
# compiled loop's step, each with its source); the rest are this harness's, set before any GPU ran the
# study, from what others published, and to be checked against the first GPU run's run.json ``timing``:
# - kernel_compile_s: one elementwise program, 0.36 s on an RTX A6000 with jax 0.10.2 (openxla/xla#44517);
# - gemm_compile_s: a GEMM autotuned over Triton tilings: 399 configs for 12 fusions took 3.7 min on 4 host
#   threads on an H100 (openxla/xla#13108), about 4.6 s a fusion on the lent machine's 16 threads; a cold
#   1024^2 matmul compile 2.85 s on an A6000 (openxla/xla#44517); XLA keeps what it tuned for a fusion for
#   the rest of the process, so a shape compiled again costs less: 2 s on average;
# - step_compile_s: a train step autotunes its forward and backward GEMMs (an MLP of 3 layers: 4-6 distinct
#   fusions, some shapes shared, some tuned before in the same process): 6 s, where a larger train step was
#   seen at 22 s (jax-ml/jax#21250);
# - host_gflops: the float64 references run on one BLAS thread (jaxgpu.ground.timing.single_blas_thread), about
#   40 GFLOP/s on a server core, not the 16 cores' 200;
# - startup_s: Python, JAX, the CUDA context, cuBLAS and the 75% preallocation of the card's memory: 20 s.
_GPU = dict(kernel_compile_s=0.3, gemm_compile_s=2.0, step_compile_s=6.0, dispatch_s=roofline.GPU_LAUNCH_S,
            loop_step_s=roofline.GPU_LOOP_STEP_S, flop_efficiency=roofline.COMPUTE_FRACTION,
            elementwise_efficiency=0.5, host_gflops=40.0, host_gbps=8.0, rng_gbps=0.6, device_rng_gbps=50.0,
            experiment_setup_s=3.0, startup_s=20.0)

# CPU constants, fitted case by case to a quick study on a 2-core Intel Xeon (jax 0.10.2):
# a train step's compile with its op-by-op initialisation (0.8 s), an experiment's first case
# (imports, data, shared compiles: 1.5 s); XLA:CPU's fresh output buffers are first-touched
# on every call (page faults), which held the plain-jit triad near 10 GB/s; fused
# elementwise arithmetic reached a fifth of the estimated fp32 peak (reports/cpu-reference).
_CPU = dict(kernel_compile_s=0.05, gemm_compile_s=0.05, step_compile_s=0.8, dispatch_s=15e-6, loop_step_s=5e-9,
            flop_efficiency=0.6,
            elementwise_efficiency=0.2, bandwidth_gbps=10.0, host_gflops=20.0, host_gbps=4.0, rng_gbps=0.4,
            device_rng_gbps=0.3, experiment_setup_s=1.5, startup_s=3.0)


# Compiling for a GPU on this CPU (--compile-for): XLA:GPU down to a cubin took 0.1-2 s per
# program here (jax 0.10.2, the cuda12 plugin); nothing runs.
_COMPILE = dict(_CPU, kernel_compile_s=0.2, gemm_compile_s=0.5, step_compile_s=1.5, experiment_setup_s=1.0)


def machine(platform: str, target: str | None = None) -> Machine:
    """The machine a plan is made for: this CPU, a GPU of the hardware table (default: H200 SXM),
    or ("compile") this CPU compiling for a GPU.

    Raises:
      KeyError: ``target`` names no GPU in the hardware table.
    """
    if platform == "cpu":
        return Machine("this CPU", "cpu", hardware.cpu_estimate(), **_CPU)
    if platform == "compile":
        return Machine("this CPU, compiling for a GPU", "cpu", hardware.cpu_estimate(), **_COMPILE)
    hw = hardware.find_gpu(target or hardware.DEFAULT_GPU)
    return Machine(hw.name, "gpu", hw, bandwidth_gbps=(hw.memory_bw_gbps or 0) * roofline.BANDWIDTH_FRACTION, **_GPU)


def experiment_seconds(cases: Sequence[Case], m: Machine) -> float:
    """Estimated seconds of an experiment's cases, with its first-case set-up where a case does any work."""
    work = sum(m.case_seconds(c.cost) for c in cases)
    return work + (m.setup_seconds() if work else 0.0)


@dataclasses.dataclass(frozen=True)
class ExperimentPlan:
    name: str
    cases: int
    compiles: float
    seconds: float


def plan(experiments: Sequence[tuple[str, Sequence[Case]]], m: Machine) -> list[ExperimentPlan]:
    """Per experiment: cases, compiles and estimated seconds on ``m``."""
    out = []
    for name, cases in experiments:
        out.append(ExperimentPlan(name, len(cases),
                                  sum(c.cost.compiles + c.cost.gemm_compiles + c.cost.step_compiles for c in cases),
                                  experiment_seconds(cases, m)))
    return out


def lines(plans: Sequence[ExperimentPlan], m: Machine, startup: bool = True) -> list[str]:
    """The dry run's output: one line per experiment and a last ``total:`` line."""
    out = [f"{p.name:16s} {p.cases:4d} cases {math.ceil(p.compiles):4d} compiles  estimated {p.seconds:6.1f} s"
           for p in plans]
    total = sum(p.seconds for p in plans) + (m.startup_s if startup else 0.0)
    if startup:
        out.append(f"{'start-up':16s} {'':27s}estimated {m.startup_s:6.1f} s")
    out.append(f"total: {sum(p.cases for p in plans)} cases, estimated {total:.0f} s on {m.name}")
    return out
