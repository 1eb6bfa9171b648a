"""The pricing code's fingerprint: a hash over every module a price or a plan depends on, found by following their
imports, each as code (comments and docstrings left out), with the JAX, jaxlib and CUDA plugin versions that compile
the plans. A record priced under one fingerprint and read under another was priced by other code: the committed
priced runs carry theirs, and a test says when they must be priced again.

Code and data are stamped apart. The tables a price reads one entry at a time (``DATA``: the cards with their
calibration entries, the named models, the published cases) are left out of the code's hash; each entry a record
used has a hash of its own (``data``), which the run keeps beside the code's. A new card, model or case then stales
nothing, and an edited one only the records that used it (``used``).

Imports no JAX (versions are read from the installed packages' metadata).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import io
import tokenize
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# where a price is made: the library's planner, programs, plans and roofline, and the study's side of it (the
# published cases priced, the model's view of timed records, the summary's rows); their imports are followed
ENTRIES = ("jaxgpu.pricing.planner", "jaxgpu.pricing.published", "jaxgpu.pricing.plans", "jaxgpu.pricing.sizing",
           "experiments.gpu_model.measure", "experiments.analysis.pricing", "experiments.reporting.summary")
# the study's modules whose imports are followed too (the rest of the study, its registry and views, is not pricing)
_STUDY = ("experiments.gpu_model", "experiments.analysis.pricing", "experiments.reporting.summary",
          "experiments.contract", "experiments.transformer")
# the experiments whose records hold prices, each with where its prices are made: its run.json carries the stamp
# (``stamp``) of the code that priced them, and experiments.reprice prices them again when it changes
PRICED = {"gpu_model": ENTRIES, "transformer": ("experiments.transformer.measure", "jaxgpu.pricing.planner",
                                                 "jaxgpu.pricing.plans", "jaxgpu.pricing.roofline")}
VERSIONED = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin")
# the tables of data, by module: their statements (and the private constants only they read) are no part of the
# code's hash; each entry is hashed apart, where a record names it (``used``)
DATA = {"jaxgpu.ground.hardware": ("GPUS",), "jaxgpu.ground.calibration": ("TABLE",),
        "jaxgpu.ground.decoders": ("MODELS",), "jaxgpu.pricing.published_cases": ("CASES",)}


def _path(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


# modules that draw and colour (matplotlib figures, the palette): no number of a price passes through them
_DRAWING = ("jaxgpu.records.figures", "jaxgpu.records.palette")


def _followed(module: str) -> bool:
    return (module.startswith("jaxgpu.") or module.startswith(_STUDY)) and not module.startswith(_DRAWING)


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The project modules ``tree`` imports anywhere (a name imported from a package may be a module of it)."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                keep = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(keep + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def sources(entries: Iterable[str] = ENTRIES, root: Path = ROOT) -> list[Path]:
    """Every file the ``entries`` depend on, following their imports within the library and the study's pricing."""
    seen: dict[str, Path] = {}
    todo = list(entries)
    while todo:
        module = todo.pop()
        path = _path(module, root)
        if module in seen or path is None:
            continue
        seen[module] = path
        found = _imported(ast.parse(path.read_text()), module, path.name == "__init__.py")
        todo += [m for m in found if _followed(m) and m not in seen]
    return sorted(seen.values())


