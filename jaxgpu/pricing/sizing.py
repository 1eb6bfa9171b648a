"""What a GPU buys your step: any JAX function and its argument shapes, priced on every GPU of the hardware table.

``on_gpus(step, *specs)`` answers "which of these GPUs holds this step, and how long would it take there?" for a
program given as ``jax.ShapeDtypeStruct``s (nothing is allocated, so a 70B step is as cheap to ask about as a
small one). Per GPU: the bytes one device holds (XLA:GPU's own memory plan for that GPU where the gpu-compile
extra can compile it here, else XLA:CPU's plan of the same program standing in, and the row says which), whether
that fits the card's memory after the share JAX's allocator leaves unused, the predicted seconds with their
bounds (``jaxgpu.predict``), and what binds the step. With ``measure=True`` a first row times the step on this
machine, on random inputs of those shapes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.ground import hardware

# JAX preallocates this share of a GPU's memory for its arrays (XLA_PYTHON_CLIENT_MEM_FRACTION's default): a
# step that needs more does not fit as JAX is started by default (the rest is the CUDA context, cuBLAS and
# cuDNN workspaces, other processes)
USABLE_FRACTION = 0.75


@dataclasses.dataclass(frozen=True)
class GpuRow:
    """One device's answer. ``bytes_per_device``: what the step holds on one device (arguments, outputs and
    temporaries, less what XLA aliases), from ``memory_plan``; ``fits``: within ``USABLE_FRACTION`` of its
    memory; ``seconds`` (with ``lower_s``, ``upper_s``) per call of the step, predicted, or measured here;
    ``binds``: "compute", "memory" or "launches"; ``plan``: the program priced ("xla:gpu h200", or
    "xla:cpu, estimate (why)"); ``memory_plan``: the same for the bytes."""

    device: str
    memory_gb: float
    bytes_per_device: float
    fits: bool
    seconds: float
    lower_s: float
    upper_s: float
    binds: str
    plan: str
    memory_plan: str
    measured: bool = False


@dataclasses.dataclass(frozen=True)
class OnGpus:
    """The rows of ``on_gpus``; a notebook shows them as a table."""

    rows: tuple[GpuRow, ...]

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, device: str) -> GpuRow:
        return next(r for r in self.rows if r.device == device)

    def table(self):
        from jaxgpu.records import figures, labels

        return figures.Table(
            ["device", "memory", "step holds", "fits", "seconds per step", "bounds", "binds", "figures from"],
            [[r.device, labels.si(r.memory_gb * 1e9, "B"), labels.si(r.bytes_per_device, "B"),
              "yes" if r.fits else "no",
              labels.si(r.seconds, "s"), f"{labels.si(r.lower_s, 's')} - {labels.si(r.upper_s, 's')}", r.binds,
              "measured here" if r.measured else f"predicted, not run: {r.plan}; memory: {r.memory_plan}"]
             for r in self.rows],
            f"A step on each GPU (fits: within {USABLE_FRACTION:.0%} of the card, JAX's default share)")

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def as_dicts(self) -> list[dict]:
        return [dataclasses.asdict(r) for r in self.rows]


def _memory(step: Callable, specs: Sequence[Any], hw: hardware.Hardware) -> tuple[float, str]:
    """Bytes one device holds and whose plan says so: XLA:GPU's for ``hw`` where it compiles here, else XLA:CPU's."""
    import jax

    from jaxgpu.ground import timing
    from jaxgpu.pricing import targets

    devs, label = _mesh_devices(hw, 1)
    if devs is not None:
        return float(targets.compile_plan(step, *targets.specs_like(list(specs), devs[0])).total_bytes), label
    shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), list(specs))
    compiled = (step if hasattr(step, "lower") else jax.jit(step)).lower(*shapes).compile()
    return float(timing.memory_bytes(compiled)), f"xla:cpu, estimate ({label})"


def _random_like(specs: Sequence[Any]) -> list[Any]:
    """Inputs of the specs' shapes and dtypes, random (never zeros XLA could fold or a cache could flatter)."""
    import jax
    import jax.numpy as jnp

    leaves, tree = jax.tree.flatten(list(specs))
    keys = jax.random.split(jax.random.key(0), max(len(leaves), 1))
    out = []
    for k, s in zip(keys, leaves):
        if jnp.issubdtype(s.dtype, jnp.floating):
            out.append(jax.random.normal(k, s.shape, jnp.float32).astype(s.dtype))
        elif jnp.issubdtype(s.dtype, jnp.integer):
            out.append(jax.random.randint(k, s.shape, 0, 8).astype(s.dtype))
        elif jnp.issubdtype(s.dtype, jax.dtypes.prng_key):
            out.append(jax.random.split(k, s.shape) if s.shape else k)
        else:
            out.append(jnp.ones(s.shape, s.dtype))
    return jax.tree.unflatten(tree, out)


def on_gpus(step: Callable, *specs: Any, gpus: Sequence[str] | None = None, measure: bool = False,
            target_s: float = 0.3) -> OnGpus:
    """``step(*specs)`` on every GPU of the hardware table (or those named in ``gpus``, any spelling
    ``hardware.find_gpu`` reads): one ``GpuRow`` each, predicted, never run; with ``measure``, a first row
    timed on this machine (compile apart, warm-up, repeats), on random inputs of the specs' shapes.

    ``specs`` are ``jax.ShapeDtypeStruct``s (or arrays: only their shapes and dtypes are read), in a pytree as
    the step takes them. One device per GPU: a step sharded over several is priced per device by compiling
    it with its shardings (``jaxgpu.pricing.targets``).

    Raises:
      KeyError: a name in ``gpus`` is no GPU of the hardware table.
    """
    from jaxgpu.pricing import roofline

    hws = [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values())
    rows = []
    if measure:
        rows.append(_measured_here(step, specs, target_s))
    for hw in hws:
        nbytes, mem_plan = _memory(step, specs, hw)
        p = roofline.predict(step, *specs, on=hw)
        rows.append(GpuRow(hw.name, hw.memory_gb, nbytes, nbytes <= USABLE_FRACTION * hw.memory_gb * 1e9,
                           p.estimate_s, p.lower_s, p.upper_s, p.bound, p.plan, mem_plan))
    return OnGpus(tuple(rows))


