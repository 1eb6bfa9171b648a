"""What a program should take on some hardware, priced kernel by kernel from a compiled plan.

``predict(fn, *args, on="H200 SXM")`` compiles ``fn`` for the GPU named (XLA:GPU's own plan, on this CPU,
when the ``gpu-compile`` extra is installed: ``jaxgpu.pricing.targets``; else this machine's XLA:CPU plan, and the
result says so in ``plan``), splits the optimised program into its kernels (each fusion, library call or op,
inside loops as often as they run: ``jaxgpu.ground.launches.kernels``) and prices each on the hardware's roofs:

    a matrix product  max(FLOPs / (roof x wave fill), bytes / bandwidth) + a launch
    anything else     max(FLOPs / elementwise roof (+ exp and log, and pow, at their own rates where the roofs
                      have them: a run's exp/log and pow chains), bytes / bandwidth) + a launch
    the program       one call's dispatch + the kernels x their launches + loop iterations x a loop step
                      (+ on a CPU, the thread pool's wake-up once if a kernel is split over the cores)

The wave fill is a GPU's tile and wave quantisation: a product split in CTA tiles runs in whole waves of
one tile per SM, so a 1024-row GEMM on 132 SMs leaves part of its last wave idle (``wave_fill``). On a CPU
the roof of a product is the rate the run's own matmul sweep measured at that size (``Roofs.gemm_curve``)
and the bandwidth of a kernel the rate the run's STREAM sweep measured for that many bytes
(``Roofs.bandwidth_curve``): the level of the memory hierarchy it fits in. Where that curve jumps (XLA:CPU
splitting a kernel over the cores wakes its thread pool: ``Roofs.split``), the jump is taken out of the
curve and charged once per program.

Beside the estimate, ``lower_s`` (every kernel at its binding roof, no quantisation, no launches) and
``upper_s`` (compute and memory not overlapping, launches on top) bound it. Roofs are achievable figures,
never bare datasheet peaks: measured in a run, or a datasheet peak times a share others measured
(``roofs_for``); every constant below names its source.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.ground import calibration, hardware
from jaxgpu.ground.launches import Kernel, kernels  # noqa: F401 - part of this module's API

# Achievable shares of datasheet peaks are each card's own, by kind of kernel, from published kernel-level
# measurements (jaxgpu.ground.calibration; roofs_for reads them). These two are the H100's bf16 matmul (794.5 of 989
# TFLOP/s, stas00/ml-engineering's MAMF table) and the H200's device copy (about 4.3 of 4.8 TB/s, the device tool's
# KINDS.md): what a study's budget and a CPU run's GPU column assume of a GPU.
COMPUTE_FRACTION = 794.5 / 989.4
BANDWIDTH_FRACTION = 4.3 / 4.8
# Host time of one call of a jitted program on a GPU (JAX's dispatch plus the first launch): a lead of about
# 10 us. A compiled loop's iteration on a GPU, which XLA:GPU drives from the host: 8.2 us (a 1e7-step
# lax.scan in 81.6 s, in a public JAX issue).
GPU_LAUNCH_S = 10e-6
GPU_LOOP_STEP_S = 8.2e-6
# Device time of one kernel beyond its work: the start-up overhead of back-to-back dependent kernels in a
# stream, fitted at 2555 ns on an A100 80GB and 2433 ns on an H200 (te42kyfo/gpu-benches @1c36d50,
# gpu-small-kernels/repeated-stream.svg; inside a CUDA graph, which XLA:GPU records runs of kernels as,
# about 1.3 us in the same repository's *_graph.txt).
GPU_KERNEL_S = 2.5e-6
# CTA tiles (rows x columns of the product) that cuBLAS and CUTLASS pick among: 128x256 down to 64x64 for
# Tensor Core GEMMs on Hopper and Ampere (the tile shapes CUTLASS's sm80 and sm90 GEMM profiles instantiate),
# 128x128 for float32 without Tensor Cores; and split-K (the reduction dimension cut in up to 16 slices of
# at least 256, each a tile of its own: cuBLAS's answer to a product with too few output tiles to fill the
# SMs, a decode step's matrix-vector products). The model takes the choice that fills the waves best, as a
# heuristic would.
TENSOR_TILES = ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128), (64, 64))
SPLIT_K = (1, 2, 4, 8, 16)
SPLIT_K_MIN = 256
# Attention run as one fused kernel (FlashAttention, cuDNN): its products at the share of the bf16 peak the card's
# fused attention reaches at the kernel's sequence length, forward and backward together (calibration.attention_at:
# cuDNN's on an H200 and a B200; FlashAttention-2's 50-73% on an A100, "reaching 50-73% of the theoretical maximum
# FLOPs/s on A100", Dao 2023, arXiv 2307.08691), the curve's highest and lowest for the bounds; causal, so about half
# of the score blocks are computed; the scores never reach memory. Applies to kernels JAX named ``flash_attention``
# (jaxgpu.kernels.transformer). FLASH_PEAK_SHARE is the A100's band, kept for a caller of the older name.
FLASH_PEAK_SHARE = (0.50, 0.615, 0.73)
FLASH_CAUSAL_SHARE = 0.5
SIMT_TILES = ((128, 128),)


@dataclasses.dataclass(frozen=True)
class Roofs:
    """Achievable rates: FLOP/s per roof key (``Hardware.tflops`` keys, "elementwise" for fused non-matmul
    arithmetic and, where measured, "transcendental": exp and log per second, and "power": pow per second),
    memory bytes/s, seconds per call, per kernel launch and per loop iteration; where they come from. A GPU's
    roofs know its SMs (for the wave fill) and that a float32 product at DEFAULT precision runs as TF32 there; a
    CPU run's roofs carry the curves its sweeps measured."""

    name: str
    flops: dict[str, float]
    bandwidth: float
    overhead_s: float
    source: str
    loop_step_s: float = 0.0  # one iteration of a compiled loop (a scan's step)
    kernel_s: float = 0.0  # one kernel launch beyond the first
    sms: int = 0  # streaming multiprocessors: the wave fill of a GEMM (0: none)
    tf32_default: bool = False  # float32 products at DEFAULT precision use TF32 (Ampere and later GPUs)
    # the host dispatches the next call while the device runs this one (a GPU): back-to-back calls cost the
    # longer of the two, not their sum; on a CPU the same cores do both
    overlap: bool = False
    # (work per call, rate, case key) points a run measured: FLOP/s of products by roof key, bytes/s by bytes
    gemm_curve: dict[str, tuple[tuple[float, float, str], ...]] = dataclasses.field(default_factory=dict)
    bandwidth_curve: tuple[tuple[float, float, str], ...] = ()
    # a GPU's share of its datasheet peak behind each roof key ("memory" for the bandwidth), and where each comes from
    shares: dict[str, calibration.Share] = dataclasses.field(default_factory=dict)

    def compute(self, dtype: str) -> float | None:
        return self.flops.get(dtype) or self.flops.get("fp32")

    def gemm_rate(self, key: str, work: float, exclude: str = "") -> float | None:
        """The FLOP/s of a product of ``work`` FLOPs: from the run's curve for its roof key where it has one
        (interpolated in log-log, never from the point ``exclude`` names), else the flat roof."""
        return _on_curve(self.gemm_curve.get(key, ()), work, exclude) or self.compute(key)

    def bandwidth_at(self, nbytes: float, exclude: str = "") -> float:
        """The bytes/s of a kernel moving ``nbytes``: the run's STREAM curve where it has one (less the wake-up of
        ``split``, which a program pays once), else the roof."""
        at, wake = self.split(exclude)
        pts = [(b, b / max(b / r - wake, 0.1 * b / r) if b >= at else r, k) for b, r, k in self.bandwidth_curve
               if b > 0 and r > 0]
        return _on_curve(pts, nbytes, exclude, small="best") or self.bandwidth

    def split(self, exclude: str = "") -> tuple[float, float]:
        """(bytes, seconds): the size at which the run's STREAM curve jumps, and by how much. On XLA:CPU that is
        where a kernel starts being split over the cores, and the jump is the thread pool waking: tens of
        microseconds, paid once by a program (its next split kernels find the threads awake: a many-kernel step
        costs far less than its kernels timed alone). (inf, 0) where the curve has no such jump (a GPU's roofs)."""
        pts = sorted((b, b / r) for b, r, k in self.bandwidth_curve if k != exclude and b > 0 and r > 0)
        for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
            if t1 > SPLIT_JUMP * t0 * b1 / b0 and t1 - t0 > SPLIT_MIN_S:
                # the jump lies somewhere between the two sizes: the geometric middle is the even guess (the
                # larger would leave a kernel between them unsplit, as one priced without its own point was)
                return math.sqrt(b0 * b1), t1 - t0
        return math.inf, 0.0


