"""The command line as a careless user meets it: one line and exit 2 for bad input, nothing lost."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxgpu.records import results

from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]


def _run(*args, timeout=180):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


# What the CUDA plugin (the gpu-compile extra) logs from C++ when JAX starts on a machine without a
# driver: not ours to silence, and not part of an error message.
_PLUGIN_LOG = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWE]\d{4} .*cudart_stub)")


def _one_line_error(proc, pattern):
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if not _PLUGIN_LOG.match(ln)]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert pattern in lines[0], lines[0]


def test_unknown_backend():
    _one_line_error(_run("experiments.run", "--backend", "tpu"), "invalid choice: 'tpu'")


def test_unknown_experiment_lists_the_known_ones():
    proc = _run("experiments.run", "--only", "matmull")
    _one_line_error(proc, "unknown experiment 'matmull'; did you mean matmul? known: devices, matmul, precision")


def test_bad_device_count():
    _one_line_error(_run("experiments.run", "--devices", "0"), "--devices must be at least 1")


def test_gpu_requested_where_there_is_none():
    import jax

    if jax.default_backend() == "gpu":
        pytest.skip("this machine has a GPU")
    _one_line_error(_run("experiments.run", "--backend", "gpu", "--only", "matmul"), "no GPU backend found")


def test_list():
    proc = _run("experiments.run", "--list")
    assert proc.returncode == 0 and "matmul" in proc.stdout


@pytest.mark.slow
def test_tiny_run_writes_the_contract_and_resume_skips_what_is_done(tmp_path):
    out = tmp_path / "run"
    proc = _run("experiments.run", "--backend", "cpu", "--only", "matmul", "--profile", "tiny", "--out", str(out),
                "--devices", "2")
    assert proc.returncode == 0, proc.stderr
    for name in ("run.json", "results.jsonl", "report.md", "report.html"):
        assert (out / name).exists(), name
    run = results.read_run(out)
    meta = run.meta
    assert meta["env"]["n_devices"] == 2 and "--xla_force_host_platform_device_count=2" in meta["env"]["xla_flags"]
    sweep = [r for r in run.records if "impl" in r.params]
    assert sweep and all(r.experiment == "matmul" and r.status == "ok" for r in run.records)
    for r in sweep:
        assert {"n", "dtype"} <= set(r.params) and {"gflops", "time_s_median", "rel_error"} <= set(r.metrics)
    n_before = len(run.records)

    # Drop the last two records, as if the run had been killed; resume measures only those.
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:-2]) + "\n")
    proc = _run("experiments.run", "--resume", str(out), "--no-report")
    assert proc.returncode == 0, proc.stderr
    assert "2 cases" in proc.stderr
    assert len(results.read_run(out).records) == n_before
    proc = _run("experiments.run", "--resume", str(out), "--no-report")
    assert "0 cases" in proc.stderr
    # the same folder without --resume: refused, the run left as it was
    _one_line_error(_run("experiments.run", "--only", "matmul", "--out", str(out)), f"--resume {out}")
    assert len(results.read_run(out).records) == n_before

    # --only with --resume adds an experiment to the run; run.json's sessions says what each invocation ran
    proc = _run("experiments.run", "--resume", str(out), "--only", "devices", "--no-report")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "run.json").read_text())
    assert [s["experiments"] for s in meta["sessions"]] == [["matmul"], ["matmul"], ["matmul"], ["devices"]]
    assert meta["sessions"][-1]["completion"]["state"] == "complete"
    assert meta["config"]["experiments"] == ["matmul", "devices"]
    # a run recorded with another JAX, or on another device kind, is not resumed here
    for field, other in (("jaxlib", "0.11.2"), ("device_kind", "NVIDIA H100 80GB HBM3")):
        changed = {**meta, "env": {**meta["env"], field: other}}
        (out / "run.json").write_text(json.dumps(changed))
        _one_line_error(_run("experiments.run", "--resume", str(out), "--no-report"), "another machine or JAX")
        assert f"{field} {other!r} there" in _run("experiments.run", "--resume", str(out)).stderr
    assert len(results.read_run(out).records) > n_before  # the devices records, and nothing after the refusals


@pytest.mark.slow
def test_sigkill_midway_keeps_every_finished_record(tmp_path):
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "experiments.run", "--backend", "cpu", "--only", "matmul",
                             "--out", str(out), "--no-progress"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if path.exists() and path.read_text().count("\n") >= 8:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = results.read_run(out)
    assert len(run.records) >= 8
    assert all(r.status == "ok" for r in run.records)


def test_report_refuses_a_broken_results_file(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"schema": 1, "run_id": "x"}))
    (tmp_path / "results.jsonl").write_text("garbage\n{}\n")
    _one_line_error(_run("experiments.report", str(tmp_path)), "results.jsonl: line 1 is not a JSON record")


def test_report_on_a_folder_that_is_not_a_run(tmp_path):
    _one_line_error(_run("experiments.report", str(tmp_path / "missing")), "not a result folder")


def test_bad_process_count():
    _one_line_error(_run("experiments.run", "--processes", "0"), "--processes must be at least 1")


def test_an_out_folder_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _one_line_error(_run("experiments.run", "--only", "devices", "--out", str(blocker / "run")),
                    "cannot create the result folder")


def test_an_out_folder_holding_a_run_is_not_appended_to(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    _one_line_error(_run("experiments.run", "--only", "devices", "--out", str(tmp_path)), "already holds a run")
    with pytest.raises(FileExistsError, match="already holds a run"):
        from experiments.harness import runner

        runner.run_study(RunSettings(("devices",), out=str(tmp_path), progress=False), "cpu", log=lambda m: None)


def test_a_host_device_count_xla_cannot_hold():
    _one_line_error(_run("experiments.run", "--devices", "100000"), "--devices 100000: at most 1024 host devices")


def test_an_empty_only_is_not_the_whole_study():
    _one_line_error(_run("experiments.run", "--only", ""), "names no experiment")
    _one_line_error(_run("experiments.run", "--only", " , "), "names no experiment")


def test_more_processes_than_the_machine_holds():
    _one_line_error(_run("experiments.run", "--only", "distributed", "--processes", "100000"),
                    "this machine holds at most")
    _one_line_error(_run("experiments.run", "--only", "distributed", "--processes", "3"), "does not split evenly")


def test_a_bad_setting_is_one_line():
    _one_line_error(_run("experiments.run", "--only", "matmul", "--set", "matmul.sizez=(1,)"), "has no field 'sizez'")
    _one_line_error(_run("experiments.run", "--only", "matmul", "--set", "matmul.sizes=big"), "takes tuple")


def test_target_without_dry_run():
    _one_line_error(_run("experiments.run", "--target", "H100"), "add --dry-run")
    _one_line_error(_run("experiments.run", "--dry-run", "--backend", "gpu", "--target", "TPU"), "unknown GPU 'TPU'")


@pytest.mark.slow
def test_resume_sets_a_cut_last_line_aside_and_keeps_every_record(tmp_path):
    out = tmp_path / "run"
    proc = _run("experiments.run", "--backend", "cpu", "--only", "devices,matmul", "--profile", "tiny", "--out",
                str(out), "--no-report", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    path = out / "results.jsonl"
    text = path.read_text()
    complete = text.count("\n")
    path.write_text(text[:-40])  # a kill in the middle of writing the last record
    proc = _run("experiments.run", "--resume", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "set aside" in proc.stderr
    run = results.read_run(out)  # readable again, the cut record measured anew
    assert len(run.records) == complete and (out / results.CUT_FILE).exists()
    assert (out / "report.md").exists()


def test_compile_for_a_gpu_not_in_the_table():
    _one_line_error(_run("experiments.run", "--compile-for", "tpu"), "unknown GPU 'tpu'; known: H100 SXM, H200 SXM")
    _one_line_error(_run("experiments.run", "--compile-for", "l4"),
                    "no XLA:GPU target for the L4, whose prices stand in from the A100 80GB's plan (--compile-for "
                    "a100); compile targets: h100 (H100 SXM), h200 (H200 SXM)")
    _one_line_error(_run("experiments.run", "--compile-for", "h200", "--backend", "gpu"), "drop --backend")


@pytest.mark.parametrize("name", ["h100", "H100", "H100 SXM", "h100-sxm", "NVIDIA H100"])
def test_one_resolver_reads_a_gpu_name_however_it_is_spelled(name):
    from experiments import run

    assert run.parse_args(["--dry-run", "--target", name]).target == "H100 SXM"
    assert run.parse_args(["--compile-for", name]).compile_for == "h100"


def test_a_gpu_name_typo_gets_a_suggestion():
    _one_line_error(_run("experiments.run", "--dry-run", "--target", "h10"),
                    "--target: unknown GPU 'h10'; did you mean 'H100 SXM'?")


def test_a_flag_nothing_reads_is_named_as_ignored():
    proc = _run("experiments.run", "--dry-run", "--only", "matmul", "--processes", "2", "--out", "somewhere")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2 and all(line.endswith("; ignored") for line in warnings), proc.stderr
    assert "--processes" in warnings[0] and "--out" in warnings[1]


def test_help_ends_with_examples_a_shell_can_take():
    import shlex

    out = _run("experiments.run", "--help").stdout
    examples = [line.split("#")[0].strip() for line in out.split("examples:")[1].splitlines()
                if line.strip().startswith("python -m")]
    assert len(examples) >= 4
    for cmd in examples:  # each parses as a shell would read it, and as our parser then does
        argv = shlex.split(cmd)
        from experiments import run

        run.parse_args(argv[3:])


def test_a_report_folder_that_cannot_be_made():
    _one_line_error(_run("experiments.report", "reports/cpu-multidevice", "--out", "/proc/no/report"),
                    "cannot create the report folder /proc/no/report")


def test_a_dry_run_for_a_compile_plans_the_compiles_not_a_timed_run():
    proc = _run("experiments.run", "--dry-run", "--compile-for", "h200", "--only", "matmul,transformer")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].endswith("on this CPU, compiling for a GPU"), proc.stdout
    timed = _run("experiments.run", "--dry-run", "--backend", "cpu", "--only", "matmul,transformer")
    assert timed.stdout.strip().splitlines()[-1].endswith("on this CPU"), timed.stdout
    assert timed.stdout != proc.stdout


def test_target_plans_a_gpu_run_whatever_this_machine_has():
    proc = _run("experiments.run", "--dry-run", "--target", "h100", "--only", "matmul")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].endswith("on H100 SXM"), proc.stdout
    _one_line_error(_run("experiments.run", "--dry-run", "--target", "h100", "--backend", "cpu"),
                    "--backend cpu plans this CPU: drop one")


def test_every_option_has_help():
    from experiments import run

    for action in run.parser()._actions:
        assert action.help, action.option_strings
    assert "seed of every random draw" in _run("experiments.run", "--help").stdout


def test_settings_are_decided_once_from_the_command_line_and_the_resumed_run(tmp_path):
    from experiments import run

    s = run.parse_args(["--only", "matmul", "--profile", "tiny", "--seed", "3", "--set", "matmul.sizes=(64,)",
                        "--out", str(tmp_path / "a")])
    assert s == RunSettings(("matmul",), profile="tiny", seed=3, out=str(tmp_path / "a"),
                            overrides={"matmul": {"sizes": (64,)}}, argv=s.argv)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seed = 4
    # a resumed run's run.json fills what the command line leaves unset
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.json").write_text(json.dumps(
        {"schema": 1, "config": {"profile": "tiny", "seed": 7, "backend": "cpu", "experiments": ["precision"],
                                 "devices": 2}}))
    (tmp_path / "b" / "results.jsonl").write_text("")
    again = run.parse_args(["--resume", str(tmp_path / "b")])
    assert (again.experiments, again.profile, again.seed, again.backend, again.devices, again.resume) == \
        (("precision",), "tiny", 7, "cpu", 2, True)
    assert run.parse_args(["--resume", str(tmp_path / "b"), "--seed", "1"]).seed == 1  # the command line wins
    assert any("--devices" in w for w in run.parse_args(["--backend", "gpu", "--devices", "2"]).warnings)


def test_the_console_scripts_name_themselves():
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        scripts = {e.name for e in distribution("jaxgpu").entry_points if e.group == "console_scripts"}
    except PackageNotFoundError:
        pytest.skip("jaxgpu is not installed (pip install -e .): its console scripts are not there to run")
    assert scripts == {"jaxgpu-run", "jaxgpu-report", "jaxgpu-model"}
    bin_dir = Path(sys.executable).parent
    for name in sorted(scripts):
        proc = subprocess.run([str(bin_dir / name), "--help"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: {name} "), (name, proc.stderr[-500:])
        assert "python -m" not in proc.stdout, name
    bad = subprocess.run([str(bin_dir / "jaxgpu-run"), "--only", "nope"], capture_output=True, text=True, timeout=120)
    _one_line_error(bad, "jaxgpu-run: error: unknown experiment 'nope'")


@pytest.mark.parametrize("config", ['"abc"', '5', '{"devices": "4"}'])
def test_a_resumed_run_json_that_cannot_be_read_back_is_one_line(tmp_path, config):
    (tmp_path / "run.json").write_text('{"schema": 1, "config": ' + config + "}")
    (tmp_path / "results.jsonl").write_text("")
    _one_line_error(_run("experiments.run", "--resume", str(tmp_path), "--dry-run"), "its config cannot be read back")


def test_a_resumed_set_run_measures_only_the_overridden_cases(tmp_path, capsys):
    """``--set`` is read back on ``--resume``: the cases still to measure are the ones the run's records were
    measured with, never the profile's own under a run.json that states the overridden ones."""
    from experiments import run
    from experiments.harness import runner

    out = tmp_path / "run"
    asked = ["--only", "matmul", "--profile", "tiny", "--set", "matmul.sizes=(48,)", "--no-report", "--no-progress"]
    runner.run_study(run.parse_args([*asked, "--backend", "cpu", "--out", str(out)]), "cpu", log=lambda m: None)
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text(lines[0] + "\n")  # killed after its first record
    again = run.parse_args(["--resume", str(out), "--no-report", "--no-progress"])
    assert again.overrides == {"matmul": {"sizes": (48,)}}
    runner.run_study(again, "cpu", log=lambda m: None)
    done = results.read_run(out)
    assert len(done.records) == len(lines) and {r.params["n"] for r in done.records if "n" in r.params} == {48}
    # the same --set again is the run's own; another is refused in one line, the run left as it was
    assert run.parse_args(["--resume", str(out), "--set", "matmul.sizes=(48,)"]).overrides == again.overrides
    with pytest.raises(SystemExit) as refused:
        run.parse_args(["--resume", str(out), "--set", "matmul.sizes=(64,)"])
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert refused.value.code == 2 and "--set changes what the resumed run measured (matmul: sizes=(48,))" in said
    assert len(results.read_run(out).records) == len(lines)
