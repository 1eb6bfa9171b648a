"""What practitioners turn when a training step does not fit: the fit search over the knobs real runs use.

``fewest`` finds the fewest GPUs of a node that hold a step as asked, trying only the meshes. When that is not one
GPU, ``fit`` tries the knobs a practitioner reaches for first, each a change to the step's settings, cheapest first
by what it usually costs in time: micro-batches (the batch in passes, gradients accumulated), activation
checkpointing as MaxText's and Pax's policies save (the products without a batch dimension kept) and as torch's
checkpoint of each layer does (nothing kept), and the weights and AdamW's state in bf16 (of a LoRA step, its frozen
base in NF4). At each count below the fewest found, from the largest down, the knobs are compiled in that order
until one holds the step; the search stops at the first count none holds (one GPU's share only grows as the count
falls). The answer names the knob and what it costs in time: the step with the knob against the step as asked on the
same GPUs (priced, though it does not fit there).

"Fits" is JAX's default: the plan within 75% of the card (``sharded.USABLE_FRACTION``). The answer also says the
fewest GPUs that would hold it with the share raised (``RAISED``, the ``XLA_PYTHON_CLIENT_MEM_FRACTION`` MaxText's
and Pax's scripts set), among the plans compiled on the way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.pricing import planner, sharded

# JAX's preallocated share raised as MaxText's (0.85) and Pax's and JAX-Toolbox's (0.9) scripts raise it
RAISED = 0.9
RAISE_WITH = "XLA_PYTHON_CLIENT_MEM_FRACTION"
# activation checkpointing as runs set it: MaxText's minimal / Pax's SAVE_DOT_WITH_NO_BATCH_DIM keep the products
# without a batch dimension; torch.utils.checkpoint around each layer keeps nothing but the layer's input
SAVE_DOTS = "dots_with_no_batch_dims_saveable"
SAVE_NOTHING = "nothing_saveable"


def fits_raised(plan: Any) -> bool:
    """Whether a ``planner.ModelPlan`` fits its card with JAX's share raised to ``RAISED`` (its ``capacity`` is the
    default share's)."""
    return plan.bytes_per_device <= RAISED * plan.capacity / sharded.USABLE_FRACTION


@dataclasses.dataclass(frozen=True)
class Knob:
    """One change to a step's settings: its name in the answer, and the settings and mode it gives."""

    name: str
    changes: tuple = ()  # StepSettings fields, (name, value) pairs
    mode: str = ""  # another mode (train_bf16: the weights and AdamW's state in bf16), or the step's own

    def apply(self, settings: Any, mode: str) -> tuple[Any, str]:
        return dataclasses.replace(settings, **dict(self.changes)), self.mode or mode


def knobs(settings: Any, mode: str, batch: int) -> list[Knob]:
    """The knobs to try on a training step as asked, cheapest first; none that the settings already turn, none a
    serving step takes, micro-batches only where they split each node's batch evenly."""
    if not mode.startswith("train"):
        return []
    out = []
    per_node = batch // settings.nodes
    for k in (2, 4, 8):
        acc = settings.accumulate * k
        if per_node % acc == 0 and per_node // acc >= 1:
            out.append(Knob(f"{acc} micro-batches", (("accumulate", acc),)))
    if settings.remat == "none":
        out.append(Knob(f"remat {SAVE_DOTS} (MaxText's minimal, Pax's SAVE_DOT_WITH_NO_BATCH_DIM)",
                        (("remat", SAVE_DOTS),)))
    if mode == "train" and not settings.lora:
        out.append(Knob("bf16 weights and AdamW state", mode="train_bf16"))
    if settings.lora and settings.weights == "bf16":  # LoRA's frozen base in 4 bits: QLoRA
        out.append(Knob("nf4 base weights (QLoRA)", (("weights", "nf4"),)))
    if settings.remat in ("none", SAVE_DOTS):
        out.append(Knob(f"remat {SAVE_NOTHING} (each layer recomputed, as torch's checkpoint of a layer)",
                        (("remat", SAVE_NOTHING),)))
        deepest = max((k for k in out if k.changes and k.changes[0][0] == "accumulate"),
                      key=lambda k: k.changes[0][1], default=None)
        if deepest is not None:
            out.append(Knob(f"{deepest.name} and remat {SAVE_NOTHING}",
                            (*deepest.changes, ("remat", SAVE_NOTHING))))
    return out


@dataclasses.dataclass(frozen=True)
class Fit:
    """The fit search's answer for one card.

    Attributes:
      plan: the step on the fewest GPUs that hold it (``plan.fits``), with ``knob`` turned; where nothing held it,
        the step as asked on the most GPUs searched.
      knob: the knob that made it fit on ``plan.devices`` ("" for the step as asked).
      asked_s: the step as asked on the same GPUs (its time, though it may not fit there): ``plan.seconds /
        asked_s - 1`` is what the knob costs.
      raised: the fewest GPUs among the plans compiled that hold it within ``RAISED`` of the card, and that plan's
        knob ("" as asked); 0 where none did.
    """

    plan: Any
    knob: str
    asked_s: float
    raised: int
    raised_knob: str

    @property
    def cost(self) -> float:
        """The knob's cost in time: its step over the step as asked on the same GPUs, less one (0.12: 12% slower)."""
        return self.plan.seconds / self.asked_s - 1 if self.asked_s else 0.0


