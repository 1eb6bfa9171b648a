"""The host allocator: XLA:CPU's buffers kept in the process, chosen at start, recorded, and measured both ways."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpu import devices, results

from experiments.bandwidth import view

ROOT = Path(__file__).resolve().parents[1]


def test_which_allocator_a_process_has():
    assert devices.allocator_in_use(devices.TUNED_MALLOC) == "tuned"
    assert devices.allocator_in_use({}) == "system"
    assert devices.allocator_in_use({"MALLOC_ARENA_MAX": "4"}) == "custom"
    env = devices.allocator_environ("tuned", {"PATH": "/bin", "MALLOC_ARENA_MAX": "8"})
    assert env == {"PATH": "/bin", **devices.TUNED_MALLOC}
    assert devices.allocator_environ("system", env) == {"PATH": "/bin"}
    assert devices.allocator_command("python x.py").endswith(" python x.py")
    with pytest.raises(devices.BackendError, match="unknown allocator"):
        devices.allocator_environ("jemalloc")


@pytest.mark.slow
@pytest.mark.parametrize("asked,got", [(None, "tuned"), ("system", "system")])
def test_a_cpu_run_restarts_itself_with_the_allocator_asked_for(tmp_path, asked, got):
    env = devices.allocator_environ("system")  # whatever this test process has, the run starts from glibc's
    env["PYTHONPATH"] = str(ROOT)
    extra = ["--allocator", asked] if asked else []
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "--backend", "cpu", "--only", "devices",
                           "--profile", "tiny", "--out", str(tmp_path / "run"), "--no-report", *extra], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["env"]["allocator"] == got and meta["completion"]["max_rss_bytes"] > 0


def _rec(allocator, gbps, faults):
    return results.Record("bandwidth", {"kernel": "triad", "impl": "jax", "variant": "process",
                                        "allocator": allocator, "n": 1 << 25, "dtype": "float32"},
                          {"gbytes_per_s": gbps, "page_faults_per_call": faults})


def test_the_view_names_the_cause_only_when_the_records_show_it():
    pages = (1 << 25) * 4 / 4096
    shown = view._allocators([_rec("system", 8.0, 32769), _rec("tuned", 25.0, 0)], pages)
    assert "3.1x" in shown and "not DRAM" in shown
    same = view._allocators([_rec("system", 24.0, 10), _rec("tuned", 25.0, 0)], pages)
    assert "no difference" in same and "not DRAM" not in same
    assert view._allocators([_rec("tuned", 25.0, 0)], pages) == ""
