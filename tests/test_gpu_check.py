"""The GPU check in parts (experiments.gpu_check, scripts/gpu_check.sh), tested on CPU: a fake study that writes
records and never ends, a "hung" one that ignores signals, and an nvidia-smi shim stand in for a GPU machine."""

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from experiments import gpu_check
from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]

# A study that takes --out/--resume DIR, writes run.json, then a record every 0.2 s stamped with its wall time,
# forever; with HANG=1 it ignores SIGINT and SIGTERM (a process inside the driver does not answer them either).
FAKE_STUDY = textwrap.dedent("""\
    import json, os, signal, sys, time
    args = sys.argv[1:]
    out = args[args.index("--resume" if "--resume" in args else "--out") + 1]
    os.makedirs(out, exist_ok=True)
    if os.environ.get("HANG"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump({"argv": args}, f)
    print("fake study writing into", out, flush=True)
    i = 0
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        while True:
            f.write(json.dumps({"i": i, "written_at": time.time()}) + "\\n")
            f.flush()
            i += 1
            time.sleep(0.2)
""")

SMI = "#!/bin/sh\necho '1024, 81559, 35, 1980, 2619, 120.5, 3'\n"


def _setup(tmp_path: Path, hang: bool = False, deadline_s: int = 240) -> tuple[list[str], dict, Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    study = tmp_path / "fake_study.py"
    study.write_text(FAKE_STUDY)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "nvidia-smi").write_text(SMI)
    (shims / "nvidia-smi").chmod(0o755)
    root = tmp_path / "check"
    archive = tmp_path / "part.tar.gz"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{shims}:{os.environ['PATH']}",
           "JAXGPU_CHECK_STUDY": f"{sys.executable} {study}", "JAXGPU_CHECK_ROOT": str(root),
           "GPU_CHECK_S": str(deadline_s), "PYTHON": sys.executable, **({"HANG": "1"} if hang else {})}
    return ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--part", "1", str(archive)], env, archive, root


def _records(archive: Path) -> list[dict]:
    with tarfile.open(archive) as tar:
        name = next(n for n in tar.getnames() if n.endswith("study/results.jsonl"))
        lines = tar.extractfile(name).read().decode().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def _member(archive: Path, suffix: str) -> str:
    with tarfile.open(archive) as tar:
        return tar.extractfile(next(n for n in tar.getnames() if n.endswith(suffix))).read().decode()


@pytest.mark.slow
def test_a_killed_part_leaves_its_records_and_a_hung_one_packs_by_its_deadline(tmp_path):
    # both at once, to spend the 70 s once: (a) a study that never ends, the whole call SIGKILLed 70 s in;
    # (b) a study that ignores every signal, in a part whose deadline is 30 s
    killed_argv, killed_env, killed_archive, _ = _setup(tmp_path / "a")
    hung_argv, hung_env, hung_archive, hung_root = _setup(tmp_path / "b", hang=True, deadline_s=30)
    killed = subprocess.Popen(killed_argv, cwd=ROOT, env=killed_env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.time()
    hung = subprocess.Popen(hung_argv, cwd=ROOT, env=hung_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    out, _ = hung.communicate(timeout=120)
    hung_s = time.time() - t0
    time.sleep(max(0.0, 70 - (time.time() - t0)))
    kill_at = time.time()
    os.killpg(killed.pid, signal.SIGKILL)  # the whole call: the check, its threads and the study
    killed.wait(timeout=10)

    assert hung_s <= 30 + 15, out
    assert hung.returncode == gpu_check.EXIT["overran"], out  # never 124 or 137, the device tool's own
    summary = _member(hung_archive, "part-1/summary.txt")
    assert "past its limit" in summary and "finished after" in summary, summary
    assert _records(hung_archive), "the hung study's records came home"
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "b" / "fake_study.py")], capture_output=True, text=True)
    assert not left.stdout.split(), "nothing of the hung step runs on after the part"

    records = _records(killed_archive)
    before = [r for r in records if r["written_at"] <= kill_at - 35]
    assert before and len(before) >= 5 * (70 - 35 - 15), len(before)  # a record every 0.2 s, from start-up on
    written = {r["i"] for r in records}
    assert all(i in written for i in range(max(r["i"] for r in before) + 1))  # none missing before the cut
    monitor = list(csv.DictReader(io.StringIO(_member(killed_archive, "part-1/monitor.csv"))))
    assert len(monitor) >= 3 and monitor[0]["gpu_memory_used_mib"] == "1024", monitor[:2]
    assert int(monitor[0]["host_total_bytes"]) > 0


