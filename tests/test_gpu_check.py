"""The GPU check in parts (experiments.gpu_check, scripts/gpu_check.sh), tested on CPU: a fake study that writes
records and never ends, a "hung" one that ignores signals, and an nvidia-smi shim stand in for a GPU machine."""

import csv
import importlib.metadata
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

from experiments import gpu_check, preflight
from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]

# A study that takes --out DIR and --only NAMES, writes run.json as an H100's run would, then a record of the first
# experiment named every 0.2 s stamped with its wall time, forever (FAKE_RECORDS=N: N records, then exit 0); with
# HANG=1 it ignores SIGINT and SIGTERM (a process inside the driver does not answer them either).
FAKE_STUDY = textwrap.dedent("""\
    import os, signal, sys, time
    from jaxgpu.records import results
    args = sys.argv[1:]
    out = args[args.index("--out") + 1]
    experiment = args[args.index("--only") + 1].split(",")[0]
    if os.environ.get("HANG"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    run_id = results.new_run_id()
    env = {"backend": "gpu", "device_kind": "NVIDIA H100 80GB HBM3", "n_devices": 1, "host": "gpu-host"}
    writer = results.RunWriter(out, {"run_id": run_id, "argv": args, "env": env, "config": {}}, new=True)
    print("fake study writing into", out, flush=True)
    limit = int(os.environ.get("FAKE_RECORDS", "0")) or None
    i = 0
    while limit is None or i < limit:
        writer.write(results.Record(experiment, {"i": i}, {"written_at": time.time()}, run_id=run_id, backend="gpu",
                                    device_kind=env["device_kind"]))
        i += 1
        time.sleep(0.2)
""")

SMI = "#!/bin/sh\necho '1024, 81559, 35, 1980, 2619, 120.5, 3'\n"


def _setup(tmp_path: Path, hang: bool = False, deadline_s: int = 180, part: str = "1", records: int = 0,
           root: Path | None = None) -> tuple[list[str], dict, Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    study = tmp_path / "fake_study.py"
    study.write_text(FAKE_STUDY)
    shims = tmp_path / "bin"
    shims.mkdir(exist_ok=True)
    (shims / "nvidia-smi").write_text(SMI)
    (shims / "nvidia-smi").chmod(0o755)
    root = root or tmp_path / "check"
    archive = tmp_path / f"part-{part}.tar.gz"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{shims}:{os.environ['PATH']}",
           "JAXGPU_CHECK_STUDY": f"{sys.executable} {study}", "JAXGPU_CHECK_ROOT": str(root),
           "JAXGPU_CHECK_PREFLIGHT": "echo preflight stand-in", "GPU_CHECK_S": str(deadline_s),
           "PYTHON": sys.executable, **({"HANG": "1"} if hang else {}),
           **({"FAKE_RECORDS": str(records)} if records else {})}
    return ["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--part", part, str(archive)], env, archive, root


def _records(archive: Path, folder: str = "") -> list[dict]:
    with tarfile.open(archive) as tar:
        name = next(n for n in tar.getnames() if n.endswith("/results.jsonl") and folder in n)
        lines = tar.extractfile(name).read().decode().splitlines()
    return [{"i": r["params"]["i"], "written_at": r["metrics"]["written_at"]}
            for r in map(json.loads, (line for line in lines if line.endswith("}")))]


def _member(archive: Path, suffix: str) -> str:
    with tarfile.open(archive) as tar:
        return tar.extractfile(next(n for n in tar.getnames() if n.endswith(suffix))).read().decode()


@pytest.mark.slow
def test_a_killed_part_leaves_its_records_and_a_hung_one_packs_by_its_deadline(tmp_path):
    # both at once, to spend the 45 s once: (a) a study that never ends, the whole call SIGKILLed 45 s in;
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
    time.sleep(max(0.0, 45 - (time.time() - t0)))
    kill_at = time.time()
    os.killpg(killed.pid, signal.SIGKILL)  # the whole call: the check, its threads and the study
    killed.wait(timeout=10)

    assert hung_s <= 30 + 15, out
    assert hung.returncode == gpu_check.EXIT["overran"], out  # never 124 or 137, the device tool's own
    summary = _member(hung_archive, "part-1-try-1/summary.txt")
    assert "past its limit" in summary and "finished after" in summary, summary
    assert _records(hung_archive), "the hung study's records came home"
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "b" / "fake_study.py")], capture_output=True, text=True)
    assert not left.stdout.split(), "nothing of the hung step runs on after the part"

    records = _records(killed_archive)
    # the archive is at most PACK_EVERY_S (15 s) and a pack old: whatever was written 25 s before the kill is in it
    before = [r for r in records if r["written_at"] <= kill_at - 25]
    assert before and len(before) >= 5 * (45 - 25 - 10), len(before)  # a record every 0.2 s, from start-up on
    written = {r["i"] for r in records}
    assert all(i in written for i in range(max(r["i"] for r in before) + 1))  # none missing before the cut
    monitor = list(csv.DictReader(io.StringIO(_member(killed_archive, "part-1-try-1/monitor.csv"))))
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
    assert "SIGTERM" in _member(archive, "part-1-try-1/summary.txt")
    assert _member(archive, "part-1-try-1/kernel.txt")  # what the kernel said, or why it could not be read
    assert not Path(str(archive) + ".tmp").exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "fake_study.py")], capture_output=True, text=True)
    assert not left.stdout.split()