# A jump in a STREAM curve's time between neighbouring sizes that is a thread pool waking, not more bytes: 5x the
# time the bytes explain and at least 10 us (here 0.7 us at 3 KB to 68 us at 6 KB, in reports/cpu-reference). A
# kernel leaving the last-level cache for DRAM slows by less (50 MB in 1.1 ms, 200 MB in 7.6 ms: 1.7x its bytes)
SPLIT_JUMP, SPLIT_MIN_S = 5.0, 10e-6
# kernels XLA:CPU never splits over the cores: one that may update its buffer in place (ParallelTaskAssignment in
# xla/service/cpu/parallel_task_assignment.cc returns one task for a possible in-place dynamic-update-slice)
_NEVER_SPLIT = ("dynamic-update-slice",)


def _on_curve(points: Sequence[tuple[float, float, str]], x: float, exclude: str, small: str = "first"
              ) -> float | None:
    """The rate at ``x`` on a measured curve, interpolated in log-log; past its largest point, that point's rate;
    below its smallest, that point's rate (``small="first"``: a product too small to measure is no faster) or the
    curve's best (``"best"``: a kernel smaller than any the sweep timed fits in cache and is not split)."""
    pts = sorted((p[0], p[1]) for p in points if p[2] != exclude and p[0] > 0 and p[1] > 0)
    if not pts or x <= 0:
        return None
    xs = [p[0] for p in pts]
    i = bisect.bisect_left(xs, x)
    if i == 0:
        return max(p[1] for p in pts) if small == "best" and x < xs[0] else pts[0][1]
    if i == len(pts):
        return pts[-1][1]
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    if x1 == x0:
        return max(y0, y1)
    t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))