def _measured_here(step: Callable, specs: Sequence[Any], target_s: float) -> GpuRow:
    import jax

    from jaxgpu.ground import devices, timing

    args = _random_like(specs)
    jitted = step if hasattr(step, "lower") else jax.jit(step)
    t = timing.time_jitted(jitted, *args, target_s=target_s)
    nbytes = float(timing.memory_bytes(jitted.lower(*args).compile()))
    dev = jax.devices()[0]
    mem = (devices.host_memory_bytes() or 0) / 1e9 if dev.platform == "cpu" else \
        (dev.memory_stats() or {}).get("bytes_limit", 0) / 1e9
    name = f"this {dev.platform} ({dev.device_kind})"
    return GpuRow(name, mem, nbytes, nbytes <= mem * 1e9, t.median_s, t.quantile_s(0.25), t.quantile_s(0.75),
                  "-", "measured", "xla memory analysis", measured=True)


# ---- a transformer on N GPUs ----------------------------------------------------------------------------------
# How many bytes each device sends over its links for a collective, per byte the kernel list counts for it
# (operands + results; an async start's results alone, however XLA's version prints them: stack.async_results):
# all-reduce ring 2(n-1)/n of its S, counted 2S; all-gather and reduce-scatter (n-1)/n of the full S, counted
# S(1 + 1/n); all-to-all (n-1)/n of S, counted 2S; a permute S, counted 2S.
_LINK_SHARE = {"all-reduce": lambda n: (n - 1) / n, "all-gather": lambda n: (n - 1) / (n + 1),
               "reduce-scatter": lambda n: (n - 1) / (n + 1), "all-to-all": lambda n: (n - 1) / (2 * n),
               "collective-permute": lambda n: 0.5}


@dataclasses.dataclass(frozen=True)
class ModelPlan:
    """A transformer's step on ``devices`` GPUs of one kind, compiled for them and priced, never run.

    ``bytes_per_device`` from XLA:GPU's memory plan (``memory_plan`` names it; XLA:CPU's stands in without the
    gpu-compile extra) beside ``estimate_bytes``, ``jaxgpu.pricing.fit``'s formula for the whole model divided by the
    devices; ``fits`` within ``USABLE_FRACTION`` of the card; ``seconds`` per step (``lower_s`` to ``upper_s``),
    of which ``comm_s`` is what the step's collectives add at the datasheet link bandwidth (one direction): the
    async ones beyond the compute they run under (``overlapped_s`` of them hidden), the synchronous ones whole;
    ``upper_s`` prices them all unhidden; ``tokens_per_s`` and ``mfu`` (model FLOPs, 6 x parameters per trained
    token or 2 x per served one, over the devices' bf16 peak, or fp8's for fp8 products) follow from it."""

    model: str
    # "train" (AdamW, fp32 master weights, bf16 products; fsdp), "train_bf16" (the same, weights and AdamW state in
    # bf16), "prefill" (a prompt through every layer, bf16 weights; tp) or "serve" (one decode step; tp)
    mode: str
    gpu: str
    devices: int
    batch: int
    seq: int
    bytes_per_device: float
    estimate_bytes: float
    fits: bool
    seconds: float
    lower_s: float
    upper_s: float
    comm_s: float
    binds: str
    tokens_per_s: float
    mfu: float
    collectives: dict
    plan: str
    memory_plan: str
    matmul_flop_share: float = 0.0  # of the plan's FLOPs, those of its matrix products
    matmul_time_share: float = 0.0  # of its predicted device time (collectives apart), its matrix products'
    settings: str = ""  # the step's settings in words (``StepSettings.words``)
    internode_s: float = 0.0  # of ``comm_s``, the gradients' all-reduce between nodes
    nodes: int = 1  # of ``devices`` GPUs each
    overlapped_s: float = 0.0  # collectives' time hidden under compute (async, the latency-hiding schedule's)
    memory_split: dict = dataclasses.field(default_factory=dict)  # bytes_per_device by kind (``MEMORY_PARTS``)
    estimate_parts: dict = dataclasses.field(default_factory=dict)  # estimate_bytes by the formula's components
    time_split: dict = dataclasses.field(default_factory=dict)  # the step's device seconds by kind (``KINDS``)
    mesh: str = ""  # how its GPUs split the step: "fsdp", "tp" or "fsdp 4 x tp 2" (``mesh_words``)
    # one layer's attention scores in float32 a GPU: held in XLA's plan of a flash step, never by the fused kernel
    scores_bytes: float = 0.0
    query_block: int = 0  # bytes_per_device is of the step's twin that runs its attention this many queries at a time
    written_bytes: float = 0.0  # where a twin in blocks was planned, the bytes a GPU of the step as written

    @property
    def capacity(self) -> float:
        """The bytes of one card the step may hold: ``USABLE_FRACTION`` of its memory (JAX's default share)."""
        return USABLE_FRACTION * hardware.find_gpu(self.gpu).memory_gb * 1e9


