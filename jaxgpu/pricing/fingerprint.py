"""The pricing code's fingerprint: a hash over every module a price or a plan depends on, found by following their
imports, each as code (comments and docstrings left out), with the JAX, jaxlib and CUDA plugin versions that compile
the plans. A record priced under one fingerprint and read under another was priced by other code: the committed
priced runs carry theirs, and a test says when they must be priced again.

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


def _code(path: Path) -> str:
    """A module as code: its text without comments and docstrings, its whitespace collapsed. Read off the text (the
    spans ``ast`` and ``tokenize`` give), not off a syntax tree, whose form differs from one Python to the next."""
    src = path.read_text()
    lines = src.encode().splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    spans = []  # byte offsets to drop
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
    raw, kept, at = src.encode(), [], 0
    for a, b in sorted(spans):
        kept.append(raw[at:max(a, at)])
        at = max(at, b)
    kept.append(raw[at:])
    return " ".join(b"".join(kept).decode().split())


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
        h.update(str(path.relative_to(root)).encode() + b"\0" + _code(path).encode())
    return h.hexdigest()[:12]


def stamp(experiment: str) -> dict[str, str]:
    """What a run.json's info says of the code that priced ``experiment``'s records (``PRICED``): the fingerprint with
    and without the compiler's versions, and those versions."""
    entries = PRICED[experiment]
    return {"pricing_fingerprint": fingerprint(entries), "pricing_code": fingerprint(entries, with_versions=False),
            "pricing_versions": versions()}
