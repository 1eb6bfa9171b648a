import json
import math

import pytest

from jaxgpu.records import results
from jaxgpu.records.results import Record


def _rec(n=1, **kw):
    return Record(experiment="matmul", params={"n": n, "dtype": "float32"},
                  metrics={"time_s_median": 0.5, "gflops": 2.0 * n}, run_id="r", backend="cpu", **kw)


def _write(tmp_path, records, meta=None):
    with results.RunWriter(tmp_path, meta or {"run_id": "r", "env": {"backend": "cpu"}}) as w:
        for r in records:
            w.write(r)
    return tmp_path


def test_round_trip(tmp_path):
    recs = [_rec(1), _rec(2), _rec(3, status="unsupported", reason="no fp8 here")]
    run = results.read_run(_write(tmp_path, recs))
    assert run.records == tuple(recs)
    assert run.meta["schema"] == results.SCHEMA and run.meta["run_id"] == "r"
    line = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[0])
    assert set(line) == {"schema", "benchmark_version", "run_id", "experiment", "backend", "device_kind",
                         "n_devices", "params", "status", "reason", "metrics"}


def test_each_record_is_on_disk_as_soon_as_it_is_written(tmp_path):
    w = results.RunWriter(tmp_path, {"run_id": "r"})
    w.write(_rec(1))
    assert len(results.read_run(tmp_path).records) == 1  # before close
    w.close()


def test_non_finite_metrics_survive_as_null(tmp_path):
    run = results.read_run(_write(tmp_path, [Record("x", {}, {"loss": math.nan})]))
    assert math.isnan(run.records[0].metrics["loss"])
    assert '"loss": null' in (tmp_path / "results.jsonl").read_text()


def test_metrics_must_be_numbers():
    with pytest.raises(TypeError):
        Record("x", {}, {"gflops": "fast"})
    with pytest.raises(ValueError):
        Record("x", {}, {}, status="great")


def test_corrupt_line_is_refused_naming_the_file(tmp_path):
    _write(tmp_path, [_rec(1), _rec(2)])
    path = tmp_path / "results.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    with pytest.raises(results.ResultsError, match=r"results.jsonl: line 2 is not a JSON record"):
        results.read_run(tmp_path)


def test_unknown_schema_is_refused(tmp_path):
    _write(tmp_path, [_rec(1)])
    (tmp_path / "results.jsonl").write_text(json.dumps({**_rec(1).to_dict(), "schema": 99}) + "\n")
    with pytest.raises(results.ResultsError, match="unknown schema 99"):
        results.read_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"schema": 7}))
    with pytest.raises(results.ResultsError, match=r"run.json: unknown schema 7"):
        results.read_run(tmp_path)


def test_missing_or_garbage_folder(tmp_path):
    with pytest.raises(results.ResultsError, match="not a result folder"):
        results.read_run(tmp_path / "nope")
    with pytest.raises(results.ResultsError, match="run.json: missing"):
        results.read_run(tmp_path)
    (tmp_path / "run.json").write_bytes(b"\xff\xfe garbage")
    with pytest.raises(results.ResultsError, match="run.json"):
        results.read_run(tmp_path)


def test_a_write_cut_short_by_a_kill_is_dropped_with_a_warning(tmp_path):
    _write(tmp_path, [_rec(1), _rec(2)])
    path = tmp_path / "results.jsonl"
    path.write_text(path.read_text() + '{"schema": 1, "experi')
    with pytest.warns(UserWarning, match="cut short"):
        run = results.read_run(tmp_path)
    assert len(run.records) == 2


def test_resume_keys_skip_all_but_failures():
    recs = [_rec(1), _rec(2, status="failed", reason="boom"), _rec(3, status="does_not_fit", reason="big")]
    assert results.completed_keys(recs) == {recs[0].key, recs[2].key}


def test_latest_record_of_a_case_wins():
    first = _rec(1, status="failed", reason="flaky")
    again = _rec(1)
    assert results.latest([first, again]) == [again]


def test_rewriting_run_json_on_resume_keeps_the_first(tmp_path):
    _write(tmp_path, [_rec(1)], {"run_id": "first", "info": {"a": 1}, "config": {"experiments": ["a"]}})
    _write(tmp_path, [_rec(2)], {"run_id": "second", "info": {"a": 2, "b": 3}, "config": {"experiments": ["b"]}})
    run = results.read_run(tmp_path)
    assert run.meta["run_id"] == "first" and run.meta["resumed_by"] == ["second"]
    assert run.meta["info"] == {"a": 1, "b": 3} and run.meta["config"]["experiments"] == ["a", "b"]
    assert len(run.records) == 2


def test_merge_pairs_records_with_their_runs(tmp_path):
    a = _write(tmp_path / "a", [_rec(1)], {"run_id": "a", "env": {"backend": "gpu"}})
    b = _write(tmp_path / "b", [_rec(1), _rec(2)], {"run_id": "b", "env": {"backend": "cpu"}})
    merged = results.merge([results.read_run(a), results.read_run(b)])
    assert [run.meta["run_id"] for run, _ in merged] == ["b", "b", "a"]  # cpu before gpu, stable


def test_status_mapping():
    assert results.status_of(results.Unsupported("no fp8"))[0] == "unsupported"
    assert results.status_of(RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 9 GiB"))[0] == "does_not_fit"
    status, reason = results.status_of(ValueError("bad\nsecond line"))
    assert status == "failed" and reason == "ValueError: bad"