@dataclasses.dataclass(frozen=True)
class NotPriced:
    """A step that cannot run on a card as asked (fp8 products on a card without fp8 matrix units; nodes where the
    table knows no network between them): said, not priced as an emulation."""

    model: str
    mode: str
    gpu: str
    devices: int
    reason: str


def _mesh_devices(hw: hardware.Hardware, n: int):
    """Compile-only devices of ``hw``'s XLA:GPU target (or its stand-in) and the plan's label; (None, why)
    where none can be had here."""
    from jaxgpu.pricing import roofline, targets

    name, label = roofline.plan_target(hw)
    why = "no XLA:GPU target for this GPU" if name is None else targets.unavailable()
    if why is None:
        try:
            roofline._cpu_only_if_no_driver()
            return targets.devices(name, n), label
        except (NotImplementedError, RuntimeError) as err:
            why = f"XLA:GPU cannot compile in this process ({type(err).__name__})"
    return None, why


MODES = ("train", "train_bf16", "prefill", "serve")


def plan_model(model: str | Any, gpu: str = "H200 SXM", *, train: bool = True, batch: int = 1, seq: int = 2048,
               devices: int = 1, mode: str | None = None, settings: Any = None) -> ModelPlan:
    """``model`` (a name of ``jaxgpu.kernels.transformer.CONFIGS``) training (one AdamW step over ``batch`` sequences of
    ``seq`` tokens, split fsdp) or serving (one decode step for ``batch`` sequences against a ``seq``-token
    cache, split by tensor parallelism) on ``devices`` GPUs named ``gpu``, compiled for them by XLA:GPU on this
    CPU and priced (``ModelPlan``). Nothing is allocated.

    ``model`` may also be a ``jaxgpu.kernels.transformer.Config`` (any decoder described by its dimensions).
    ``mode``, one of ``MODES``, overrides ``train``: "train_bf16" keeps the weights and AdamW's state in bf16;
    "prefill" runs a ``seq``-token prompt through every layer (tp) and gives the next token's logits. ``settings``: a
    ``jaxgpu.kernels.transformer.StepSettings`` (remat policy, flash attention, fp8 products, scanned or unrolled
    layers, nodes of ``devices`` GPUs each, ``batch`` split over them); default: no remat, flash attention, bf16,
    one node, layers scanned in training and prefill and unrolled in a decode step (what serving runs hold).

    Raises:
      KeyError: an unknown model or GPU.
      ValueError: settings the mode does not take (remat or nodes in serving; a batch the nodes do not split).
      jaxgpu.records.results.Unsupported: the card cannot run the step so (fp8 without fp8 matrix units; nodes
        without a network in the table).
      RuntimeError: no XLA:GPU plan can be had here (the gpu-compile extra is missing) and ``devices`` > 1.
    """
    from jaxgpu.kernels import transformer as tf
    from jaxgpu.pricing import roofline

    c = _config(model)
    mode = mode or ("train" if train else "serve")
    if mode not in MODES:
        raise KeyError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    s = settings or default_settings(mode)
    hw = hardware.find_gpu(gpu)
    _check_settings(s, mode, hw, batch, c, seq)
    devs, label = _devices_for(hw, devices)
    how = split_of(s, mode)
    mesh = tf.mesh_for(devs, how, s.tp)
    step, specs, sh, tokens, model_flops = _step(c, mode, batch // s.nodes, seq, mesh, how, s)
    roofs = roofline.roofs_for(hw)
    (nbytes, split), hidden, exposed, counts, rest, p = _priced(step, _placed(specs, sh), label, hw, roofs, devices,
                                                                triton=s.weights != "bf16")
    scores = _scores_bytes(c, mode, batch, seq, s, how, dict(mesh.shape))
    nbytes, split, block, written = _blocked_memory(c, mode, batch // s.nodes, seq, mesh, how, s, label, scores,
                                                    nbytes, split)
    between = _internode_s(c, mode, hw, devices, s.nodes)
    est = _estimate(c, mode, batch, seq, s)
    # XLA:GPU's latency-hiding schedule starts an async collective early and waits for it late: only what outlasts
    # the compute between adds to the step (a synchronous collective and the nodes' all-reduce are priced whole)
    overlapped = min(hidden, p.estimate_s)
    comm = hidden - overlapped + exposed + between
    seconds = p.estimate_s + comm
    tokens, model_flops = tokens * s.nodes, model_flops * s.nodes  # every node's share of the batch, at once
    peak = (hw.peak_flops("fp8" if s.matmul == "fp8" else "bf16") or 0) * devices * s.nodes
    return ModelPlan(c.name, mode, hw.name, devices, batch, seq, nbytes,
                     sum(est.values()) / devices, nbytes <= USABLE_FRACTION * hw.memory_gb * 1e9, seconds,
                     max(p.lower_s, comm), p.upper_s + comm + overlapped, comm,
                     "communication" if comm > max(p.compute_s, p.memory_s, p.launch_s) else p.bound,
                     tokens / seconds, model_flops / seconds / peak if peak else 0.0, counts, p.plan, label,
                     *_matmul_shares(rest, roofs), s.words(), between, s.nodes, overlapped, split,
                     {k: v / devices for k, v in est.items()}, {**_by_kind(rest, roofs), "collectives": comm},
                     mesh_words(how, mesh), scores, block, written)


def _placed(specs, shardings) -> list:
    """The step's argument specs with their shardings: what it is lowered for, nothing allocated."""
    import jax

    return [jax.tree.map(lambda a, h: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=h), sp, sh)
            for sp, sh in zip(specs, shardings)]


