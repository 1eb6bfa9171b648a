"""How a decoder's arrays are split over a mesh of GPUs: the meshes (one axis for fsdp or tp, two for fsdp+tp) and
the rule that cuts each array by its name and shape, as MaxText keeps its logical-axis rules in one place.

fsdp cuts every array along its largest dimension the devices divide and splits the batch; tp cuts the layers'
products by Megatron's columns and rows and keeps the batch whole; fsdp+tp does both on a 2-D mesh. A mixture's
experts go to devices whole under every mesh. Shardings are made from shapes alone, so a 70B step is split
without a byte allocated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jaxgpu.ground.workload import MODEL_AXIS

if TYPE_CHECKING:  # JAX is imported where an array is cut: a cached plan is read without it
    import jax

AXIS = "devices"  # the one axis of a 1-D mesh; of a 2-D mesh, the fsdp (data) axis
MODEL = MODEL_AXIS  # a 2-D mesh's tensor-parallel axis
REPLICAS = "replicas"  # hsdp's outer axis: the nodes, each holding the model's fsdp shards whole
WHOLE = ("dp", "zero1", "zero2")  # the meshes that keep the weights whole on every GPU (the batch split)
EXPERT = "experts"  # the ep mesh's inner axis: a group of GPUs that hold a mixture's experts between them
CONTEXT = "context"  # the cp mesh's inner axis: a group of GPUs that split each sequence between them
# the 2-D meshes of fsdp groups and an inner axis: tensor, expert or context parallel
INNER = {"fsdp+tp": MODEL, "zero1+tp": MODEL, "ep": EXPERT, "cp": CONTEXT}
_COLUMNS = ("wqkv", "w_gate", "w_up", "w_qkv", "b_qkv", "w_fc", "b_fc", "head")  # cut along their last dimension
_ROWS = ("wo", "w_down", "w_o", "w_proj")  # cut along their input dimension (the one after the layer axis)


_EXPERTS = ("w_gate", "w_up", "w_down")  # a mixture of experts' matrices, [L, E, ...]: an expert to a device


def _is_experts(name: str, shape: tuple[int, ...]) -> bool:
    return name in _EXPERTS and len(shape) == 4


def _is_cache(name: str, shape: tuple[int, ...]) -> bool:
    """A KV cache's array ([L, B, S, KV heads, hd], or [B, S, KV heads, hd] a layer): unnamed, in a list or tuple."""
    return not name and len(shape) >= 4


def residual_layout(tokens: jax.sharding.NamedSharding | None) -> Callable | None:
    """A constraint on the residual stream [B, T, d] between layers, given the ``tokens``' sharding: the batch split
    as the tokens are (fsdp, hsdp, dp: each GPU's rows stay on it), so that a product of a cut weight gathers the
    weight, as FSDP does, not the activations; None where the tokens are whole (tp). Left to itself, XLA:GPU's plan
    of Llama-3 8B on 16 H100s (fsdp, 2 x 4096 tokens a GPU) gathered each layer's activations over every GPU, 134 GB
    a step, where gathering the weights moves 28 GB. On an fsdp+tp mesh, the batch over the groups, each group's
    devices holding their rows whole (Megatron's layout, in which a group's products cut by columns and rows need
    one all-reduce each half block): left to itself, XLA split the stream along d over the groups too and moved it
    each layer (Llama 7B on 8 H100s, fsdp 4 x tp 2, a train step of 8 x 2k: 49 GB a GPU against fsdp's 24 GB).
    Within a group the stream is split along its sequence (``sequence_parallel``) where the batch splits; ``whole``
    (an attribute) gathers a product's input."""
    import jax

    if tokens is None:
        return None
    mesh = tokens.mesh
    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    if EXPERT in mesh.axis_names or CONTEXT in mesh.axis_names:
        return _inner_layout(mesh, tokens)
    if MODEL not in mesh.axis_names:
        split = tokens.spec[0] if len(tokens.spec) else None
        if split is None:
            return None
        n = math.prod(mesh.shape[a] for a in (split if isinstance(split, tuple) else (split,)))
        return lambda x: jax.lax.with_sharding_constraint(x, NS(mesh, P(split))) if x.shape[0] % n == 0 else x

    n = mesh.shape[AXIS]
    sequence = sequence_parallel(mesh, AXIS)

    def put(x):  # the batch over the groups; a batch too small to split, its sequence (attention gathers K and V)
        if x.shape[0] % n == 0:
            return sequence(x)
        spec = P(None, AXIS) if x.shape[1] % n == 0 else P()
        return jax.lax.with_sharding_constraint(x, NS(mesh, spec))

    put.whole = lambda x: sequence.whole(x) if x.shape[0] % n == 0 else x
    return put


