"""The kernels an optimized program launches, read off its HLO: each kernel's FLOPs and bytes per launch, how often
it launches (the trip counts of the loops around it), and which are matrix products, collectives or fused attention.
What ``jaxgpu.pricing.roofline`` prices on a card's roofs.
"""

from __future__ import annotations

import dataclasses
import math
import re

from jaxgpu.ground import stack


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
    return float(sum(stack.ELEMENT_BYTES.get(t, 4) * math.prod(int(d) for d in dims.split(",") if d)
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
    instrs = stack.parse(body)
    by = {**(outer or {}), **{i["name"]: i for i in instrs}}
    for ins in instrs:
        if ins["op"] not in ("dot", "convolution") or len(ins["operands"]) < 2:
            continue
        lhs, rhs = (by.get(o) for o in ins["operands"][:2])
        if lhs is None or rhs is None:
            return None, "", "default"
        a = ins["attrs"]
        dims = gemm_dims(lhs["shape"], rhs["shape"], (stack.attr_dims(a, "lhs_contracting_dims"),
                                                      stack.attr_dims(a, "rhs_contracting_dims")),
                         (stack.attr_dims(a, "lhs_batch_dims"), stack.attr_dims(a, "rhs_batch_dims")))
        return dims, lhs["dtype"], dot_precision(a)
    return None, "", "default"


# ops through which a fusion's slice of an operand reads only the sliced elements: each element of their result is
# one element of their input (a fusion computes what its outputs need, element by element)
_ONE_TO_ONE = ("bitcast", "reshape", "convert", "transpose", "copy")


def _fused_bytes(body: str, operand_bytes: list[float], result_bytes: float) -> float:
    """Bytes a fusion moves: each operand read once, except one it only slices (a scanned layer's weights
    out of the stack, or an unrolled step's few layers out of it, converted to fp8 on the way: the slices are read)
    or updates in place (a KV cache: nothing of it is read), and its result written once, except an in-place update
    (only the update is written)."""
    instrs = stack.parse(body)
    by = {i["name"]: i for i in instrs}
    params = {int(i["operands"][0]): i["name"] for i in instrs if i["op"] == "parameter" and i["operands"]
              and i["operands"][0].isdigit()}
    users: dict[str, list[dict]] = {}
    for ins in instrs:
        for o in ins["operands"]:
            users.setdefault(o, []).append(ins)

    def size(ins: dict) -> float:
        return stack.ELEMENT_BYTES.get(ins["dtype"], 4) * math.prod(ins["shape"] or [1])

    root = next((i for i in instrs if i["root"]), instrs[-1] if instrs else None)
    # what the fusion gives back: its root, or each element of a root tuple (a GEMM's product beside its workspace)
    outs = [by.get(o) for o in root["operands"]] if root is not None and root["op"] == "tuple" else [root]
    updates = [o for o in outs if o is not None and o["op"] == "dynamic-update-slice" and len(o["operands"]) > 1]
    in_place = bool(updates)
    total = 0.0
    for idx, nbytes in enumerate(operand_bytes):
        name = src = params.get(idx)
        use = users.get(name, []) if name else []
        while len(use) == 1 and use[0]["op"] in _ONE_TO_ONE:
            src = use[0]["name"]
            use = users.get(src, [])
        if use and all(u["op"] in ("dynamic-slice", "slice") and u["operands"][0] == src for u in use):
            # the slices' share of the operand's elements, at the operand's own width (a convert between them
            # changes the width of what is written, not of what is read)
            whole = math.prod(by[src]["shape"] or [1])
            total += nbytes * min(1.0, sum(math.prod(u["shape"] or [1]) for u in use) / whole)
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
    return ins["dtype"] == "s8" and src is not None and src["op"] == "custom-call" and bool(stack.GEMM_CALL.search(
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


def with_trips(optimized_hlo: str, of: int, trips: int) -> str | None:
    """The program with the loops of ``of`` trips that its entry computation runs run ``trips`` times instead: every
    kernel of their bodies launched that much more or less (a step's loop over its micro-batches, priced with one
    more micro-batch on the same plan). None where the entry computation runs no loop of ``of`` trips (XLA unrolled
    it, or there is none)."""
    entry = re.search(r"^ENTRY %?[\w.\-]+ \([^\n]*\{\n(.*?)\n\}", optimized_hlo, re.M | re.S)
    if entry is None:
        return None
    body = entry.group(1)
    count = re.compile(rf'("known_trip_count":\{{"n":"){of}(")')
    lines = [count.sub(rf"\g<1>{trips}\g<2>", line) if _LINE.match(line) and " while(" in line else line
             for line in body.splitlines()]
    changed = "\n".join(lines)
    if changed == body:
        return None
    return optimized_hlo[:entry.start(1)] + changed + optimized_hlo[entry.end(1):]


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
    defined = {i["name"]: i for i in stack.parse(body)}
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
        if op == "custom-call" and stack.GEMM_CALL.search(rest):
            # its result is (product, workspace): the workspace is scratch, not memory traffic
            (ins,) = stack.parse(line)
            product = re.match(r"\(?\s*(\w+\[[\d,]*\])", result)
            nbytes = _type_bytes(product.group(1) if product else result) + sum(operand_bytes)
            lhs_type = re.match(r"\(?\s*(\w+)\[", types.get(operands[0], "")) if operands else None
            out.append(Kernel(name, stack.library_gemm_flops(ins, shapes), nbytes, True, mult,
                              _gemm_of_call(rest, operands, shapes), lhs_type.group(1) if lhs_type else "",
                              dot_precision(rest), scope))
            continue
        called = re.search(r"calls=%?([\w.\-]+)", rest)
        fused = bodies.get(called.group(1), "") if called else ""
        if fused and not re.search(r'op_name="[^"]*/', rest):  # no name of JAX's (a path): the body's
            scope = _body_scope(fused)
        if fused and op in ("fusion", "fusion-start") and stack.GEMM_CALL.search(fused):
            # a library GEMM inside a fusion (jax 0.11's dynamic-slice fusion: cuBLAS reads a layer's slice of a
            # stacked operand, or writes into one, in place): the product's work and shape, its workspace left out
            out.append(_gemm_fusion(name, fused, operand_bytes, mult, scope))
            continue
        # an unfused instruction (XLA:CPU's plain dot, whose operands are other kernels' results) is read with the
        # shapes of what it reads: alone, its line has none, and a 1024^3 product counted as its output's size
        flops = stack.op_flops(fused) if fused else stack.op_flops(line, defined)
        is_dot = flops["dot"] > 0 or "gemm" in rest or "matmul" in rest
        gemm, dtype, precision = (_gemm_of_body(fused) if fused else _gemm_of_body(line, defined)) if is_dot else \
            (None, "", "default")
        if not dtype:
            first = re.match(r"\(?\s*(\w+)\[", types.get(operands[0], "") if operands else result)
            dtype = first.group(1) if first else ""
        if op == "fusion-start" or (op.endswith("-start") and stack.COLLECTIVE.match(line)):
            result = stack.async_results(result, len(operands))  # its results, not the inputs it lists beside them
        nbytes = _fused_bytes(fused, operand_bytes, _type_bytes(result)) if fused else \
            _type_bytes(result) + sum(operand_bytes)
        out.append(Kernel(name, sum(flops.values()), nbytes, is_dot, mult, gemm, dtype, precision, scope,
                          stack.transcendental_ops(fused or line), stack.power_ops(fused or line),
                          stack.replica_group(rest) if stack.COLLECTIVE.match(line) else 0))


def _gemm_fusion(name: str, fused: str, operand_bytes: list[float], mult: int, scope: str) -> Kernel:
    """The kernel of a fusion around a library GEMM: the GEMM's FLOPs, shape, input type and precision; the bytes the
    fusion moves (``_fused_bytes``: a sliced operand's slice read, an in-place update's update written), of which
    the product is the output."""
    instrs = stack.parse(fused)
    by = {i["name"]: i for i in instrs}
    shapes = {n: i["shape"] for n, i in by.items()}
    call = next(i for i in instrs if i["op"] == "custom-call" and stack.GEMM_CALL.search(i["attrs"]))
    lhs = by.get(call["operands"][0]) if call["operands"] else None
    product = stack.ELEMENT_BYTES.get(call["dtype"], 4) * math.prod(call["shape"] or [1])
    return Kernel(name, stack.library_gemm_flops(call, shapes), _fused_bytes(fused, operand_bytes, product), True, mult,
                  _gemm_of_call(call["attrs"], call["operands"], shapes), lhs["dtype"] if lhs else "",
                  dot_precision(call["attrs"]), scope)


def _body_scope(fused: str) -> str:
    """The scope of a fusion whose own line names no op of JAX's: XLA drops the name of a fusion it deduplicated
    (one body called from each unrolled layer), or gives it one of its own ("reshape.46": Llama-2 7B's attention
    probabilities on 8 H100s, two kernels a layer of [2, 32, 4096, 4096] that a fused attention never writes,
    priced as 4.3 GB of memory traffic each until read from their bodies). "flash_attention" where most of its
    body's named ops are."""
    names = re.findall(r'op_name="([^"]*)"', fused)
    return "flash_attention" if names and sum("flash_attention" in n for n in names) * 2 > len(names) else ""


def program_counts(optimized_hlo: str) -> tuple[float, float]:
    """(FLOPs, bytes) of an optimized program, summed over its kernels (``kernels``): the count that holds
    where XLA's cost analysis cannot see (library GEMMs on a GPU)."""
    ks = kernels(optimized_hlo)
    return sum(k.flops * k.count for k in ks), sum(k.bytes * k.count for k in ks)
