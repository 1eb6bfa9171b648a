"""The fastest layout that fits: a search over a training step's parallel layouts, each priced from its compiled plan.

``candidates`` lists the layouts Megatron and MaxText run a step in on N GPUs of a card: a mesh (fsdp; hsdp past one
node; ZeRO-1 and -2; tensor-parallel groups within a node, with fsdp over the groups or Megatron's distributed
optimizer), pipeline stages with and without virtual stages, context groups, a mixture's expert groups,
micro-batches, remat (none, the frameworks' named policies, each layer recomputed) and, where asked, fp8 products.
``best_layouts`` judges each before anything is compiled, in this order, and keeps why:

1. the rules (``jaxgpu.pricing.feasible``, the pipeline's): a layout that cannot be laid out is ``refused``;
2. the formula (``jaxgpu.pricing.fit``, cut as the layout cuts the step): a layout whose formula, at
   ``FORMULA_FLOOR`` of itself (the least XLA's plan held against the formula on the committed plans), holds more
   than the card is pruned: it ``cannot fit``;
3. the price's lower bound (``bound_s``): the model's matrix FLOPs at the card's measured matrix share of its peak
   over every GPU, with a pipeline's bubble and a recomputed forward pass: a layout whose bound is above the best
   price found so far ``cannot beat`` it;
4. what recomputing buys: a layout the same but for more recomputation (``REMATS``' order), or, without stages, more
   micro-batches, than one already priced that fits is ``dominated``: recomputation and passes only add work to a
   price, and buy only memory, which the other did not need;
5. what the plans held: the formula leaves out XLA's temporaries and gathered weights, so once a layout's mesh has
   plans priced, the least they held beyond their formula is added to its other candidates' formula, and one that
   then passes the card ``cannot fit`` either (``_pruned``).

The rest are compiled and priced (``planner.plan_model``: plans and answers cached; in ``workers`` processes, the
bound's order, a round at a time), until ``budget_s`` is spent (the rest ``unexplored``). A plan that does not fit is
``does not fit``; the best that fits is ``best``, the others ``slower``. Nothing here is run: every figure is
predicted from XLA:GPU's plan, as ``plan_model``'s.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.ground import decoders, hardware
from jaxgpu.pricing import cluster, planner, sharded
from jaxgpu.pricing import workers as pool
from jaxgpu.records.results import Unsupported

# the least XLA's plan of a training step held against the formula (fit.transformer_train, cut as its mesh cuts it)
# over the committed transformer plans: 0.873, Llama-2 70B over 1 and 8 H100s and H200s (reports/compiled-h100 and
# -h200, bytes_compiled / bytes_predicted of the 36 train plans); a layout is pruned only where even this share of its
# formula exceeds the card
FORMULA_FLOOR = 0.85
# remat as the search tries it, least recomputed first: none, MaxText's minimal_flash (the products' outputs kept, the
# attention core recomputed), Megatron's selective (the attention core alone recomputed), every layer recomputed
REMATS = ("none", "megatron:selective", "maxtext:minimal_flash", "nothing_saveable")
MESHES = ("fsdp", "hsdp", "zero1", "zero2", "fsdp+tp", "zero1+tp")
FATES = ("best", "slower", "does not fit", "cannot beat", "dominated", "cannot fit", "refused", "unexplored")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One layout and what the search found of it: ``fate`` (``FATES``) and ``why`` in words; ``bound_s`` (the
    price's lower bound) and ``formula_bytes`` (the formula a GPU) before compiling; where it was priced, its plan's
    ``seconds``, ``bytes_per_device``, ``fits``, ``mfu`` and ``binds`` (predicted, never run)."""

    layout: str
    settings: decoders.StepSettings
    fate: str = "unexplored"
    why: str = ""
    bound_s: float = 0.0
    formula_bytes: float = 0.0
    seconds: float | None = None
    bytes_per_device: float | None = None
    fits: bool | None = None
    mfu: float | None = None
    binds: str = ""

    def row(self) -> dict:
        """The candidate as the command's JSON holds it (its settings as their fields)."""
        out = dataclasses.asdict(self)
        out["settings"] = {k: v for k, v in out["settings"].items() if k not in ("xla",)}
        return out


@dataclasses.dataclass(frozen=True)
class Search:
    """A search's answer: the step asked, every candidate ranked (the best first: those priced that fit by their
    seconds, then those priced that do not, then the rest by fate), the plans compiled and the seconds it took."""

    model: str
    gpu: str
    devices: int
    batch: int
    seq: int
    candidates: tuple[Candidate, ...]
    compiled: int
    elapsed_s: float

    def top(self, k: int = 3) -> list[Candidate]:
        return [c for c in self.candidates if c.fate in ("best", "slower")][:k]

    def counts(self) -> dict[str, int]:
        """How many candidates met each fate."""
        return {f: n for f in FATES if (n := sum(c.fate == f for c in self.candidates))}

    def figure(self) -> Any:
        """The priced candidates' predicted time against memory a GPU (``jaxgpu.records.figures.layout_figure``)."""
        from jaxgpu.records import figures

        capacity = sharded.USABLE_FRACTION * hardware.find_gpu(self.gpu).device_bytes
        return figures.layout_figure(self.candidates, capacity, f"{self.model}, a train step on {self.devices} "
                                                                f"{self.gpu}")


