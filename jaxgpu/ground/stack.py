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


def _attr_dims(attrs: str, key: str) -> list[int]:
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
        m = _COLLECTIVE.match(line)
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
    """One kernel of an optimised program: its work per launch and how often it launches.

    ``gemm`` is (batch, m, n, k) for a matrix product (a library call, or a fusion around a dot), else
    None; ``dtype`` the HLO element type of its inputs (the product's, for a GEMM) and ``precision`` the
    algorithm a float32 product asks for ("highest", "tf32", "bf16x3", ...: ``dot_precision``).
    ``count`` is how many times the program launches it: the trip counts of the loops around it."""

    name: str
    flops: float
    bytes: float
    is_dot: bool
    count: int = 1
    gemm: tuple[int, int, int, int] | None = None
    dtype: str = ""
    precision: str = "default"
    scope: str = ""  # "flash_attention" where JAX named it so (jaxgpu.kernels.transformer): priced as one fused kernel
    transcendentals: float = 0.0  # how many of ``flops`` are transcendental ops (``transcendental_ops``)
    powers: float = 0.0  # how many of those are pow (``power_ops``)
    group: int = 0  # a collective's devices (``replica_group``): those of one group; 0 where it names all of them

    def to_list(self) -> list:
        """A compact form for a results attachment (``from_list`` reads it back)."""
        return [self.name, self.flops, self.bytes, self.is_dot, self.count, list(self.gemm) if self.gemm else None,
                self.dtype, self.precision, self.scope, self.transcendentals, self.powers, self.group]

    @classmethod
    def from_list(cls, v: list) -> Kernel:
        return cls(v[0], float(v[1]), float(v[2]), bool(v[3]), int(v[4]), tuple(v[5]) if v[5] else None, v[6], v[7],
                   v[8] if len(v) > 8 else "", float(v[9]) if len(v) > 9 else 0.0, float(v[10]) if len(v) > 10 else 0.0,
                   int(v[11]) if len(v) > 11 else 0)


_FREE = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done", "after-all",
         "fusion-done",  # an async fusion's end (jax 0.11): its work is its start's
         "partition-id", "replica-id", "add-dependency", "opt-barrier", "optimization-barrier"}
_LINE = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+) = (.+?) ([\w\-]+)\((.*)$")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \([^\n]*\{\n(.*?)\n\}", re.M | re.S)


def _type_bytes(types: str) -> float:
    return float(sum(ELEMENT_BYTES.get(t, 4) * math.prod(int(d) for d in dims.split(",") if d)
                     for t, dims in re.findall(r"(\w+)\[([\d,]*)\]", types)))


def _json_dims(attrs: str, key: str) -> list[int] | None:
    m = re.search(f'"{key}":\\[([^\\]]*)\\]', attrs)
    return [int(d) for d in re.findall(r"\d+", m.group(1))] if m else None


