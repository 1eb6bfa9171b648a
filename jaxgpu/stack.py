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

import dataclasses
import math
import re

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = (\w+)\[([\d,]*)\]\S*\s+([\w\-]+)\((.*)$")
# an instruction whose result is a tuple (a library GEMM returns its product and a workspace): the first element
_TUPLE_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = \((\w+)\[([\d,]*)\][^=]*?\) ([\w\-]+)\((.*)$")
# a custom call that multiplies matrices: cuBLAS, cuBLASLt (and its fp8 variant), oneDNN's matmul
_GEMM_CALL = re.compile(r'custom_call_target="([^"]*(?:gemm|matmul)[^"]*)"', re.I)
_MOVEMENT = {"parameter", "constant", "reshape", "broadcast", "transpose", "slice", "concatenate", "copy", "convert",
             "bitcast", "bitcast-convert", "get-tuple-element", "tuple", "iota", "dynamic-slice",
             "dynamic-update-slice", "pad", "reverse", "gather", "scatter", "custom-call", "call", "while",
             "conditional", "rng-bit-generator", "rng", "after-all", "partition-id", "replica-id",
             "optimization-barrier"}
CLASSES = ("dot", "elementwise", "reduce")


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
                    "attrs": rest[i:]})
    return out


def _attr_dims(attrs: str, key: str) -> list[int]:
    m = re.search(key + r"=\{([\d,]*)\}", attrs)
    return _dims(m.group(1)) if m else []


def op_flops(hlo_text: str) -> dict[str, float]:
    """FLOPs of a program by class (dot, elementwise, reduce), from its unoptimized HLO text."""
    instrs = parse(hlo_text)
    shapes = {i["name"]: i["shape"] for i in instrs}
    totals = dict.fromkeys(CLASSES, 0.0)
    for ins in instrs:
        op, n_out = ins["op"], math.prod(ins["shape"]) if ins["shape"] else 1
        if op == "custom-call" and _GEMM_CALL.search(ins["attrs"]):
            totals["dot"] += library_gemm_flops(ins, shapes)
            continue
        if op in _MOVEMENT:
            continue
        if op in ("dot", "convolution"):
            lhs = shapes.get(ins["operands"][0], [])
            k = math.prod(lhs[d] for d in _attr_dims(ins["attrs"], "lhs_contracting_dims") if d < len(lhs))
            totals["dot"] += 2.0 * n_out * k
        elif op in ("reduce", "reduce-window"):
            src = shapes.get(ins["operands"][0], ins["shape"])
            totals["reduce"] += float(math.prod(src) if src else 1)
        else:
            totals["elementwise"] += float(n_out)
    return totals


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
    return bool(_GEMM_CALL.search(optimized_hlo))


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
                    "dims": ((_attr_dims(a, "lhs_contracting_dims"), _attr_dims(a, "rhs_contracting_dims")),
                             (_attr_dims(a, "lhs_batch_dims"), _attr_dims(a, "rhs_batch_dims")))})
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


_COLLECTIVE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = (.+?) (all-reduce|all-gather|reduce-scatter|all-to-all|"
                         r"collective-permute)(-start)?\(")
# Bytes per element of each HLO element type: the one table every HLO byte count here and in
# jaxgpu.prediction reads (an unknown type counts as 4).
ELEMENT_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
                 "s8": 1, "u8": 1, "pred": 1, "f8e4m3fn": 1, "f8e5m2": 1}


def collectives(optimized_hlo: str) -> dict[str, tuple[int, int]]:
    """The collectives an optimized program holds: kind (all_reduce, all_gather, reduce_scatter,
    all_to_all, collective_permute) -> (how many, bytes of their results). An asynchronous pair
    counts once (its start); a gather's or permute's start lists its input beside its result, of
    which the larger (the result) is counted."""
    out: dict[str, tuple[int, int]] = {}
    for line in optimized_hlo.splitlines():
        m = _COLLECTIVE.match(line)
        if not m:
            continue
        types, op, start = m.groups()
        sizes = [ELEMENT_BYTES.get(t, 4) * math.prod(_dims(d) or [1]) for t, d in re.findall(r"(\w+)\[([\d,]*)\]",
                                                                                             types)]
        nbytes = max(sizes) if start and op in ("all-gather", "collective-permute") else sum(sizes)
        key = op.replace("-", "_")
        count, total = out.get(key, (0, 0))
        out[key] = (count + 1, total + nbytes)
    return out


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


# ---------------------------------------------------------------- kernels of an optimized program


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    flops: float
    bytes: float
    is_dot: bool


_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done"}


def _type_bytes(types: str) -> float:
    return float(sum(ELEMENT_BYTES.get(t, 4) * math.prod(int(d) for d in dims.split(",") if d)
                     for t, dims in re.findall(r"(\w+)\[([\d,]*)\]", types)))


def kernels(optimized_hlo: str) -> list[Kernel]:
    """The kernels of an optimised program: each instruction of its entry computation that does work,
    with the FLOPs of what it computes (a fusion: its fused computation; a library GEMM: its shapes) and the
    bytes it moves (its operands read once, its result written once)."""
    bodies = {m.group(1): m.group(2) for m in re.finditer(r"^%?([\w.\-]+) \([^\n]*\{\n(.*?)\n\}", optimized_hlo,
                                                          re.M | re.S)}
    entry = re.search(r"^ENTRY [^\n]*\{\n(.*?)\n\}", optimized_hlo, re.M | re.S)
    if entry is None:
        return []
    out, types = [], {}
    shapes = {i["name"]: i["shape"] for i in parse(entry.group(1))}
    for line in entry.group(1).splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+) = (.+?) ([\w\-]+)\((.*)$", line)
        if not m:
            continue
        name, result, op, rest = m.groups()
        types[name] = result
        if op in _FREE:
            continue
        operands = re.findall(r"%([\w.\-]+)", rest.split("),")[0])
        nbytes = _type_bytes(result) + sum(_type_bytes(types.get(o, "")) for o in operands)
        if op == "custom-call" and _GEMM_CALL.search(rest):
            # its result is (product, workspace): the workspace is scratch, not memory traffic
            (ins,) = parse(line)
            product = re.match(r"\(?\s*(\w+\[[\d,]*\])", result)
            nbytes -= _type_bytes(result) - _type_bytes(product.group(1) if product else result)
            out.append(Kernel(name, library_gemm_flops(ins, shapes), nbytes, True))
            continue
        called = re.search(r"calls=%?([\w.\-]+)", rest)
        body = bodies.get(called.group(1), "") if called else line
        flops = op_flops(body)
        out.append(Kernel(name, sum(flops.values()), nbytes, flops["dot"] > 0 or "gemm" in rest or "matmul" in rest))
    return out


def program_counts(optimized_hlo: str) -> tuple[float, float]:
    """(FLOPs, bytes) of an optimized program, summed over its kernels (``kernels``): the count that holds
    where XLA's cost analysis cannot see (library GEMMs on a GPU)."""
    ks = kernels(optimized_hlo)
    return sum(k.flops for k in ks), sum(k.bytes for k in ks)