def layout_words(s: decoders.StepSettings) -> str:
    """A layout in a phrase: "zero1+tp (tp 4), pp 4 x vp 2, 8 micro-batches, remat megatron:selective, fp8"."""
    parts = [s.mesh if s.ep == 1 and s.cp == 1 else f"fsdp, {'ep' if s.ep > 1 else 'cp'} {max(s.ep, s.cp)}"]
    parts[0] += f" (tp {s.tp})" if s.tp else ""
    if s.pp > 1:
        parts.append(f"pp {s.pp}" + (f" x vp {s.vp}" if s.vp > 1 else ""))
    if s.accumulate > 1:
        parts.append(f"{s.accumulate} micro-batches")
    if s.remat != "none":
        parts.append(f"remat {s.remat}")
    if s.matmul == "fp8":
        parts.append("fp8")
    return ", ".join(parts)


def candidates(c: decoders.Decoder, hw: hardware.Hardware, devices: int, batch: int, seq: int,
               fp8: bool = False, remats: Sequence[str] = REMATS,
               base: decoders.StepSettings | None = None) -> list[decoders.StepSettings]:
    """Every layout the search tries for ``c`` trained on ``devices`` GPUs of ``hw``, before any rule is applied; the
    rest of each step's settings (flash, the network, overlap, XLA flags) are ``base``'s."""
    base = base or decoders.StepSettings()
    node = min(hw.node, devices)
    tps = [t for t in (2, 4, 8) if t <= node and node % t == 0]
    meshes = [(m, 0) for m in MESHES if "tp" not in m and (m != "hsdp" or devices > hw.node)]
    meshes += [(m, t) for m in ("fsdp+tp", "zero1+tp") for t in tps]
    groups = [("cp", k) for k in (2, 4) if seq % k == 0]
    groups += [("ep", k) for k in (2, 4, 8) if c.experts > 1 and c.experts % k == 0]
    out = []
    for pp in (p for p in (1, 2, 4, 8) if devices % p == 0 and c.layers % p == 0 and p < devices):
        for vp in (1, 2) if pp > 1 else (1,):
            for acc in sorted({1, 2, 4, 8} | ({pp, 2 * pp} if pp > 1 else set())):
                if vp > 1 and acc % pp:  # interleaving takes micro-batches in multiples of the stages
                    continue
                for remat in remats:
                    for matmul in ("bf16", "fp8") if fp8 else ("bf16",):
                        one = dataclasses.replace(base, remat=remat, accumulate=acc, pp=pp, vp=vp, matmul=matmul,
                                                  ep=1, cp=1, schedule="1f1b")
                        out += [dataclasses.replace(one, mesh=m, tp=t) for m, t in meshes]
                        out += [dataclasses.replace(one, mesh="fsdp", **{g: k}) for g, k in groups if pp == 1]
    return out