def gemm_dims(lhs: list[int], rhs: list[int], contracting: tuple[list[int], list[int]],
              batch: tuple[list[int], list[int]]) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a product of ``lhs`` and ``rhs`` under its dimension numbers."""
    (lc, rc), (lb, rb) = contracting, batch
    b = math.prod(lhs[d] for d in lb if d < len(lhs))
    k = math.prod(lhs[d] for d in lc if d < len(lhs))
    m = math.prod(x for d, x in enumerate(lhs) if d not in lc and d not in lb)
    n = math.prod(x for d, x in enumerate(rhs) if d not in rc and d not in rb)
    return b, m, n, k


def dot_precision(attrs: str) -> str:
    """What a product's precision config asks of a float32 product: "highest" (IEEE fp32), "tf32" (one TF32
    pass: DEFAULT or HIGH on a GPU), "bf16x3" / "bf16x6" / "bf16x9" (split passes), or "default"."""
    algo = re.search(r"ALG_DOT_(\w+)", attrs) or re.search(r"algorithm=dot_(\w+)", attrs)
    if algo:
        a = algo.group(1).upper()
        for name, key in (("X9", "bf16x9"), ("X6", "bf16x6"), ("X3", "bf16x3"), ("TF32", "tf32"),
                          ("F32_F32_F32", "highest"), ("BF16_BF16", "default"), ("F16_F16", "default")):
            if name in a:
                return key
    prec = re.search(r'operand_precision(?:"?:\[|=\{)"?(\w+)', attrs)
    p = prec.group(1).lower() if prec else "default"
    return {"highest": "highest", "high": "tf32"}.get(p, "default")


def _gemm_of_call(rest: str, operands: list[str], shapes: dict[str, list[int]]) -> tuple | None:
    lhs, rhs = (shapes.get(o, []) for o in operands[:2]) if len(operands) >= 2 else ([], [])
    lc, rc = _json_dims(rest, "lhs_contracting_dimensions"), _json_dims(rest, "rhs_contracting_dimensions")
    if not lhs or not rhs or lc is None or rc is None:
        return None
    lb, rb = _json_dims(rest, "lhs_batch_dimensions") or [], _json_dims(rest, "rhs_batch_dimensions") or []
    return gemm_dims(lhs, rhs, (lc, rc), (lb, rb))


def _gemm_of_body(body: str, outer: dict[str, dict] | None = None) -> tuple[tuple | None, str, str]:
    """The (batch, m, n, k), input element type and precision of the first dot of a fused computation (or of one
    unfused dot, its operands among ``outer``'s instructions)."""
    instrs = parse(body)
    by = {**(outer or {}), **{i["name"]: i for i in instrs}}
    for ins in instrs:
        if ins["op"] not in ("dot", "convolution") or len(ins["operands"]) < 2:
            continue
        lhs, rhs = (by.get(o) for o in ins["operands"][:2])
        if lhs is None or rhs is None:
            return None, "", "default"
        a = ins["attrs"]
        dims = gemm_dims(lhs["shape"], rhs["shape"], (_attr_dims(a, "lhs_contracting_dims"),
                                                      _attr_dims(a, "rhs_contracting_dims")),
                         (_attr_dims(a, "lhs_batch_dims"), _attr_dims(a, "rhs_batch_dims")))
        return dims, lhs["dtype"], dot_precision(a)
    return None, "", "default"


def _fused_bytes(body: str, operand_bytes: list[float], result_bytes: float) -> float:
    """Bytes a fusion moves: each operand read once, except one it only slices (a scanned layer's weights
    out of the stack: the slice is read) or updates in place (a KV cache: nothing of it is read), and its
    result written once, except an in-place update (only the update is written)."""
    instrs = parse(body)
    by = {i["name"]: i for i in instrs}
    params = {int(i["operands"][0]): i["name"] for i in instrs if i["op"] == "parameter" and i["operands"]
              and i["operands"][0].isdigit()}
    users: dict[str, list[dict]] = {}
    for ins in instrs:
        for o in ins["operands"]:
            users.setdefault(o, []).append(ins)

    def size(ins: dict) -> float:
        return ELEMENT_BYTES.get(ins["dtype"], 4) * math.prod(ins["shape"] or [1])

    root = next((i for i in instrs if i["root"]), instrs[-1] if instrs else None)
    # what the fusion gives back: its root, or each element of a root tuple (a GEMM's product beside its workspace)
    outs = [by.get(o) for o in root["operands"]] if root is not None and root["op"] == "tuple" else [root]
    updates = [o for o in outs if o is not None and o["op"] == "dynamic-update-slice" and len(o["operands"]) > 1]
    in_place = bool(updates)
    total = 0.0
    for idx, nbytes in enumerate(operand_bytes):
        name = src = params.get(idx)
        use = users.get(name, []) if name else []
        while len(use) == 1 and use[0]["op"] in ("bitcast", "reshape"):
            src = use[0]["name"]
            use = users.get(src, [])
        if use and all(u["op"] in ("dynamic-slice", "slice") and u["operands"][0] == src for u in use):
            total += min(nbytes, sum(size(u) for u in use))
        elif in_place and any(u is d and u["operands"][0] == src for u in use for d in updates):
            continue
        else:
            total += nbytes
    if in_place:  # each update written into its buffer, and the fusion's other outputs but a GEMM's workspace
        written = [by.get(d["operands"][1]) for d in updates]
        if not all(written):
            return total + result_bytes
        others = [o for o in outs if o is not None and o not in updates and not _workspace(o, by)]
        return total + sum(map(size, written)) + sum(map(size, others))
    return total + result_bytes


def _workspace(ins: dict, by: dict[str, dict]) -> bool:
    """Whether an instruction is a library GEMM's scratch workspace (its result's s8 element): not memory traffic."""
    src = by.get(ins["operands"][0]) if ins["op"] == "get-tuple-element" and ins["operands"] else None
    return ins["dtype"] == "s8" and src is not None and src["op"] == "custom-call" and bool(_GEMM_CALL.search(
        src["attrs"]))


def kernels(optimized_hlo: str) -> list[Kernel]:
    """The kernels of an optimised program: each instruction that does work, in its entry computation and in
    the loops (``while``) and calls it makes, with the FLOPs of what it computes (a fusion: its fused
    computation; a library GEMM: its shapes), the bytes it moves (``_fused_bytes``), its product's shape and
    how many times it launches (a loop's known trip count times the kernels of its body)."""
    bodies = {m.group(1): m.group(2) for m in _COMPUTATION.finditer(optimized_hlo)}
    entry = re.search(r"^ENTRY %?([\w.\-]+)", optimized_hlo, re.M)
    if entry is None or entry.group(1) not in bodies:
        return []
    out: list[Kernel] = []
    _walk(bodies[entry.group(1)], bodies, 1, out, depth=0)
    return out


def loop_steps(optimized_hlo: str) -> int:
    """Iterations of the program's compiled loops (nested loops multiply), each a host round trip on a GPU."""
    bodies = {m.group(1): m.group(2) for m in _COMPUTATION.finditer(optimized_hlo)}
    entry = re.search(r"^ENTRY %?([\w.\-]+)", optimized_hlo, re.M)
    steps = [0]

    def walk(body: str, mult: int, depth: int) -> None:
        for line in body.splitlines():
            m = _LINE.match(line)
            if not m or depth >= 8:
                continue
            if m.group(3) == "while":
                n = _trip_count(m.group(4))
                steps[0] += mult * n
                called = re.search(r"body=%?([\w.\-]+)", m.group(4))
                if called and called.group(1) in bodies:
                    walk(bodies[called.group(1)], mult * n, depth + 1)
            elif m.group(3) in ("call", "conditional"):  # XLA:CPU wraps a loop in a call, as _walk follows
                for called in re.findall(r"(?:to_apply|branch_computations|true_computation)=\{?%?([\w.\-]+)",
                                         m.group(4)):
                    if called in bodies:
                        walk(bodies[called], mult, depth + 1)
    if entry and entry.group(1) in bodies:
        walk(bodies[entry.group(1)], 1, 0)
    return steps[0]


def devices(optimized_hlo: str) -> int:
    """The devices one call of the program runs on: its SPMD partitions times its replicas (the module header's
    ``num_partitions`` and ``replica_count``; 1 where it names neither). Its kernels are one device's share."""
    head = optimized_hlo.split("\n", 1)[0]
    n = 1
    for field in ("num_partitions", "replica_count"):
        m = re.search(rf"\b{field}=(\d+)", head)
        n *= int(m.group(1)) if m else 1
    return n


def _trip_count(rest: str) -> int:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"', rest) or re.search(r"trip_count=(\d+)", rest)
    return int(m.group(1)) if m else 1


def _walk(body: str, bodies: dict[str, str], mult: int, out: list[Kernel], depth: int) -> None:
    types: dict[str, str] = {}
    defined = {i["name"]: i for i in parse(body)}
    shapes = {n: i["shape"] for n, i in defined.items()}
    for line in body.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        name, result, op, rest = m.groups()
        types[name] = result
        if op in _FREE:
            continue
        scope = "flash_attention" if re.search(r'op_name="[^"]*flash_attention', rest) else ""
        if op in ("while", "call", "conditional") and depth < 8:
            n = _trip_count(rest) if op == "while" else 1
            for key in (("body",) if op == "while" else ("to_apply", "branch_computations", "true_computation")):
                called = re.search(key + r"=\{?%?([\w.\-]+)", rest)
                if called and called.group(1) in bodies:
                    _walk(bodies[called.group(1)], bodies, mult * n, out, depth + 1)
            continue
        operands = re.findall(r"%([\w.\-]+)", rest.split("),")[0])
        operand_bytes = [_type_bytes(types.get(o, "")) for o in operands]
        if op == "custom-call" and _GEMM_CALL.search(rest):
            # its result is (product, workspace): the workspace is scratch, not memory traffic
            (ins,) = parse(line)
            product = re.match(r"\(?\s*(\w+\[[\d,]*\])", result)
            nbytes = _type_bytes(product.group(1) if product else result) + sum(operand_bytes)
            lhs_type = re.match(r"\(?\s*(\w+)\[", types.get(operands[0], "")) if operands else None
            out.append(Kernel(name, library_gemm_flops(ins, shapes), nbytes, True, mult,
                              _gemm_of_call(rest, operands, shapes), lhs_type.group(1) if lhs_type else "",
                              dot_precision(rest), scope))
            continue
        called = re.search(r"calls=%?([\w.\-]+)", rest)
        fused = bodies.get(called.group(1), "") if called else ""
        if fused and "op_name=" not in rest:
            scope = _body_scope(fused)
        if fused and op in ("fusion", "fusion-start") and _GEMM_CALL.search(fused):
            # a library GEMM inside a fusion (jax 0.11's dynamic-slice fusion: cuBLAS reads a layer's slice of a
            # stacked operand, or writes into one, in place): the product's work and shape, its workspace left out
            out.append(_gemm_fusion(name, fused, operand_bytes, mult, scope))
            continue
        # an unfused instruction (XLA:CPU's plain dot, whose operands are other kernels' results) is read with the
        # shapes of what it reads: alone, its line has none, and a 1024^3 product counted as its output's size
        flops = op_flops(fused) if fused else op_flops(line, defined)
        is_dot = flops["dot"] > 0 or "gemm" in rest or "matmul" in rest
        gemm, dtype, precision = (_gemm_of_body(fused) if fused else _gemm_of_body(line, defined)) if is_dot else \
            (None, "", "default")
        if not dtype:
            first = re.match(r"\(?\s*(\w+)\[", types.get(operands[0], "") if operands else result)
            dtype = first.group(1) if first else ""
        if op == "fusion-start" or (op.endswith("-start") and _COLLECTIVE.match(line)):
            result = async_results(result, len(operands))  # its results, not the inputs it lists beside them
        nbytes = _fused_bytes(fused, operand_bytes, _type_bytes(result)) if fused else \
            _type_bytes(result) + sum(operand_bytes)
        out.append(Kernel(name, sum(flops.values()), nbytes, is_dot, mult, gemm, dtype, precision, scope,
                          transcendental_ops(fused or line), power_ops(fused or line),
                          replica_group(rest) if _COLLECTIVE.match(line) else 0))


def _gemm_fusion(name: str, fused: str, operand_bytes: list[float], mult: int, scope: str) -> Kernel:
    """The kernel of a fusion around a library GEMM: the GEMM's FLOPs, shape, input type and precision; the bytes the
    fusion moves (``_fused_bytes``: a sliced operand's slice read, an in-place update's update written), of which
    the product is the output."""
    instrs = parse(fused)
    by = {i["name"]: i for i in instrs}
    shapes = {n: i["shape"] for n, i in by.items()}
    call = next(i for i in instrs if i["op"] == "custom-call" and _GEMM_CALL.search(i["attrs"]))
    lhs = by.get(call["operands"][0]) if call["operands"] else None
    product = ELEMENT_BYTES.get(call["dtype"], 4) * math.prod(call["shape"] or [1])
    return Kernel(name, library_gemm_flops(call, shapes), _fused_bytes(fused, operand_bytes, product), True, mult,
                  _gemm_of_call(call["attrs"], call["operands"], shapes), lhs["dtype"] if lhs else "",
                  dot_precision(call["attrs"]), scope)


def _body_scope(fused: str) -> str:
    """The scope of a fusion whose own line names no op (XLA drops the name of a fusion it deduplicated: one
    body called from each unrolled layer): "flash_attention" where most of its body's named ops are."""
    names = re.findall(r'op_name="([^"]*)"', fused)
    return "flash_attention" if names and sum("flash_attention" in n for n in names) * 2 > len(names) else ""


def program_counts(optimized_hlo: str) -> tuple[float, float]:
    """(FLOPs, bytes) of an optimized program, summed over its kernels (``kernels``): the count that holds
    where XLA's cost analysis cannot see (library GEMMs on a GPU)."""
    ks = kernels(optimized_hlo)
    return sum(k.flops * k.count for k in ks), sum(k.bytes * k.count for k in ks)
