"""Views of what XLA compiles: the op mix of a program (FLOPs by op class), parsed from its HLO.

FLOPs per instruction, from the HLO text of a lowered program (shapes are explicit
there, before fusion hides them): a dot is 2 x (output elements) x (contracted size);
an elementwise op is one FLOP per output element (a transcendental counts as one); a
reduce one per input element; data movement (reshape, broadcast, transpose, slice,
concatenate, copy, convert, constants, parameters) counts zero. A matrix product handed
to a library (a cuBLAS / cuBLASLt custom call in an optimized GPU program) counts as the
dot it is, from its operands' shapes: XLA's own cost analysis counts each as -1.
"""

from __future__ import annotations

import math
import re

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = (\w+)\[([\d,]*)\]\S*\s+([\w\-]+)\((.*)$")
# an instruction whose result is a tuple (a library GEMM returns its product and a workspace): the first element
_TUPLE_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = \((\w+)\[([\d,]*)\][^=]*?\) ([\w\-]+)\((.*)$")
# a custom call that multiplies matrices: cuBLAS, cuBLASLt (and its fp8 variant), oneDNN's matmul
GEMM_CALL = re.compile(r'custom_call_target="([^"]*(?:gemm|matmul)[^"]*)"', re.I)
_MOVEMENT = {"parameter", "constant", "reshape", "broadcast", "transpose", "slice", "concatenate", "copy", "convert",
             "bitcast", "bitcast-convert", "get-tuple-element", "tuple", "iota", "dynamic-slice",
             "dynamic-update-slice", "pad", "reverse", "gather", "scatter", "custom-call", "call", "while",
             "conditional", "rng-bit-generator", "rng", "after-all", "partition-id", "replica-id",
             "optimization-barrier"}
CLASSES = ("dot", "elementwise", "reduce")
# ops an elementwise count takes as one FLOP each that a core evaluates as a series of them (or, on a GPU, on its
# special-function units): their count is kept apart (``transcendental_ops``) so that a model can price them at a
# rate measured for them (the roofline experiment's exp/log chain)
TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "tanh", "sine",
                  "cosine", "tan", "atan2", "erf", "cbrt"}


def _dims(s: str) -> list[int]:
    return [int(d) for d in s.split(",") if d]


def parse(hlo_text: str) -> list[dict]:
    """Instructions as dicts: name, dtype, shape, op, operands, attrs (the raw rest of the line)."""
    out = []
    for line in hlo_text.splitlines():
        m = _INSTR.match(line) or _TUPLE_INSTR.match(line)
        if not m:
            continue
        name, dtype, dims, op, rest = m.groups()
        depth, i = 1, 0
        while i < len(rest) and depth:
            depth += {"(": 1, ")": -1}.get(rest[i], 0)
            i += 1
        operands = [o.strip().lstrip("%") for o in rest[: i - 1].split(",") if o.strip()]
        out.append({"name": name, "dtype": dtype, "shape": _dims(dims), "op": op, "operands": operands,
                    "attrs": rest[i:], "root": line.lstrip().startswith("ROOT")})
    return out


def attr_dims(attrs: str, key: str) -> list[int]:
    m = re.search(key + r"=\{([\d,]*)\}", attrs)
    return _dims(m.group(1)) if m else []


def op_flops(hlo_text: str, outer: dict[str, dict] | None = None) -> dict[str, float]:
    """FLOPs of a program by class (dot, elementwise, reduce), from its unoptimized HLO text; ``outer``: the parsed
    instructions (``parse``, by name) of the computation around it, for an operand defined there (one
    unfused instruction of an optimised program: its operands are other kernels' results)."""
    instrs = parse(hlo_text)
    shapes = {**{n: i["shape"] for n, i in (outer or {}).items()}, **{i["name"]: i["shape"] for i in instrs}}
    totals = dict.fromkeys(CLASSES, 0.0)
    for ins in instrs:
        op, n_out = ins["op"], math.prod(ins["shape"]) if ins["shape"] else 1
        if op == "custom-call" and GEMM_CALL.search(ins["attrs"]):
            totals["dot"] += library_gemm_flops(ins, shapes)
            continue
        if op in _MOVEMENT:
            continue
        if op in ("dot", "convolution"):
            lhs = shapes.get(ins["operands"][0], [])
            k = math.prod(lhs[d] for d in attr_dims(ins["attrs"], "lhs_contracting_dims") if d < len(lhs))
            totals["dot"] += 2.0 * n_out * k
        elif op in ("reduce", "reduce-window"):
            src = shapes.get(ins["operands"][0], ins["shape"])
            totals["reduce"] += float(math.prod(src) if src else 1)
        else:
            totals["elementwise"] += float(n_out)
    return totals


def transcendental_ops(hlo_text: str, ops: frozenset[str] | set[str] = frozenset(TRANSCENDENTAL)) -> float:
    """How many of a computation's elementwise FLOPs (``op_flops``) are transcendental ops (``TRANSCENDENTAL``,
    or those of ``ops``)."""
    return float(sum(math.prod(i["shape"]) if i["shape"] else 1 for i in parse(hlo_text) if i["op"] in ops))


def power_ops(hlo_text: str) -> float:
    """How many of its transcendental ops are ``power``: a CPU computes x**y as exp(y log x) with the care for
    signs and zeros that costs it about three exps' time (the roofline's pow chain measures it)."""
    return transcendental_ops(hlo_text, {"power"})


def library_gemm_flops(ins: dict, shapes: dict[str, list[int]]) -> float:
    """FLOPs of a library GEMM (a parsed custom-call instruction): 2 x output elements x contracted size, the
    contracted dimensions from its backend config's dot dimension numbers (else the operand's last)."""
    lhs = shapes.get(ins["operands"][0], []) if ins["operands"] else []
    m = re.search(r'"lhs_contracting_dimensions":\[([^\]]*)\]', ins["attrs"])
    dims = [int(d) for d in re.findall(r"\d+", m.group(1))] if m else [len(lhs) - 1]
    k = math.prod(lhs[d] for d in dims if 0 <= d < len(lhs)) if lhs else 0
    return 2.0 * math.prod(ins["shape"] or [1]) * k


def has_library_gemm(optimized_hlo: str) -> bool:
    """Whether a program hands a matrix product to a library (which XLA's cost analysis does not count)."""
    return bool(GEMM_CALL.search(optimized_hlo))


def dot_shapes(hlo_text: str) -> list[dict]:
    """Every dot of a program with its operand shapes, dtypes, dimension numbers and precision
    (``highest``, ``high`` or ``default``, as the HLO's ``operand_precision`` says)."""
    instrs = parse(hlo_text)
    by_name = {i["name"]: i for i in instrs}
    out = []
    for ins in instrs:
        if ins["op"] != "dot":
            continue
        lhs, rhs = (by_name.get(o) for o in ins["operands"][:2])
        if lhs is None or rhs is None:
            continue
        a = ins["attrs"]
        prec = re.search(r"operand_precision=\{(\w+)", a)
        out.append({"lhs": lhs["shape"], "rhs": rhs["shape"], "lhs_dtype": lhs["dtype"], "rhs_dtype": rhs["dtype"],
                    "out_dtype": ins["dtype"], "precision": prec.group(1) if prec else "default",
                    "dims": ((attr_dims(a, "lhs_contracting_dims"), attr_dims(a, "rhs_contracting_dims")),
                             (attr_dims(a, "lhs_batch_dims"), attr_dims(a, "rhs_batch_dims")))})
    return out


_PRECISIONS = {"highest": "highest", "high": "high", "default": None}  # HLO name -> jax.lax precision
_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64", "s8": "int8", "s32": "int32"}


def dots_only(hlo_text: str, seed: int = 0):
    """A jitted program doing only the program's dots (same shapes, dtypes), and random inputs for it.

    Timing it next to the whole program gives the share of time spent in matrix
    multiplication without a profiler. Each dot keeps the precision it has in the program:
    at DEFAULT an fp32 dot runs as TF32 on Ampere and Hopper GPUs, at HIGHEST it does not.
    """
    import jax
    import jax.numpy as jnp
    import ml_dtypes  # noqa: F401 - numpy casts to bfloat16 / float8 through it
    import numpy as np

    specs = dot_shapes(hlo_text)
    # numpy draws the inputs: a jax.random call per new shape would compile a program each. One draw per
    # shape and dtype: a step's backward pass repeats its forward's shapes, and a dot's time is its shape's
    rng = np.random.default_rng(seed)
    drawn: dict = {}

    def draw(shape, dtype):
        key = (tuple(shape), dtype)
        if key not in drawn:
            drawn[key] = jnp.asarray(rng.standard_normal(shape, dtype=np.float32).astype(
                jnp.dtype(_DTYPES.get(dtype, "float32"))))
        return drawn[key]

    args = [(draw(s["lhs"], s["lhs_dtype"]), draw(s["rhs"], s["rhs_dtype"])) for s in specs]
    dims = [tuple(tuple(tuple(d) for d in pair) for pair in s["dims"]) for s in specs]
    outs = [jnp.dtype(_DTYPES.get(s["out_dtype"], "float32")) for s in specs]
    precs = [_PRECISIONS[s["precision"]] for s in specs]

    def run(pairs):
        return [jax.lax.dot_general(a, b, d, precision=p, preferred_element_type=o)
                for (a, b), d, o, p in zip(pairs, dims, outs, precs)]

    return jax.jit(run), args


def count_ops(hlo_text: str) -> dict[str, int]:
    """Instructions of an HLO module (all computations), fusions, and the entry computation's
    instructions: after fusion each of those is one kernel launch or loop."""
    instrs = parse(hlo_text)
    entry = hlo_text[hlo_text.find("\nENTRY"):] if "\nENTRY" in hlo_text else hlo_text
    entry = entry[: entry.find("\n}") + 1] if "\n}" in entry else entry
    skip = ("parameter", "constant", "tuple", "get-tuple-element")
    return {"instructions": len([i for i in instrs if i["op"] not in skip]),
            "fusions": sum(i["op"] == "fusion" for i in instrs),
            "entry_ops": len([i for i in parse(entry) if i["op"] not in skip])}


def library_calls(optimized_hlo: str) -> list[str]:
    """Library kernels an optimized program calls: custom-call targets (cuBLAS, cuDNN, oneDNN, ...)
    and the kinds of custom fusions (Triton, YNNPACK, cuBLAS-fused GEMMs)."""
    targets = set(re.findall(r'custom_call_target="([^"]+)"', optimized_hlo))
    kinds = set(re.findall(r'"kind":"(__[\w]+)"', optimized_hlo))
    kinds |= {f"fusion kind {k}" for k in re.findall(r"kind=(kCustom|kTriton\w*)", optimized_hlo) if k != "kCustom"}
    return sorted(targets | kinds)


# custom-call targets and fusion kinds, by the library (or code generator) they stand for
_LIBRARIES = (
    ("cublaslt_f8", lambda n: n == "__cublas$lt$matmul$f8"),
    ("cublaslt", lambda n: n.startswith("__cublas$lt")),
    ("cublas", lambda n: n.startswith("__cublas")),
    ("cudnn", lambda n: n.startswith("__cudnn")),
    ("cusolver", lambda n: n.startswith("__cusolver")),
    ("triton_gemm", lambda n: n.startswith("__triton") and "gemm" in n),
    ("triton", lambda n: n.startswith("__triton")),
    ("ynnpack", lambda n: n.startswith("__ynn")),
    ("onednn", lambda n: n.startswith("__onednn")),
)


def library_counts(optimized_hlo: str) -> dict[str, int]:
    """How many calls of each library an optimized program makes (keys of ``_LIBRARIES``: cublas,
    cublaslt, cublaslt_f8 (an FP8 GEMM kept in FP8), cudnn, cusolver, triton_gemm, triton, ynnpack,
    onednn), counting custom calls and custom fusions; libraries not called are absent."""
    names = re.findall(r'custom_call_target="([^"]+)"', optimized_hlo)
    names += re.findall(r'"kind":"(__[\w$]+)"', optimized_hlo)
    out: dict[str, int] = {}
    for n in names:
        key = next((k for k, match in _LIBRARIES if match(n)), None)
        if key:
            out[key] = out.get(key, 0) + 1
    return out


COLLECTIVE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = (.+?) (all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute)(-start)?\(")
# Bytes per element of each HLO element type: the one table every HLO byte count here and in
# jaxgpu.pricing.roofline reads (an unknown type counts as 4).
ELEMENT_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
                 "s8": 1, "u8": 1, "pred": 1, "f8e4m3fn": 1, "f8e5m2": 1}


def _top_level(types: str) -> list[str]:
    """The elements of a tuple type (``(a, (b, c), d)`` -> ``a``, ``(b, c)``, ``d``); a plain type alone."""
    types = types.strip()
    if not types.startswith("("):
        return [types]
    parts, depth, start = [], 0, 1
    for i, ch in enumerate(types):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
            if depth == 0:
                parts.append(types[start:i].strip())
        elif ch == "," and depth == 1:
            parts.append(types[start:i].strip())
            start = i + 1
    return [p for p in parts if p]


def async_results(types: str, operands: int) -> str:
    """The results of an asynchronous collective's ``-start``, out of its result type, which may list its inputs
    beside them, differently by collective and by XLA version: ``((inputs), results)`` (reduce-scatter and all-to-all
    in jax 0.10, all-reduce in 0.11 too), ``(inputs..., results...)`` (all-gather, collective-permute) or the results
    alone (all-reduce in 0.10)."""
    parts = _top_level(types)
    if len(parts) > 1 and parts[0].startswith("("):
        return ", ".join(parts[1:])
    if operands and len(parts) == 2 * operands:
        return ", ".join(parts[operands:])
    return types


def _operand_count(rest: str) -> int:
    return len(re.findall(r"%([\w.\-]+)", rest.split("),")[0].split(")")[0]))


def collectives(optimized_hlo: str) -> dict[str, tuple[int, int]]:
    """The collectives an optimized program holds: kind (all_reduce, all_gather, reduce_scatter,
    all_to_all, collective_permute) -> (how many, bytes of their results). An asynchronous pair
    counts once (its start), with its results only (``async_results``)."""
    out: dict[str, tuple[int, int]] = {}
    for line in optimized_hlo.splitlines():
        m = COLLECTIVE.match(line)
        if not m:
            continue
        types, op, start = m.groups()
        if start:
            types = async_results(types, _operand_count(line[m.end():]))
        nbytes = sum(ELEMENT_BYTES.get(t, 4) * math.prod(_dims(d) or [1]) for t, d in re.findall(r"(\w+)\[([\d,]*)\]",
                                                                                                 types))
        key = op.replace("-", "_")
        count, total = out.get(key, (0, 0))
        out[key] = (count + 1, total + nbytes)
    return out


def replica_group(rest: str) -> int:
    """The devices of one group of a collective, read off its ``replica_groups`` in each form XLA prints: listed
    (``{{0,2},{1,3}}``), iota (``[2,2]<=[4]``: 2 groups of 2) or a mesh's axes (``mesh['axis_0'=2,'axis_1'=4]
    {'axis_1'}``: the sizes of the axes named); 0 where it names none (every device of the program)."""
    m = re.search(r"replica_groups=(\{\{[\d,]*\}|\[\d+,(\d+)\]<=|mesh\[([^\]]*)\]"
                  r"(?:, device_ids=\((?:[^()]|\([^()]*\))*\))?\s*\{([^}]*)\})", rest)
    if not m:
        return 0
    if m.group(2):
        return int(m.group(2))
    if m.group(3) is None:
        return len([x for x in m.group(1)[2:-1].split(",") if x])
    sizes = dict(re.findall(r"'([\w.]+)'=(\d+)", m.group(3)))
    n = 1
    for name, sub in re.findall(r"'([\w.]+)'(?::\(\d+\)(\d+))?", m.group(4)):
        n *= int(sub) if sub else int(sizes.get(name, 1))
    return n


def replica_members(rest: str, devices: int) -> list[list[int]] | None:
    """A collective's groups as device ids, read off its ``replica_groups`` (listed, iota ``[G,S]<=[dims]T(perm)``, or
    a mesh's axes, row-major, with its ``device_ids`` where printed) or a permute's ``source_target_pairs``; every
    device of the program where it names none; None where its form cannot be read."""
    import numpy as np

    pairs = re.search(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}", rest)
    if pairs:
        return [[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)\}", pairs.group(1))]
    listed = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", rest)
    if listed:
        groups = [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", listed.group(1))]
        return [g for g in groups if g] or [list(range(devices))]
    iota = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", rest)
    if iota:
        ids = np.arange(int(np.prod([int(d) for d in iota.group(3).split(",")]))).reshape(
            [int(d) for d in iota.group(3).split(",")])
        if iota.group(4):
            ids = ids.transpose([int(d) for d in iota.group(4).split(",")])
        return ids.reshape(int(iota.group(1)), int(iota.group(2))).tolist()
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\](?:, device_ids=\(((?:[^()]|\([^()]*\))*)\))?\s*"
                     r"\{([^}]*)\}", rest)
    if mesh:
        axes = re.findall(r"'([\w.]+)'=(\d+)", mesh.group(1))
        named = re.findall(r"'([\w.]+)'", mesh.group(3))
        if ":" in mesh.group(3) or any(n not in dict(axes) for n in named):
            return None  # a sub-axis: not read here
        order = _device_ids(mesh.group(2) or "") or list(range(devices))
        grid = np.asarray(order).reshape([int(v) for _, v in axes])
        names = [a for a, _ in axes]
        keep = [i for i, a in enumerate(names) if a not in named] + [names.index(a) for a in named]
        return grid.transpose(keep).reshape(-1, int(np.prod([int(dict(axes)[a]) for a in named]) or 1)).tolist()
    return None if "replica_groups=" in rest else [list(range(devices))]