def refusal(c: decoders.Decoder, hw: hardware.Hardware, s: decoders.StepSettings, devices: int, batch: int,
            seq: int) -> str | None:
    """Why the rules refuse a layout (the line ``plan_model`` would raise), or None."""
    from jaxgpu.pricing import pipeline

    try:
        if s.pp > 1:
            pipeline._check(c, "train", hw, batch, devices, s)
            stage = dataclasses.replace(s, pp=1, vp=1, accumulate=1)
            planner._asked(pipeline.stage_of(c, s.pp), hw.name, "train", stage, batch // s.accumulate, seq,
                           devices // s.pp)
        else:
            planner._asked(c, hw.name, "train", s, batch, seq, devices)
    except (ValueError, KeyError, Unsupported) as why:
        return str(why).strip("'\"")
    return None


def formula_bytes(c: decoders.Decoder, hw: hardware.Hardware, s: decoders.StepSettings, devices: int, batch: int,
                  seq: int) -> float:
    """The formula's bytes a GPU (``planner``'s, cut as the layout's mesh cuts the step): a pipeline's first stage
    holds its share of the weights and state and the activations of its layers for the micro-batches in flight at
    its peak (``pipeline.in_flight``), as the pipeline's price counts them."""
    from jaxgpu.kernels import sharding
    from jaxgpu.pricing import pipeline

    how = planner.split_of(s, "train")
    tp = s.tp or (sharding.tp_degree(devices // s.pp) if how in ("fsdp+tp", "zero1+tp") else 1)
    est = planner._per_gpu(planner._estimate(c, "train", batch, seq, s), how, devices, hw.node, tp)
    held = pipeline.in_flight(s.schedule, s.pp, s.accumulate, s.vp) if s.pp > 1 else 1.0
    return sum(v * (held if k == "activations" else 1.0) for k, v in est.items())


def bound_s(c: decoders.Decoder, hw: hardware.Hardware, s: decoders.StepSettings, devices: int, batch: int,
            seq: int) -> float:
    """A lower bound of the layout's price: its matrix products' FLOPs (6 a trained token a weight, the embedding's
    gather left out; a forward pass more where every layer is recomputed) at the card's measured matrix share of its
    peak (the most the price lets a product reach) over every GPU, times a pipeline's bubble ((m + (p - 1) / v) / m of
    its work). Attention, collectives and memory-bound kernels only add to a price."""
    dtype = "fp8" if s.matmul == "fp8" else "bf16"
    rate = (hw.peak_flops(dtype) or 0.0) * hw.share(f"matmul:{dtype}").value * devices
    flops = 6.0 * (c.active_params() - c.vocab * c.d_model) * batch * seq
    flops *= 4 / 3 if s.remat in ("nothing_saveable", "maxtext:full", "megatron:full", "pax:SAVE_NOTHING") else 1
    bubble = (s.accumulate + (s.pp - 1) / s.vp) / s.accumulate if s.pp > 1 else 1.0
    return flops / rate * bubble if rate else 0.0


def _priced(model: Any, gpu: str, batch: int, seq: int, devices: int, settings: decoders.StepSettings) -> Any:
    """A layout's plan, or the reason it could not be had (a worker's task: module-level)."""
    try:
        return planner.plan_model(model, gpu, batch=batch, seq=seq, devices=devices, mode="train", settings=settings)
    except (ValueError, KeyError, LookupError, Unsupported) as why:
        return str(why).strip("'\"")


def best_layouts(model: str | Any, gpu: str = hardware.DEFAULT_GPU, *, devices: int, batch: int, seq: int,
                 fp8: bool = False, remats: Sequence[str] = REMATS, layout: decoders.StepSettings | None = None,
                 base: decoders.StepSettings | None = None, budget_s: float | None = None, workers: int = 1,
                 ray: str | None = None, progress: Callable[[int, int, Candidate], None] | None = None) -> Search:
    """The layouts of a training step of ``batch`` sequences of ``seq`` tokens on ``devices`` GPUs named ``gpu``,
    judged and priced as the module says, ranked best first (``Search``). ``layout``: a layout to price whatever the
    bound says (a published run's), beside the candidates; ``base``: the settings every candidate keeps but its
    layout (``candidates``); ``progress(priced, to price at most, candidate)`` after each priced. The plans not
    cached are compiled ``workers`` at a time: in as many processes here, or, with ``ray`` (a cluster's address:
    ``jaxgpu.pricing.cluster``), as Ray tasks over its nodes.

    Raises:
      KeyError: an unknown model, GPU or remat policy.
      ValueError: ``workers`` below 1, or a ``budget_s`` below 0.
      RuntimeError: with ``ray``, Ray is not installed or the cluster cannot be reached.
    """
    t0 = time.perf_counter()
    if budget_s is not None and budget_s < 0:
        raise ValueError(f"a budget is 0 or more seconds, got {budget_s}")
    c, hw = decoders.find(model), hardware.find_gpu(gpu)
    tried = candidates(c, hw, devices, batch, seq, fp8, remats, base)
    if layout is not None:
        tried = [layout] + [s for s in tried if s != layout]
    judged = [_judged(c, hw, s, devices, batch, seq) for s in dict.fromkeys(tried)]
    todo = sorted((k for k in judged if k.fate == "unexplored"),
                  key=lambda k: (k.settings != layout, k.bound_s, _weight(k.settings)))
    done: dict[decoders.StepSettings, Candidate] = {}
    best, count = float("inf"), 0
    while todo:
        if budget_s is not None and time.perf_counter() - t0 > budget_s and done:
            break
        todo = _pruned(todo, done, best, layout)
        now, todo = todo[:max(workers, 1)], todo[max(workers, 1):]
        calls = [dict(model=c, gpu=hw.name, batch=batch, seq=seq, devices=devices, settings=k.settings) for k in now]
        for k, got in zip(now, cluster.each(_priced, calls, ray) if ray else pool.each(_priced, calls, workers)):
            done[k.settings] = _fate(k, got)
            if isinstance(got, planner.ModelPlan) and got.fits:
                best = min(best, got.seconds)
            count += 1
            if progress:
                progress(count, count + len(todo) + len(now) - now.index(k) - 1, done[k.settings])
    out = [done.get(k.settings, k) for k in judged]
    out = [dataclasses.replace(k, why="the budget was spent first") if k.fate == "unexplored" else k for k in out]
    return Search(c.name, hw.name, devices, batch, seq, tuple(_ranked(out)), sum(
        k.seconds is not None for k in out), time.perf_counter() - t0)


def _pruned(todo: list[Candidate], done: dict, best: float, layout: Any) -> list[Candidate]:
    """``todo`` less what the plans priced so far (``done``) rule out, each put in ``done`` with why: a bound above
    the best price found (``cannot beat``), or a layout the same but recomputing more than one that fits
    (``dominated``). The ``layout`` asked is priced whatever they say. (What a mesh's plans held beyond the formula
    is not carried to its other candidates: it shrinks with recomputation and smaller micro-batches, and a
    candidate pruned so might have fit.)"""
    fitting = {_family(x.settings): x for x in done.values() if x.fits}
    left = []
    for k in todo:
        by = fitting.get(_family(k.settings))
        if k.settings == layout:
            left.append(k)
        elif k.bound_s >= best:
            done[k.settings] = dataclasses.replace(k, fate="cannot beat", why=f"its bound, {k.bound_s:.3g} s, is "
                                                                              f"above the best found, {best:.3g} s")
        elif by is not None and _heavier(k.settings, by.settings):
            done[k.settings] = dataclasses.replace(k, fate="dominated", why=f"{by.layout} fits, with less "
                                                                            "recomputation or fewer passes")
        else:
            left.append(k)
    return left


def _family(s: decoders.StepSettings) -> decoders.StepSettings:
    """A layout with its recomputation (and, without stages, its micro-batches) taken out: ``dominated``'s kin."""
    return dataclasses.replace(s, remat="none", accumulate=1 if s.pp == 1 else s.accumulate)


def _weight(s: decoders.StepSettings) -> tuple[int, int]:
    return _REMAT_ORDER.get(s.remat, len(REMATS)), s.accumulate if s.pp == 1 else 0


def _heavier(s: decoders.StepSettings, than: decoders.StepSettings) -> bool:
    """Whether ``s`` recomputes more or runs more passes than ``than``, of the same family, and no less of either."""
    a, b = _weight(s), _weight(than)
    return a != b and a[0] >= b[0] and a[1] >= b[1]


_REMAT_ORDER = {r: i for i, r in enumerate(REMATS)}


def _judged(c, hw, s, devices: int, batch: int, seq: int) -> Candidate:
    """A candidate judged before compiling: refused by the rules, pruned by the formula, or to be priced."""
    words = layout_words(s)
    if (why := refusal(c, hw, s, devices, batch, seq)) is not None:
        return Candidate(words, s, "refused", why)
    nbytes, capacity = formula_bytes(c, hw, s, devices, batch, seq), sharded.USABLE_FRACTION * hw.device_bytes
    bound = bound_s(c, hw, s, devices, batch, seq)
    if nbytes * FORMULA_FLOOR > capacity:
        why = (f"the formula holds {nbytes / 1e9:.1f} GB a GPU; {FORMULA_FLOOR:.0%} of it is more than the card's "
               f"{capacity / 1e9:.1f} GB")
        return Candidate(words, s, "cannot fit", why, bound, nbytes)
    return Candidate(words, s, "unexplored", "", bound, nbytes)


def _fate(k: Candidate, got: Any) -> Candidate:
    if not isinstance(got, planner.ModelPlan):
        return dataclasses.replace(k, fate="refused", why=str(got))
    return dataclasses.replace(k, fate="slower" if got.fits else "does not fit", seconds=got.seconds,
                               bytes_per_device=got.bytes_per_device, fits=got.fits, mfu=got.mfu, binds=got.binds,
                               why="" if got.fits else f"its plan holds {got.bytes_per_device / 1e9:.1f} GB a GPU")


def _ranked(out: list[Candidate]) -> list[Candidate]:
    """Those that fit by their seconds (the first ``best``, the others ``slower`` by how much), then those that do
    not by their bytes, then the rest by fate and bound."""
    fit = sorted((k for k in out if k.fate == "slower"), key=lambda k: k.seconds)
    if fit:
        first = fit[0].seconds
        fit = [dataclasses.replace(fit[0], fate="best")] + [
            dataclasses.replace(k, why=f"{k.seconds / first - 1:.0%} slower than the best") for k in fit[1:]]
    over = sorted((k for k in out if k.fate == "does not fit"), key=lambda k: k.bytes_per_device)
    rest = sorted((k for k in out if k.fate not in ("slower", "does not fit")),
                  key=lambda k: (FATES.index(k.fate), k.bound_s))
    return fit + over + rest
