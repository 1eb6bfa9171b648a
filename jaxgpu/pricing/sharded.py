"""A step split over N GPUs, read off XLA:GPU's plan of it: the devices it is compiled for, its memory, its kernels
priced on a card's roofs and its collectives on the card's links.

``jaxgpu.pricing.planner`` prices a decoder's step through it; any program with shardings can be (``placed`` specs,
``devices_for`` the card and count, ``program`` of the two, ``compiled`` for its plan, ``priced`` for its time).
Nothing is allocated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from typing import NamedTuple

from jaxgpu.ground import hardware, launches, stack
from jaxgpu.pricing import roofline, targets

# JAX preallocates this share of a GPU's memory for its arrays (XLA_PYTHON_CLIENT_MEM_FRACTION's default): a
# step that needs more does not fit as JAX is started by default (the rest is the CUDA context, cuBLAS and
# cuDNN workspaces, other processes)
USABLE_FRACTION = 0.75

# How many bytes each device sends over its links for a collective, per byte the kernel list counts for it
# (operands + results; an async start's results alone, however XLA's version prints them: stack.async_results):
# all-reduce ring 2(n-1)/n of its S, counted 2S; all-gather and reduce-scatter (n-1)/n of the full S, counted
# S(1 + 1/n); all-to-all (n-1)/n of S, counted 2S; a permute S, counted 2S.
LINK_SHARE = {"all-reduce": lambda n: (n - 1) / n, "all-gather": lambda n: (n - 1) / (n + 1),
               "reduce-scatter": lambda n: (n - 1) / (n + 1), "all-to-all": lambda n: (n - 1) / (2 * n),
               "collective-permute": lambda n: 0.5}


def compile_devices(hw: hardware.Hardware, n: int):
    """Compile-only devices of ``hw``'s XLA:GPU target (or its stand-in) and the plan's label; (None, why)
    where none can be had here."""
    name, label = roofline.plan_target(hw)
    why = "no XLA:GPU target for this GPU" if name is None else targets.unavailable()
    if why is None:
        try:
            roofline._cpu_only_if_no_driver()
            return targets.devices(name, n, hw.node), label
        except (NotImplementedError, RuntimeError) as err:
            why = f"XLA:GPU cannot compile in this process ({type(err).__name__})"
    return None, why


def devices_for(hw: hardware.Hardware, devices: int) -> tuple[list, str]:
    """(the devices a step for ``devices`` cards is compiled for, the plan's name): XLA:GPU's compile-only devices,
    else this machine's CPU devices standing in (an estimate, named so)."""
    import jax

    devs, label = compile_devices(hw, devices)
    if devs is not None:
        return devs, label
    devs = jax.devices("cpu")[:devices]
    if len(devs) < devices:
        raise RuntimeError(f"no XLA:GPU plan for {devices} {hw.name}s here ({label}), and this machine has "
                           f"{len(devs)} CPU devices to stand in: install the gpu-compile extra")
    return devs, f"xla:cpu, estimate ({label})"


def label_for(hw: hardware.Hardware) -> str | None:
    """The name of the plan a step for ``hw`` is priced from where it is known without JAX (a CUDA plugin at JAX's
    version and no GPU driver: XLA:GPU's compile-only devices, ``devices_for``), else None: only trying tells."""
    from jaxgpu.ground import devices

    name, label = roofline.plan_target(hw)
    if name is None or targets.unavailable() or devices.gpu_driver_present():
        return None
    return label


class NoCompileDevices(RuntimeError):
    """XLA:GPU's compile-only devices that ``label_for`` named cannot be had in this process (``devices_for``'s
    reason)."""


def gpu_devices(hw: hardware.Hardware, n: int) -> list:
    """``devices_for``'s XLA:GPU devices, for a step ``label_for`` named; ``NoCompileDevices`` where none can be had."""
    devs, label = devices_for(hw, n)
    if not label.startswith("xla:gpu"):
        raise NoCompileDevices(f"no XLA:GPU plan for {n} {hw.name}s in this process ({label})")
    return devs


def placed(specs, shardings) -> list:
    """The step's argument specs with their shardings: what it is lowered for, nothing allocated."""
    from jaxgpu.kernels import programs

    return programs.placed(specs, shardings)


def program(step, placed: list) -> targets.Program:
    """A function and its placed specs as a ``targets.Program`` with no recipe: its plan is cached by its lowered
    text alone."""
    return targets.Program(None, (), lambda: (step, placed))


def compiled(program: targets.Program, label: str, options: dict | None = None) -> tuple[float, str, dict]:
    """(bytes the program holds, its optimized HLO, those bytes by kind: ``MEMORY_PARTS``), from XLA:GPU's plan
    (compiled with ``options``; read from the plan cache where it holds it, before anything is traced where the
    program has a recipe) or this CPU's."""
    if label.startswith("xla:gpu") and program.recipe is not None:
        plan = targets.plan_of(program, options)
    elif label.startswith("xla:gpu"):
        plan = targets.compile_plan(*_built(program), options=options, cache=True)  # asked again: read
    else:
        step, args = program.build()
        compiled = step.lower(*args).compile()
        m = compiled.memory_analysis()
        plan = targets.Plan(m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes,
                            m.alias_size_in_bytes, 0.0, compiled.as_text())
    split = dict(zip(MEMORY_PARTS, map(float, (plan.argument_bytes, plan.output_bytes, plan.temp_bytes,
                                                plan.alias_bytes))))
    return float(plan.total_bytes), plan.hlo, split


def _built(program: targets.Program) -> list:
    step, args = program.build()
    return [step, *args]


# XLA's memory analysis of a program, per device: what it holds is arguments + outputs + temporaries - aliased (an
# output written over a donated argument counted once)
MEMORY_PARTS = ("arguments", "outputs", "temporaries", "aliased")


class Priced(NamedTuple):
    """A step's plan priced: XLA's memory (``nbytes``, by ``MEMORY_PARTS``), its async collectives' seconds
    (``hidden``) and how many of them run under compute (``overlapped``), its synchronous ones' (``exposed``),
    {collective: (count, bytes moved)}, the other kernels and their ``Prediction``."""

    nbytes: float
    split: dict
    hidden: float
    overlapped: float
    exposed: float
    counts: dict
    rest: list
    p: roofline.Prediction
    interference: float = 0.0  # the compute's slowdown while a collective runs beside it (the card's share)

    @property
    def added_s(self) -> float:
        """Seconds the collectives add to the kernels': the async ones beyond the compute they run under, the
        synchronous ones whole, and the compute under the rest slowed by ``interference`` while they run."""
        return self.hidden - self.overlapped + self.exposed + self.interference * self.overlapped


# how a run hides its async collectives under compute (``jaxgpu.ground.decoders.OVERLAPS``): "plan", as XLA's
# schedule orders them (``waited``); "framework", under the step's whole compute, up to its length (a framework that
# buckets its own: PyTorch's DDP and FSDP, Megatron's distributed optimizer)
def priced(program: targets.Program, label: str, hw: hardware.Hardware, roofs, devices: int, triton: bool,
           options: dict | None = None, overlap: str = "plan", loop: tuple[int, int] | None = None) -> Priced:
    """The step (a ``targets.Program``: ``program`` makes one of a function and its placed specs) on XLA:GPU's
    plan (compiled with ``options``: the run's XLA flags), priced (``Priced``).
    ``triton``: its GEMMs also as Triton fusions, the cheaper plan kept, as XLA's autotuner keeps the faster on a
    GPU (a weight stored in int8 or fp8 is widened inside a Triton GEMM, where cuBLAS needs a kernel before it that
    writes the wide copy: on an A100, 20 ms a token for Llama-2 7B against 7). ``loop`` (of, trips): the plan's
    loops of ``of`` trips priced as run ``trips`` times (``launches.with_trips``); LookupError where it has none."""
    best = None
    for extra in ({}, {"xla_gpu_enable_triton_gemm": True}) if triton and label.startswith("xla:gpu") else ({},):
        nbytes, hlo, split = compiled(program, label, {**(options or {}), **extra})
        if loop and (hlo := launches.with_trips(hlo, *loop)) is None:
            raise LookupError(f"the plan runs no loop of {loop[0]} trips")
        ks, across = launches.kernels(hlo), crossing(hlo, hw.node, devices)
        hidden, exposed, rest, counts = collectives(ks, hw, devices, across)
        plan = label + (", triton gemm" if extra else "")
        p = roofline.price(rest, roofs, loop_steps=launches.loop_steps(hlo), plan=plan)
        overlapped = (min(hidden, p.estimate_s) if overlap == "framework"
                      else hidden - waited(ks, hlo, hw, devices, across, roofs, p.estimate_s))
        got = Priced(float(nbytes), split, hidden, overlapped, exposed, counts, rest, p,
                     hw.share("interference").value)
        if best is None or got.p.estimate_s + got.added_s < best.p.estimate_s + best.added_s:
            best = got
    return best


# an async collective's -done and the -start it waits for
_DONE = re.compile(r"%([\w.\-]+) = .*?\b(?:all-gather|all-reduce|reduce-scatter|collective-permute|all-to-all)-done\("
                   r"\s*%([\w.\-]+)")


def waited(ks: list, hlo: str, hw: hardware.Hardware, devices: int, across: Mapping[str, int] | Set[str], roofs,
           compute_s: float) -> float:
    """Seconds the compute of a plan waits for its async collectives, in the order XLA's schedule gives them: the
    kernels in turn on one stream (each priced alone on ``roofs``, scaled to add up to ``compute_s``), the
    collectives one at a time on another, each from its ``-start`` (or when the one before it ends), its ``-done``
    holding the compute until it is over. A gradients' all-reduce started after the backward pass is waited for
    whole; an FSDP gather started a layer ahead, not at all. A ``-done`` met before its start (a loop that starts
    the next step's collective: XLA's pipelining) waits for nothing; a loop's kernels run its trip count at once."""
    starts = {m.group(1): m.group(2) for m in map(_DONE.search, hlo.splitlines()) if m}
    alone = {i: roofline.price([k], roofs).device_s + k.count * roofs.kernel_s
             for i, k in enumerate(ks) if _op(k) is None}
    scale = compute_s / sum(alone.values()) if sum(alone.values()) else 0.0
    clock = free = wait = 0.0
    ends: dict[str, float] = {}
    for i, k in enumerate(ks):
        op = _op(k)
        if op is None:
            clock += alone[i] * scale
        elif k.name.startswith(op + "-start"):
            free = max(clock, free) + _link_s(k, op, hw, devices, across)
            ends[k.name] = free
        elif k.name.startswith(op + "-done"):
            end = ends.pop(starts.get(k.name, ""), clock)
            wait, clock = wait + max(0.0, end - clock), max(clock, end)
        else:
            clock += _link_s(k, op, hw, devices, across)  # synchronous: on the compute's stream
    return wait


def _op(k) -> str | None:
    """The collective a kernel is (``LINK_SHARE``'s name), None for any other kernel."""
    return next((o for o in LINK_SHARE if k.name.startswith(o)), None)


def _link_s(k, op: str, hw: hardware.Hardware, devices: int, across: Mapping[str, int] | Set[str]) -> float:
    """Seconds of collective ``k`` (an ``op``) on the card's link, one direction; where its group joins nodes
    (``across``: ``crossing``'s), on the network ports: a ring (all-reduce, all-gather, reduce-scatter) over k GPUs
    of each node at k ports' speed, up to the link's (NVIDIA measures 192 GB/s of all-reduce bus bandwidth between
    DGX A100s, whose eight GPUs have a 25 GB/s port each: NVIDIA/nccl issue 812), an all-to-all or a permute at each
    GPU's own port. A 2-D mesh's collectives run within a group of its devices."""
    link, port = link_rate(hw, op), port_rate(hw)
    if k.name in across:
        rings = across[k.name] if isinstance(across, Mapping) and op in _RINGS else 1
        bw = min(link, rings * port) if link else port
    else:
        bw = link
    return k.count * k.bytes * LINK_SHARE[op](k.group or devices) / bw if bw else 0.0


def link_rate(hw: hardware.Hardware, op: str = "") -> float:
    """Bytes/s of a collective ``op`` over the card's link, one direction: the datasheet's at the share a node's ring
    collectives reach (``hw.share("link")``; an all-reduce's, which NVLink's switches reduce in place, its own)."""
    return (hw.link_gbps or 0) / 2 * 1e9 * hw.share("link:all-reduce" if op == "all-reduce" else "link").value


def port_rate(hw: hardware.Hardware) -> float:
    """Bytes/s of a GPU's network port, one direction, at the share a collective across nodes reaches
    (``hw.share("network")``); the link's where the table knows no network (never priced at zero)."""
    if not hw.internode_gbps:
        return link_rate(hw)
    return hw.internode_gbps / 2 * 1e9 * hw.share("network").value


# the collectives NCCL runs as rings, one a GPU of a node's share of the group (the rest are point to point)
_RINGS = ("all-reduce", "all-gather", "reduce-scatter")


def crossing(hlo: str, node: int, devices: int) -> dict[str, int]:
    """The collectives of a plan over ``devices`` GPUs whose groups join GPUs of different nodes of ``node`` (a
    node's GPUs neighbours in the devices' order, as ``targets.devices`` lays them out), each with the fewest GPUs a
    group of it has in one node: NCCL runs a ring over a node's k GPUs as k rings, each leaving the node through
    another GPU's network port, so a ring's share moves at k ports' speed (``_link_s``). A group that cannot be read
    is counted as crossing with one GPU a node (priced at one port's speed: a network collective priced at NVLink's,
    or at k ports', would flatter the step)."""
    import collections

    if devices <= node:
        return {}
    out = {}
    for line in hlo.splitlines():
        if not stack.COLLECTIVE.match(line):
            continue
        groups = stack.replica_members(line, devices)
        per_node = [collections.Counter(d // node for d in g) for g in groups or []]
        if groups is None or any(len(c) > 1 for c in per_node):  # unread: counted as crossing
            name = line.split("=")[0].strip().removeprefix("ROOT").strip().lstrip("%")
            out[name] = min((min(c.values()) for c in per_node if len(c) > 1), default=1)
    return out


def collectives(ks: list, hw: hardware.Hardware, devices: int, across: Mapping[str, int] | Set[str] = frozenset()
                ) -> tuple[float, float, list, dict]:
    """(seconds of the program's async collectives (a ``-start`` / ``-done`` pair: what XLA:GPU's schedule can run
    under compute), seconds of its synchronous ones, the other kernels, {collective: (count, bytes moved)}); each at
    the card's link bandwidth, one direction, or those named in ``across`` (``crossing``: their groups join nodes) at
    the network ports' (``_link_s``)."""
    hidden, exposed, rest, counts = 0.0, 0.0, [], {}
    for k in ks:
        op = _op(k)
        if op is None:
            rest.append(k)
            continue
        if k.name.startswith(op + "-done"):
            continue
        moved = k.count * k.bytes * LINK_SHARE[op](k.group or devices)  # a start's bytes: its results'
        n, b = counts.get(op, (0, 0.0))
        counts[op] = (n + k.count, b + moved)
        t = _link_s(k, op, hw, devices, across)
        if k.name.startswith(op + "-start"):
            hidden += t
        else:
            exposed += t
    return hidden, exposed, rest, counts


# what a step's device time goes to: the matrix products (library GEMMs and fusions around a dot), the attention
# fused into one kernel (flash), every other kernel (elementwise, norms, softmax, the optimizer's update), and the
# collectives' time beyond the compute they run under
KINDS = ("matrix products", "fused attention", "other kernels", "collectives")


def by_kind(ks: list, roofs) -> dict[str, float]:
    """Seconds of the step's kernels by kind (``KINDS`` but the collectives), each kind priced alone on ``roofs``."""
    flash = [k for k in ks if k.scope == "flash_attention"]
    dots = [k for k in ks if k.is_dot and k.scope != "flash_attention"]
    other = [k for k in ks if not k.is_dot and k.scope != "flash_attention"]
    return {kind: roofline.price(part, roofs).device_s if part else 0.0
            for kind, part in zip(KINDS, (dots, flash, other))}


def matmul_shares(ks: list, roofs) -> tuple[float, float]:
    """(of the kernels' FLOPs, the matrix products' (fused attention's included); of their priced time, the same)."""
    dots = [k for k in ks if k.is_dot or k.scope == "flash_attention"]
    others = [k for k in ks if not (k.is_dot or k.scope == "flash_attention")]
    t_dots, t_other = (roofline.price(ks_, roofs).device_s if ks_ else 0.0 for ks_ in (dots, others))
    all_flops = sum(k.flops * k.count for k in ks)
    return (sum(k.flops * k.count for k in dots) / all_flops if all_flops else 0.0,
            t_dots / (t_dots + t_other) if t_dots + t_other else 0.0)