def fit(model: str | Any, gpu: str = hardware.DEFAULT_GPU, *, counts: Sequence[int] = planner.NODE,
        train: bool = True, batch: int = 1, seq: int = 2048, mode: str | None = None, settings: Any = None) -> Fit:
    """The fewest of ``counts`` GPUs named ``gpu`` that hold the step, the step as asked first (``planner.fewest``)
    and then with each knob (``knobs``) on fewer; arguments as ``planner.plan_model``'s."""
    m = mode or ("train" if train else "serve")
    s = settings or planner.default_settings(m)
    tried: list[tuple[str, Any]] = []  # (knob, plan) for every plan compiled here

    def plan(n: int, knob: Knob | None) -> Any:
        s2, m2 = knob.apply(s, m) if knob else (s, m)
        try:
            p = planner.plan_model(model, gpu, batch=batch, seq=seq, devices=n, mode=m2, settings=s2)
        except ValueError:  # a knob the mesh cannot lay out on n GPUs (micro-batches a GPU's rows do not split)
            if knob is None:
                raise
            return None
        tried.append((knob.name if knob else "", p))
        return p

    best = planner.fewest(model, gpu, counts=counts, batch=batch, seq=seq, mode=m, settings=s)
    tried.append(("", best))
    knob_name = ""
    ordered = sorted(set(counts))
    below = [n for n in ordered if n < best.devices] if best.fits else ordered
    for n in reversed(below):
        held = next((p for k in knobs(s, m, batch) if (p := plan(n, k)) is not None and p.fits), None)
        if held is None:
            break  # one GPU's share only grows as the count falls: no knob holds it on fewer
        best, knob_name = held, tried[-1][0]
    asked = next((p for k, p in tried if not k and p.devices == best.devices), None)
    if asked is None and knob_name:
        asked = plan(best.devices, None)
    raised = [(p.devices, k) for k, p in tried if fits_raised(p)]
    low = min(raised, default=(0, ""))
    return Fit(best, knob_name, asked.seconds if asked else best.seconds, low[0], low[1])


def fit_on_gpus(model: str | Any, *, counts: Sequence[int] = planner.NODE, gpus: Sequence[str] | None = None,
                **step: Any) -> list[Fit | planner.NotPriced]:
    """``fit`` for each GPU of the hardware table (or ``gpus``): what ``python -m experiments.model --fit`` prints;
    a card that cannot run the step as asked is a ``planner.NotPriced``."""
    return planner.each_gpu(fit, model, counts=counts, gpus=gpus, **step)


# the largest a search grows to: sequences a step (batch) and tokens a sequence (seq)
LIMITS = {"batch": 65536, "seq": 1 << 20}
SEQ_UNIT = 256  # a sequence grows in whole blocks of a fused attention kernel's tiles


def largest(model: str | Any, gpu: str = hardware.DEFAULT_GPU, *, what: str = "batch", devices: int = 8,
            train: bool = True, batch: int = 1, seq: int = 2048, mode: str | None = None,
            settings: Any = None) -> Any:
    """The plan of the step with the largest batch (``what="batch"``) or sequence (``"seq"``) that ``devices`` GPUs
    named ``gpu`` hold (``fits``), the other held as asked: doubling from the size asked until a plan does not fit,
    then halving the gap to a batch its nodes, micro-batches and GPUs split evenly (a batch the GPUs do not split is
    held whole on each), or a whole ``SEQ_UNIT`` of tokens; below
    the size asked where even that does not fit. None where even the smallest does not. Each try is a plan_model
    compile (the plan cache answers a repeat)."""
    if what not in LIMITS:
        raise ValueError(f"what must be one of {', '.join(LIMITS)}, got {what!r}")
    m = mode or ("train" if train else "serve")
    s = settings or planner.default_settings(m)
    # a batch grows by what splits it evenly: its nodes, micro-batches and, where the GPUs split the batch (fsdp), them
    split = planner.split_of(s, m)
    unit = s.nodes * s.accumulate * (devices if split != "tp" else 1) if what == "batch" else SEQ_UNIT
    cache: dict[int, Any] = {}

    def plan(x: int) -> Any:
        if x not in cache:
            size = {"batch": batch, "seq": seq} | {what: x}
            try:
                cache[x] = planner.plan_model(model, gpu, devices=devices, mode=m, settings=s, **size)
            except ValueError:  # past what the model takes (a GPT-2's learned positions): no larger fits
                cache[x] = None
        return cache[x]

    def fits(x: int) -> bool:
        return plan(x) is not None and plan(x).fits

    x = max(unit, ({"batch": batch, "seq": seq}[what] // unit) * unit)
    # settings or a mesh that cannot be laid out are said, not read as "does not fit" (only a size past what the
    # model takes is, below)
    planner._asked(model, gpu, m, s, *({"batch": batch, "seq": seq} | {what: min(x, unit)}).values(), devices)
    lo, hi = 0, None
    while fits(x):  # grow while it fits
        lo = x
        if x >= LIMITS[what]:
            return plan(x)
        x = min(2 * x, LIMITS[what])
    hi = x
    while not lo and hi > unit:  # even the size asked does not fit: shrink until one does
        hi, x = max(unit, (hi // 2 // unit) * unit), hi
        if fits(hi):
            lo, hi = hi, x
    if not lo:
        return None
    while hi - lo > unit:
        mid = (lo + hi) // 2 // unit * unit
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return plan(lo)