def sequence_parallel(mesh: jax.sharding.Mesh, rows: str | None = None) -> Callable:
    """Megatron's sequence parallelism on a mesh with a tp axis: the stream [B, T, d] between a layer's products held
    split along its sequence over each tp group (1/tp of it a GPU, its norms computed on that share), and ``whole``
    gathering a product's input. A column-cut product's input is then gathered and a row-cut product's output
    reduce-scattered, the bytes of the all-reduce they replace. ``rows``: the mesh axis the batch is split over
    (None inside a function ``vmap``ped over the groups, whose own axis stays XLA's to place)."""
    import jax

    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    tp = mesh.shape[MODEL]
    split, gathered = NS(mesh, P(rows, MODEL)), NS(mesh, P(rows))

    def put(x):
        return _conjugate(split, gathered)(x) if x.shape[1] % tp == 0 else \
            jax.lax.with_sharding_constraint(x, gathered)

    put.whole = lambda x: _conjugate(gathered, split)(x) if x.shape[1] % tp == 0 else x
    return put


def _conjugate(forward: jax.sharding.NamedSharding, backward: jax.sharding.NamedSharding) -> Callable:
    """x laid out as ``forward``, its gradient as ``backward``: Megatron's pair of sequence-parallel operators (a
    gather of the sequence whose gradient is reduce-scattered, a reduce-scatter whose gradient is gathered). A plain
    constraint's gradient takes the same layout, and XLA then kept the backward pass's products split by sequence,
    moving each layer's hidden activations and attention scores with all-to-alls."""
    import jax

    @jax.custom_vjp
    def f(x):
        return jax.lax.with_sharding_constraint(x, forward)

    f.defvjp(lambda x: (f(x), None), lambda _, g: (jax.lax.with_sharding_constraint(g, backward),))
    return f


def _inner_layout(mesh: jax.sharding.Mesh, tokens: jax.sharding.NamedSharding) -> Callable:
    """The residual stream's constraint on an ep or cp mesh, carrying what the layer needs of the mesh as attributes.
    ep: the batch over every GPU; ``experts`` the mesh, over which ``transformer``'s mixture sends each GPU's tokens
    to the GPUs that hold their experts and back (an all-to-all each way within an expert group, as GShard's
    dispatch and combine). cp: the batch over the fsdp groups, each sequence split over a context group; ``kv``
    gathers a layer's keys and values over the group (each GPU's queries against the whole sequence: the ring's
    bytes, (C - 1) / C of K and V each way)."""
    import jax

    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    put = lambda spec: (lambda x: jax.lax.with_sharding_constraint(x, NS(mesh, spec)))
    if EXPERT in mesh.axis_names:
        layout = lambda x: put(P((AXIS, EXPERT)))(x) if x.shape[0] % mesh.devices.size == 0 else x
        layout.experts = mesh
        return layout
    split = tokens.spec[0] if len(tokens.spec) else None
    layout = put(P(split, CONTEXT))
    layout.kv = put(P(split))
    return layout


def tp_degree(devices: int) -> int:
    """The tensor-parallel group an fsdp+tp mesh of ``devices`` takes when none is named: the largest power of
    two that divides ``devices`` and whose square is at most it (2 of 4, 6 or 8, 4 of 16, 1 of an odd count): the
    squarest mesh, its model axis no longer than its fsdp axis, as a tp group's all-reduces of activations grow
    with it and fsdp's gathers do not."""
    t = 1
    while (2 * t) ** 2 <= devices and devices % (2 * t) == 0:
        t *= 2
    return t


