"""Several devices on one job: data parallel three ways, tensor parallel, and collectives.

Data parallel: one step function (``mlp.train_step_fn``), three ways to run it over
a ``data`` mesh axis, each checked against the single-device step on the same global batch:

  ``pmap``          ``jax.pmap`` with ``lax.pmean`` of the gradients (state stacked per device)
  ``jit_sharding``  ``jax.jit`` with ``NamedSharding``: batch sharded, state replicated; XLA
                    inserts the all-reduce itself
  ``shard_map``     ``jax.shard_map`` with an explicit ``lax.pmean``; inputs laid out as its
                    ``in_specs`` say before the call

Tensor parallel: the study's MLP split Megatron-style over a ``model`` axis, by
annotating the parameters only: even layers column-split (kernel ``P(None, "model")``),
odd layers row-split (``P("model", None)``), so a column layer's sharded output feeds the
next row layer directly and one all-reduce per pair restores the full activation. XLA's
partitioner does the rest; the memory per device is read from ``compiled.memory_analysis()`` (``timing.memory_bytes``).

Collectives: all-reduce, all-gather, reduce-scatter, all-to-all and ppermute inside
``shard_map``, each checked against numpy, with NCCL-tests' bandwidth definitions.

APIs: ``jax.sharding.Mesh`` and ``NamedSharding`` (stable since 0.4); ``jax.shard_map`` is
top-level from 0.7 and ``jax.experimental.shard_map`` before; ``jax.pmap`` is built on
``jit`` + ``shard_map`` from 0.8 and in maintenance mode. Meshes are passed explicitly
(no ``with mesh:``, deprecated after 0.10), so the same code runs on 0.10 and 0.11.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpu.ground import timing, workload
from jaxgpu.ground.workload import COLLECTIVES, DP_VARIANTS  # noqa: F401 - part of this module's API
from jaxgpu.kernels import mlp

DATA, MODEL = workload.DATA_AXIS, workload.MODEL_AXIS


def shard_map(f: Callable, *, mesh: Mesh, in_specs, out_specs) -> Callable:
    """``jax.shard_map`` where it exists (jax >= 0.7), else the experimental one."""
    sm = getattr(jax, "shard_map", None)
    if sm is not None:
        return sm(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map as old  # jax < 0.7 (tested by hiding jax.shard_map)

    return old(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def make_mesh(devices: Sequence[Any], shape: Sequence[int] | None = None,
              axes: Sequence[str] = (DATA,)) -> Mesh:
    """A mesh over ``devices`` (all of them in one axis unless ``shape`` says otherwise).

    Raises:
      ValueError: ``shape`` does not multiply to the number of devices.
    """
    devs = list(devices)
    shape = tuple(shape) if shape is not None else (len(devs),)
    if math.prod(shape) != len(devs) or len(shape) != len(axes):
        raise ValueError(f"mesh shape {shape} over axes {tuple(axes)} does not match {len(devs)} devices")
    return Mesh(np.array(devs, dtype=object).reshape(shape), tuple(axes))


# --- data parallel -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DataParallel:
    """A data-parallel train step and the layout functions that go with it.

    ``step(state, x, y) -> (state, metrics)`` takes the layouts ``put_state`` / ``put_batch``
    make; ``get_params`` returns the parameters as one host pytree; ``metric`` one scalar.
    """

    variant: str
    n_devices: int
    step: Callable
    put_state: Callable
    put_batch: Callable
    get_params: Callable
    metric: Callable


def _pmap_step(step_fn: Callable, devices: Sequence[Any]) -> DataParallel:
    n = len(devices)
    mesh = make_mesh(devices)
    stacked = NamedSharding(mesh, P(DATA))
    step = jax.pmap(step_fn, axis_name=DATA, devices=list(devices), donate_argnums=(0,))
    put_state = lambda s: jax.device_put(jax.tree.map(lambda a: np.broadcast_to(a, (n, *np.shape(a))), s), stacked)
    put_batch = lambda a: jax.device_put(np.asarray(a).reshape(n, -1, *np.shape(a)[1:]), stacked)
    return DataParallel("pmap", n, step, put_state, put_batch,
                        lambda s: jax.device_get(jax.tree.map(lambda a: a[0], s["params"])),
                        lambda v: float(np.asarray(v)[0]))


def _jit_sharding_step(step_fn: Callable, devices: Sequence[Any]) -> DataParallel:
    mesh = make_mesh(devices)
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P(DATA))
    step = jax.jit(step_fn, in_shardings=(replicated, split, split), out_shardings=replicated, donate_argnums=(0,))
    return DataParallel("jit_sharding", len(devices), step, lambda s: jax.device_put(s, replicated),
                        lambda a: jax.device_put(a, split), lambda s: jax.device_get(s["params"]), float)


def to_varying(tree: Any, axis: str = DATA) -> Any:
    """Marks replicated values as differing per device along ``axis`` inside ``shard_map``.

    With shard_map's replication checking (``check_vma``, jax >= 0.7), the gradient of a
    replicated parameter is already summed over the devices by autodiff; taking it of a
    device-varying copy instead keeps each device's own gradient, so the explicit
    ``pmean`` is the one reduction, as in ``pmap``. ``lax.pcast`` in jax >= 0.8,
    ``lax.pvary`` before; older shard_map has no such typing and needs nothing.
    """
    if hasattr(jax.lax, "pcast"):
        return jax.tree.map(lambda a: jax.lax.pcast(a, axis, to="varying"), tree)
    if hasattr(jax.lax, "pvary"):  # jax 0.6-0.7
        return jax.tree.map(lambda a: jax.lax.pvary(a, axis), tree)
    return tree


def _shard_map_step(step_fn: Callable, devices: Sequence[Any]) -> DataParallel:
    mesh = make_mesh(devices)
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P(DATA))
    mapped = shard_map(step_fn, mesh=mesh, in_specs=(P(), P(DATA), P(DATA)), out_specs=P())
    step = jax.jit(mapped, donate_argnums=(0,))
    return DataParallel("shard_map", len(devices), step, lambda s: jax.device_put(s, replicated),
                        lambda a: jax.device_put(a, split), lambda s: jax.device_get(s["params"]), float)


_BUILDERS = {"pmap": _pmap_step, "jit_sharding": _jit_sharding_step, "shard_map": _shard_map_step}


def data_parallel(model: mlp.MLP, optimizer: optax.GradientTransformation, variant: str,
                  devices: Sequence[Any], preset: str = "fp32") -> DataParallel:
    """The MLP train step run data-parallel over ``devices`` as ``variant`` (one of DP_VARIANTS).

    With one device and ``variant="single"``, the plain jitted step on that device.

    Raises:
      ValueError: an unknown variant.
    """
    if variant == "single":
        dev = list(devices)[0]
        step = jax.jit(mlp.train_step_fn(model, optimizer, preset), donate_argnums=(0,))
        put = lambda t: jax.device_put(t, dev)
        return DataParallel("single", 1, step, put, put, lambda s: jax.device_get(s["params"]), float)
    if variant not in _BUILDERS:
        raise ValueError(f"unknown data-parallel variant {variant!r}; known: single, {', '.join(DP_VARIANTS)}")
    if variant == "jit_sharding":  # XLA inserts the all-reduce
        step_fn = mlp.train_step_fn(model, optimizer, preset)
    else:
        step_fn = mlp.train_step_fn(model, optimizer, preset, reduce=lambda t: jax.lax.pmean(t, DATA),
                                    local=to_varying if variant == "shard_map" else None)
    return _BUILDERS[variant](step_fn, devices)


def lines_of_code(variant: str) -> int:
    """Source lines of a variant's builder here (what it costs to write, next to its speed)."""
    src = inspect.getsource(_BUILDERS[variant]).splitlines()
    return sum(1 for line in src[1:] if line.strip() and not line.strip().startswith("#"))


