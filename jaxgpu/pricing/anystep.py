"""Any JAX step on N GPUs: ``price_step(step, *specs, in_specs=, mesh=, gpu=)`` compiles a user's own step (Flax,
Optax or plain JAX) for a mesh of N GPUs of a card by XLA:GPU on this CPU, split as the user's PartitionSpecs say,
and prices it from that plan (``StepPlan``): memory a GPU, time with its collectives on the card's links and
network, what binds. Nothing runs and nothing is allocated.

Beside ``predict`` (one GPU, any program), ``on_gpus`` (a step on one GPU of every card) and ``plan_model`` (the
decoders this package describes): the door for every other model, an encoder, a ViT, a T5, split as its run splits
it. ``gpu_mesh`` gives the mesh of compile-only devices, for a step whose own sharding constraints name it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.pricing import roofline, sharded


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """A step on ``devices`` GPUs of one kind, compiled for them and priced, never run.

    ``bytes_per_device``: XLA's plan of what a GPU holds (``memory_split``: arguments, outputs, temporaries,
    aliased), ``fits`` within ``capacity`` (JAX's default share of the card's reported memory); ``seconds`` a step
    (``lower_s`` to ``upper_s``), of which ``comm_s`` is what the collectives add beyond the compute they run under
    (``overlapped_s`` hidden), each at the card's link, or its network port where a group joins nodes;
    ``collectives`` {op: (count, bytes a GPU)}; ``time_split`` by kind (``sharded.KINDS``); ``flops`` XLA's count of
    a GPU's program; ``mfu`` the ``model_flops`` given over the GPUs' bf16 peak (0 where none was given);
    ``plan`` the program priced ("xla:gpu h100", or XLA:CPU's standing in)."""

    name: str
    gpu: str
    devices: int
    mesh: str  # the mesh's axes and sizes: "data 8", "data 4 x model 2"
    bytes_per_device: float
    memory_split: dict
    fits: bool
    capacity: float
    seconds: float
    lower_s: float
    upper_s: float
    comm_s: float
    overlapped_s: float
    binds: str
    collectives: dict
    time_split: dict
    flops: float
    mfu: float
    plan: str

    def table(self):
        from jaxgpu.records import figures, labels

        rows = [["GPUs", f"{self.devices} {self.gpu} ({self.mesh})"],
                ["a GPU holds", f"{labels.si(self.bytes_per_device, 'B')} of {labels.si(self.capacity, 'B')} usable"
                                + ("" if self.fits else ": does not fit")],
                ["a step", f"{labels.si(self.seconds, 's')} ({labels.si(self.lower_s, 's')} - "
                           f"{labels.si(self.upper_s, 's')}), binds {self.binds}"],
                ["collectives add", labels.si(self.comm_s, "s") + f" ({labels.si(self.overlapped_s, 's')} hidden)"]]
        rows += [["MFU", f"{self.mfu:.0%}"]] if self.mfu else []
        return figures.Table(["", self.name or "the step"], rows,
                             f"Compiled by XLA:GPU for the GPUs on this CPU and predicted, not run ({self.plan})")

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def _shape(mesh: Mapping[str, int] | Any) -> tuple[tuple[str, ...], tuple[int, ...]]:
    if hasattr(mesh, "axis_names"):
        return tuple(mesh.axis_names), tuple(mesh.shape[a] for a in mesh.axis_names)
    if not isinstance(mesh, Mapping) or not mesh or any(not isinstance(n, int) or n < 1 for n in mesh.values()):
        raise ValueError(f"a mesh is its axes' names and sizes, each 1 or more, like {{'data': 8}}; got {mesh!r}")
    return tuple(mesh), tuple(mesh.values())


def gpu_mesh(gpu: str, mesh: Mapping[str, int]) -> Any:
    """A ``jax.sharding.Mesh`` of compile-only devices of ``gpu`` (XLA:GPU's target; this CPU's devices stand in
    without the gpu-compile extra) with ``mesh``'s axes, e.g. ``{"data": 4, "model": 2}``: past one node (the
    table's ``Hardware.node``), whole nodes, a node's GPUs neighbours along the last axes.

    Raises:
      KeyError: an unknown GPU. ValueError: a mesh of no devices, over 1024, or not in whole nodes past one.
      jaxgpu.records.results.Unsupported: nodes of a card the table knows no network for.
    """
    from jaxgpu.kernels import parallel
    from jaxgpu.records.results import Unsupported

    hw = hardware.find_gpu(gpu)
    axes, sizes = _shape(mesh)
    n = math.prod(sizes)
    if n > 1024:
        raise ValueError(f"a mesh of {n} GPUs: 1024 at most")
    if n > hw.node and n % hw.node:
        raise ValueError(f"past one node, GPUs come in whole nodes of {hw.node}: {n} do not")
    if n > hw.node and not hw.internode_gbps:
        raise Unsupported(f"the hardware table knows no network between {hw.name} nodes (internode_gbps)")
    devs, _ = sharded.devices_for(hw, n)
    return parallel.make_mesh(devs, sizes, axes)


def _placed(specs: Sequence[Any], in_specs: Any, mesh: Any) -> list:
    """The arguments' shapes with their shardings on ``mesh``: ``in_specs`` a PartitionSpec (or None: whole) for
    each argument, or a pytree of them matching it."""
    import jax

    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    given = list(in_specs) if in_specs is not None else [None] * len(specs)
    if len(given) != len(specs):
        raise ValueError(f"in_specs has {len(given)} entries for the step's {len(specs)} arguments")
    out = []
    for arg, spec in zip(specs, given):
        if spec is None or isinstance(spec, P):
            out.append(jax.tree.map(lambda a, s=spec: jax.ShapeDtypeStruct(a.shape, a.dtype,
                                                                           sharding=NS(mesh, s or P())), arg))
        else:
            out.append(jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NS(mesh, s or P())),
                                    arg, spec, is_leaf=lambda x: x is None or isinstance(x, P)))
    return out