def test_every_gpu_experiment_is_in_one_part_and_each_try_has_its_own_folders(tmp_path):
    both = [n for p in gpu_check.PARTS for n in gpu_check.part_experiments(p)]
    assert sorted(both) == sorted(gpu_check.gpu_experiments()) and len(set(both)) == len(both)
    root = tmp_path / "check"
    first = gpu_check.try_folder(root, "2")
    assert first.name == "part-2-try-1"
    first.mkdir(parents=True)
    assert gpu_check.try_folder(root, "2").name == "part-2-try-2" and gpu_check.try_folder(root, "1").name.endswith("1")
    steps = gpu_check.part_steps("2", first, "python3", 180)
    study = next(s for s in steps if s.name == "gpu-study")
    assert study.argv[study.argv.index("--out") + 1] == str(first / "gpu-part-2-try-1") and "--resume" not in study.argv
    assert study.argv[study.argv.index("--only") + 1] == ",".join(gpu_check.PARTS["2"])
    assert [s.name for s in gpu_check.part_steps("1", first, "python3", 180)] == ["preflight", "gpu-study"]
    tests = gpu_check.part_steps(gpu_check.TESTS_PART, first, "python3", 100)
    assert [s.name for s in tests] == ["gpu-tests"] and "-v" in tests[0].argv  # a cut step still names its tests


def _fresh_env():
    return {**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cuda"}


@pytest.fixture(scope="module")
def gpu_test_items():
    return gpu_check.count_tests(sys.executable)


@pytest.mark.parametrize("slower", [1.0, gpu_check.SLOWER])
@pytest.mark.parametrize("part", [*gpu_check.PARTS, gpu_check.TESTS_PART])
def test_each_part_plans_at_most_180_s_on_an_h100_its_key_cases_within_three_quarters(part, slower, gpu_test_items):
    out = "\n".join(gpu_check.dry_run(part, None, "H100 SXM", sys.executable, gpu_test_items, slower))
    likely, most = map(float, re.search(r"the command: estimated (\d+) s, at most (\d+) s", out).groups())
    assert likely <= most <= 180, out
    assert out.strip().endswith("every claim-deciding case fits its part's budget"), out
    if part in gpu_check.PARTS:
        assert "no claim-deciding case is cut" in out, out
        share = re.search(r"info hooks: estimated \d+ s \((\d+)% of the budget", out).group(1)
        assert int(share) <= 100 * gpu_check.KEY_SHARE, out


# The claim-deciding cases of the quick GPU study per experiment, as they stood when the parts were cut to 180 s: a
# part made to fit by dropping or declassifying a case fails here (a claim that reads more moves these on purpose).
KEY_CASES = {"memory_fit": 11, "devices": 2, "matmul": 6, "precision": 13, "bandwidth": 4, "roofline": 10,
             "transfer": 6, "training": 4, "inference": 1, "op_mix": 2, "serial_parallel": 17, "compiler": 2,
             "collectives": 1, "data_parallel": 1, "tensor_parallel": 1, "distributed": 1, "transformer": 2}


def test_the_parts_plan_every_claim_deciding_case_of_the_quick_configs():
    from experiments.analysis import claims
    from experiments.harness import runner

    planned = {}
    for part in gpu_check.PARTS:
        s = RunSettings(tuple(gpu_check.part_experiments(part)), backend="gpu", target="h100", budget_s=10_000)
        ctx, _ = runner._dry_context(s, "gpu")
        planned |= {p.name: sum(c.key for c in p.cases) for p in runner._build(s, ctx, rests_on=claims.rests_on)
                    if any(c.key for c in p.cases)}
    assert planned == KEY_CASES


def test_the_command_plans_a_part_for_the_h100_and_the_host_part_on_this_cpu():
    for part, says in (("1", "every claim-deciding case fits its part's budget"),
                       ("host", "planned with this machine's CPU")):
        proc = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--part", part, "--slower", "1.3"],
                              cwd=ROOT, env=_fresh_env(), capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0 and "for the H100 SXM" in proc.stdout and says in proc.stdout, proc.stdout


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
    (["--part", "6", "x.tar.gz"], "invalid choice"),
    (["--dry-run", "--part", "1", "--slower", "0"], "--slower"),
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


@pytest.mark.slow
def test_parts_and_tries_unpack_into_one_folder_and_the_report_reads_every_run(tmp_path):
    # part 1 then part 2, each on a cold machine (a root of its own), then part 1 again on the first one's root
    calls = [("1", tmp_path / "machine-a"), ("2", tmp_path / "machine-b"), ("1", tmp_path / "machine-a")]
    archives = []
    for i, (part, machine) in enumerate(calls):
        argv, env, archive, _ = _setup(tmp_path / f"call-{i}", part=part, records=5, root=machine / "gpu-check")
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:]
        archives.append(archive)
    home = tmp_path / "home"
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(home, filter="data")
    runs = sorted(p.parent for p in home.rglob("results.jsonl"))
    assert [r.name for r in runs] == ["gpu-part-1-try-1", "gpu-part-1-try-2", "gpu-part-2-try-1"], runs
    for run in runs:  # every record of every try came home, none overwritten by another part's or try's
        assert len((run / "results.jsonl").read_text().splitlines()) == 5, run
    # the second try's archive keeps the first try's records too
    assert {n.split("/")[1] for n in tarfile.open(archives[2]).getnames()} == {"part-1-try-1", "part-1-try-2"}
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "experiments.report", *map(str, runs), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (out / "report.md").read_text()
    assert all(r.name in report for r in runs), "each GPU run is reported"