def check_divisible(batch: int, n_devices: int) -> None:
    if batch % n_devices:
        raise ValueError(f"global batch {batch} does not split evenly over {n_devices} devices")


def loss_trajectory(dp: DataParallel, state: dict, batches: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """The loss of each step when ``dp`` trains from ``state`` on ``batches`` (global batches)."""
    s = dp.put_state(state)
    out = []
    for x, y in batches:
        s, m = dp.step(s, dp.put_batch(x), dp.put_batch(y))
        out.append(dp.metric(m["loss"]))
    return out


def trajectory_error(reference: Sequence[float], other: Sequence[float]) -> float:
    """Largest relative difference between two loss trajectories."""
    ref, got = np.asarray(reference, np.float64), np.asarray(other, np.float64)
    return float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-30)))


def time_step(dp: DataParallel, state: dict, x: np.ndarray, y: np.ndarray, target_s: float = 0.3) -> timing.Timing:
    """Seconds per train step of ``dp`` on one global batch (compile timed apart)."""
    s = dp.put_state(state)
    xb, yb = dp.put_batch(x), dp.put_batch(y)
    compiled, compile_s = timing.compile_timed(dp.step, s, xb, yb)
    t, last = timing.time_stateful(compiled, s, xb, yb, target_s=target_s)
    if not np.isfinite(dp.metric(last["loss"])):
        raise ArithmeticError(f"{dp.variant} step produced a non-finite loss")
    return dataclasses.replace(t, compile_s=compile_s)