def roofs_for(hw: hardware.Hardware, *, overhead_s: float = GPU_LAUNCH_S) -> Roofs:
    """A GPU's achievable roofs: its datasheet peaks times the shares its kernels reach (``hw.shares``: published
    kernel-level measurements of that card, or of the card that stands in for it, which ``source`` names); fused
    arithmetic that is not a product at the fp32 product's share."""
    shares = {k: hw.share(f"matmul:{k}") for k, v in hw.tflops.items() if v}
    shares["elementwise"] = hw.share("matmul:fp32")
    shares["memory"] = hw.share("memory")
    flops = {k: hw.tflops[k] * 1e12 * sh.value for k, sh in shares.items() if k in hw.tflops}
    flops["elementwise"] = hw.tflops["fp32"] * 1e12 * shares["elementwise"].value
    said = "; ".join(f"{k} {sh.said()}" for k, sh in shares.items() if k in ("bf16", "fp8", "tf32", "memory")
                     and k in shares)
    return Roofs(hw.name, flops, (hw.memory_bw_gbps or 0) * 1e9 * shares["memory"].value, overhead_s,
                 f"{hw.source}, each kind of kernel at its share of the peak: {said}", GPU_LOOP_STEP_S, GPU_KERNEL_S,
                 hw.cores, tf32_default=True, overlap=True, shares=shares)


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Seconds a program should take on ``roofs``: ``estimate_s``, between ``lower_s`` (each kernel at its
    binding roof) and ``upper_s`` (compute and memory not overlapping, launches on top). ``plan`` says which
    compiled program was priced: "xla:gpu h200" (XLA:GPU's own, for that GPU) or "xla:cpu, estimate" (this
    machine's, standing in for one the GPU would run)."""

    roofs: str
    flops: float
    bytes: float
    compute_s: float
    memory_s: float
    lower_s: float
    upper_s: float
    kernels: int  # launches
    estimate_s: float = 0.0
    launch_s: float = 0.0  # the estimate's share that is dispatch, launches and loop steps
    plan: str = ""
    # the kernels back to back on the device, without the host's dispatch of the call: what CUDA events or a
    # profiler time, and what a benchmark that keeps the device busy with many calls in flight sees per call
    device_s: float = 0.0
    device_range_s: tuple[float, float] = (0.0, 0.0)  # its bounds: as lower_s and upper_s, without the dispatch

    @property
    def bound(self) -> str:
        """What binds the program as a whole: "compute", "memory" or "launches" (the largest share)."""
        if self.launch_s > max(self.compute_s, self.memory_s):
            return "launches"
        return "compute" if self.compute_s >= self.memory_s else "memory"


def bound(flops: float, nbytes: float, roofs: Roofs, dtype: str = "fp32", launches: int = 1,
          loop_steps: int = 0, exclude: str = "") -> Prediction:
    """The price of work counted as one kernel (``launches`` of it, ``loop_steps`` iterations of a
    compiled loop): a record's XLA counts, where its kernels are not known. On a run's roofs the product's
    rate and the bandwidth come from its curves at this size (never the point ``exclude`` names)."""
    peak = (roofs.gemm_rate(dtype, flops, exclude) if dtype != "elementwise" else roofs.compute(dtype))
    bw = roofs.bandwidth_at(nbytes, exclude) if nbytes else roofs.bandwidth
    c = flops / peak if peak and flops else 0.0
    m = nbytes / bw if bw and nbytes else 0.0
    o = roofs.overhead_s + max(0, launches - 1) * roofs.kernel_s + loop_steps * roofs.loop_step_s
    return Prediction(roofs.name, flops, nbytes, c, m, max(c, m) + o, c + m + o, launches, max(c, m) + o, o,
                      device_s=max(c, m) + o - roofs.overhead_s)


def wave_fill(gemm: tuple[int, int, int, int], sms: int, tiles: Sequence[tuple[int, int]]) -> float:
    """The share of a GPU's tile slots a product uses: its useful multiply-adds over whole waves of one tile
    (a slice of the reduction, under split-K) per SM, for the tile and split that fill them best (1.0 without
    SMs to fill)."""
    b, m, n, k = gemm
    if sms <= 0 or m * n * b == 0:
        return 1.0
    best = 0.0
    for tm, tn in tiles:
        for split in SPLIT_K:
            if split > 1 and k < split * SPLIT_K_MIN:
                break
            count = b * math.ceil(m / tm) * math.ceil(n / tn) * split
            waves = math.ceil(count / sms)
            best = max(best, b * m * n * k / (waves * sms * tm * tn * math.ceil(k / split)))
    return best


# HLO element type of a product's inputs -> the roof it meets
_DOT_KEYS = {"bf16": "bf16", "f16": "fp16", "f8e4m3fn": "fp8", "f8e5m2": "fp8", "s8": "int8", "u8": "int8",
             "f64": "fp64"}


def roof_key(k: Kernel, roofs: Roofs) -> str:
    """The roof a kernel meets: a product's by its inputs' type and precision, "elementwise" otherwise."""
    if not k.is_dot:
        return "elementwise"
    if k.dtype in _DOT_KEYS:
        return _DOT_KEYS[k.dtype]
    if k.precision == "tf32" or (k.precision == "default" and roofs.tf32_default):
        return "tf32"
    return "fp32"


_PASSES = {"bf16x3": 3, "bf16x6": 6, "bf16x9": 9}


def price(ks: Sequence[Kernel], roofs: Roofs, *, loop_steps: int = 0, plan: str = "", exclude: str = "",
          dtype: str | None = None) -> Prediction:
    """The price of a program given kernel by kernel (see the module docstring). ``dtype`` forces the roof of
    its products (a preset the plan does not show); ``exclude`` keeps a case's own point off a run's curves."""
    c_total = m_total = lower = upper = est = 0.0
    launches = 0
    for k in ks:
        if k.scope == "flash_attention" and roofs.overlap:
            if not k.is_dot:
                continue  # the softmax and masking live inside the fused kernel
            key = roof_key(k, roofs)
            held = roofs.shares.get(key) or roofs.shares.get("fp32")
            peak = (roofs.compute(key) or 0) / (held.value if held else COMPUTE_FRACTION)
            work = k.flops * FLASH_CAUSAL_SHARE * k.count
            band = flash_band(roofs.name, max(k.gemm[1:]) if k.gemm else 0)
            lo_s, mid_s, hi_s = (work / (peak * share) for share in reversed(band))
            c_total, launches = c_total + lo_s, launches + k.count
            lower, est, upper = lower + lo_s, est + mid_s, upper + hi_s
            continue
        key = dtype if (dtype and k.is_dot) else roof_key(k, roofs)
        if k.is_dot:
            rate = roofs.gemm_rate("bf16" if k.precision in _PASSES else key, k.flops, exclude)
            rate = (rate or 0) / _PASSES.get(k.precision, 1)
            tiles = TENSOR_TILES if key != "fp32" and key != "fp64" else SIMT_TILES
            fill = wave_fill(k.gemm, roofs.sms, tiles) if k.gemm else 1.0
        else:
            rate, fill = roofs.compute("elementwise"), 1.0
        bw = roofs.bandwidth_at(k.bytes, exclude) if k.bytes else roofs.bandwidth
        c = k.flops / rate if rate and k.flops else 0.0
        if not k.is_dot and k.transcendentals and roofs.flops.get("transcendental") and rate:
            # exp and log at the rate measured for them, pow at its own where measured, the rest of the kernel's
            # FLOPs at the elementwise roof
            exp_rate = roofs.flops["transcendental"]
            pow_rate = roofs.flops.get("power") or exp_rate
            c = (max(0.0, k.flops - k.transcendentals) / rate + (k.transcendentals - k.powers) / exp_rate
                 + k.powers / pow_rate)
        m = k.bytes / bw if bw and k.bytes else 0.0
        cq = c / fill if fill > 0 else c
        n = k.count
        c_total, m_total, launches = c_total + n * c, m_total + n * m, launches + n
        lower += n * max(c, m)
        upper += n * (cq + m)
        est += n * max(cq, m)
    gaps, loops = max(0, launches - 1) * roofs.kernel_s, loop_steps * roofs.loop_step_s
    at, wake = roofs.split(exclude)
    if wake and any(not k.is_dot and k.bytes >= at and not any(w in k.name for w in _NEVER_SPLIT) for k in ks):
        gaps += wake  # the thread pool wakes once for the program
    if roofs.overlap:  # dispatch hides behind the device's work when there is enough of it
        estimate = max(est + gaps, roofs.overhead_s) + loops
        low = max(lower, roofs.overhead_s)
    else:
        estimate, low = est + gaps + roofs.overhead_s + loops, lower + roofs.overhead_s
    o = estimate - est
    return Prediction(roofs.name, sum(k.flops * k.count for k in ks), sum(k.bytes * k.count for k in ks), c_total,
                      m_total, low, upper + gaps + roofs.overhead_s + loops, launches, estimate, o, plan,
                      est + gaps + loops, (lower, upper + gaps + loops))


def flash_band(card: str, length: int) -> tuple[float, float, float]:
    """(lowest, at ``length``, highest) share of the bf16 peak a fused attention's products reach on ``card``
    (``calibration.attention_at``); FLASH_PEAK_SHARE for a card the hardware table does not name."""
    try:
        return calibration.attention_at(card, length)
    except KeyError:
        return FLASH_PEAK_SHARE


def bound_kernels(ks: list[Kernel], roofs: Roofs, dtype: str = "fp32") -> Prediction:
    """``price`` with every product at ``dtype``'s roof (the older call)."""
    return price(ks, roofs, dtype=dtype)


def _hardware(on: str | hardware.Hardware | Roofs) -> hardware.Hardware | Roofs:
    if isinstance(on, str):
        return hardware.find_gpu(on)
    return on


def plan_target(hw: hardware.Hardware) -> tuple[str | None, str]:
    """The ``jaxgpu.pricing.targets`` name whose XLA:GPU plan is priced for ``hw`` (its own, else its ``stand_in``'s),
    and how the plan is labelled."""
    own = target_of(hw)
    if own:
        return own, f"xla:gpu {own}"
    other = target_of(hardware.GPUS[hw.stand_in]) if hw.stand_in in hardware.GPUS else None
    return other, (f"xla:gpu {other}, standing in for the {hw.name}" if other else "")


def target_of(hw: hardware.Hardware) -> str | None:
    """The ``jaxgpu.pricing.targets`` name XLA:GPU compiles for this GPU with (None: no target for it)."""
    return hw.compiled.name if hw.compiled else None


def plan_for(fn: Callable, *args: Any, on: str | hardware.Hardware, plan: str = "auto", triton_gemm: bool = False
             ) -> tuple[list[Kernel], int, str]:
    """The kernels, loop iterations and name of the plan ``predict`` prices for ``on``: XLA:GPU's for a GPU
    with a target (``plan="auto"`` or ``"gpu"``) where it can be compiled here, its GEMMs as cuBLAS calls (or,
    ``triton_gemm``, as Triton fusions that can take a conversion of their inputs with them), else this
    machine's XLA:CPU plan, named "xla:cpu, estimate (why)".

    Raises:
      RuntimeError: ``plan="gpu"`` and XLA:GPU's plan cannot be had here (the message says why).
    """
    import jax

    from jaxgpu.ground import launches
    from jaxgpu.pricing import targets

    hw = _hardware(on)
    name, label = plan_target(hw) if isinstance(hw, hardware.Hardware) else (None, "")
    why = "no XLA:GPU target for this GPU" if name is None else None
    if why is None and plan != "cpu":
        why = targets.unavailable()
    if why is None and plan != "cpu":
        try:
            _cpu_only_if_no_driver()
            dev = targets.devices(name)[0]
        except (NotImplementedError, RuntimeError) as err:  # the CUDA plugin did not start in this process
            why = f"XLA:GPU cannot compile in this process ({type(err).__name__}: {str(err)[:80]}); start it " \
                  "with JAX_PLATFORMS=cpu"
        else:
            jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
            gpu = targets.compile_plan(jitted, *targets.specs_like(list(args), dev),
                                       options={"xla_gpu_enable_triton_gemm": triton_gemm})
            named = label + (", triton gemm" if triton_gemm else "")
            return launches.kernels(gpu.hlo), launches.loop_steps(gpu.hlo), named
    if plan == "gpu":
        raise RuntimeError(f"no XLA:GPU plan for {hw.name if isinstance(hw, hardware.Hardware) else on}: {why}")
    ks, steps, _ = _cpu_plan(fn, args)
    return ks, steps, "xla:cpu, estimate" + ("" if plan == "cpu" else f" ({why})")


def _cpu_only_if_no_driver() -> None:
    """Before JAX starts: without a driver, keep the CUDA plugin from trying (and failing) to find a GPU, so its
    compile-only topology stays available (``jaxgpu.ground.devices.configure`` does the same for a run)."""
    from jaxgpu.ground import devices

    if not devices._backends_initialized() and not devices.gpu_driver_present():
        devices.configure("cpu")


def predict(fn: Callable, *args: Any, on: str | hardware.Hardware | Roofs = hardware.DEFAULT_GPU,
            dtype: str | None = None, plan: str = "auto") -> Prediction:
    """The price of ``fn(*args)`` on ``on``: a GPU of the hardware table (by name: "H200 SXM", "h100", or a
    device kind), a ``Hardware`` or ``Roofs``. ``args`` may be arrays or ``jax.ShapeDtypeStruct``s, so a 70B
    step is priced without allocating it. The plan priced (``Prediction.plan``) is XLA:GPU's for that GPU
    ("xla:gpu h200") where the gpu-compile extra can compile it here, else this machine's XLA:CPU plan
    standing in for it ("xla:cpu, estimate (why)"); ``plan="cpu"`` asks for the latter, ``"gpu"`` insists
    on the former.

    Raises:
      KeyError: ``on`` names no GPU in the hardware table.
      RuntimeError: ``plan="gpu"`` where XLA:GPU's plan cannot be had.
    """
    hw = _hardware(on)
    roofs = hw if isinstance(hw, Roofs) else roofs_for(hw)
    if not isinstance(hw, hardware.Hardware):
        ks, steps, name = _cpu_plan(fn, args)
        return price(ks, roofs, loop_steps=steps, plan=name, dtype=dtype)
    ks, steps, name = plan_for(fn, *args, on=hw, plan=plan)
    best = price(ks, roofs, loop_steps=steps, plan=name, dtype=dtype)
    if name.startswith("xla:gpu") and any(k.is_dot for k in ks):
        # On a GPU XLA autotunes each GEMM between cuBLAS and a Triton fusion (which can take a conversion of
        # its inputs, int8 weights widened to bf16, inside it); without a device to autotune on, both plans
        # are priced and the cheaper kept, as the autotuner would keep the faster.
        try:
            ks, steps, name = plan_for(fn, *args, on=hw, plan=plan, triton_gemm=True)
        except Exception:  # noqa: BLE001 - XLA:GPU will not tile it ("Couldn't find output tile sizes"): cuBLAS's stands
            return best
        best = min(best, price(ks, roofs, loop_steps=steps, plan=name, dtype=dtype), key=lambda p: p.estimate_s)
    return best


def _cpu_plan(fn: Callable, args: Sequence[Any]) -> tuple[list[Kernel], int, str]:
    import jax

    from jaxgpu.ground import launches

    specs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), list(args))
    hlo = (fn if hasattr(fn, "lower") else jax.jit(fn)).lower(*specs).compile().as_text()
    return launches.kernels(hlo), launches.loop_steps(hlo), "xla:cpu"