# -- the preflight: what would break in the first minute of a lease, asked on this CPU ---------------------------

def test_the_preflight_imports_everything_and_checks_a_program_here():
    proc = subprocess.run([sys.executable, "-m", "experiments.preflight", "--backend", "cpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    n = len(preflight.module_names())
    assert f"imports   {n} of {n} modules" in proc.stdout and n > 100
    for check in ("program", "sharded", "analyses", "gpu plan"):
        assert any(line.startswith(check) for line in lines), proc.stdout
    assert "relative error" in proc.stdout and lines[-1] == "preflight: every check passed"


def test_the_preflight_names_each_break_and_runs_the_rest(monkeypatch):
    monkeypatch.setattr(preflight, "module_names", lambda: ["jaxgpu.ground.timing", "experiments.no_such_module"])

    def moved(platform_name):
        raise AttributeError("module 'jax' has no attribute 'shard_map'")

    monkeypatch.setattr(preflight, "check_sharded", moved)
    said = []
    assert preflight.run("cpu", said.append) == 2
    assert "FAILED    import experiments.no_such_module: ModuleNotFoundError" in "\n".join(said)
    assert any(line.startswith("FAILED    sharded: AttributeError: module 'jax' has no attribute") for line in said)
    assert any(line.startswith("program   ") for line in said)  # the checks after a break still run
    assert any(line.startswith("analyses  ") for line in said)


def test_the_preflight_reports_the_projects_own_deprecations(tmp_path, monkeypatch):
    # a deprecated call made from the project's code is named with its place; one raised inside a library is not
    for name in ("old_call", "lib_call"):
        (tmp_path / f"{name}.py").write_text(f"import warnings\nwarnings.warn('{name} is going', DeprecationWarning)\n")
    monkeypatch.setattr(preflight, "_module_of", lambda filename: "experiments.old_call"
                        if filename.endswith("old_call.py") else "")
    monkeypatch.syspath_prepend(str(tmp_path))
    failed, deprecated = preflight.import_all(["old_call", "lib_call"])
    assert not failed and deprecated == ["experiments.old_call:2: old_call is going"]


def test_the_preflight_refuses_a_bad_backend_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "experiments.preflight", "--backend", "tpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_good_archive_is_never_replaced_by_a_partial_or_oversized_one(tmp_path, monkeypatch):
    root, archive = tmp_path / "gpu-check", tmp_path / "part-1.tar.gz"
    check = gpu_check.Check(["1"], archive, 180, root, sys.executable)
    (check.folder / "gpu-part-1-try-1").mkdir()
    (check.folder / "gpu-part-1-try-1" / "results.jsonl").write_text('{"a": 1}\n')
    assert check.pack()
    good = archive.read_bytes()
    assert any(n.endswith("part-1-try-1/kernel.txt") for n in tarfile.open(archive).getnames())  # with every pack
    (check.folder / "big.bin").write_bytes(os.urandom(1 << 16))  # incompressible: no smaller archive holds it
    monkeypatch.setattr(gpu_check, "ARCHIVE_MAX_BYTES", 1 << 14)
    assert not check.pack() and archive.read_bytes() == good
    monkeypatch.setattr(gpu_check, "ARCHIVE_MAX_BYTES", 1 << 30)

    def cut(self, *args, **kwargs):
        raise OSError("file changed as we read it")

    monkeypatch.setattr(tarfile.TarFile, "add", cut)
    assert not check.pack() and archive.read_bytes() == good
    assert not list(tmp_path.glob("*.tmp"))


def test_the_preflight_names_a_cuda_plugin_at_another_version_than_jaxlib(monkeypatch):
    # pip adds the newest jax-cuda12-plugin (this package's dependency) to a jax[cuda13] install
    installed = {"jaxlib": "0.11.2", "jax-cuda13-plugin": "0.11.2", "jax-cuda12-plugin": "0.12.0.1"}

    def version(name):
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert "jax-cuda12-plugin 0.12.0.1 beside jaxlib 0.11.2" in preflight.plugin_clash()
    installed["jax-cuda12-plugin"] = "0.11.2"
    assert preflight.plugin_clash() is None