def mesh_shape(devices: int, how: str = "fsdp", tp: int = 0, node: int = 8, group: int = 0) -> dict[str, int]:
    """The axes of the mesh a step split ``how`` over ``devices`` GPUs takes, each with its size, in order: one axis
    (``AXIS``) for "fsdp", "tp" and the whole-weight meshes (``WHOLE``); for "hsdp", the nodes of ``node`` devices
    along ``REPLICAS``, a node's devices along ``AXIS``; for "fsdp+tp" and "zero1+tp", the devices in groups of ``tp``
    (0: ``tp_degree``) along ``MODEL``, the groups along ``AXIS``; for "ep" and "cp", groups of ``group`` devices
    along ``EXPERT`` or ``CONTEXT``. Read from the counts alone (no device, no JAX), as a cached plan is looked up.

    Raises:
      ValueError: the devices do not split so."""
    if how == "hsdp":
        inner = min(node, devices)
        if devices % inner:
            raise ValueError(f"{devices} devices do not fill nodes of {node}")
        return {REPLICAS: devices // inner, AXIS: inner}
    if how in ("ep", "cp"):
        if not group or devices % group:
            raise ValueError(f"{devices} devices do not split into {how} groups of {group}")
        return {AXIS: devices // group, INNER[how]: group}
    if how not in ("fsdp+tp", "zero1+tp"):
        return {AXIS: devices}
    t = tp or tp_degree(devices)
    if devices % t:
        raise ValueError(f"{devices} devices do not split into tensor-parallel groups of {t}")
    return {AXIS: devices // t, MODEL: t}


def mesh_for(devices: Sequence[Any], how: str = "fsdp", tp: int = 0, node: int = 8, group: int = 0
             ) -> jax.sharding.Mesh:
    """The mesh ``shard_specs`` splits a step ``how`` over (``parallel.make_mesh``), of ``mesh_shape``'s axes. The
    devices in order: a node's are neighbours (a topology's host order)."""
    from jaxgpu.kernels import parallel

    devs = list(devices)
    shape = mesh_shape(len(devs), how, tp, node, group)
    return parallel.make_mesh(devs, tuple(shape.values()), tuple(shape))


def _fsdp_spec(shape: tuple[int, ...], n: int, axis: str = AXIS, taken: tuple = ()) -> jax.sharding.PartitionSpec:
    import jax

    P = jax.sharding.PartitionSpec
    dims = sorted((i for i in range(len(shape)) if i not in taken), key=lambda i: -shape[i])
    cut = next((i for i in dims if shape[i] % n == 0 and shape[i] >= n), None)
    return P(*[axis if i == cut else None for i in range(len(shape))])


def _tp_cut(name: str, shape: tuple[int, ...], n: int) -> int | None:
    """The dimension tensor parallelism cuts an array named ``name`` along, or None where it keeps it whole."""
    cut = None
    base, _, part = name.partition("_lora_")
    if part:  # an adapter: of a matrix cut by columns, A whole and B by columns; of one cut by rows, A by rows, B whole
        cut = (len(shape) - 1 if part == "b" else None) if base in _COLUMNS else \
            (len(shape) - 2 if part == "a" else None) if base in _ROWS else None
    elif name in _COLUMNS or name.startswith(tuple(c + "_" for c in _COLUMNS)):
        cut = len(shape) - 1
    elif name in _ROWS:
        cut = len(shape) - 2
    elif name == "embed":
        cut = 0
    return None if cut is None or shape[cut] % n else cut


def _tp_spec(name: str, shape: tuple[int, ...], n: int) -> jax.sharding.PartitionSpec:
    import jax

    cut = _tp_cut(name, shape, n)
    return jax.sharding.PartitionSpec(*[AXIS if i == cut else None for i in range(len(shape))])


def _two_d_spec(name: str, shape: tuple[int, ...], data: int, model: int, batch: bool) -> jax.sharding.PartitionSpec:
    """An array's cut on the fsdp+tp mesh: tp's along ``MODEL`` (a KV cache [.., B, S, KV heads, hd] by its heads),
    then along ``AXIS`` the batch of a batch or a cache, a mixture's experts, else fsdp's largest dimension left."""
    import jax

    def whole_if(i, n):
        return i if i is not None and 0 <= i < len(shape) and shape[i] % n == 0 and shape[i] >= n else None

    cache = _is_cache(name, shape)
    cut = None if batch else whole_if(len(shape) - 2, model) if cache else _tp_cut(name, shape, model)
    if batch or cache:
        split = whole_if(0 if batch else len(shape) - 4, data)
    elif _is_experts(name, shape):
        split = whole_if(1, data)
    else:
        split = None
    spec = [MODEL if i == cut else None for i in range(len(shape))]
    if split is not None and split != cut:
        spec[split] = AXIS
        return jax.sharding.PartitionSpec(*spec)
    fsdp = _fsdp_spec(shape, data, AXIS, () if cut is None else (cut,))
    return jax.sharding.PartitionSpec(*[a or b for a, b in zip(fsdp, spec)])


def _inner_spec(how: str, name: str, shape: tuple[int, ...], mesh: jax.sharding.Mesh, batch: bool
                ) -> jax.sharding.PartitionSpec:
    """An array's cut on an ep or cp mesh: a batch over every GPU (ep), or over the fsdp groups with its sequence
    over a context group (cp); a mixture's experts [L, E, ...] over an expert group and fsdp's cut over the groups
    (ep); every other array fsdp's cut over every GPU."""
    import jax

    P = jax.sharding.PartitionSpec
    n, inner = mesh.devices.size, INNER[how]
    if batch and how == "ep":
        return P((AXIS, inner)) if shape[0] % n == 0 else P()
    if batch:
        data = mesh.shape[AXIS]
        return P(AXIS if shape[0] % data == 0 else None, inner if len(shape) > 1 and shape[1] % mesh.shape[inner]
                 == 0 else None)
    if how == "ep" and _is_experts(name, shape) and shape[1] % mesh.shape[inner] == 0:
        rest = _fsdp_spec(shape, mesh.shape[AXIS], AXIS, (0, 1))
        return P(None, inner, *rest[2:])
    return _fsdp_spec(shape, n, (AXIS, inner))


def expert_spec(shape: tuple[int, ...], mesh: jax.sharding.Mesh) -> jax.sharding.PartitionSpec:
    """One layer's slice [E, ...] of an expert matrix on an ep mesh: the experts over the expert group, fsdp's cut
    over the groups (the stacked [L, E, ...] array's cut, ``_inner_spec``, less its layer axis)."""
    import jax

    return jax.sharding.PartitionSpec(*_inner_spec("ep", _EXPERTS[0], (1, *shape), mesh, False)[1:])


def shard_specs(tree: Any, mesh: jax.sharding.Mesh, how: str = "fsdp", batch: bool = False) -> Any:
    """``NamedSharding``s for every array of ``tree`` (parameters, optimizer state, a KV cache: arrays or specs)
    on ``mesh`` (``mesh_for``), split ``how`` ("fsdp", "tp", "hsdp", "dp", "zero1", "zero2", or "fsdp+tp" on a
    2-D mesh); ``batch``: the tree is a batch (tokens), split along its first dimension under fsdp, hsdp and the
    whole-weight meshes (whole where the devices do not divide it), whole under tp, and under fsdp+tp over the
    groups, along its sequence where they do not divide the batch."""
    import jax

    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    want = {"fsdp+tp": (AXIS, MODEL), "zero1+tp": (AXIS, MODEL), "hsdp": (REPLICAS, AXIS), "ep": (AXIS, EXPERT),
            "cp": (AXIS, CONTEXT)}.get(how, (AXIS,))
    if tuple(mesh.axis_names) != want:
        raise ValueError(f"a {how} split takes a mesh of axes {want} (mesh_for), got axes {mesh.axis_names}")
    n = mesh.devices.size

    def one(path, a):
        shape = tuple(a.shape)
        if not shape or n == 1:
            return NS(mesh, P())
        keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
        name = next((k for k in reversed(keys) if isinstance(k, str)), "")
        if how == "fsdp+tp" or how == "zero1+tp" and batch:
            return NS(mesh, _two_d_spec(name, shape, mesh.shape[AXIS], mesh.shape[MODEL], batch))
        if how == "zero1+tp":  # tp's cut within a group, whole across the groups (the planner cuts AdamW's state)
            cut = _tp_cut(name, shape, mesh.shape[MODEL])
            return NS(mesh, P(*[MODEL if i == cut else None for i in range(len(shape))]))
        if how in ("ep", "cp"):
            return NS(mesh, _inner_spec(how, name, shape, mesh, batch))
        if batch and how == "hsdp":  # the batch over every GPU, a node's rows within the node
            return NS(mesh, P((REPLICAS, AXIS)) if shape[0] % n == 0 else P())
        if batch:
            return NS(mesh, P(AXIS) if how in ("fsdp", *WHOLE) and shape[0] % n == 0 else P())
        if how in WHOLE:  # the weights whole; the planner cuts zero1's and zero2's optimizer state as fsdp
            return NS(mesh, P())
        if how == "hsdp":  # fsdp's cut within a node, whole across the nodes
            return NS(mesh, _fsdp_spec(shape, mesh.shape[AXIS]))
        if _is_experts(name, shape) and shape[1] % n == 0:  # [L, E, ...]: experts split over devices
            return NS(mesh, P(None, AXIS, None, None))
        if how == "fsdp":
            return NS(mesh, _fsdp_spec(shape, n))
        if _is_cache(name, shape) and shape[-2] % n == 0:  # a KV cache [.., S, KV heads, hd]: by heads
            return NS(mesh, P(*[AXIS if i == len(shape) - 2 else None for i in range(len(shape))]))
        return NS(mesh, _tp_spec(name, shape, n))

    return jax.tree_util.tree_map_with_path(one, tree)
