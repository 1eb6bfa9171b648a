import json
import re
import shutil
from pathlib import Path

import pytest

from jaxgpu import results

import experiments
from experiments import report
from experiments.analysis import prediction
from experiments.harness import runner
from experiments.reporting import build


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    runner.run_study(["matmul"], platform="cpu", profile="tiny", out_dir=out, progress=False, log=lambda m: None)
    report.write_report([out], out)
    return out


def _as_gpu_run(src, dst):
    """A copy of a run relabelled as a GPU run with everything twice as fast."""
    shutil.copytree(src, dst)
    meta = json.loads((dst / "run.json").read_text())
    meta["env"].update(backend="gpu", device_kind="NVIDIA H200")
    meta["run_id"] += "-gpu"  # another run (a report counts one run id once)
    (dst / "run.json").write_text(json.dumps(meta))
    lines = []
    for line in (dst / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec["backend"], rec["device_kind"] = "gpu", "NVIDIA H200"
        if "gflops" in rec["metrics"]:
            rec["metrics"]["gflops"] *= 2
        lines.append(json.dumps(rec))
    (dst / "results.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def test_run_writes_a_report_with_computed_takeaways(tiny_run):
    md = (tiny_run / "report.md").read_text()
    page = (tiny_run / "report.html").read_text()
    assert "## Matrix multiplication" in md and "**Takeaway:** On cpu, JAX reached" in md
    assert "On cpu, JAX reached" in page  # the HTML is the same view, not a separate text
    gflops = [r.metrics["gflops"] for r in results.read_run(tiny_run).records
              if r.params.get("impl") == "jax" and r.params.get("shape") == "square"]
    assert f"{gflops[-1]:.0f} GFLOP/s" in md  # the takeaway quotes the measured figure
    assert "exact" in md and "Environment of each run" in md
    assert (tiny_run / "matmul_gflops.png").stat().st_size > 1000


def test_html_is_self_contained(tiny_run):
    page = (tiny_run / "report.html").read_text()
    assert 'src="data:image/png;base64,' in page
    assert not re.search(r'(src|href)="https?://', page)
    assert 'name="viewport"' in page


def test_cpu_and_gpu_runs_merge_with_speedups(tiny_run, tmp_path):
    gpu = _as_gpu_run(tiny_run, tmp_path / "gpu")
    md_path, _ = report.write_report([tiny_run, gpu], tmp_path / "merged")
    md = md_path.read_text()
    assert "GPU / CPU speed-up per case" in md
    assert "| 2x |" in md
    assert "On gpu (NVIDIA H200), JAX reached" in md


def test_report_is_deterministic(tiny_run, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    report.write_report([tiny_run], a)
    report.write_report([tiny_run], b)
    for name in ("report.md", "report.html", "matmul_gflops.png"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_failed_and_unsupported_cases_are_shown_not_hidden(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    with open(run / "results.jsonl", "a") as f:
        rec = results.Record("matmul", {"case": "worked_example", "dtype": "float4"}, {}, status="unsupported",
                             reason="no such dtype here", backend="cpu")
        f.write(json.dumps(rec.to_dict()) + "\n")
    md = report.write_report([run], run)[0].read_text()
    assert "unsupported: no such dtype here" in md


def _lowering_for_cuda_too(lowered: dict, failed: dict):
    """A stand-in for JAX's jit lowering that lowers every program once more for CUDA (StableHLO, no
    GPU needed), counting {program name: lowerings} and collecting {name: error}."""
    from jax._src import pjit  # private: the one place every jit's first lowering passes

    original = pjit._pjit_lower

    def both(jaxpr, *args, lowering_platforms=None, lowering_parameters=None, pgle_profiler=None):
        out = original(jaxpr, *args, lowering_platforms=lowering_platforms,
                       lowering_parameters=lowering_parameters, pgle_profiler=pgle_profiler)
        if lowering_platforms is None:
            name = str(args[6])
            try:
                original(jaxpr, *args, lowering_platforms=("cuda",), lowering_parameters=lowering_parameters,
                         pgle_profiler=None)
                lowered[name] = lowered.get(name, 0) + 1
            except Exception as err:  # noqa: BLE001 - collected and reported by the test
                failed[name] = f"{type(err).__name__}: {str(err)[:300]}"
        return out

    return pjit, both


@pytest.fixture(scope="module")
def every_tiny(tmp_path_factory):
    """Every experiment at the tiny profile, each program also lowered for CUDA on the way."""
    import experiments

    out = tmp_path_factory.mktemp("every")
    lowered, failed = {}, {}
    pjit, both = _lowering_for_cuda_too(lowered, failed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pjit, "_pjit_lower", both)
        runner.run_study(experiments.names(), platform="cpu", profile="tiny", out_dir=out, progress=False,
                         log=lambda m: None)
    report.write_report([out], out)
    return out, lowered, failed


@pytest.mark.slow
def test_every_experiment_runs_tiny_and_reports(every_tiny):
    import experiments

    tmp_path, _, _ = every_tiny
    names = experiments.names()
    run = results.read_run(tmp_path)
    assert {r.experiment for r in run.records} == set(names)
    # expected on CPU: formats torch lacks (precision), and a host->device "copy" XLA:CPU makes by taking the
    # host array as it is (zero copy), which has no bandwidth to time
    expected = lambda r: r.experiment == "precision" or (
        r.experiment == "transfer" and r.params.get("direction") == "host_to_device" and "zero copy" in r.reason)
    bad = [(r.experiment, r.params, r.reason) for r in run.records
           if r.status == "failed" or (r.status == "unsupported" and not expected(r))]
    assert not bad, bad
    md = (tmp_path / "report.md").read_text()
    for name in names:
        title = experiments.view(name).section([(run, r) for r in run.records if r.experiment == name]).title
        assert f"## {title}" in md, name
    assert md.count("**Takeaway:**") >= len(names)
    assert "## How well does the roofline predict?" in md and "H200 SXM (predicted)" in md
    # the records are what was measured: the model's figures are recomputed when they are read
    assert "roofs" not in run.meta and not any("time_s_predicted" in r.metrics for r in run.records)
    priced = prediction.errors(run, list(run.records))
    assert len(priced) >= 30 and all(p > 0 for _, p, _ in priced)


def test_each_figure_draws_the_h200_prediction_beside_what_ran(every_tiny):
    tmp_path, _, _ = every_tiny
    run = results.read_run(tmp_path)
    sections = {s.anchor: s for s in report.build_sections([run])}
    guessed = {r.experiment for _, r in prediction.predicted_pairs([run])}
    assert guessed >= {"matmul", "precision", "bandwidth", "roofline", "serial_parallel", "inference", "training"}
    for name in guessed - {"op_mix"}:  # op_mix draws shares of time, which a whole-step bound cannot split
        labels = [line.get_label() for p in sections[name].plots for ax in p.figure.axes for line in ax.get_lines()]
        assert any("NVIDIA H200 SXM, predicted, not run" in label for label in labels), (name, labels)
        assert any(label.startswith("cpu") for label in labels), (name, labels)
        cells = [str(c) for t in sections[name].tables for row in t.rows for c in row]
        assert not any("predicted, not run" in c for c in cells), name  # tables list what ran


def test_a_merged_gpu_run_is_drawn_beside_its_own_prediction(every_tiny, tmp_path):
    cpu, _, _ = every_tiny
    gpu = _as_gpu_run(cpu, tmp_path / "gpu")
    sections = {s.anchor: s for s in report.build_sections([results.read_run(cpu), results.read_run(gpu)])}
    labels = [line.get_label() for p in sections["matmul"].plots for ax in p.figure.axes for line in ax.get_lines()]
    assert any(label.startswith("gpu (NVIDIA H200) ") for label in labels), labels  # measured
    assert any("NVIDIA H200 SXM, predicted, not run" in label for label in labels), labels  # its prediction


@pytest.mark.slow
def test_every_experiments_programs_lower_for_cuda(every_tiny):
    _, lowered, failed = every_tiny
    assert not failed, failed
    assert sum(lowered.values()) > 100, lowered


@pytest.mark.slow
def test_a_gpu_run_cut_at_any_record_still_merges_into_a_full_ledger(every_tiny, tmp_path):
    cpu, _, _ = every_tiny
    gpu = _as_gpu_run(cpu, tmp_path / "gpu")
    lines = (gpu / "results.jsonl").read_text().splitlines()
    full = results.read_run(gpu)

    cpu_run = results.read_run(cpu)
    for cut in range(len(lines) + 1):
        run = results.Run(full.path, {**full.meta, "completion": {"state": "running"}}, full.records[:cut])
        pairs = results.merge([cpu_run, run])
        rows = [r for r in build.ledger_section(pairs, {x.experiment for _, x in pairs}).tables[0].rows]
        assert len(rows) == 18, cut
        # the section of the experiment the cut falls in, from its partial records
        if cut:
            name = full.records[cut - 1].experiment
            experiments.view(name).section([p for p in pairs if p[1].experiment == name])
    assert "stopped without finishing" in " ".join(build.completion_notes([run]))


def test_a_gpu_run_is_set_beside_its_own_hosts_cpu_run(tiny_run, tmp_path):
    gpu = _as_gpu_run(tiny_run, tmp_path / "gpu")
    other = tmp_path / "cpu-elsewhere"
    shutil.copytree(tiny_run, other)
    meta = json.loads((other / "run.json").read_text())
    meta["env"]["cpu_model"] = "Another CPU"
    meta["run_id"] += "-elsewhere"
    (other / "run.json").write_text(json.dumps(meta))
    lines = [json.loads(x) for x in (other / "results.jsonl").read_text().splitlines()]
    for rec in lines:
        if "gflops" in rec["metrics"]:
            rec["metrics"]["gflops"] *= 10  # another machine, ten times faster
    (other / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    table = build.speedup_table(results.merge([results.read_run(d) for d in (other, gpu, tiny_run)]))
    assert table.rows and all(r[-1] == f"{tiny_run.name}, same host" for r in table.rows)
    assert all(r[5] == "2x" for r in table.rows if r[2] == "gflops")
    # without the same host's run, the other CPU is used, and the table says so
    table = build.speedup_table(results.merge([results.read_run(d) for d in (other, gpu)]))
    assert all(r[-1].endswith("another machine") for r in table.rows)


def test_profile_trace_is_written(tmp_path):
    runner.run_study(["devices"], platform="cpu", profile="tiny", out_dir=tmp_path / "run", progress=False,
                     trace_dir=tmp_path / "trace", log=lambda m: None)
    files = [p.name for p in (tmp_path / "trace").rglob("*") if p.is_file()]
    assert any(f.endswith(".xplane.pb") for f in files) and any(f.endswith(".trace.json.gz") for f in files), files


COMMITTED_RUNS = report.STUDY_RUNS


@pytest.mark.slow
def test_the_committed_report_is_reproduced_from_the_committed_runs(tmp_path):
    root = Path(__file__).resolve().parents[1] / "reports"
    for name in COMMITTED_RUNS:
        shutil.copytree(root / name, tmp_path / name)
    report.write_report([tmp_path / n for n in COMMITTED_RUNS], tmp_path / "study")
    assert (tmp_path / "study" / "report.md").read_text() == (root / "study" / "report.md").read_text()
    md = (root / "study" / "report.md").read_text()
    ledger = md.split("## Claims ledger")[1].split("\n## ")[0]
    rows = [ln for ln in ledger.splitlines() if ln.startswith("| C")]
    assert len(rows) == 18 and all("](#" in r or "(not run)" in r for r in rows)


def test_an_older_benchmark_version_is_flagged_not_mixed_silently(tiny_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(tiny_run, old)
    meta = json.loads((old / "run.json").read_text())
    (old / "run.json").write_text(json.dumps({**meta, "run_id": meta["run_id"] + "-old"}))  # another run
    lines = [json.loads(x) for x in (old / "results.jsonl").read_text().splitlines()]
    for rec in lines:
        rec["benchmark_version"] = 0
    (old / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = report.write_report([old, tiny_run], tmp_path / "merged")[0].read_text()
    now = experiments.load("matmul").benchmark_version
    assert f"measured matmul with different methods (benchmark_version [0, {now}])" in md
    alone = report.write_report([tiny_run], tmp_path / "alone")[0].read_text()
    assert "different methods" not in alone


def test_the_readme_headline_and_experiment_table_match_the_committed_report():
    import re

    from experiments.analysis import claims

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    md = (root / "reports" / "study" / "report.md").read_text()
    counts = re.search(r"runs below; ([^.]+)\.", md).group(1)
    assert f"**{counts}**" in readme, counts
    for name, ids in re.findall(r"^\| `(\w+)` \| ([C\d, ]+) \|", readme, re.M):
        assert tuple(ids.split(", ")) == claims.for_experiment(name), name
