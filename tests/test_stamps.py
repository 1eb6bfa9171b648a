"""Code and data stamped apart (jaxgpu.pricing.fingerprint): a table's entry is no part of the code's hash; each record
is judged stale by the entries it used, and experiments.reprice prices only those again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpu.pricing import fingerprint

ROOT = Path(__file__).resolve().parents[1]


def _module(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jaxgpu" / "ground" / "decoders.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


_TABLE = '''"""A data module."""
_SOURCE = "a config.json"  # read by the table alone: data
_ACT = {"silu": "swiglu"}  # read by a function: code


def find(name):
    return MODELS[name], _ACT


# the named models
MODELS = {"a": (1, 2, _SOURCE)}
'''


def test_a_tables_entries_are_no_part_of_the_codes_hash_and_code_beside_them_is(tmp_path):
    """Editing a table of ``fingerprint.DATA`` (an entry, a private constant only the table reads, the comment above
    it) changes neither the code's fingerprint nor the plan cache's raw bytes; a constant a function reads is code,
    and a comment elsewhere changes the raw bytes alone."""
    path = _module(tmp_path, _TABLE)
    entries = ["jaxgpu.ground.decoders"]

    def hashes():
        return fingerprint.fingerprint(entries, tmp_path, with_versions=False), fingerprint.raw_code(path, tmp_path)

    first = hashes()
    for old, new in (('{"a": (1, 2, _SOURCE)}', '{"a": (1, 2, _SOURCE), "b": (3, 4, _SOURCE)}'),
                     ('"a config.json"', '"another config.json"'), ("# the named models", "# the models, named")):
        path.write_text(path.read_text().replace(old, new))
        assert hashes() == first, old
    path.write_text(path.read_text().replace("def find(name):", "def find(name):  # by its name"))
    code, raw = hashes()
    assert code == first[0] and raw != first[1]
    path.write_text(path.read_text().replace('"swiglu"', '"geglu"'))
    assert hashes()[0] != first[0]


def test_a_record_uses_its_case_its_card_and_the_model_its_program_names():
    assert fingerprint.used("gpu_model", {"case": "maxtext-llama2-7b-1x8-h100", "gpu": "H100 SXM", "kind": "train"}) \
        == ["card:H100 SXM", "case:maxtext-llama2-7b-1x8-h100", "model:llama-7b"]
    assert fingerprint.used("gpu_model", {"case": "headline", "gpu": "L4", "program": "matmul_fp32", "size": 1}) \
        == ["card:L4"]
    assert fingerprint.used("transformer", {"model": "gpt2-124m", "mode": "train"}, "H200 SXM") == [
        "card:H200 SXM", "model:gpt2-124m"]
    with pytest.raises(ValueError, match="card, model, case"):
        fingerprint.data("gpu:H100")


def test_a_cards_data_is_what_its_prices_read(monkeypatch):
    """A card's hash holds its entry, its stand-in's entry and the calibration entry each kind resolves to: an edit of
    the A100's entry moves its hash and the L4's (priced on the A100's plan), not the H200's."""
    import dataclasses

    from jaxgpu.ground import hardware

    before = {c: fingerprint.data(f"card:{c}") for c in ("A100 80GB", "L4", "H200 SXM")}
    a100 = hardware.GPUS["A100 80GB"]
    monkeypatch.setitem(hardware.GPUS, "A100 80GB", dataclasses.replace(a100, source=a100.source + " (edited)"))
    after = {c: fingerprint.data(f"card:{c}") for c in before}
    assert after["A100 80GB"] != before["A100 80GB"] and after["L4"] != before["L4"]
    assert after["H200 SXM"] == before["H200 SXM"]
    assert fingerprint.card_data(hardware.GPUS["L4"]) == after["L4"]


def _scratch(tmp_path: Path) -> Path:
    """A copy of the package, the study and its committed runs (their records and run.json)."""
    from experiments.report import STUDY_RUNS

    src = tmp_path / "src"
    for pkg in ("jaxgpu", "experiments"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for run in STUDY_RUNS:
        (src / "reports" / run).mkdir(parents=True)
        for name in ("run.json", "results.jsonl"):
            shutil.copy(ROOT / "reports" / run / name, src / "reports" / run / name)
    return src


def _check(src: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "experiments.reprice", "--check"], cwd=src, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_named_model_added_stales_nothing_and_an_edited_case_or_card_only_what_used_it(tmp_path):
    """docs/adding-a-model.md's edit in a scratch copy: experiments.reprice --check stays clean. An edited published
    case stales that case's record alone; an edited card, the records priced on it (or on a card it stands in
    for), in each run that has them."""
    from experiments import reprice

    if reprice.stale():
        pytest.skip("the committed runs are stale here: test_the_committed_prices_were_made_by_todays_pricing_code")
    src = _scratch(tmp_path)
    models = src / "jaxgpu" / "ground" / "decoders.py"
    text = models.read_text()
    end = text.index("\n)}\n", text.index("MODELS = {"))
    entry = ('    Decoder(name="zed-3b", layers=26, d_model=3072, heads=24, kv_heads=8, ffn=8192, vocab=128256, '
             'max_seq=8192, style="llama"),')
    models.write_text(text[:end] + "\n" + entry + text[end:])
    proc = _check(src, tmp_path)
    assert proc.returncode == 0 and "nothing stale" in proc.stdout, proc.stdout + proc.stderr[-2000:]

    cases = src / "jaxgpu" / "pricing" / "published_cases.py"
    text = cases.read_text()
    at = text.index('id="mamf-h100-fp8"')
    cut = text.index("published=", at)
    cases.write_text(text[:cut] + "published=1.0 + " + text[cut + len("published="):])
    proc = _check(src, tmp_path)
    assert proc.returncode == 1 and proc.stdout.splitlines()[0] == (
        "priced-published: gpu_model 1 record of changed or new data: mamf-h100-fp8"), proc.stdout
    cases.write_text(text)

    table = src / "jaxgpu" / "ground" / "hardware.py"
    text = table.read_text()
    table.write_text(text.replace('"NVIDIA A100 datasheet (80GB SXM), dense"', '"the A100 datasheet"'))
    lines = _check(src, tmp_path).stdout.splitlines()
    assert lines[0].startswith("priced-published: gpu_model ") and "records of changed or new data: " in lines[0], lines
    assert not [line for line in lines if line.startswith("compiled-")], lines  # their H100 and H200 used no A100
    assert "a100" in lines[0].lower()


def _published(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "reports" / "priced-published", tmp_path / "priced-published",
                    ignore=shutil.ignore_patterns("*.png", "*.html", "tables"))
    return tmp_path / "priced-published"


def test_reprice_prices_the_stale_and_missing_records_alone_and_keeps_the_rest(tmp_path, monkeypatch):
    """A run of one priced experiment whose data changed for one record, and which lacks another, is priced again
    for those two alone (experiments.run narrowed to them by --set); every other record stays byte for byte, in the
    order the cases are, under the run's own id; run.json says when and why, and nothing is stale after."""
    from jaxgpu.records import results

    from experiments import reprice

    folder = _published(tmp_path)
    lines = (folder / "results.jsonl").read_text().splitlines(keepends=True)
    dropped = json.loads(lines[3])["params"]
    (folder / "results.jsonl").write_text("".join(lines[:3] + lines[4:]))
    meta = json.loads((folder / "run.json").read_text())
    changed = json.loads(lines[0])["params"]
    stamp = fingerprint.stamp("gpu_model", [json.loads(x)["params"] for x in lines])
    meta["info"]["gpu_model"] = {**stamp, "pricing_data": {**stamp["pricing_data"],
                                                          f"case:{changed['case']}": "0" * 12}}
    (folder / "run.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    judged = reprice.judged(results.read_run(folder))
    assert list(judged) == ["gpu_model"] and judged["gpu_model"] == [changed, dropped]
    calls = []

    def fake_run(args):
        calls.append(args)
        out = Path(args[args.index("--out") + 1])
        out.mkdir(parents=True)
        fresh = [{**json.loads(line), "run_id": "fresh", "metrics": {"predicted_s": 1.0}} for line in (lines[0],
                                                                                                        lines[3])]
        (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fresh))
        (out / "run.json").write_text(json.dumps({
            "info": {"gpu_model": fingerprint.stamp("gpu_model", [r["params"] for r in fresh])},
            "completion": {"elapsed_s": 2.0}}))

    monkeypatch.setattr(reprice, "_run", fake_run)
    reprice.some(folder, "gpu_model", judged["gpu_model"], "a test")
    ids = tuple(sorted([changed["case"], dropped["case"]]))
    assert calls[0][calls[0].index("--set") + 1] == f"gpu_model.ids={ids!r}"
    after = (folder / "results.jsonl").read_text().splitlines(keepends=True)
    assert len(after) == len(lines) and after[4:] == lines[4:] and after[1:3] == lines[1:3]
    assert [json.loads(after[i])["metrics"] for i in (0, 3)] == [{"predicted_s": 1.0}] * 2
    assert {json.loads(x)["run_id"] for x in after} == {meta["run_id"]}
    said = json.loads((folder / "run.json").read_text())
    assert said["info"]["recompiled"].startswith("2 of gpu_model's records priced again and 0 left out on")
    assert said["completion"]["cases_done"] == len(lines)
    assert reprice.judged(results.read_run(folder)) == {}
