"""The host allocator: XLA:CPU's buffers kept in the process, chosen at start, recorded, and measured both ways."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpu.ground import devices
from jaxgpu.records import results

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


def test_the_tuned_heap_gives_freed_arrays_back_before_a_worker_starts():
    # under TUNED_MALLOC freed memory stays resident unless trimmed: a 400 MB buffer freed must leave the RSS
    code = ("import numpy as np\nfrom jaxgpu import devices\n"
            "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096\n"
            "a = np.ones(100_000_000, np.float32); before = rss(); del a\n"
            "kept = rss(); devices.release_host_memory(); print(before - kept, before - rss())\n")
    env = devices.allocator_environ("tuned")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    freed_alone, trimmed = (int(x) for x in out.stdout.split())
    assert freed_alone < 100e6  # the heap kept it ...
    assert trimmed > 300e6  # ... until trimmed


def test_a_bandwidth_set_is_freed_before_the_next_is_drawn(monkeypatch):
    from experiments.bandwidth import measure

    live = []

    def draw(n, dtype, sharded, platform):
        live.append((n, dtype))
        return [object()]

    def release():
        live.clear()
        measure._HELD.clear()

    monkeypatch.setattr(measure, "_draw", draw)
    monkeypatch.setattr(measure, "_release", release)
    first = measure._arrays(8, "float32", False, "cpu")
    assert measure._arrays(8, "float32", False, "cpu") is first  # kept across the kernels that share it
    measure._arrays(8, "bfloat16", False, "cpu")
    assert live == [(8, "bfloat16")]
    measure._HELD.clear()


def test_a_worker_killed_for_memory_says_so():
    from jaxgpu.kernels import stream

    assert stream._exit_words(-9) == "killed by SIGKILL (out of memory?)"
    assert stream._exit_words(2) == "exited 2"
    log = "Traceback ...\nMemoryError: no room\nI0000 00:00:17 cudart_stub.cc:31] Could not find cuda drivers"
    assert stream._last_message(log) == "MemoryError: no room"