# --- tensor parallel -----------------------------------------------------------------------


def tensor_parallel_specs(params: dict, model_size: int, axis: str = MODEL) -> dict:
    """Megatron-style partition specs for ``mlp.MLP`` parameters (see the module docstring).

    A matrix whose split dimension does not divide by ``model_size`` stays replicated.
    """
    names = sorted(params, key=lambda k: int(k.rsplit("_", 1)[1]))
    layouts = {None: {"kernel": P(), "bias": P()}, "column": {"kernel": P(None, axis), "bias": P(axis)},
               "row": {"kernel": P(axis, None), "bias": P()}}
    return {name: layouts[workload.megatron_split(i, *params[name]["kernel"].shape, model_size)]
            for i, name in enumerate(names)}


def state_specs(state: dict, param_specs: dict) -> dict:
    """Specs for a whole train state: every subtree shaped like the parameters (Adam's
    moments, momentum) is split like them; counters and scalars are replicated."""
    pdef = jax.tree.structure(state["params"])
    like_params = lambda t: jax.tree.structure(t) == pdef
    return jax.tree.map(lambda t: param_specs if like_params(t) else P(), state, is_leaf=like_params)


def _shardings(mesh: Mesh, specs) -> Any:
    return jax.tree.map(lambda p: NamedSharding(mesh, p), specs, is_leaf=lambda x: isinstance(x, P))


@dataclasses.dataclass(frozen=True)
class TensorParallel:
    """The MLP's train and inference steps with parameters split over ``mesh``'s model axis."""

    mesh: Mesh
    train_step: Any  # jitted (state, x, y) -> (state, metrics)
    infer_step: Any  # jitted (params, x) -> logits
    state_sharding: Any
    params_sharding: Any
    batch_sharding: NamedSharding


def tensor_parallel(model: mlp.MLP, optimizer: optax.GradientTransformation, state: dict, mesh: Mesh,
                    preset: str = "fp32") -> TensorParallel:
    """The MLP split over ``mesh``'s ``model`` axis (and its batch over ``data``, if the mesh has one)."""
    m = mesh.shape.get(MODEL, 1)
    pspecs = tensor_parallel_specs(state["params"], m)
    s_sh = _shardings(mesh, state_specs(state, pspecs))
    p_sh = _shardings(mesh, pspecs)
    batch = NamedSharding(mesh, P(DATA) if DATA in mesh.shape else P())
    replicated = NamedSharding(mesh, P())
    train = jax.jit(mlp.train_step_fn(model, optimizer, preset), in_shardings=(s_sh, batch, batch),
                    out_shardings=(s_sh, replicated), donate_argnums=(0,))
    infer_fn = mlp.make_infer_step(model, preset)
    infer = jax.jit(lambda p, x: infer_fn(p, x), in_shardings=(p_sh, batch), out_shardings=batch)
    return TensorParallel(mesh, train, infer, s_sh, p_sh, batch)