def _device_ids(text: str) -> list[int]:
    """A mesh's ``device_ids`` as XLA prints them: listed (``0,2,1,3``) or iota (``[4,2]T(1,0)``: arange(8) in the
    shape [4, 2], transposed, flattened)."""
    import numpy as np

    iota = re.fullmatch(r"\s*\[([\d,]+)\](?:T\(([\d,]+)\))?\s*", text)
    if iota:
        dims = [int(d) for d in iota.group(1).split(",")]
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        return (ids.transpose([int(d) for d in iota.group(2).split(",")]) if iota.group(2) else ids).ravel().tolist()
    return [int(x) for x in re.findall(r"\d+", text)]


def unfused_bytes(hlo_text: str, itemsize: int = 4) -> float:
    """Bytes moved if every non-trivial instruction read its operands and wrote its output to memory."""
    instrs = parse(hlo_text)
    shapes = {i["name"]: i["shape"] for i in instrs}
    total = 0.0
    for ins in instrs:
        if ins["op"] in ("parameter", "constant", "tuple", "get-tuple-element"):
            continue
        total += math.prod(ins["shape"] or [1]) * itemsize
        total += sum(math.prod(shapes.get(o, []) or [1]) * itemsize for o in ins["operands"] if o in shapes)
    return total


def lowering_chain(fn, *args) -> dict[str, str]:
    """The program at each stage: jaxpr, StableHLO, and XLA's optimized HLO."""
    import jax

    lowered = jax.jit(fn).lower(*args)
    return {"jaxpr.txt": str(jax.make_jaxpr(fn)(*args)), "stablehlo.mlir": lowered.as_text(),
            "optimized_hlo.txt": lowered.compile().as_text()}

