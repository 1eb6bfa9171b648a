"""A decoder's training step in pipeline stages, priced from one stage's plans: ``plan`` (what
``jaxgpu.pricing.planner.plan_model`` answers for ``StepSettings.pp`` > 1).

A pipeline's GPUs run different programs (a stage each), so it is not compiled whole: XLA:GPU plans the heaviest
stage (``stage_of``) on its devices / pp GPUs, split there by the step's mesh, and the schedule puts the stages'
work in order. Plans of that stage give what the schedule needs: two micro-batches accumulated in a loop, priced as
compiled and with its loop run three times (the third trip is one micro-batch's forward and backward, ``per`` below;
what the plan holds beyond two trips is once a step: the update, zeroing the gradients' sum, the loop's copies), one
micro-batch with its update; and the stage's layers alone (a vocabulary of a few rows) with one micro-batch and with
two at once: what one more micro-batch in flight holds, the head's logits and loss not among it, as the last stage
computes them for one micro-batch at a time. Then, for M micro-batches, P stages and V virtual stages a GPU:

- the step: M micro-batches' work, the update once, and the bubble, (P - 1) / V micro-batches' work and the
  2 (P - 1) sends the first micro-batch's forward and the last one's backward wait on;
- the sends between stages: a micro-batch's activations (its gradients on the way back), a GPU's share of them, over
  NVLink within a node and the network port across nodes; in the steady state a GPU's 2 V sends a micro-batch run
  under its compute, as an async collective does (``jaxgpu.pricing.sharded``), what outlasts it added;
- the memory: the stage's plan with its gradients accumulated, and the activations of the micro-batches the
  schedule keeps in flight on the first stage (``in_flight``) beyond the plan's one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxgpu.ground import decoders, hardware
from jaxgpu.pricing import sharded


def in_flight(schedule: str, stages: int, micro_batches: int, virtual: int = 1) -> float:
    """Micro-batches whose activations the first stage holds at its peak, in micro-batches through all its layers:
    GPipe every one (each forward pass runs before any backward); 1F1B ``stages`` (its warm-up of stages - 1
    forward passes and one more before the first backward); interleaved 1F1B ``stages`` + (``stages`` - 1) /
    ``virtual`` (Megatron's warm-up: 2 (P - 1) + (V - 1) P chunks and one more, each 1/V of the layers; Korthikanti
    et al. 2022's factor 1 + (P - 1) / (P V)). Never more than the micro-batches there are."""
    if schedule == "gpipe":
        return float(micro_batches)
    if virtual == 1:
        return float(min(stages, micro_batches))
    chunks = min(2 * (stages - 1) + (virtual - 1) * stages + 1, micro_batches * virtual)
    return chunks / virtual


def bubble_share(stages: int, micro_batches: int, virtual: int = 1) -> float:
    """The share of a step the stages wait, their work apart from sends and update: (P - 1) / V micro-batches'
    work of M + (P - 1) / V (Narayanan et al. 2021; (P - 1) / (M + P - 1) without virtual stages, either schedule)."""
    idle = (stages - 1) / virtual
    return idle / (micro_batches + idle)


def stage_of(c: decoders.Decoder, stages: int) -> decoders.Decoder:
    """The heaviest stage as a decoder of its own: layers / ``stages`` of ``c``'s layers and one vocabulary matrix
    used at both ends (the embedding and the output head tied), as the last stage holds the head and computes the
    loss and the first holds the embedding: the last stage's time, and the weights of either end."""
    return dataclasses.replace(c, name=f"{c.name} (a stage of {stages})", layers=c.layers // stages, tied=True)


# the vocabulary rows a GPU of the stage whose plans give one more micro-batch's activations in flight: few enough
# that its logits are nothing beside a layer's stream (128256 rows: a micro-batch's fp32 logits are 4.2 GB at 8k
# tokens, which the whole stage's plans counted once more for each micro-batch in flight)
BODY_VOCAB = 64


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A pipeline step's time, in seconds: ``per`` micro-batch through a stage (forward and backward), ``once`` a
    step (the update, the gradients' reduction), ``bubble`` waiting (its sends included), ``sends`` what the steady
    state's sends add beyond the compute they run under; ``seconds`` the whole step."""

    per: float
    once: float
    bubble: float
    sends: float
    seconds: float


def schedule(two: float, three: float, micro_batches: int, stages: int, virtual: int, send_s: float) -> Schedule:
    """A pipeline step's time from a stage's step of two micro-batches accumulated in a loop (``two``: their forwards
    and backwards, the update) and of three (``three``: the same loop run once more), ``send_s`` a send of one
    micro-batch's activations between stages. The third micro-batch is one's work; the rest of ``two`` beyond two of
    them is once a step. (A plan of one micro-batch, no loop, would not do: the loop's once-a-step work, its
    gradients' sum zeroed and copied, is not in it, and its difference from ``two`` counted that work once a
    micro-batch.)"""
    per, once = _linear(two, three)
    bubble = (stages - 1) * (per / virtual + 2 * send_s)
    sends = micro_batches * max(2 * virtual * send_s - per, 0.0)
    return Schedule(per, once, bubble, sends, micro_batches * per + once + bubble + sends)


def _check(c: decoders.Decoder, mode: str, hw: hardware.Hardware, batch: int, devices: int, s: Any) -> None:
    """A pipeline that can be laid out (``plan``'s Raises)."""
    p, v, m = s.pp, s.vp, s.accumulate
    if not mode.startswith("train"):
        raise ValueError("pipeline stages split a training step; a prefill or decode step takes fsdp, tp or fsdp+tp")
    if devices % p:
        raise ValueError(f"{devices} GPUs do not split into {p} pipeline stages")
    n = devices // p
    if n > hw.node and n % hw.node or n < hw.node and hw.node % n and devices > hw.node:
        raise ValueError(f"a stage's {n} GPUs would straddle nodes of {hw.node}: take a count that gives each stage "
                         "a part of a node or whole nodes")
    if devices > hw.node and not hw.internode_gbps:
        from jaxgpu.records.results import Unsupported
        raise Unsupported(f"the hardware table knows no network between {hw.name} nodes (internode_gbps)")
    if c.layers % (p * v):
        raise ValueError(f"{c.name}'s {c.layers} layers do not split into {p} stages"
                         + (f" x {v} virtual stages" if v > 1 else ""))
    if v > 1 and m % p:
        raise ValueError(f"interleaved stages take micro-batches in multiples of the stages ({p}), got {m}")
    if s.nodes > 1:
        raise ValueError("a pipeline counts every GPU in devices: the nodes setting is not taken with pp")
    if batch % m:
        raise ValueError(f"a batch of {batch} does not split into {m} micro-batches")


def _send_s(c: decoders.Decoder, hw: hardware.Hardware, micro: int, seq: int, n: int, devices: int, how: str,
            tp: int) -> tuple[float, float]:
    """(seconds, bytes) of one send between stages: a micro-batch's residual stream in bf16, a GPU's share (cut as
    the stage's mesh cuts its batch: not by a tp mesh, by the groups of fsdp+tp or zero1+tp), over NVLink within a
    node or the network port where the pipeline spans nodes (its slowest boundary sets the pace)."""
    from jaxgpu.kernels import sharding

    ways = 1 if how == "tp" else n // (tp or sharding.tp_degree(n)) if how in ("fsdp+tp", "zero1+tp") else n
    nbytes = 2.0 * micro * seq * c.d_model / ways
    rate = sharded.port_rate(hw) if devices > hw.node else sharded.link_rate(hw)
    return (nbytes / rate if rate else 0.0), nbytes


def plan(model: str | Any, gpu: str, *, mode: str, batch: int, seq: int, devices: int, settings: Any,
         plan_stage: Callable) -> Any:
    """A training step of ``batch`` sequences of ``seq`` tokens in ``settings.pp`` pipeline stages over ``devices``
    GPUs named ``gpu`` (a ``jaxgpu.pricing.planner.ModelPlan``), priced from the heaviest stage's XLA:GPU plans
    (``plan_stage``: ``jaxgpu.pricing.planner.stage_plan``; ``plan_model`` answers so for pp > 1) by the module's
    schedule. ``settings.accumulate`` micro-batches flow through the stages.

    Raises:
      ValueError: a pipeline that cannot be laid out (not training; devices not in whole stages, a stage across
        nodes; layers not in stages x virtual stages; interleaving with micro-batches not a multiple of the stages),
        or a stage its mesh cannot split (``plan_model``'s).
      jaxgpu.records.results.Unsupported: as ``plan_model``.
    """
    c, hw, s = decoders.find(model), hardware.with_network(hardware.find_gpu(gpu), settings.network), settings
    _check(c, mode, hw, batch, devices, s)
    p, v, m = s.pp, s.vp, s.accumulate
    stage, n, micro = stage_of(c, p), devices // p, batch // m
    one = dataclasses.replace(s, pp=1, vp=1, schedule="1f1b", accumulate=1)
    a = plan_stage(stage, gpu, batch=micro, seq=seq, devices=n, mode=mode, settings=one)
    b, b3 = (plan_stage(stage, gpu, batch=2 * micro, seq=seq, devices=n, mode=mode,
                        settings=dataclasses.replace(one, accumulate=2), trips=k) for k in (0, 3))
    # one more micro-batch in flight, read off the stage's layers (a vocabulary of a few rows a GPU): the first stage
    # holds the layers' activations of several, the last its head's logits and loss for one at a time
    body = dataclasses.replace(stage, vocab=BODY_VOCAB * n)
    lone, wide = (plan_stage(body, gpu, batch=k * micro, seq=seq, devices=n, mode=mode, settings=one) for k in (1, 2))
    send_s, send_bytes = _send_s(c, hw, micro, seq, n, devices, s.mesh if s.mesh != "auto" else "fsdp", s.tp)
    # the schedule orders the stage's work (its time less what its collectives add); the collectives of every
    # micro-batch and the update are the step's, hidden under its work as the run hides them (``_collectives``)
    t = schedule(_work(b), _work(b3), m, p, v, send_s)
    added, hidden = _collectives(b, b3, m, t, s.overlap)
    seconds = t.seconds + added
    held = in_flight(s.schedule, p, m, v)
    base = b if m > 1 else a  # the gradients summed over micro-batches: the plan that holds their sum
    more = (held - 1) * max(wide.bytes_per_device - lone.bytes_per_device, 0.0)  # the rest in flight
    nbytes = base.bytes_per_device + more
    comm = added + t.sends
    peak = (hw.peak_flops("fp8" if s.matmul == "fp8" else "bf16") or 0) * devices
    flops = (6.0 * c.active_params() if not s.lora else
             4.0 * c.active_params() + 6.0 * c.adapter_params(s.lora, s.lora_on)) * batch * seq
    est = {k: x * (held if k == "activations" else 1) for k, x in a.estimate_parts.items()}
    return dataclasses.replace(
        a, model=c.name, devices=devices, batch=batch, seq=seq, settings=s.words(),
        mesh=f"pp {p}" if n == 1 else f"pp {p} x {a.mesh}" + (f" {n}" if " " not in a.mesh else ""),
        bytes_per_device=nbytes, fits=nbytes <= sharded.USABLE_FRACTION * hw.device_bytes,
        memory_split={**base.memory_split, "temporaries": base.memory_split["temporaries"] + more},
        estimate_bytes=sum(est.values()), estimate_parts=est, written_bytes=0.0,
        # the bounds: the same schedule over the stage's bounds, the upper with every send in the open
        # (a stage's lower bound takes its collectives whole where they outlast its one micro-batch's compute,
        # which a step of many hides: never above the estimate)
        seconds=seconds, lower_s=min(schedule(b.lower_s, b3.lower_s, m, p, v, send_s).seconds, seconds),
        upper_s=schedule(b.upper_s, b3.upper_s, m, p, v, 0.0).seconds + 2 * (m * v + p - 1) * send_s,
        comm_s=comm, overlapped_s=hidden,
        collectives={**_counts(b.collectives, b3.collectives, m),
                     "pipeline send": (2 * m * v, 2 * m * v * send_bytes)},
        binds="pipeline bubble" if t.bubble > max(t.seconds - t.bubble - t.sends, comm) else b.binds,
        tokens_per_s=batch * seq / seconds, mfu=flops / seconds / peak if peak else 0.0,
        time_split={**_split(b.time_split, b3.time_split, m, t, comm), "pipeline bubble": t.bubble},
        pp=p, schedule=s.schedule if v == 1 else "interleaved 1f1b", vp=v, micro_batches=m, bubble_s=t.bubble,
        send_s=send_s, in_flight=held)


def _work(x: Any) -> float:
    """A stage plan's time less what its collectives add: its kernels' work."""
    return x.seconds - x.comm_s


def _collectives(b: Any, b3: Any, m: int, t: Schedule, overlap: str) -> tuple[float, float]:
    """(seconds the step's collectives add, seconds of them hidden): every micro-batch's and the update's, from the
    stage's plans of two and three micro-batches; a framework's hidden under the step's whole work, up to its length
    (``StepSettings.overlap``), XLA's as each micro-batch's schedule hides them (the plans' own waits)."""
    whole = _over(b.comm_s + b.overlapped_s, b3.comm_s + b3.overlapped_s, m)
    if overlap == "framework":
        added = max(whole - (t.seconds - t.bubble - t.sends), 0.0)
    else:
        added = min(_over(b.comm_s, b3.comm_s, m), whole)
    return added, whole - added


def _linear(two: float, three: float) -> tuple[float, float]:
    """(once a micro-batch, once a step) of a quantity of the stage's plans of two and three micro-batches."""
    per = max(three - two, 0.0)
    return per, max(two - 2 * per, 0.0)


def _over(two: float, three: float, m: int) -> float:
    """A quantity of the stage's plans of two and three micro-batches over ``m`` micro-batches, the bubble apart."""
    per, once = _linear(two, three)
    return m * per + once


def _counts(b: dict, b3: dict, m: int) -> dict:
    """The stage's collectives {op: (count, bytes)} over ``m`` micro-batches."""
    return {op: (round(_over(k, b3.get(op, (k, x))[0], m)), _over(x, b3.get(op, (k, x))[1], m))
            for op, (k, x) in b.items()}


def _split(b: dict, b3: dict, m: int, t: Schedule, comm: float) -> dict:
    """The step's work by kind: each kind of kernel over the schedule, scaled to the work's seconds (each kind's
    clamps apart), and the collectives the step adds (``comm``: theirs and the steady state's exposed sends)."""
    split = {k: _over(x, b3.get(k, x), m) for k, x in b.items() if k != "collectives"}
    work = t.seconds - t.bubble - t.sends
    split = {k: x * work / (sum(split.values()) or 1.0) for k, x in split.items()}
    split["collectives"] = comm
    return split
