"""Faults a machine or a shared folder brings: a full disk, SIGTERM, two runs racing for a folder, damaged
records, one run merged twice. Each gives one line, keeps every finished record, and says what happened."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxgpu.records import results

import experiments
from experiments.analysis import claims
from experiments.harness.settings import RunSettings
from experiments.report import STUDY_RUNS
from experiments.reporting import build, render

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = STUDY_RUNS


def _env(**extra):
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.startswith("experiments.")]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert lines, stderr[-3000:]
    return lines[-1]


# ---------------------------------------------------------------- a full disk


def test_a_full_disk_keeps_every_record_written_and_says_which_file(tmp_path, monkeypatch):
    from experiments.harness import runner

    real, calls = os.fsync, []

    def fsync(fd):  # the disk fills after the third record
        calls.append(fd)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "run"
    with pytest.raises(results.RunWriteError, match=r"cannot write .*results.jsonl: No space left on device"):
        runner.run_study(RunSettings(("matmul",), profile="tiny", out=str(out), progress=False), "cpu",
                         log=lambda m: None)
    monkeypatch.setattr(os, "fsync", real)
    run = results.read_run(out)
    assert len(run.records) >= 3  # the records synced before it, readable
    assert run.completion["state"] == "write_failed" and "No space left" in run.completion["reason"]
    # space is back: --resume measures the rest (the cut line, if any, set aside)
    runner.run_study(RunSettings(("matmul",), profile="tiny", out=str(out), resume=True, progress=False), "cpu",
                     log=lambda m: None)
    again = results.read_run(out)
    assert again.completion["state"] == "complete" and len(again.records) > len(run.records)


@pytest.mark.slow
def test_the_command_line_on_a_full_disk_is_one_line_and_exit_1(tmp_path):
    # a real full disk where this machine lets root mount a small tmpfs; else the same fault, made
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mnt)], capture_output=True)
    env = _env()
    if mounted.returncode != 0:
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "sitecustomize.py").write_text(
            "import errno, os\nreal, n = os.fsync, [0]\n"
            "def fsync(fd):\n    n[0] += 1\n    if n[0] > 3:\n"
            "        raise OSError(errno.ENOSPC, 'No space left on device')\n    return real(fd)\n"
            "os.fsync = fsync\n")
        env = _env(PYTHONPATH=f"{tmp_path / 'site'}:{ROOT}")
    try:
        proc = subprocess.run([sys.executable, "-m", "experiments.run", "--backend", "cpu", "--profile", "tiny",
                               "--only", "matmul,precision", "--out", str(mnt / "run"), "--no-progress"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr[-3000:]
        line = _one_line(proc.stderr)  # the records' file, or the report after them: either says where and why
        assert "No space left on device" in line and ("--resume" in line or "records are kept" in line), line
        run = results.read_run(mnt / "run")  # whatever was written is readable
        assert run.records
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", str(mnt)], capture_output=True)


# ---------------------------------------------------------------- SIGTERM


@pytest.mark.slow
def test_sigterm_stops_the_run_like_ctrl_c_and_reports_what_it_measured(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "experiments.run", "--backend", "cpu", "--profile", "tiny",
                             "--only", "matmul,precision,bandwidth,serial_parallel", "--out", str(out),
                             "--no-progress"], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # until a few records are in
        p = out / "results.jsonl"
        if p.exists() and p.read_text().count("\n") >= 5:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    line = _one_line(err)
    assert "stopped by SIGTERM" in line and "--resume" in line and "report:" in line, line
    run = results.read_run(out)
    assert run.completion["state"] == "interrupted" and run.completion["stopped_by"] == "SIGTERM"
    assert len(run.records) >= 5 and (out / "report.md").exists() and (out / "report.html").exists()
    assert "was interrupted" in (out / "report.md").read_text()


# ---------------------------------------------------------------- two runs racing for one folder


@pytest.mark.slow
def test_two_runs_started_into_one_folder_at_once_one_wins_the_other_is_one_line(tmp_path):
    out = tmp_path / "shared-run"
    cmd = [sys.executable, "-m", "experiments.run", "--backend", "cpu", "--profile", "tiny", "--only", "devices",
           "--out", str(out), "--no-progress", "--no-report"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    done = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in done)
    assert codes == [0, 2], done
    loser = next(err for rc, err in done if rc == 2)
    assert "already holds a run" in _one_line(loser)
    run = results.read_run(out)  # the winner's run, not two runs' records under one run.json
    assert len({r.run_id for r in run.records}) == 1 and "resumed_by" not in run.meta


def test_a_writer_claims_a_new_folder_exclusively(tmp_path):
    results.RunWriter(tmp_path / "r", {"run_id": "a"}, new=True).close()
    with pytest.raises(results.FolderTaken, match="already holds a run"):
        results.RunWriter(tmp_path / "r", {"run_id": "b"}, new=True)
    assert json.loads((tmp_path / "r" / "run.json").read_text())["run_id"] == "a"


# ---------------------------------------------------------------- damaged records


def _committed(tmp_path) -> list[results.Run]:
    for name in COMMITTED:
        shutil.copytree(ROOT / "reports" / name, tmp_path / name)
    return [results.read_run(tmp_path / name) for name in COMMITTED]


def _without(runs, experiment: str, metric: str) -> list[results.Run]:
    def strip(r):
        if r.experiment != experiment or metric not in r.metrics:
            return r
        return results.Record.from_dict({**r.to_dict(), "metrics": {k: v for k, v in r.to_dict()["metrics"].items()
                                                                    if k != metric}})
    return [results.Run(run.path, run.meta, tuple(strip(r) for r in run.records)) for run in runs]


@pytest.mark.slow
@pytest.mark.parametrize("experiment", experiments.names())
def test_a_metric_gone_from_an_experiments_records_never_kills_the_report(experiment, tmp_path):
    runs = _committed(tmp_path)
    metrics = sorted({k for run in runs for r in run.records if r.experiment == experiment for k in r.metrics})
    if not metrics:
        pytest.skip(f"no committed records of {experiment}")
    for metric in metrics:  # every damage of this experiment's records, one metric at a time
        damaged = _without(runs, experiment, metric)
        pairs = results.merge(damaged)
        sec = build.experiment_section(experiment, [(r, build.guard(x)) for r, x in pairs])
        assert sec.anchor == experiment, (metric, sec.title)
        for c, v in claims.ledger(pairs):  # unusable inputs: not run or a verdict, never a crash
            assert v.verdict in claims.VERDICTS, (metric, c.id)


@pytest.mark.parametrize("experiment,metric", [("op_mix", "dot_time_share"), ("tensor_parallel", "bytes_measured")])
def test_the_report_builds_around_the_damages_seen_and_names_them(experiment, metric, tmp_path):
    runs = _without(_committed(tmp_path), experiment, metric)
    sections = build.build_sections(runs)
    mine = next(s for s in sections if s.anchor == experiment)
    said = " ".join(mine.paragraphs)
    assert "could not be drawn" in said and repr(metric) in said, said
    assert len(sections) >= 15  # every other section and the ledger still build
    ledger = {row[0]: row for row in sections[0].tables[0].rows}
    full = {row[0]: row for row in build.build_sections(_committed(tmp_path / "again"))[0].tables[0].rows}
    for cid in ledger:  # a claim that read the damaged records is not graded on them
        if ledger[cid][4] != full[cid][4]:
            assert ledger[cid][4] == "not run", (cid, ledger[cid][4], full[cid][4])


# ---------------------------------------------------------------- one run merged twice


def test_a_run_named_twice_is_counted_once(tmp_path):
    runs = _committed(tmp_path)
    shutil.copytree(tmp_path / "cpu-reference", tmp_path / "copy-of-the-reference")
    dirs = [tmp_path / "cpu-reference", tmp_path / "cpu-reference", tmp_path / "copy-of-the-reference",
            tmp_path / "cpu-multidevice", *(tmp_path / n for n in COMMITTED[2:])]
    kept, read, notes = render.once(dirs)
    assert [d.name for d in kept] == ["cpu-reference", "cpu-multidevice", *COMMITTED[2:]]
    named = [n for n in notes if "named" in n]  # the others say which older records were left out
    assert len(named) == 1 and "named 3 times" in named[0] and "counted once" in named[0]
    once = {c.id: v for c, v in claims.ledger(results.merge(results.newest_methods(runs)[0]))}
    twice = {c.id: v for c, v in claims.ledger(results.merge(read))}
    assert once == twice
    md = render.write_report(dirs, tmp_path / "merged")[0].read_text()
    assert "counted once" in md


def test_a_new_run_that_cannot_write_its_run_json_gives_the_folder_back(tmp_path, monkeypatch):
    real = Path.write_text

    def full(self, *a, **k):
        if self.name == "run.json.tmp":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(results.RunWriteError, match="nothing was measured .*start the run again"):
        results.RunWriter(tmp_path / "r", {"run_id": "a"}, new=True)
    monkeypatch.setattr(Path, "write_text", real)
    assert not (tmp_path / "r" / "results.jsonl").exists()
    results.RunWriter(tmp_path / "r", {"run_id": "b"}, new=True).close()  # once there is space, it starts


def test_c13_reads_the_features_of_the_run_its_records_came_from():
    from tests.test_verdicts import SCENARIOS

    decided = [(results.Run(Path("reference"), {"env": {"backend": "cpu", "device_kind": "cpu"}}, ()), rec)
               for _, rec in SCENARIOS["C13"]["supported"]]
    other = results.Run(Path("amx"), {"env": {"backend": "cpu", "device_kind": "cpu", "cpu_features": "amx_bf16"}},
                        ())
    extra = (other, results.Record("devices", {"role": "cpu"}, {"cores": 2.0}, backend="cpu", device_kind="cpu"))
    from experiments.analysis.evidence import Evidence

    v, _ = claims.decide(claims.by_id("C13"), Evidence(decided + [extra]))
    assert "did not record" in v.evidence and "AMX" not in v.evidence.split("did not record")[0], v.evidence
