"""Predictions frozen before a GPU runs (experiments.reporting.frozen): committed for both cards, never rewritten,
and set beside a GPU run's measurements when one is merged."""

import dataclasses
import json
from pathlib import Path

import pytest

from jaxgpu.ground import hardware
from jaxgpu.records import results

from experiments.report import STUDY_RUNS
from experiments.reporting import frozen

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed():
    files = frozen.read(ROOT / "reports" / "predictions")
    assert files, "reports/predictions holds the predictions made before any GPU ran"
    return files


def test_the_committed_predictions_cover_every_summary_row_on_both_cards(committed):
    study = json.loads((ROOT / "reports" / "study" / "summary.json").read_text())
    topics = {r["topic"] for r in study["rows"]}
    for f in committed:
        assert frozen.intact(f), "a frozen file is never edited: its digest still matches"
        assert set(f["cards"]) == {"H100 SXM", "H200 SXM"}
        for card, got in f["cards"].items():
            rows = {r["topic"]: r for r in got["summary"]}
            assert topics <= set(rows), (card, topics - set(rows))
            timed = [r for r in rows.values() if r["basis"].startswith("predicted")]
            assert len(timed) >= 5 and all(r["gpu_value"] > 0 for r in timed), card
            compiled = [r for r in rows.values() if r["basis"].startswith("compiled")]
            assert len(compiled) == 2 and all(card in r["gpu"] or "GPUs" in r["gpu"] for r in compiled), card
            assert len(got["cases"]) > 100 and all(c["predicted"] > 0 for c in got["cases"].values())
            assert len(got["verdicts"]) == 18
    # the H100's memory is slower: the model must not have priced both cards alike
    last = committed[-1]["cards"]
    triad = [{r["topic"]: r for r in last[c]["summary"]}["Memory bandwidth (STREAM triad)"]["gpu_value"]
             for c in ("H100 SXM", "H200 SXM")]
    assert triad[0] < triad[1]


def test_a_model_is_frozen_once(tmp_path):
    f = {"made": "2026-12-05", "model": "abc", "cards": {}, "schema": 1}
    f["sha256"] = frozen._digest(f)
    path = frozen.write(f, tmp_path)
    with pytest.raises(FileExistsError, match="never rewritten"):
        frozen.write({**f, "made": "2027-01-01"}, tmp_path)
    assert json.loads(path.read_text()) == f and frozen.read(tmp_path) == [f]
    assert not frozen.intact({**f, "cards": {"H100 SXM": {}}})


def test_a_merged_gpu_run_meets_the_frozen_predictions(committed, tmp_path):
    runs = [results.read_run(ROOT / "reports" / n) for n in STUDY_RUNS]
    cpu = runs[0]
    mm = next(r for r in cpu.records if r.experiment == "matmul" and r.status == "ok" and r.params.get("n") == 4096
              and r.params.get("impl") == "jax" and r.params.get("shape") == "square")
    on_gpu = dataclasses.replace(mm, backend="gpu", device_kind="NVIDIA H100 80GB HBM3",
                                 metrics={**mm.metrics, "gflops": 50_000.0,
                                          "time_s_median": mm.metrics["time_s_median"] * 277 / 50_000})
    assert hardware.gpu_spec("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    env = {**cpu.env, "backend": "gpu", "device_kind": "NVIDIA H100 80GB HBM3", "n_devices": 1}
    gpu = results.Run(tmp_path / "gpu-h100", {**cpu.meta, "env": env, "mode": "measured",
                                              "hardware": dataclasses.asdict(hardware.GPUS["H100 SXM"])}, (on_gpu,))
    met = frozen.compare(committed[-1], [*runs, gpu])
    row = next(m for m in met if m.what == "A big matrix multiply (fp32)")
    assert row.card == "H100 SXM" and row.measured == pytest.approx(50e12) and row.unit == "FLOP/s"
    case = next(m for m in met if m.what == mm.key)
    assert case.measured == pytest.approx(on_gpu.metrics["time_s_median"]) and case.predicted > 0
    folder = tmp_path / "predictions"
    frozen.write(committed[-1], folder)
    sec = frozen.section([*runs, gpu], folder)
    assert sec is not None and len(sec.tables[0].rows) == len(met) >= 2
    assert frozen.section(runs, folder) is None  # no GPU run: nothing to set beside
