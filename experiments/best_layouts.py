"""The model command's ``--best``: a training step's fastest layouts that fit (``jaxgpu.pricing.layouts``), printed as
a ranked table with what became of the others, progress on stderr while plans compile, and ``--out`` files: PATH.json
(every candidate, ranked best first), PATH.csv and PATH.png (predicted time against memory a GPU)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

from experiments import cli

COLUMNS = ("layout", "fate", "fits", "seconds", "bytes_per_device", "mfu", "binds", "bound_s", "formula_bytes", "why")
# what each fate means, as the closing line says it
SAID = {"best": "best", "slower": "slower", "does not fit": "compiled and do not fit",
        "cannot beat": "pruned by the price's lower bound",
        "dominated": "pruned: the same layout with less recomputation or fewer micro-batches fits",
        "cannot fit": "pruned by the formula", "refused": "refused by the rules", "unexplored": "left for the budget"}


def answer(a: Any, command: str) -> int:
    """Search each card asked (``a``: the command's ``Asked``) and print its answer; 2 where the search is refused,
    1 where the files cannot be written."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import layouts

    gpus = a.gpus or (hardware.DEFAULT_GPU,)
    layout = a.settings if a.layout_said else None
    base = a.settings  # what is not layout (flash, the network, overlap, XLA flags) every candidate keeps
    searches = []
    for gpu in gpus:
        def progress(done: int, total: int, k: Any, gpu: str = gpu) -> None:
            said = f"{k.seconds:.3g} s" if k.seconds is not None else k.why[:60]
            print(f"  {gpu}: {done} priced, {total - done} left: {k.layout}: {k.fate} ({said})", file=sys.stderr,
                  flush=True)

        try:
            searches.append(layouts.best_layouts(
                a.decoder, gpu, devices=a.devices[0], batch=a.batch, seq=a.seq, fp8=a.settings.matmul == "fp8",
                layout=layout, base=base, budget_s=a.budget_s, workers=a.workers, ray=a.ray, progress=progress))
        except (KeyError, ValueError, RuntimeError) as err:
            return cli.fail(cli.name(command), str(err.args[0] if isinstance(err, KeyError) else err))
    for s in searches:
        for line in lines(s, a.top, layout):
            print(line)
        print(f"{s.gpu}: {s.compiled} layouts priced in {s.elapsed_s:.0f} s", file=sys.stderr)
    return write(Path(a.out), searches, command) if a.out else 0


def lines(s: Any, top: int, layout: Any = None) -> list[str]:
    """A search's answer: the top layouts as a table, where the asked layout ranks, and how many met each fate."""
    head = (f"{s.model}, one train step, batch {s.batch} x {s.seq:,} tokens on {s.devices} {s.gpu}: the fastest "
            "layouts that fit (compiled for the GPU on this CPU, predicted, not run):")
    rows = [("rank", "layout", "GB/GPU", "step s", "MFU", "binds", "")]
    best = s.top(top)
    for i, k in enumerate(best, 1):
        rows.append((str(i), k.layout, f"{k.bytes_per_device / 1e9:.1f}", f"{k.seconds:.3g}", f"{k.mfu:.0%}",
                     k.binds, k.why))
    out = [head]
    if not best:
        out.append("  no layout found that fits" + (" in the budget" if s.counts().get("unexplored") else ""))
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if layout is not None:
        mine = next(k for k in s.candidates if k.settings == layout)
        rank = next((i for i, k in enumerate(s.candidates, 1) if k.settings == layout), None)
        out.append(f"the layout asked ({mine.layout}): {mine.fate}" + (f", rank {rank}" if mine.seconds else "")
                   + (f": {mine.why}" if mine.why else ""))
    counts = s.counts()
    out.append(f"{len(s.candidates)} candidates: " + ", ".join(f"{n} {SAID[f]}" for f, n in counts.items())
               + f"; {s.compiled} priced from their plans (those the cache held read, not compiled).")
    return out


def write(out: Path, searches: list, command: str) -> int:
    """PATH.json (each card's candidates, ranked best first), PATH.csv and PATH.png."""
    try:
        rows = [{"gpu": s.gpu, "n_devices": s.devices, **k.row()} for s in searches for k in s.candidates]
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
        with open(out.with_suffix(".csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(("gpu", "n_devices", *COLUMNS))
            w.writerows([[r["gpu"], r["n_devices"], *(r[c] if r[c] is not None else "" for c in COLUMNS)]
                         for r in rows])
        searches[0].figure().savefig(out.with_suffix(".png"), dpi=150, metadata={"Software": None})
    except OSError as err:
        print(f"{cli.name(command)}: error: cannot write {out}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(f"written: {out.with_suffix('.json')}, {out.with_suffix('.csv')} and {out.with_suffix('.png')}",
          file=sys.stderr)
    return 0