# one layer's attention scores past this share of a flash step's plan (and past a block's): its memory is read off
# a twin of the step whose attention runs a block of queries at a time, a block's scores QUERY_BLOCK_BYTES a GPU at most
SCORES_SHARE = 0.05
QUERY_BLOCK_BYTES = 256e6
MIN_QUERY_BLOCK = 128  # queries a block at least (a block's scores may then pass QUERY_BLOCK_BYTES)


def _blocked_memory(c, mode: str, batch: int, seq: int, mesh, how: str, s, label: str, scores: float,
                    nbytes: float, split: dict) -> tuple[float, dict, int, float]:
    """(bytes a GPU, their split, the query block, the bytes of the step as written where a twin was planned)
    of the step's memory. XLA's plan of a flash step may hold one
    layer's attention scores as the program computes them (``scores`` a GPU; Llama 7B's 16k-token prefill on one
    H100: 35.2 GB of temporaries, 34.4 GB of them), which the fused kernel whose time the step is priced at never
    holds. Where they come to ``SCORES_SHARE`` of the plan and more than a block's, a twin of the step that runs
    its attention a block of queries at a time (``StepSettings.query_block``: the same arithmetic, a block's
    scores held at once, as a fused kernel tiles it) is planned too, and kept where it holds half the scores less
    or more (XLA fuses some steps' scores away itself). The time stays the step's own."""
    import dataclasses

    from jaxgpu.pricing import fit

    banded = fit.keys_seen(seq, c.window) < seq  # a sliding window's blocks already hold t x 2 windows of scores
    if s.query_block or banded or scores < max(SCORES_SHARE * nbytes, QUERY_BLOCK_BYTES):
        return nbytes, split, s.query_block, 0.0
    want = max(MIN_QUERY_BLOCK, int(seq * QUERY_BLOCK_BYTES / scores))
    block = next((b for b in range(min(want, seq // 2), 0, -1) if seq % b == 0), 0)
    if block < MIN_QUERY_BLOCK // 8:  # a prime length: no block worth a scan
        return nbytes, split, 0, 0.0
    step, specs, sh, *_ = _step(c, mode, batch, seq, mesh, how, dataclasses.replace(s, query_block=block))
    got, _, twin_split = _compiled(step, _placed(specs, sh), label, {})
    # kept where it holds less by half the scores or more: the plan as written held them at once
    return (got, twin_split, block, nbytes) if got < nbytes - 0.5 * scores else (nbytes, split, 0, nbytes)


def _scores_bytes(c, mode: str, batch: int, seq: int, s, how: str, shape: dict) -> float:
    """One layer's attention scores in float32 a GPU: what XLA's plan of a flash step may hold while a layer computes
    them, as the program writes them whole, and the fused kernel whose time the step is priced at never holds. Cut by
    the axes that cut the attention (``shape``: the mesh's axis sizes): fsdp's by the batch, or by the queries where
    the groups of fsdp+tp split the sequence; tp's by the heads where both kinds of head divide. A step already in
    blocks of queries (``StepSettings.query_block``) holds a block's. 0 in a decode step, and without flash (the
    formula counts them there)."""
    from jaxgpu.kernels import transformer as tf
    from jaxgpu.pricing import fit

    if mode == "serve" or not s.flash:
        return 0.0
    micro = batch // s.nodes // s.accumulate if mode.startswith("train") else batch
    whole = 4.0 * c.heads * seq * fit.keys_seen(seq, c.window) * micro
    cut = 1
    data = shape.get(tf.AXIS, 1) if how != "tp" else 1
    if micro % data == 0 or (how == "fsdp+tp" and seq % data == 0):
        cut *= data
    model = shape.get(tf.MODEL, 1) if how == "fsdp+tp" else shape.get(tf.AXIS, 1) if how == "tp" else 1
    if c.heads % model == 0 and c.kv_heads % model == 0:
        cut *= model
    block = s.query_block if s.query_block and seq % s.query_block == 0 else seq
    return whole / cut * block / seq


def split_of(s: Any, mode: str) -> str:
    """How the settings ``s`` split a ``mode`` step: their mesh, or the mode's own (fsdp to train, tp to serve)."""
    return s.mesh if s.mesh != "auto" else "fsdp" if mode.startswith("train") else "tp"


def mesh_words(how: str, mesh: Any) -> str:
    """A plan's mesh in a few characters: "fsdp", "tp", or "fsdp 4 x tp 2" (the groups, and the GPUs of a group)."""
    from jaxgpu.kernels import transformer as tf

    if how != "fsdp+tp":
        return how
    return f"fsdp {mesh.shape[tf.AXIS]} x tp {mesh.shape[tf.MODEL]}"


def _estimate(c, mode: str, batch: int, seq: int, s) -> dict[str, float]:
    """``jaxgpu.pricing.fit``'s formula for the whole step, by component (divided by the devices it is split over)."""
    from jaxgpu.pricing import fit

    micro = batch // s.nodes // s.accumulate  # the sequences whose activations a GPU's node holds at once
    if mode.startswith("train"):
        return fit.transformer_train(_fit_shape(c), "bf16", seq, micro, flash=s.flash)
    if mode == "prefill":
        return fit.transformer_prefill(_fit_shape(c), "bf16", seq, batch, flash=s.flash)
    return fit.transformer_inference(_fit_shape(c), "bf16", seq, batch)


# the most GPUs ``fewest`` searches: one node of eight, joined by NVLink (a DGX). Past a node, the nodes hold the
# model alike (FSDP within a node, data parallel between nodes), so a GPU's share stops falling with more of them
NODE = (1, 2, 4, 8)


def fewest(model: str | Any, gpu: str = "H200 SXM", *, counts: Sequence[int] = NODE, train: bool = True,
           batch: int = 1, seq: int = 2048, mode: str | None = None, settings: Any = None) -> ModelPlan:
    """The plan on the fewest of ``counts`` GPUs named ``gpu`` that hold the step (``ModelPlan.fits``), else the
    plan on the most of them (which does not fit: "more than" that many). XLA's plans decide; the formula
    (``_estimate``) only says which count to compile first, and the counts beside it are compiled until the
    fewest that fits is bracketed (one GPU's share falls as they grow; a count the formula puts past 1.5x the
    card's share, where it has never been that far off, is not compiled). Where the settings leave the mesh to
    the mode ("auto"), the other mesh (tp to train, fsdp to serve) is tried on fewer GPUs than the first found
    (where none held it, on the most too), and wins where it holds the step on fewer; so is fsdp+tp on the counts
    of four and more (``tp_degree``'s groups of two or more: a batch too small to split over every GPU still has
    its activations cut by tp). Arguments as ``plan_model``'s."""
    import dataclasses

    from jaxgpu.kernels import transformer as tf

    m = mode or ("train" if train else "serve")
    s = settings or default_settings(m)
    counts = sorted(n for n in set(counts) if not s.tp or n % s.tp == 0)
    if not counts:
        raise ValueError(f"none of the counts searched splits into tensor-parallel groups of {s.tp}")
    best, tried = _fewest_on(_config(model), hardware.find_gpu(gpu), counts, m, batch, seq, s)
    if s.mesh != "auto":
        return best
    for how in [h for h in ("fsdp", "tp", "fsdp+tp") if h != split_of(s, m)]:
        # fewer GPUs than the fewest found; where none of the counts held it, the most of them too
        fewer = [n for n in counts if (n < best.devices or not best.fits and n == best.devices)
                 and (how != "fsdp+tp" or 1 < tf.tp_degree(n) < n)]
        # another mesh only where the mode's own came near on fewer GPUs (within a quarter of the card's share):
        # the meshes split a step's bytes within a few tenths of each other, so beyond that none can hold it
        if not fewer or not any(n in tried and tried[n].bytes_per_device <= 1.25 * best.capacity for n in fewer):
            continue
        found, _ = _fewest_on(_config(model), hardware.find_gpu(gpu), fewer, m, batch, seq,
                              dataclasses.replace(s, mesh=how))
        best = found if found.fits else best
    return best


def _fewest_on(c, hw: hardware.Hardware, counts: list[int], m: str, batch: int, seq: int, settings: Any
               ) -> tuple[ModelPlan, dict[int, ModelPlan]]:
    """``fewest`` on one mesh: the fewest of ``counts`` that fits, else the plan on the most; and every plan
    compiled on the way, by count."""
    from jaxgpu.pricing import fit

    whole = sum(_estimate(c, m, batch, seq, settings).values())
    i = next((k for k, n in enumerate(counts) if fit.fits(whole / n, USABLE_FRACTION * hw.memory_gb)),
             len(counts) - 1)
    tried: dict[int, ModelPlan] = {}

    def plan(k: int) -> ModelPlan:
        tried[counts[k]] = plan_model(c, hw.name, batch=batch, seq=seq, devices=counts[k], mode=m,
                                      settings=settings)
        return tried[counts[k]]

    cap = USABLE_FRACTION * hw.memory_gb * 1e9
    if plan(i).fits:  # fewer, until one does not fit; a count the formula puts past 1.5x the card is not compiled
        while i > 0 and whole / counts[i - 1] <= 1.5 * cap and plan(i - 1).fits:
            i -= 1
        return tried[counts[i]], tried
    while i + 1 < len(counts):
        i += 1
        if plan(i).fits:
            return tried[counts[i]], tried
    return tried[counts[-1]], tried


def _priced(step, placed: list, label: str, hw: hardware.Hardware, roofs, devices: int, triton: bool) -> tuple:
    """(bytes, async and synchronous collectives' seconds, their counts, the other kernels, their ``Prediction``)
    of the step on XLA:GPU's plan. ``triton``: its GEMMs also as Triton fusions, the cheaper plan kept, as XLA's
    autotuner keeps the faster on a GPU (a weight stored in int8 or fp8 is widened inside a Triton GEMM, where
    cuBLAS needs a kernel before it that writes the wide copy: on an A100, 20 ms a token for Llama-2 7B against 7)."""
    from jaxgpu.ground import stack
    from jaxgpu.pricing import roofline

    best = None
    for options in ({}, {"xla_gpu_enable_triton_gemm": True}) if triton and label.startswith("xla:gpu") else ({},):
        nbytes, hlo, split = _compiled(step, placed, label, options)
        hidden, exposed, rest, counts = _collectives(stack.kernels(hlo), hw, devices)
        plan = label + (", triton gemm" if options else "")
        p = roofline.price(rest, roofs, loop_steps=stack.loop_steps(hlo), plan=plan)
        if best is None or p.estimate_s + hidden + exposed < best[-1].estimate_s + best[1] + best[2]:
            best = ((nbytes, split), hidden, exposed, counts, rest, p)
    return best


# what a step's device time goes to: the matrix products (library GEMMs and fusions around a dot), the attention
# fused into one kernel (flash), every other kernel (elementwise, norms, softmax, the optimizer's update), and the
# collectives' time beyond the compute they run under
KINDS = ("matrix products", "fused attention", "other kernels", "collectives")


def _by_kind(ks: list, roofs) -> dict[str, float]:
    """Seconds of the step's kernels by kind (``KINDS`` but the collectives), each kind priced alone on ``roofs``."""
    from jaxgpu.pricing import roofline

    flash = [k for k in ks if k.scope == "flash_attention"]
    dots = [k for k in ks if k.is_dot and k.scope != "flash_attention"]
    other = [k for k in ks if not k.is_dot and k.scope != "flash_attention"]
    return {kind: roofline.price(part, roofs).device_s if part else 0.0
            for kind, part in zip(KINDS, (dots, flash, other))}


def _matmul_shares(ks: list, roofs) -> tuple[float, float]:
    """(of the kernels' FLOPs, the matrix products' (fused attention's included); of their priced time, the same)."""
    from jaxgpu.pricing import roofline

    dots = [k for k in ks if k.is_dot or k.scope == "flash_attention"]
    others = [k for k in ks if not (k.is_dot or k.scope == "flash_attention")]
    t_dots, t_other = (roofline.price(ks_, roofs).device_s if ks_ else 0.0 for ks_ in (dots, others))
    all_flops = sum(k.flops * k.count for k in ks)
    return (sum(k.flops * k.count for k in dots) / all_flops if all_flops else 0.0,
            t_dots / (t_dots + t_other) if t_dots + t_other else 0.0)


def _devices_for(hw: hardware.Hardware, devices: int) -> tuple[list, str]:
    """(the devices a step for ``devices`` cards is compiled for, the plan's name): XLA:GPU's compile-only devices,
    else this machine's CPU devices standing in (an estimate, named so)."""
    import jax

    devs, label = _mesh_devices(hw, devices)
    if devs is not None:
        return devs, label
    devs = jax.devices("cpu")[:devices]
    if len(devs) < devices:
        raise RuntimeError(f"no XLA:GPU plan for {devices} {hw.name}s here ({label}), and this machine has "
                           f"{len(devs)} CPU devices to stand in: install the gpu-compile extra")
    return devs, f"xla:cpu, estimate ({label})"


def _compiled(step, placed: list, label: str, options: dict | None = None) -> tuple[float, str, dict]:
    """(bytes the program holds, its optimized HLO, those bytes by kind: ``MEMORY_PARTS``), from XLA:GPU's plan
    (compiled with ``options``) or this CPU's."""
    from jaxgpu.pricing import targets

    if label.startswith("xla:gpu"):
        plan = targets.compile_plan(step, *placed, options=options, cache=True)  # asked again: read, not compiled
    else:
        compiled = step.lower(*placed).compile()
        m = compiled.memory_analysis()
        plan = targets.Plan(m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes,
                            m.alias_size_in_bytes, 0.0, compiled.as_text())
    split = dict(zip(MEMORY_PARTS, map(float, (plan.argument_bytes, plan.output_bytes, plan.temp_bytes,
                                                plan.alias_bytes))))
    return float(plan.total_bytes), plan.hlo, split


# XLA's memory analysis of a program, per device: what it holds is arguments + outputs + temporaries - aliased (an
# output written over a donated argument counted once)
MEMORY_PARTS = ("arguments", "outputs", "temporaries", "aliased")


# why XLA's plan of a flash step holds the attention's scores that the formula leaves out
_UNFUSED = ", which the program computes whole and a fused kernel never holds"


def formula_vs_plan(p: ModelPlan) -> str:
    """Where ``jaxgpu.pricing.fit``'s formula and XLA's plan of the step part, per device, in a sentence: what each
    counts and, where they differ by more than a tenth, which side holds the difference and why."""
    from jaxgpu.records.labels import si

    m, f = p.memory_split, p.estimate_parts
    if not m or not f:
        return ""
    held = m["arguments"] + m["outputs"] - m["aliased"]  # what stays between steps: weights, state, cache, tokens
    temp = m["temporaries"]
    # the scores the plan read may hold at once: not where a twin in blocks was tried (read, or shown not to hold less)
    whole = 0.0 if p.query_block or p.written_bytes else p.scores_bytes
    read = p.query_block and p.written_bytes  # the twin's plan is the one read
    twin = (f" XLA's plan is of the step with its attention run {p.query_block} queries at a time, as a fused kernel "
            f"tiles it: as written, the step holds {si(p.written_bytes - p.bytes_per_device, 'B')} more a GPU, as it "
            f"computes each layer's attention scores whole ({si(p.scores_bytes, 'B')} in float32)."
            if read else "")
    if p.mode.startswith("train"):
        # the formula's 18 bytes a parameter: fp32 weights, gradients and two moments, a bf16 copy; XLA keeps the
        # weights and moments between steps and the gradients and the copy (6 of the 18) among its temporaries
        passing = f["state"] * 6 / 18
        acts = temp - passing
        text = (f"the formula counts {si(f['state'], 'B')} of weights, gradients, AdamW moments and a bf16 copy and "
                f"{si(f['activations'], 'B')} of activations (Korthikanti et al.'s count); XLA's plan holds "
                f"{si(held, 'B')} between steps (the weights and moments) and {si(temp, 'B')} of temporaries, of "
                f"which the gradients and the copy are {si(passing, 'B')}, so {si(max(acts, 0), 'B')} for activations "
                "and scratch")
        if acts < 0.9 * f["activations"]:
            text += (": fewer than the count, as the step recomputes its norms, MLP activation and loss in the "
                     "backward pass")
        elif acts > 1.1 * f["activations"]:
            near = 0.5 * whole < acts - f["activations"] < 1.5 * whole  # the excess is about the scores
            text += (": more than the count, which leaves out the logits over the vocabulary and the backward "
                     "pass's scratch" + (f", and one layer's attention scores ({si(whole, 'B')} in float32)"
                                         + _UNFUSED if near else ""))
        return text + "." + twin
    if p.mode == "prefill":
        text = (f"the formula counts {si(f['weights'], 'B')} of weights and {si(f['activations'], 'B')} for one "
                f"layer's values at a time; XLA's plan holds {si(held, 'B')} between steps and {si(temp, 'B')} of "
                "temporaries")
        block = p.scores_bytes * p.query_block / p.seq if read else 0.0  # the twin's block holds these
        if 0.5 * whole < temp - f["activations"] < 1.5 * whole:
            text += f": more than the count, by about one layer's attention scores ({si(whole, 'B')} in " \
                    "float32)" + _UNFUSED
        elif 0.5 * block < temp - f["activations"] < 1.5 * block:
            text += f": more than the count, by about a block's attention scores ({si(block, 'B')} in float32)"
        elif temp > 1.5 * f["activations"]:
            text += (": more than the count, which leaves out the logits, the copies XLA makes between layouts and, "
                     "split over GPUs, the values a split keeps whole on each")
        return text + "." + twin
    text = (f"the formula counts {si(f['weights'], 'B')} of weights and {si(f['kv_cache'], 'B')} of KV cache; XLA's "
            f"plan holds {si(held, 'B')} between steps and {si(temp, 'B')} of temporaries")
    if temp > 0.05 * held:
        text += (": the logits over the vocabulary, the layers' products and any copy of a weight XLA makes in "
                 "another layout, none of which the formula counts")
    return text + "."


def _config(model: str | Any):
    """The decoder ``model`` names, in any case and punctuation ("Llama3-8B", "llama38b": llama3-8b), or a ``Config``
    as it is."""
    from jaxgpu.kernels import transformer as tf

    if isinstance(model, tf.Config):
        return model
    squeezed = {re.sub(r"[^a-z0-9.]", "", k): k for k in tf.CONFIGS}  # "Llama-3 8B", "llama38b": llama3-8b
    try:
        return tf.CONFIGS[model.lower() if model.lower() in tf.CONFIGS else squeezed[re.sub(r"[^a-z0-9.]", "",
                                                                                            model.lower())]]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(model.lower(), tf.CONFIGS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise KeyError(f"unknown model {model!r}; {hint}known: {', '.join(tf.CONFIGS)}") from None


def default_settings(mode: str):
    """No remat, flash attention (a decode step's is XLA's), bf16, one node; layers scanned, but in a decode step held
    apart, as the published
    serving runs hold them: XLA:GPU's plan of a scanned decode copies each layer's slice out of the stacked weights
    first (its dynamic-slice fusions move 0.74 GB a layer for Llama-2 7B: 24 ms a token on an A100 against 8.8 ms
    unrolled, both on XLA:GPU's plan)."""
    from jaxgpu.kernels import transformer as tf

    return tf.StepSettings(scan=mode != "serve", flash=mode != "serve")


def _check_settings(s, mode: str, hw: hardware.Hardware, batch: int, c: Any = None, seq: int = 0) -> None:
    from jaxgpu.records.results import Unsupported

    if c is not None and c.style == "gpt2" and seq > c.max_seq:  # learned positions: max_seq rows, no more
        raise ValueError(f"{c.name} has {c.max_seq:,} learned positions: a sequence of {seq:,} tokens is longer")
    if c is not None and c.experts > 1 and (s.weights != "bf16" or s.matmul != "bf16"):
        raise ValueError("a mixture of experts runs its experts in bf16 here: int8 or fp8 experts are not built")
    training = mode.startswith("train")
    if not training and (s.remat != "none" or s.nodes > 1 or s.accumulate > 1):
        raise ValueError("remat, nodes and micro-batches are a training step's settings; a prefill or decode step "
                         "runs on one node and keeps no activations for a backward pass")
    if mode != "serve" and s.weights != "bf16":
        raise ValueError("int8 or fp8 weights are a decode step's storage (--serve); training keeps its master weights")
    if mode == "serve" and s.matmul != "bf16":
        raise ValueError("fp8 products in a decode step are not built; its weights' storage is a serving setting")
    if mode == "serve" and s.flash:
        raise ValueError("a decode step's attention is XLA's, one token against its cache: flash is a setting of "
                         "training and prefill")
    if batch % s.nodes:
        raise ValueError(f"a batch of {batch} does not split over {s.nodes} nodes")
    if (batch // s.nodes) % s.accumulate:
        raise ValueError(f"a node's batch of {batch // s.nodes} does not split into {s.accumulate} micro-batches")
    if s.matmul == "fp8" and not hw.tflops.get("fp8"):
        raise Unsupported(f"the {hw.name} has no fp8 matrix units: an fp8 step would be emulated in wider types, "
                          "which is not what fp8 training buys")
    if s.nodes > 1 and not hw.internode_gbps:
        raise Unsupported(f"the hardware table knows no network between {hw.name} nodes (internode_gbps)")


def _internode_s(c, mode: str, hw: hardware.Hardware, devices: int, nodes: int) -> float:
    """Seconds of the gradients' all-reduce between nodes, each GPU's share over its own port (a ring over the
    nodes: 2 (nodes - 1) / nodes of the share each way), not overlapped with compute: the nodes hold the model
    alike (FSDP within a node, data parallel between them), the gradients in the weights' storage type."""
    if nodes < 2:
        return 0.0
    grad_bytes = c.params() * (2 if mode == "train_bf16" else 4) / devices
    return 2 * (nodes - 1) / nodes * grad_bytes / (hw.internode_gbps / 2 * 1e9)


def _step(c, mode: str, batch: int, seq: int, mesh, how: str, s: Any) -> tuple:
    """(the step, its argument specs, their shardings, tokens per step, the model's FLOPs per step) of ``mode``,
    split ``how`` (``split_of``) over ``mesh``; ``s``: the step's settings."""
    import jax
    import jax.numpy as jnp

    from jaxgpu.kernels import transformer as tf

    if mode.startswith("train"):
        specs = tf.train_specs(c, batch, seq, dtype=jnp.bfloat16 if mode == "train_bf16" else jnp.float32)
        sh = (tf.shard_specs(specs[0], mesh, how), tf.shard_specs(specs[1], mesh, how),
              tf.shard_specs(specs[2], mesh, how, batch=True))
        step, _ = tf.train_step(c, flash=s.flash, sharding=sh, settings=s)
        tokens, model_flops = batch * seq, 6.0 * c.active_params() * batch * seq
    elif mode == "prefill":
        specs = (tf.param_specs(c, jnp.bfloat16), jax.ShapeDtypeStruct((batch, seq), jnp.int32))
        sh = (tf.shard_specs(specs[0], mesh, how), tf.shard_specs(specs[1], mesh, how, batch=True))
        step = tf.prefill_step(c, sharding=sh, settings=s)
        tokens, model_flops = batch * seq, 2.0 * c.active_params() * batch * seq
    else:
        specs = tf.decode_specs(c, batch, seq, s.weights, unrolled=not s.scan)
        sh = (tf.shard_specs(specs[0], mesh, how), tf.shard_specs(specs[1], mesh, how),
              tf.shard_specs(specs[2], mesh, how, batch=True), tf.shard_specs(specs[3], mesh, how, batch=True))
        step = tf.decode_step(c, weights=s.weights, sharding=sh)
        tokens, model_flops = batch, 2.0 * c.active_params() * batch
    return step, specs, sh, tokens, model_flops


def _collectives(ks: list, hw: hardware.Hardware, devices: int) -> tuple[float, float, list, dict]:
    """(seconds of the program's async collectives (a ``-start`` / ``-done`` pair: what XLA:GPU's schedule can run
    under compute), seconds of its synchronous ones, the other kernels, {collective: (count, bytes moved)}); each at
    the card's link bandwidth, one direction."""
    hidden, exposed, rest, counts = 0.0, 0.0, [], {}
    link = (hw.link_gbps or 0) / 2 * 1e9  # one direction
    for k in ks:
        op = next((o for o in _LINK_SHARE if k.name.startswith(o)), None)
        if op is None:
            rest.append(k)
            continue
        if k.name.startswith(op + "-done"):
            continue
        started = k.name.startswith(op + "-start")
        g = k.group or devices  # a 2-D mesh's collectives run within a group of its devices: the share is the group's
        moved = k.count * k.bytes * _LINK_SHARE[op](g)  # a start's bytes are its results' (stack.async_results)
        n, b = counts.get(op, (0, 0.0))
        counts[op] = (n + k.count, b + moved)
        t = moved / link if link else 0.0
        if started:
            hidden += t
        else:
            exposed += t
    return hidden, exposed, rest, counts


def _fit_shape(c):
    """The config in ``jaxgpu.pricing.fit``'s terms (layers, width, heads), for its estimate beside XLA's plan."""
    from jaxgpu.pricing import fit

    return fit.Transformer(c.name, c.layers, c.d_model, c.heads, c.vocab, kv_heads=c.kv_heads, ffn=c.ffn,
                           gated=c.style == "llama", head_dim=c.head_dim, tied=c.style == "gpt2" or c.tied,
                           experts=c.experts, top_k=c.top_k, window=c.window)


def model_on_gpus(model: str | Any, *, train: bool = True, batch: int = 1, seq: int = 2048,
                  devices: Sequence[int] = (1, 8), gpus: Sequence[str] | None = None,
                  mode: str | None = None, settings: Any = None) -> list[ModelPlan | NotPriced]:
    """``plan_model`` for each GPU of the hardware table (or ``gpus``) and each device count: what
    ``python -m experiments.model`` prints; a card that cannot run the step as asked is a ``NotPriced``."""
    from jaxgpu.records.results import Unsupported

    hws = [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values())
    out: list[ModelPlan | NotPriced] = []
    for hw in hws:
        for n in devices:
            try:
                out.append(plan_model(model, hw.name, train=train, batch=batch, seq=seq, devices=n, mode=mode,
                                      settings=settings))
            except Unsupported as why:
                name = model if isinstance(model, str) else model.name
                out.append(NotPriced(name, mode or ("train" if train else "serve"), hw.name, n, str(why)))
    return out


def fewest_on_gpus(model: str | Any, *, counts: Sequence[int] = NODE, gpus: Sequence[str] | None = None,
                   **step: Any) -> list[ModelPlan | NotPriced]:
    """``fewest`` for each GPU of the hardware table (or ``gpus``): what ``python -m experiments.model --fit``
    prints; a card that cannot run the step as asked is a ``NotPriced``."""
    from jaxgpu.records.results import Unsupported

    out: list[ModelPlan | NotPriced] = []
    for hw in [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values()):
        try:
            out.append(fewest(model, hw.name, counts=counts, **step))
        except Unsupported as why:
            name = model if isinstance(model, str) else model.name
            mode = step.get("mode") or ("train" if step.get("train", True) else "serve")
            out.append(NotPriced(name, mode, hw.name, max(counts), str(why)))
    return out