@pytest.mark.slow
def test_a_sigterm_stops_the_study_and_packs_at_once(tmp_path):
    # a lease ending: the study (which ignores SIGINT here) is killed whole, the archive packed within seconds
    argv, env, archive, root = _setup(tmp_path, hang=True)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(6)
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert time.time() - t0 < 15 and proc.returncode == 143, out
    assert "SIGTERM" in _member(archive, "part-1/summary.txt")
    assert _member(archive, "part-1/kernel.txt")  # what the kernel said, or why it could not be read
    assert not Path(str(archive) + ".tmp").exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "fake_study.py")], capture_output=True, text=True)
    assert not left.stdout.split()


def test_part_two_adds_its_experiments_to_part_ones_run(tmp_path):
    root = tmp_path / "check"
    fresh = gpu_check.part_steps("2", root, "python3", 240)
    study = next(s for s in fresh if s.name == "gpu-study")
    assert "--out" in study.argv and "--resume" not in study.argv  # no part 1 here: a fresh folder
    (root / "study").mkdir(parents=True)
    (root / "study" / "run.json").write_text("{}")
    study = next(s for s in gpu_check.part_steps("2", root, "python3", 240) if s.name == "gpu-study")
    assert study.argv[study.argv.index("--resume") + 1] == str(root / "study")
    assert study.argv[study.argv.index("--only") + 1] == ",".join(gpu_check.PART_2)
    assert [s.name for s in fresh] == ["preflight", "gpu-study", "gpu-tests"]
    # the experiments of the two parts are the GPU study's, each once
    both = gpu_check.part_experiments("1") + gpu_check.part_experiments("2")
    assert sorted(both) == sorted(gpu_check.gpu_experiments()) and len(set(both)) == len(both)


@pytest.mark.parametrize("part", ["1", "2"])
def test_each_part_plans_at_most_240_s_on_an_h100_with_no_key_case_cut(part):
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--part", part], cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cuda"},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "for the H100 SXM" in proc.stdout
    likely, most = map(float, re.search(r"the command: estimated (\d+) s, at most (\d+) s", proc.stdout).groups())
    assert likely <= most <= 240, proc.stdout
    assert "no claim-deciding case is cut" in proc.stdout, proc.stdout
    assert proc.stdout.strip().endswith("every claim-deciding case fits its part's budget"), proc.stdout


def test_the_budget_plan_names_a_key_case_it_would_cut():
    from experiments.analysis import claims
    from experiments.harness import runner

    plan = runner.budget_plan(RunSettings(("precision",), backend="gpu", target="h100", budget_s=10),
                              rests_on=claims.rests_on)
    assert plan.keys_cut and "would be cut" in plan.lines[-1]
    roomy = runner.budget_plan(RunSettings(("precision",), backend="gpu", target="h100", budget_s=10_000),
                               rests_on=claims.rests_on)
    assert not roomy.keys_cut and "no claim-deciding case is cut" in roomy.lines[-1]


@pytest.mark.parametrize("argv, says", [
    (["--part", "1"], "name the archive"),
    (["--part", "4", "x.tar.gz"], "invalid choice"),
    (["x.tar.gz"], "--part"),
    (["--part", "1", "/no/such/folder/x.tar.gz"], "does not exist"),
    (["--dry-run", "--part", "1", "--target", "h900"], "--target"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says):
    proc = subprocess.run([sys.executable, "-m", "experiments.gpu_check", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_the_machine_log_survives_a_missing_or_hung_nvidia_smi(tmp_path, monkeypatch):
    hung = tmp_path / "nvidia-smi"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    t0 = time.time()
    row = gpu_check.machine_sample(1.0)
    assert time.time() - t0 < 8 and "no answer" in row["gpu_error"]
    assert row["host_total_bytes"] > row["host_available_bytes"] > 0
    hung.unlink()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_check.machine_sample(1.0)["gpu_error"]
