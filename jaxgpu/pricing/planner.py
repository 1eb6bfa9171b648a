"""A decoder's step on N GPUs, planned: ``plan_model`` compiles it for the GPUs by XLA:GPU on this CPU (nothing
runs, nothing is allocated) and prices it (``ModelPlan``); ``fewest`` searches the fewest GPUs that hold it;
``formula_vs_plan`` says where the memory formula and XLA's plan part. What ``python -m experiments.model`` prints.

The decoder is ``jaxgpu.ground.decoders``'s, its step ``jaxgpu.kernels.transformer``'s, split by
``jaxgpu.kernels.sharding``'s rules; the plan is read by ``jaxgpu.pricing.sharded``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxgpu.ground import decoders, hardware
from jaxgpu.pricing import feasible, fingerprint, fit, roofline, sharded, targets
from jaxgpu.pricing import workers as pool
from jaxgpu.pricing.feasible import split_of  # noqa: F401 - planner.split_of, read by the knobs and tests
from jaxgpu.pricing.memory_words import formula_vs_plan  # noqa: F401 - planner.formula_vs_plan, as documented
from jaxgpu.records.results import Unsupported


@dataclasses.dataclass(frozen=True)
class ModelPlan:
    """A transformer's step on ``devices`` GPUs of one kind, compiled for them and priced, never run.

    ``bytes_per_device`` from XLA:GPU's memory plan (``memory_plan`` names it; XLA:CPU's stands in without the
    gpu-compile extra) beside ``estimate_bytes``, ``jaxgpu.pricing.fit``'s formula for the whole model cut as the
    mesh cuts it; ``fits`` within ``sharded.USABLE_FRACTION`` of the card as it reports itself (``device_bytes``);
    ``seconds`` per step (``lower_s`` to ``upper_s``), of which ``comm_s`` is what the step's collectives add at the
    datasheet link bandwidth, or the network port's for those that join nodes (one direction): the
    async ones beyond the compute they run under (``overlapped_s`` of them hidden), the synchronous ones whole;
    ``upper_s`` prices them all unhidden; ``tokens_per_s`` and ``mfu`` (model FLOPs, 6 x parameters per trained
    token or 2 x per served one; of a LoRA step, 4 x the base's and 6 x the adapters', its frozen weights taking no
    gradient; over the devices' bf16 peak, or fp8's for fp8 products) follow from it."""

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
    # a pipeline's (``jaxgpu.pricing.pipeline``): its stages, schedule, virtual stages a GPU and micro-batches; the
    # step's seconds waiting (``bubble_s``, sends on the way included), one send between stages, and the micro-batches
    # whose activations the first stage holds at its peak
    pp: int = 1
    schedule: str = ""
    vp: int = 1
    micro_batches: int = 1
    bubble_s: float = 0.0
    send_s: float = 0.0
    in_flight: float = 0.0

    @property
    def capacity(self) -> float:
        """The bytes of one card the step may hold: ``sharded.USABLE_FRACTION`` (JAX's default share) of the memory the
        device reports (``Hardware.device_bytes``)."""
        return sharded.USABLE_FRACTION * hardware.find_gpu(self.gpu).device_bytes


@dataclasses.dataclass(frozen=True)
class NotPriced:
    """A step that cannot run on a card as asked (fp8 products on a card without fp8 matrix units; nodes where the
    table knows no network between them): said, not priced as an emulation."""

    model: str
    mode: str
    gpu: str
    devices: int
    reason: str


MODES = ("train", "train_bf16", "prefill", "serve")


def plan_model(model: str | Any, gpu: str = hardware.DEFAULT_GPU, *, train: bool = True, batch: int = 1,
               seq: int = 2048, devices: int = 1, mode: str | None = None, settings: Any = None) -> ModelPlan:
    """``model`` (a name of ``jaxgpu.ground.decoders.MODELS``, or any ``Decoder``) training (one AdamW step over
    ``batch`` sequences of ``seq`` tokens, split fsdp) or serving (one decode step for ``batch`` sequences against a
    ``seq``-token cache, split by tensor parallelism) on ``devices`` GPUs named ``gpu``, compiled for them by
    XLA:GPU on this CPU and priced (``ModelPlan``). Nothing is allocated.

    ``mode``, one of ``MODES``, overrides ``train``: "train_bf16" keeps the weights and AdamW's state in bf16;
    "prefill" runs a ``seq``-token prompt through every layer (tp) and gives the next token's logits. ``settings``: a
    ``jaxgpu.ground.decoders.StepSettings`` (remat, flash attention, fp8, the mesh, micro-batches, pipeline stages:
    ``jaxgpu.pricing.pipeline``); default: no remat, flash attention, bf16, layers scanned but in a decode step.

    Raises:
      KeyError: an unknown model or GPU.
      ValueError: settings the mode does not take (remat in serving), or a mesh or pipeline that cannot be laid out.
      jaxgpu.records.results.Unsupported: the card cannot run the step so (fp8 without fp8 units; no network).
      RuntimeError: no XLA:GPU plan can be had here (the gpu-compile extra is missing) and ``devices`` > 1.
    """
    mode = mode or ("train" if train else "serve")
    if settings is not None and settings.pp > 1:  # stages apart: each planned, the schedule puts them in order
        from jaxgpu.pricing import pipeline
        return pipeline.plan(model, gpu, mode=mode, batch=batch, seq=seq, devices=devices, settings=settings,
                             plan_stage=stage_plan)
    return _plan(model, gpu, mode, batch, seq, devices, settings)


def stage_plan(stage: Any, gpu: str, *, batch: int, seq: int, devices: int, mode: str, settings: Any,
               trips: int = 0) -> ModelPlan:
    """A pipeline stage's plan (``plan_model`` of one stage, ``jaxgpu.pricing.pipeline``); ``trips``: its loop over
    ``settings.accumulate`` micro-batches priced as run this many times, the plan's own loop body each more time (a
    plan of more micro-batches compiled afresh would split their rows otherwise over the GPUs: 3 x 4 sequences do not
    cut over 8 as 2 x 4 do). Where XLA left no such loop, the plan of ``trips`` micro-batches itself."""
    if not trips:
        return _plan(stage, gpu, mode, batch, seq, devices, settings)
    try:
        return _plan(stage, gpu, mode, batch, seq, devices, settings, loop=(settings.accumulate, trips))
    except LookupError:
        return _plan(stage, gpu, mode, batch * trips // settings.accumulate, seq, devices,
                     dataclasses.replace(settings, accumulate=trips))


def _plan(model: str | Any, gpu: str, mode: str, batch: int, seq: int, devices: int, settings: Any,
          loop: tuple[int, int] | None = None) -> ModelPlan:
    """``plan_model`` of one program (no pipeline); ``loop``: ``sharded.priced``'s. An answer priced before by this
    library's code, as it is byte for byte, under the same compiler and XLA_FLAGS, is read from the plan cache
    (``targets.plan_cache``) without JAX."""
    c, mode, s, hw = _asked(model, gpu, mode, settings, batch, seq, devices)
    label = sharded.label_for(hw)  # None: which plan prices it is known only by trying, and no answer is kept
    key = label and targets.key_of(["answer", targets.code_of(_LIBRARY), fingerprint.card_data(hw), c, hw, mode, batch,
                                    seq, devices, s, loop, label, targets.plugin()])
    if key and (answered := _answered(key)) is not None:
        return answered
    if pool.only_cached():
        raise pool.NotCached(key)
    try:
        plan = _priced(c, hw, mode, batch, seq, devices, s, loop)
    except LookupError as err:  # no loop of the trips asked: kept too, so that a pipeline's fallback is read next
        if key:
            _keep(key, {"lookup": str(err)})
        raise
    if key and plan.memory_plan == label:
        _keep(key, dataclasses.asdict(plan))
    return plan


# the library's code a priced answer depends on: the planner and every module it imports, anywhere in its code (their
# tables of data aside: the card's entries are keyed by ``fingerprint.card_data``); read as the planner is imported,
# so that a file edited afterwards (in a notebook's session) keys no answer of the code that runs
_LIBRARY = ("jaxgpu.pricing.planner",)
targets.code_of(_LIBRARY)


def _keep(key: str, answer: dict) -> None:
    targets.plan_cache().write(key, answer)


def _answered(key: str) -> ModelPlan | None:
    """The ``ModelPlan`` kept under ``key`` (its collectives' pairs as tuples again), or None; the LookupError kept
    there is raised again."""
    if (got := targets.plan_cache().read(key)) is None:
        return None
    if "lookup" in got:
        raise LookupError(got["lookup"])
    try:
        return ModelPlan(**{**got, "collectives": {k: tuple(v) for k, v in got["collectives"].items()}})
    except (TypeError, KeyError, AttributeError):  # written by another version of ModelPlan
        return None


def _priced(c, hw: hardware.Hardware, mode: str, batch: int, seq: int, devices: int, s: Any,
            loop: tuple[int, int] | None) -> ModelPlan:
    """``_plan``'s answer, priced from XLA's plans (each read from the plan cache, or compiled) on the devices
    ``sharded.label_for`` names, or, where it cannot name them or they cannot be had in this process, on those
    ``sharded.devices_for`` finds (XLA:CPU's standing in without the gpu-compile extra)."""
    label, devs = sharded.label_for(hw), None
    if label is not None:
        try:
            return _priced_on(c, hw, mode, batch, seq, devices, s, loop, label, None)
        except sharded.NoCompileDevices:
            pass
    devs, label = sharded.devices_for(hw, devices)
    return _priced_on(c, hw, mode, batch, seq, devices, s, loop, label, devs)


def _priced_on(c, hw: hardware.Hardware, mode: str, batch: int, seq: int, devices: int, s: Any,
               loop: tuple[int, int] | None, label: str, devs: Sequence[Any] | None) -> ModelPlan:
    """``_priced`` on the plans ``label`` names, compiled for ``devs`` (None: the card's compile-only devices)."""
    from jaxgpu.kernels import sharding
    how = split_of(s, mode)
    shape = sharding.mesh_shape(devices, how, s.tp, hw.node, group=s.ep if how == "ep" else s.cp)
    step = _program(c, mode, batch // s.nodes, seq, how, s, hw, devices, devs)
    tokens, model_flops = _work(c, mode, batch // s.nodes, seq, s)
    roofs = roofline.roofs_for(hw)
    q = sharded.priced(step, label, hw, roofs, devices, triton=s.weights != "bf16", options=dict(s.xla),
                       overlap=s.overlap, loop=loop)
    nbytes, split, counts, rest, p = q.nbytes, q.split, q.counts, q.rest, q.p
    scores = _scores_bytes(c, mode, batch, seq, s, how, shape)
    twin = _program(c, mode, batch // s.nodes, seq, how, s, hw, devices, devs, block=True)
    nbytes, split, block, written = _blocked_memory(c, mode, seq, s, twin, label, scores, nbytes, split)
    between = _internode_s(c, mode, hw, devices, s)
    est = _per_gpu(_estimate(c, mode, batch, seq, s), how, devices, hw.node, shape.get(sharding.MODEL, 1))
    # an async collective adds only what the compute between its start and its done does not cover (``sharded.waited``:
    # XLA's schedule, or the framework's), a synchronous one and the nodes' all-reduce whole
    comm = q.added_s + between
    seconds = p.estimate_s + comm
    tokens, model_flops = tokens * s.nodes, model_flops * s.nodes  # every node's share of the batch, at once
    peak = (hw.peak_flops("fp8" if s.matmul == "fp8" else "bf16") or 0) * devices * s.nodes
    flop_share, time_share = sharded.matmul_shares(rest, roofs)
    return ModelPlan(
        model=c.name, mode=mode, gpu=hw.name, devices=devices, batch=batch, seq=seq, nodes=s.nodes,
        settings=s.words(), mesh=mesh_words(how, shape), plan=p.plan, memory_plan=label,
        # memory: XLA's plan (or its twin in blocks of queries), the formula beside it
        bytes_per_device=nbytes, fits=nbytes <= sharded.USABLE_FRACTION * hw.device_bytes, memory_split=split,
        estimate_bytes=sum(est.values()), estimate_parts=est,
        scores_bytes=scores, query_block=block, written_bytes=written,
        # time: the kernels priced on the card's roofs, the collectives beyond the compute they run under
        seconds=seconds, lower_s=max(p.lower_s, comm), upper_s=p.upper_s + comm + q.overlapped, comm_s=comm,
        internode_s=between, overlapped_s=q.overlapped, collectives=counts,
        binds="communication" if comm > max(p.compute_s, p.memory_s, p.launch_s) else p.bound,
        tokens_per_s=tokens / seconds, mfu=model_flops / seconds / peak if peak else 0.0,
        matmul_flop_share=flop_share, matmul_time_share=time_share,
        time_split={**sharded.by_kind(rest, roofs), "collectives": comm})


def _asked(model: str | Any, gpu: str, mode: str, settings: Any, batch: int, seq: int, devices: int = 1) -> tuple:
    """(the decoder, the mode, its settings, the card) a plan is asked for, checked (``plan_model``'s Raises)."""
    c = decoders.find(model)
    if mode not in MODES:
        raise KeyError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    s = settings or default_settings(mode)
    hw = hardware.with_network(hardware.find_gpu(gpu), s.network)
    feasible.check_settings(s, mode, hw, batch, c, seq, devices)
    return c, mode, s, hw


# one layer's attention scores past this share of a flash step's plan (and past a block's): its memory is read off
# a twin of the step whose attention runs a block of queries at a time, a block's scores QUERY_BLOCK_BYTES a GPU at most
SCORES_SHARE = 0.05


QUERY_BLOCK_BYTES = 256e6


MIN_QUERY_BLOCK = 128  # queries a block at least (a block's scores may then pass QUERY_BLOCK_BYTES)


def _blocked_memory(c, mode: str, seq: int, s, twin: Any, label: str, scores: float, nbytes: float, split: dict
                    ) -> tuple[float, dict, int, float]:
    """(bytes a GPU, their split, the query block, the bytes of the step as written where a twin was planned)
    of the step's memory. XLA's plan of a flash step may hold one
    layer's attention scores as the program computes them (``scores`` a GPU; Llama 7B's 16k-token prefill on one
    H100: 35.2 GB of temporaries, 34.4 GB of them), which the fused kernel whose time the step is priced at never
    holds. Where they come to ``SCORES_SHARE`` of the plan and more than a block's, a twin of the step that runs
    its attention a block of queries at a time (``StepSettings.query_block``: the same arithmetic, a block's
    scores held at once, as a fused kernel tiles it) is planned too, and kept where it holds half the scores less
    or more (XLA fuses some steps' scores away itself). The time stays the step's own. ``twin(block)``: the step's
    program with its attention ``block`` queries at a time (``_program``'s)."""
    banded = decoders.keys_seen(seq, c.window) < seq  # a sliding window's blocks already hold t x 2 windows of scores
    if s.query_block or banded or scores < max(SCORES_SHARE * nbytes, QUERY_BLOCK_BYTES):
        return nbytes, split, s.query_block, 0.0
    want = max(MIN_QUERY_BLOCK, int(seq * QUERY_BLOCK_BYTES / scores))
    block = next((b for b in range(min(want, seq // 2), 0, -1) if seq % b == 0), 0)
    if block < MIN_QUERY_BLOCK // 8:  # a prime length: no block worth a scan
        return nbytes, split, 0, 0.0
    got, _, twin_split = sharded.compiled(twin(block), label, dict(s.xla))
    # kept where it holds less by half the scores or more: the plan as written held them at once
    return (got, twin_split, block, nbytes) if got < nbytes - 0.5 * scores else (nbytes, split, 0, nbytes)


def _scores_bytes(c, mode: str, batch: int, seq: int, s, how: str, shape: dict) -> float:
    """One layer's attention scores in float32 a GPU: what XLA's plan of a flash step may hold while a layer computes
    them, as the program writes them whole, and the fused kernel whose time the step is priced at never holds. Cut by
    the axes that cut the attention (``shape``: the mesh's axis sizes): fsdp's by the batch, or by the queries where
    the groups of fsdp+tp split the sequence; tp's by the heads where both kinds of head divide. A step already in
    blocks of queries (``StepSettings.query_block``) holds a block's. 0 in a decode step, and without flash (the
    formula counts them there)."""
    from jaxgpu.kernels import sharding
    if mode == "serve" or not s.flash:
        return 0.0
    micro = batch // s.nodes // s.accumulate if mode.startswith("train") else batch
    whole = 4.0 * c.heads * seq * decoders.keys_seen(seq, c.window) * micro
    cut = 1
    data = shape.get(sharding.AXIS, 1) * shape.get(sharding.REPLICAS, 1) if how != "tp" else 1
    if micro % data == 0 or (how in ("fsdp+tp", "zero1+tp") and seq % data == 0):
        cut *= data
    model = shape.get(sharding.MODEL, 1) if sharding.MODEL in shape else shape.get(sharding.AXIS, 1) if how == "tp" \
        else 1
    if c.heads % model == 0 and c.kv_heads % model == 0:
        cut *= model
    if seq % shape.get(sharding.CONTEXT, 1) == 0:  # cp: a GPU's queries, a piece of the sequence
        cut *= shape.get(sharding.CONTEXT, 1)
    block = s.query_block if s.query_block and seq % s.query_block == 0 else seq
    return whole / cut * block / seq


def mesh_words(how: str, shape: dict[str, int]) -> str:
    """A plan's mesh in a few characters: "fsdp", "tp", "dp", "zero1", "zero2", "hsdp 2 x fsdp 8" (the nodes, and a
    node's GPUs) or "fsdp 4 x tp 2" (the groups, and the GPUs of a group); ``shape``: the mesh's axis sizes
    (``sharding.mesh_shape``)."""
    from jaxgpu.kernels import sharding

    if how == "hsdp":
        return f"hsdp {shape[sharding.REPLICAS]} x fsdp {shape[sharding.AXIS]}"
    if how not in sharding.INNER:
        return how
    outer = "zero1" if how == "zero1+tp" else "fsdp"
    return f"{outer} {shape[sharding.AXIS]} x {how.split('+')[-1]} {shape[sharding.INNER[how]]}"


def _estimate(c, mode: str, batch: int, seq: int, s) -> dict[str, float]:
    """``jaxgpu.pricing.fit``'s formula for the whole step, by component (divided by the devices it is split over)."""
    micro = batch // s.nodes // s.accumulate  # the sequences whose activations a GPU's node holds at once
    if mode.startswith("train") and s.lora:
        return fit.transformer_lora(c, seq, micro, s.flash, s.lora, s.lora_on, s.weights, s.remat)
    if mode.startswith("train"):
        return fit.transformer_train(c, "bf16", seq, micro, flash=s.flash, remat=s.remat)
    if mode == "prefill":
        return fit.transformer_prefill(c, "bf16", seq, batch, flash=s.flash)
    return fit.transformer_inference(c, "bf16", seq, batch)


# of a trained weight's 18 bytes in the formula (fp32 weights 4, a bf16 copy 2, fp32 gradients 4, two moments 8),
# those each mesh keeps whole on every GPU: ZeRO-1 (Megatron's distributed optimizer, "6 + 12/d" bytes a parameter)
# the bf16 weights and fp32 gradients, cutting the fp32 weights and moments; ZeRO-2 the gradients cut too
_WHOLE_SHARE = {"dp": 1.0, "zero1": 6 / 18, "zero2": 2 / 18, "zero1+tp": 6 / 18}


def _per_gpu(est: dict[str, float], how: str, devices: int, node: int, tp: int = 1) -> dict[str, float]:
    """The formula's whole-step bytes (``_estimate``) a GPU holds, split ``how`` over ``devices``: activations (and a
    KV cache) by every GPU; weights and state by every GPU (fsdp, tp, fsdp+tp), by a node's (hsdp), or whole on
    each but for ZeRO's cut share (dp, zero1, zero2; zero1+tp's whole share cut by its ``tp`` group)."""
    out = {}
    for k, v in est.items():
        if k in ("activations", "kv_cache"):
            out[k] = v / devices
        elif how == "hsdp":
            out[k] = v / min(node, devices)
        elif how in _WHOLE_SHARE:
            whole = _WHOLE_SHARE[how] if k == "state" else 1.0  # a LoRA step's frozen weights stay whole
            out[k] = v * whole / (tp if how == "zero1+tp" else 1) + v * (1 - whole) / devices
        else:
            out[k] = v / devices
    return out


def _program(c, mode: str, batch: int, seq: int, how: str, s: Any, hw: hardware.Hardware, devices: int,
             devs: Sequence[Any] | None = None, block: bool = False) -> Any:
    """The step's program (``jaxgpu.kernels.programs.built``) as a ``targets.Program``, said by what makes it so that
    a cached plan of it is read before anything is traced: the decoder, mode, sizes, mesh and settings, the card's
    compile target and its topology, or ``devs`` (the devices it is compiled for where they are known; else the
    card's compile-only ones, made on a miss). ``block``: a function of a query block giving the program of the
    step with its attention that many queries at a time (``_blocked_memory``'s twin)."""
    if block:
        return lambda b: _program(c, mode, batch, seq, how, dataclasses.replace(s, query_block=b), hw, devices, devs)
    name = roofline.plan_target(hw)[0]
    recipe = ["decoder step", c, mode, batch, seq, how, s, devices, hw.node, name,
              targets.config_text(targets.target(name)) if name else "", targets.topology(devices, hw.node),
              [str(d) for d in devs] if devs is not None else None]

    def build() -> tuple:
        from jaxgpu.kernels import programs

        on = devs if devs is not None else sharded.gpu_devices(hw, devices)
        return programs.built(on, c, mode, batch, seq, how, s, hw.node)

    return targets.Program(recipe, ("jaxgpu.kernels.programs",), build)


def _work(c, mode: str, batch: int, seq: int, s: Any) -> tuple[float, float]:
    """(tokens, the model's FLOPs) of one step of ``batch`` sequences of ``seq`` tokens: 6 FLOPs a parameter a
    trained token, or a LoRA step's 4 a frozen weight (the forward pass and the backward's through every frozen
    matrix, no gradient for it) and 6 an adapter's; 2 a served token."""
    tokens = batch * seq if mode != "serve" else batch
    if mode.startswith("train") and s.lora:
        return tokens, (4.0 * c.active_params() + 6.0 * c.adapter_params(s.lora, s.lora_on)) * tokens
    return tokens, (6.0 if mode.startswith("train") else 2.0) * c.active_params() * tokens


def default_settings(mode: str):
    """No remat, flash attention (a decode step's is XLA's), bf16, one node; layers scanned, but in a decode step held
    apart, as the published
    serving runs hold them: XLA:GPU's plan of a scanned decode copies each layer's slice out of the stacked weights
    first (its dynamic-slice fusions move 0.74 GB a layer for Llama-2 7B: 24 ms a token on an A100 against 8.8 ms
    unrolled, both on XLA:GPU's plan)."""


    return decoders.StepSettings(scan=mode != "serve", flash=mode != "serve")


def _internode_s(c, mode: str, hw: hardware.Hardware, devices: int, s: Any) -> float:
    """Of the earlier way to say a run over nodes (``StepSettings.nodes``: one node's program priced), seconds of the
    gradients' all-reduce between nodes, each GPU's share over its own port (a ring over the nodes: 2 (nodes - 1) /
    nodes of the share each way), not overlapped with compute: the nodes hold the model alike (FSDP within a node,
    data parallel between them), the gradients in the weights' storage type (of a LoRA step, the adapters' alone).
    A mesh over several nodes (``devices`` past a node) is compiled whole and prices its own collectives."""
    nodes = s.nodes
    if nodes < 2:
        return 0.0
    trained = c.adapter_params(s.lora, s.lora_on) if s.lora else c.params()
    grad_bytes = trained * (2 if mode == "train_bf16" else 4) / devices
    return 2 * (nodes - 1) / nodes * grad_bytes / sharded.port_rate(hw)


# the counts ``fewest`` searches unless told: one node of eight, joined by NVLink (a DGX); counts past a node are
# compiled whole over its nodes (fsdp then cuts the state over every GPU)
NODE = (1, 2, 4, 8)


def fewest(model: str | Any, gpu: str = hardware.DEFAULT_GPU, *, counts: Sequence[int] = NODE, train: bool = True,
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
    from jaxgpu.kernels import sharding

    m = mode or ("train" if train else "serve")
    s = settings or default_settings(m)
    counts = sorted(n for n in set(counts) if not s.tp or n % s.tp == 0)
    if not counts:
        raise ValueError(f"none of the counts searched splits into tensor-parallel groups of {s.tp}")
    best, tried = _fewest_on(decoders.find(model), hardware.find_gpu(gpu), counts, m, batch, seq, s)
    if s.mesh != "auto" or s.ep > 1 or s.cp > 1:  # expert and context groups are fsdp's
        return best
    for how in [h for h in ("fsdp", "tp", "fsdp+tp") if h != split_of(s, m)]:
        # fewer GPUs than the fewest found; where none of the counts held it, the most of them too
        fewer = [n for n in counts if (n < best.devices or not best.fits and n == best.devices)
                 and (how != "fsdp+tp" or 1 < sharding.tp_degree(n) < n)
                 and n <= hardware.find_gpu(gpu).node]  # a tensor-parallel group stays within a node
        # another mesh only where the mode's own came near on fewer GPUs (within a quarter of the card's share):
        # the meshes split a step's bytes within a few tenths of each other, so beyond that none can hold it
        if not fewer or not any(n in tried and tried[n].bytes_per_device <= 1.25 * best.capacity for n in fewer):
            continue
        found, _ = _fewest_on(decoders.find(model), hardware.find_gpu(gpu), fewer, m, batch, seq,
                              dataclasses.replace(s, mesh=how))
        best = found if found.fits else best
    return best


def _fewest_on(c, hw: hardware.Hardware, counts: list[int], m: str, batch: int, seq: int, settings: Any
               ) -> tuple[ModelPlan, dict[int, ModelPlan]]:
    """``fewest`` on one mesh: the fewest of ``counts`` that fits, else the plan on the most; and every plan
    compiled on the way, by count."""
    whole = sum(_estimate(c, m, batch, seq, settings).values())
    i = next((k for k, n in enumerate(counts) if fit.fits(whole / n, sharded.USABLE_FRACTION * hw.device_bytes / 1e9)),
             len(counts) - 1)
    tried: dict[int, ModelPlan] = {}

    def plan(k: int) -> ModelPlan:
        tried[counts[k]] = plan_model(c, hw.name, batch=batch, seq=seq, devices=counts[k], mode=m,
                                      settings=settings)
        return tried[counts[k]]

    cap = sharded.USABLE_FRACTION * hw.device_bytes
    if plan(i).fits:  # fewer, until one does not fit; a count the formula puts past 1.5x the card is not compiled
        while i > 0 and whole / counts[i - 1] <= 1.5 * cap and plan(i - 1).fits:
            i -= 1
        return tried[counts[i]], tried
    while i + 1 < len(counts):
        i += 1
        if plan(i).fits:
            return tried[counts[i]], tried
    return tried[counts[-1]], tried


def model_on_gpus(model: str | Any, *, train: bool = True, batch: int = 1, seq: int = 2048,
                  devices: Sequence[int] = (1, 8), gpus: Sequence[str] | None = None,
                  mode: str | None = None, settings: Any = None, workers: int = 1) -> list[ModelPlan | NotPriced]:
    """``plan_model`` for each GPU of the hardware table (or ``gpus``) and each device count: what
    ``python -m experiments.model`` prints; a card that cannot run the step as asked is a ``NotPriced``. The plans
    not in the cache are made in ``workers`` processes (``jaxgpu.pricing.workers``)."""
    hws = [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values())
    m = mode or ("train" if train else "serve")
    calls = [dict(search=plan_model, model=model, gpu=hw.name, batch=batch, seq=seq, devices=n, mode=m,
                  settings=settings) for hw in hws for n in devices]
    return pool.each(_priced_or_not, calls, workers)


def fewest_on_gpus(model: str | Any, *, counts: Sequence[int] = NODE, gpus: Sequence[str] | None = None,
                   workers: int = 1, **step: Any) -> list[ModelPlan | NotPriced]:
    """``fewest`` for each GPU of the hardware table (or ``gpus``); a card that cannot run the step as asked is a
    ``NotPriced``."""
    return each_gpu(fewest, model, counts=counts, gpus=gpus, workers=workers, **step)


def each_gpu(search: Any, model: str | Any, *, counts: Sequence[int] = NODE, gpus: Sequence[str] | None = None,
             workers: int = 1, **step: Any) -> list:
    """``search(model, gpu, counts=, **step)`` (``fewest``, ``knobs.fit``: a module-level function) for each GPU of
    the hardware table (or ``gpus``), the cards apart in ``workers`` processes where their plans are not cached; a
    card that cannot run the step as asked is a ``NotPriced`` with its reason."""
    hws = [hardware.find_gpu(g) for g in gpus] if gpus else list(hardware.GPUS.values())
    mode = step.get("mode") or ("train" if step.get("train", True) else "serve")
    calls = [dict(search=search, model=model, gpu=hw.name, counts=counts, devices=max(counts), **{**step, "mode": mode})
             for hw in hws]
    return pool.each(_priced_or_not, calls, workers)


def _priced_or_not(search: Any, model: str | Any, gpu: str, devices: int, **step: Any) -> Any:
    """``search(model, gpu, **step)`` (``devices=`` for ``plan_model``), or a ``NotPriced`` with the reason the card
    cannot run the step so (of ``devices`` GPUs)."""
    try:
        return search(model, gpu, **step) if "counts" in step else search(model, gpu, devices=devices, **step)
    except Unsupported as why:
        name = model if isinstance(model, str) else model.name
        return NotPriced(name, step["mode"], gpu, devices, str(why))