# --- collectives ---------------------------------------------------------------------------

# NCCL-tests (doc/PERFORMANCE.md): busbw = algbw x factor(n), algbw = size / time, where
# size is the per-rank buffer of all-reduce / all-to-all / ppermute, the per-rank *output*
# of all-gather and the per-rank *input* of reduce-scatter.
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "ppermute": lambda n: 1.0,
}


def _collective_body(name: str, n: int) -> Callable:
    ax = DATA
    return {
        "all_reduce": lambda x: jax.lax.psum(x, ax),
        "all_gather": lambda x: jax.lax.all_gather(x, ax, tiled=True),
        "reduce_scatter": lambda x: jax.lax.psum_scatter(x, ax, tiled=True),
        "all_to_all": lambda x: jax.lax.all_to_all(x, ax, 0, 0, tiled=True),
        "ppermute": lambda x: jax.lax.ppermute(x, ax, perm=[(i, (i + 1) % n) for i in range(n)]),
    }[name]


def collective(name: str, devices: Sequence[Any]) -> Callable:
    """A jitted collective over ``devices``: a global fp32 vector split in ``len(devices)``
    shards in, the collective's result (the concatenation of every device's output) out."""
    if name not in COLLECTIVES:
        raise ValueError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    mesh = make_mesh(devices)
    n = len(devices)
    return jax.jit(shard_map(_collective_body(name, n), mesh=mesh, in_specs=P(DATA), out_specs=P(DATA)))


def collective_reference(name: str, x: np.ndarray, n: int) -> np.ndarray:
    """What ``collective(name, n devices)`` must return for the global vector ``x``, in numpy."""
    shards = np.split(np.asarray(x, np.float64), n)
    if name == "all_reduce":
        return np.tile(np.sum(shards, axis=0), n)
    if name == "all_gather":
        return np.tile(np.concatenate(shards), n)
    if name == "reduce_scatter":
        return np.sum(shards, axis=0)
    if name == "all_to_all":
        pieces = [np.split(s, n) for s in shards]  # pieces[src][dst]
        return np.concatenate([np.concatenate([pieces[src][dst] for src in range(n)]) for dst in range(n)])
    if name == "ppermute":
        return np.concatenate([shards[(i - 1) % n] for i in range(n)])
    raise ValueError(f"unknown collective {name!r}")


def message_elements(name: str, nbytes: int, n: int) -> int:
    """Elements per device of the input shard whose NCCL-tests ``size`` is ``nbytes`` (fp32)."""
    elems = max(nbytes // 4, n * n)
    if name == "all_gather":  # size is the gathered output: the input is 1/n of it
        elems //= n
    return elems - elems % n  # all-to-all and reduce-scatter split the shard n ways


@dataclasses.dataclass(frozen=True)
class CollectiveResult:
    """One collective at one size: seconds, and algorithm / bus bandwidth in bytes/s."""

    name: str
    n_devices: int
    nbytes: int  # NCCL-tests size (see BUS_FACTOR)
    timing: timing.Timing
    rel_error: float

    @property
    def algbw(self) -> float:
        return self.nbytes / self.timing.median_s

    @property
    def busbw(self) -> float:
        return self.algbw * BUS_FACTOR[self.name](self.n_devices)


def bench_collective(name: str, devices: Sequence[Any], nbytes: int, target_s: float = 0.2) -> CollectiveResult:
    """Times one collective over ``devices`` on a message of ``nbytes`` (NCCL-tests size),
    after checking its result against numpy."""
    n = len(devices)
    per = message_elements(name, nbytes, n)
    size = per * 4 * (n if name == "all_gather" else 1)
    host = (np.arange(n * per, dtype=np.float32) % 997 + 1.0) * np.repeat(np.arange(1, n + 1, dtype=np.float32), per)
    x = jax.device_put(host, NamedSharding(make_mesh(devices), P(DATA)))
    fn = collective(name, devices)
    out = np.asarray(fn(x), np.float64)
    ref = collective_reference(name, host, n)
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    return CollectiveResult(name, n, size, timing.time_jitted(fn, x, target_s=target_s), err)