def _module(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(node: ast.AST, ctx: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _assigned(node: ast.stmt) -> set[str]:
    """The names a top-level assignment binds (not those of a comprehension inside it)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return set().union(*(_names(t, ast.Store) for t in targets))


def _data_statements(tree: ast.Module, tables: tuple[str, ...]) -> list[ast.stmt]:
    """The module's statements that make its ``tables``: those assigning a table, and those assigning private names
    that nothing but data reads (a source's text, an entry built before the table takes it)."""
    data = [n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            and (names := _assigned(n)) and all(t in tables or t.startswith("_") for t in names)]
    while True:  # a private name code reads is code, and so is what it reads in turn
        read = set().union(*(_names(n, ast.Load) for n in tree.body if n not in data))
        code = [n for n in data if _assigned(n) & read and not _assigned(n) <= set(tables)]
        if not code:
            return data
        data = [n for n in data if n not in code]


def _starts(src: str) -> list[int]:
    starts = [0]
    for line in src.encode().splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _data_spans(src: str, module: str) -> list[tuple[int, int]]:
    """The byte spans of ``module``'s data statements (``DATA``), with the comment lines just above each."""
    if module not in DATA:
        return []
    starts, lines = _starts(src), src.splitlines()
    out = []
    for n in _data_statements(ast.parse(src), DATA[module]):
        first = n.lineno
        while first > 1 and lines[first - 2].lstrip().startswith("#"):
            first -= 1
        out.append((starts[first - 1], starts[n.end_lineno - 1] + len(lines[n.end_lineno - 1].encode())))
    return out


def _drop(raw: bytes, spans: list[tuple[int, int]]) -> bytes:
    kept, at = [], 0
    for a, b in sorted(spans):
        kept.append(raw[at:max(a, at)])
        at = max(at, b)
    kept.append(raw[at:])
    return b"".join(kept)


def raw_code(path: Path, root: Path = ROOT) -> bytes:
    """A module's bytes, its data statements (``DATA``) left out: what a cache key reads, where any edit of the
    code must miss, a comment's too, and an entry of a table must not."""
    src = path.read_text()
    return _drop(src.encode(), _data_spans(src, _module(path, root)))


def _code(path: Path, root: Path = ROOT) -> str:
    """A module as code: its text without comments, docstrings and data statements (``DATA``), its whitespace
    collapsed. Read off the text (the spans ``ast`` and ``tokenize`` give), not off a syntax tree, whose form differs
    from one Python to the next."""
    src = path.read_text()
    starts = _starts(src)
    spans = _data_spans(src, _module(path, root))  # byte offsets to drop
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            d = body[0]  # ast's columns are bytes of UTF-8
            spans.append((starts[d.lineno - 1] + d.col_offset, starts[d.end_lineno - 1] + d.end_col_offset))
    text = src.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:  # tokenize's columns are characters
            (row, col), (end_row, end_col) = tok.start, tok.end
            spans.append((starts[row - 1] + len(text[row - 1][:col].encode()),
                          starts[end_row - 1] + len(text[end_row - 1][:end_col].encode())))
    return " ".join(_drop(src.encode(), spans).decode().split())


def versions() -> str:
    """The compiler's versions a plan depends on, as installed: "jax==0.10.2;jaxlib==0.10.2;..."."""
    return _versions()


def _versions() -> str:
    out = []
    for name in VERSIONED:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ";".join(out)


def fingerprint(entries: Iterable[str] = ENTRIES, root: Path = ROOT, with_versions: bool = True) -> str:
    """The first 12 hex digits of a hash over the pricing code (``sources``, as code) and, ``with_versions``, the
    compiler's versions (``versions``)."""
    h = hashlib.sha256(_versions().encode() if with_versions else b"")
    for path in sources(entries, root):
        h.update(str(path.relative_to(root)).encode() + b"\0" + _code(path, root).encode())
    return h.hexdigest()[:12]


def _card(name: str, hw: object = None) -> object:
    """What a price on the card ``name`` (the entry ``hw``, else the table's) reads of the data: its entry, the entry
    of the card whose plan stands in for it, and the calibration entry each kind of kernel resolves to (its own or a
    stand-in's)."""
    from jaxgpu.ground import calibration, hardware

    hw = hw or hardware.GPUS.get(name)
    kinds = sorted({e.kind for e in calibration.TABLE} | set(calibration._SAME_UNITS))

    def entry(kind: str) -> object:
        try:
            return (hw.share(kind) if hw else calibration.share(name, kind)).entry
        except KeyError:
            return None

    return hw, hw and hardware.GPUS.get(hw.stand_in or ""), [(k, entry(k)) for k in kinds]


def card_data(hw: object) -> str:
    """``data``'s hash of a card given as its entry (``jaxgpu.ground.hardware.Hardware``), in the table or not."""
    return hashlib.sha256(repr(_card(hw.name, hw)).encode()).hexdigest()[:12]


def data(key: str) -> str:
    """The hash of one entry of the data (``DATA``) as it is now: "card:H100 SXM" (``_card``), "model:llama3-8b" (a
    named model), "case:<id>" (a published case); one that is gone hashes as None does."""
    from jaxgpu.ground import decoders
    from jaxgpu.pricing import published_cases

    kind, _, name = key.partition(":")
    if kind == "card":
        value = _card(name)
    elif kind == "model":
        value = decoders.MODELS.get(name)
    elif kind == "case":
        value = next((c for c in published_cases.CASES if c.id == name), None)
    else:
        raise ValueError(f"no data of the kind {kind!r} (card, model, case)")
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def used(experiment: str, params: dict, card: str | None = None) -> list[str]:
    """The entries of the data (``data``'s keys) a record of a priced ``experiment`` (``PRICED``) with ``params``
    was priced from; ``card``: the card its run compiled for, where the params do not name one."""
    from jaxgpu.ground import decoders
    from jaxgpu.pricing import published_cases

    keys = []
    if experiment == "gpu_model":
        case = next((c for c in published_cases.CASES if c.id == params.get("case")), None)
        keys = [f"card:{params.get('gpu')}"]
        if params.get("case") != "headline":
            keys.append(f"case:{params.get('case')}")
        if case:
            keys += [f"card:{case.gpu}"] + [f"model:{x}" for x in case.program if isinstance(x, str)
                                            and x in decoders.MODELS]
    elif experiment == "transformer":
        keys = [f"model:{params.get('model')}"] + ([f"card:{card}"] if card else [])
    return sorted(set(keys))


def stamp(experiment: str, params: Iterable[dict] = (), card: str | None = None) -> dict:
    """What a run.json's info says of the code and data that priced ``experiment``'s records (``PRICED``): the code's
    fingerprint with and without the compiler's versions, those versions, and ``pricing_data``: the hash of each
    entry of the data the records with ``params`` used (``used``)."""
    entries = PRICED[experiment]
    keys = sorted({k for p in params for k in used(experiment, p, card)})
    return {"pricing_fingerprint": fingerprint(entries), "pricing_code": fingerprint(entries, with_versions=False),
            "pricing_versions": versions(), "pricing_data": {k: data(k) for k in keys}}