def price_step(step: Callable, *specs: Any, in_specs: Any = None, mesh: Mapping[str, int] | Any = None,
               gpu: str = hardware.DEFAULT_GPU, donate: Sequence[int] = (), model_flops: float = 0.0,
               name: str = "", xla: Mapping[str, Any] | None = None) -> StepPlan:
    """``step(*specs)`` on the GPUs of ``mesh`` (``{"data": 8}``, or a ``gpu_mesh``), each argument split as
    ``in_specs`` says (a ``PartitionSpec`` an argument, or a pytree of them as the argument's; None: whole on every
    GPU), compiled by XLA:GPU for ``gpu`` on this CPU and priced (``StepPlan``). ``specs``: arrays or
    ``jax.ShapeDtypeStruct``s (``jax.eval_shape`` of an init gives a model's without allocating it); only shapes
    and dtypes are read. ``donate``: the arguments the step's outputs replace (a train step's params and optimizer
    state, as ``jax.jit(..., donate_argnums=)``), so XLA's plan holds them once. ``model_flops``: the model's FLOPs
    a step, for an MFU. A step that is already jitted keeps its own settings; its sharding constraints may name
    the mesh's axes (it is lowered under ``jax.set_mesh``). ``xla``: XLA flags the run sets, without their dashes
    (``{"xla_gpu_enable_latency_hiding_scheduler": True}``), compiled with; the async collectives are hidden where
    the plan's schedule runs compute under them (``sharded.waited``).

    Raises:
      KeyError: an unknown GPU. ValueError: a mesh that cannot be laid out, in_specs not matching the arguments, or
        a PartitionSpec that does not divide an argument (JAX's own line).
      jaxgpu.records.results.Unsupported: nodes of a card the table knows no network for.
      RuntimeError: no XLA:GPU plan here (the gpu-compile extra is missing) and more devices than this CPU has.
    """
    import jax

    hw = hardware.find_gpu(gpu)
    m = gpu_mesh(hw.name, mesh if mesh is not None else {"data": 1})
    n = m.devices.size
    _, label = sharded.devices_for(hw, n)
    placed = _placed(specs, in_specs, m)
    jitted = step if hasattr(step, "lower") else jax.jit(step, donate_argnums=tuple(donate))
    roofs = roofline.roofs_for(hw)
    with jax.set_mesh(m):
        q = sharded.priced(sharded.program(jitted, placed), label, hw, roofs, n, triton=False, options=dict(xla or {}))
    nbytes, split, counts, rest, p, overlapped = q.nbytes, q.split, q.counts, q.rest, q.p, q.overlapped
    comm = q.added_s  # the async collectives beyond the compute XLA's schedule puts under them
    seconds = p.estimate_s + comm
    peak = (hw.peak_flops("bf16") or 0) * n
    cap = sharded.USABLE_FRACTION * hw.device_bytes
    return StepPlan(
        name=name or getattr(step, "__name__", ""), gpu=hw.name, devices=n,
        mesh=" x ".join(f"{a} {k}" for a, k in zip(m.axis_names, m.devices.shape)),
        bytes_per_device=nbytes, memory_split=split, fits=nbytes <= cap, capacity=cap,
        seconds=seconds, lower_s=max(p.lower_s, comm), upper_s=p.upper_s + comm + overlapped, comm_s=comm,
        overlapped_s=overlapped, binds="communication" if comm > max(p.compute_s, p.memory_s, p.launch_s) else p.bound,
        collectives=counts, time_split={**sharded.by_kind(rest, roofs), "collectives": comm}, flops=p.flops,
        mfu=model_flops / seconds / peak if model_flops and peak else 0.0, plan=p.plan)
