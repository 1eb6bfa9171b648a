"""Compiling for a GPU this machine does not have: XLA:GPU's plans, checked where they decide something.

These need the CUDA plugin (pip install -e '.[test,gpu-compile]', as .ci/run does); without it
they are skipped with the reason.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpu.pricing import targets
from jaxgpu.records import results

from experiments.harness.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
REASON = targets.unavailable()
compile_only = pytest.mark.skipif(REASON is not None, reason=f"compile-only GPU tests: {REASON}")


@compile_only
def test_the_target_configs_describe_the_gpus():
    for name, t in targets.TARGETS.items():
        (dev,) = targets.devices(name, 1)
        assert dev.device_kind == t.device_kind and dev.platform == "gpu"
        assert f"core_count: {t.sms}" in targets.config_text(t)
    assert len(targets.devices("h200", 8)) == 8


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    """Every experiment's GPU programs compiled for an H200 at the tiny profile: nothing runs."""
    import experiments
    from experiments.harness import runner

    out = tmp_path_factory.mktemp("compiled")
    runner.run_study(RunSettings(tuple(experiments.names()), profile="tiny", out=str(out), progress=False,
                                 compile_for="h200"), "gpu", log=lambda m: None)
    return results.read_run(out)


@compile_only
def test_every_experiments_gpu_programs_compile_for_the_h200(compiled_run):
    import experiments

    run = compiled_run
    assert run.meta["mode"] == "compiled" and run.meta["target"] == "h200"
    bad = [(r.experiment, r.params, r.reason) for r in run.records if r.status != "ok"]
    assert not bad, bad
    assert all(r.compiled and r.backend == "gpu" and r.device_kind == "NVIDIA H200" for r in run.records)
    with_plans = {n for n in experiments.names() if experiments.load(n).compiled_cases is not None}
    assert {r.experiment for r in run.records} == with_plans
    assert {"memory_fit", "tensor_parallel", "data_parallel", "compiler", "precision", "op_mix"} <= with_plans
    assert not any("time_s_median" in r.metrics for r in run.records)  # compile-time facts only, never a time


def _plans(run, experiment, **params):
    return [r for r in run.records if r.experiment == experiment and all(r.params.get(k) == v for k,
                                                                         v in params.items())]


@compile_only
def test_fp8_e4m3_stays_fp8_on_hopper_and_e5m2_is_widened(compiled_run):
    n = max(r.params["n"] for r in _plans(compiled_run, "precision"))
    (e4m3,) = _plans(compiled_run, "precision", preset="fp8_e4m3", n=n)
    (e5m2,) = _plans(compiled_run, "precision", preset="fp8_e5m2", n=n)
    assert e4m3.metrics["calls_cublaslt_f8"] >= 1 and e4m3.metrics["upcast_bits"] == 0
    assert "calls_cublaslt_f8" not in e5m2.metrics and e5m2.metrics["upcast_bits"] == 16  # cuBLASLt refuses e5m2 x e5m2


@compile_only
def test_the_data_parallel_step_holds_one_all_reduce_of_the_gradients(compiled_run):
    for r in _plans(compiled_run, "data_parallel", variant="jit_sharding"):
        if r.params["devices"] == 1:
            assert "all_reduce_count" not in r.metrics
            continue
        assert r.metrics["all_reduce_count"] == 1
        # the gradients and the step's loss (4 bytes), combined into one all-reduce
        assert r.metrics["gradient_bytes"] <= r.metrics["all_reduce_bytes"] <= r.metrics["gradient_bytes"] + 8


@compile_only
def test_tensor_parallel_bytes_per_device_fall_with_device_count(compiled_run):
    by_m = sorted((r.params["model"], r.metrics["bytes_compiled"]) for r in _plans(compiled_run, "tensor_parallel",
                                                                                 data=1))
    assert len(by_m) >= 3 and all(b < a for (_, a), (_, b) in zip(by_m, by_m[1:])), by_m


@compile_only
def test_the_merged_report_says_what_was_compiled_and_names_the_libraries(compiled_run, tmp_path):
    from experiments import report

    md = report.write_report([ROOT / "reports" / "cpu-reference", compiled_run.path], tmp_path)[0].read_text()
    assert "compiled, not run" in md and "cuBLASLt" in md
    assert "GPU / CPU speed-up" not in md  # a compiled plan has no time to divide


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "experiments.run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@compile_only
@pytest.mark.slow
def test_compile_for_on_the_command_line(tmp_path):
    proc = _cli("--compile-for", "h200", "--only", "compiler,data_parallel", "--profile", "tiny", "--out",
                str(tmp_path / "run"), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["mode"] == "compiled" and "core_count: 132" in meta["target_config"]
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert lines and all(json.loads(ln)["mode"] == "compiled" for ln in lines)
    assert "compiled, not run" in (tmp_path / "run" / "report.md").read_text()


@compile_only
def test_a_gpu_train_steps_flops_are_counted_from_its_hlo_library_gemms_included():
    # XLA's cost analysis counts each cuBLAS custom call as -1 FLOPs: the count comes from the program's shapes
    import jax
    import optax

    from jaxgpu.ground import launches, stack, timing
    from jaxgpu.kernels import mlp

    widths, batch, d = (1024, 1024), 256, 784
    model, opt = mlp.MLP(widths=widths, n_out=10), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), d))
    (dev,) = targets.devices("h200", 1)
    plan = targets.compile_plan(mlp.make_train_step(model, opt, "fp32"), targets.specs_like(state, dev),
                                targets.spec((batch, d), "float32", dev), targets.spec((batch,), "int32", dev))
    assert stack.has_library_gemm(plan.hlo)  # the GEMMs are cuBLAS calls XLA cannot count
    layers = [(d, widths[0]), (widths[0], widths[1]), (widths[1], 10)]
    # forward and weight gradient of every layer, input gradient of all but the first: 2 x batch x in x out each
    analytic = sum(2.0 * batch * i * o * (2 if n == 0 else 3) for n, (i, o) in enumerate(layers))
    dots = sum(k.flops for k in launches.kernels(plan.hlo) if k.is_dot)
    assert abs(dots / analytic - 1) < 0.02, (dots, analytic)
    flops, nbytes = launches.program_counts(plan.hlo)
    assert dots < flops < 1.05 * analytic and nbytes > 4 * sum(i * o for i, o in layers)  # the weights at least

    class Compiled:  # what a GPU client hands back: its cost analysis blind to the library calls
        def cost_analysis(self):
            return {"flops": -1.0, "bytes accessed": -1.0}

        def as_text(self):
            return plan.hlo

    assert timing.work_counts(Compiled()) == (flops, nbytes, "hlo")


@compile_only
def test_xla_gpu_plans_an_h100_and_an_h200_alike():
    # both are sm_90 with 132 SMs: the frozen H100 predictions price each CPU case on the H200's plan
    # (experiments.reporting.frozen), which holds only while XLA:GPU's plans of the study's kinds of program agree
    import jax
    import jax.numpy as jnp
    import optax

    from jaxgpu.ground import hardware, precision
    from jaxgpu.kernels import mlp
    from jaxgpu.pricing import roofline

    a = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)
    v = jax.ShapeDtypeStruct((1 << 20,), jnp.float32)
    model, opt = mlp.MLP(widths=(512, 512), n_out=10), optax.adamw(1e-3)
    state = jax.eval_shape(lambda: mlp.init_state(model, opt, jax.random.key(0), 64))
    step = mlp.make_train_step(model, opt, "bf16")
    programs = [(lambda x, y: precision.dot(x, y, preset="bf16"), (a, a)),
                (lambda x, y, z: x + 3.0 * y * z, (v, v, v)),
                (step, (state, jax.ShapeDtypeStruct((256, 64), jnp.float32), jax.ShapeDtypeStruct((256,), jnp.int32)))]
    for fn, args in programs:
        for triton in (False, True):
            h100, h200 = (roofline.plan_for(fn, *args, on=hardware.GPUS[g], plan="gpu", triton_gemm=triton)
                          for g in ("H100 SXM", "H200 SXM"))
            assert [k.to_list()[1:] for k in h100[0]] == [k.to_list()[1:] for k in h200[0]], (fn, triton)
            assert h100[1] == h200[1]


@compile_only
@pytest.mark.cached_answers
def test_a_plan_asked_again_is_read_from_the_cache_not_compiled(tmp_path, monkeypatch):
    """The model command's plans are kept in the user's cache folder, keyed by what makes the step, the target, the
    options and JAX, with the answer priced from them: the same step asked again compiles nothing; another GPU or
    another step does. The answer aside, the plan is read before the step is built: a step that cannot be traced is
    never traced."""
    from jaxgpu.ground import decoders
    from jaxgpu.kernels import programs
    from jaxgpu.pricing import planner

    if why := targets.unavailable():
        pytest.skip(why)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("JAXGPU_PLAN_CACHE_MB", raising=False)
    targets.plan_cache.cache_clear()
    compiled = []
    real = targets._compile
    monkeypatch.setattr(targets, "_compile", lambda lowered, options: compiled.append(1) or real(lowered, options))
    c = decoders.Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    first = planner.plan_model(c, "h100", train=True, batch=4, seq=128)
    # the plan, under what makes it, and the answer priced from it
    assert compiled == [1] and len(list((tmp_path / "jaxgpu" / "plans").glob("*.json.gz"))) == 2
    again = planner.plan_model(c, "h100", train=True, batch=4, seq=128)
    assert compiled == [1] and again == first  # read back whole: the same bytes, kernels and price
    with monkeypatch.context() as m:
        m.setattr(planner, "_answered", lambda key: None)  # priced again from the plan
        m.setattr(programs, "decoder_step", lambda *a: pytest.fail("the step was built, its plan in the cache"))
        assert planner.plan_model(c, "h100", train=True, batch=4, seq=128) == first
    planner.plan_model(c, "h200", train=True, batch=4, seq=128)
    planner.plan_model(c, "h100", train=True, batch=2, seq=128)
    assert len(compiled) == 3
    for f in (tmp_path / "jaxgpu" / "plans").glob("*.json.gz"):
        f.write_bytes(b"not a plan")  # damaged: a miss, compiled again, never an error
    planner.plan_model(c, "h100", train=True, batch=4, seq=128)
    assert len(compiled) == 4
    targets.plan_cache.cache_clear()


def test_a_cached_answer_is_read_without_jax(tmp_path):
    """The model command asked again, with JAX, jaxlib, Flax and Optax blocked from import: the same answer, read from
    the plan cache."""
    if why := targets.unavailable():
        pytest.skip(why)
    argv = [sys.executable, "-m", "experiments.model", "--layers", "2", "--d-model", "256", "--heads", "8",
            "--kv-heads", "2", "--ffn", "512", "--vocab", "1000", "--batch", "4", "--seq", "128", "--devices", "1,2",
            "--gpus", "h100"]
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    first = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    (tmp_path / "sitecustomize.py").write_text("import sys\nfor m in ('jax', 'jaxlib', 'flax', 'optax'):\n"
                                              "    sys.modules[m] = None\n")
    again = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**env, "PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout == first.stdout and "xla:gpu h100" in again.stdout


@pytest.mark.cached_answers
def test_an_answer_is_kept_only_where_its_plan_is_known_without_jax_and_a_missing_loop_is_kept_too(tmp_path,
                                                                                                 monkeypatch):
    """On a machine where only trying tells whether XLA:GPU or this CPU plans the step (a GPU driver), no answer is
    kept: a later process could plan it otherwise. A pipeline stage's plan with no loop of the trips asked raises
    LookupError, kept so that a cached pipeline reads its fallback at once."""
    from jaxgpu.ground import decoders
    from jaxgpu.pricing import planner, sharded

    if why := targets.unavailable():
        pytest.skip(why)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    targets.plan_cache.cache_clear()
    c = decoders.Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    answers = []
    monkeypatch.setattr(planner, "_keep", lambda key, answer: answers.append(answer))
    with monkeypatch.context() as m:
        m.setattr(sharded, "label_for", lambda hw: None)
        assert planner.plan_model(c, "h100", batch=4, seq=128).memory_plan == "xla:gpu h100" and not answers
    planner.plan_model(c, "h100", batch=4, seq=128)
    assert len(answers) == 1 and answers[0]["memory_plan"] == "xla:gpu h100"
    key = "0" * 32
    targets.plan_cache().write(key, {"lookup": "the plan runs no loop of 2 trips"})
    with pytest.raises(LookupError, match="no loop of 2 trips"):
        planner._answered(key)
    targets.plan_cache.cache_clear()


def test_a_key_changes_with_what_changes_a_plan_and_not_with_the_host_device_count(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    base = targets.key_of(["x"])
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    assert targets.key_of(["x"]) == base and targets.key_of(["y"]) != base
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    assert targets.key_of(["x"]) != base
    monkeypatch.delenv("JAX_ENABLE_X64")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_gpu_autotune_level=0")
    assert targets.key_of(["x"]) != base
    with pytest.raises(TypeError, match="JSON"):
        targets.key_of([object()])


def test_a_cached_plan_is_keyed_by_the_code_that_builds_the_step_not_by_the_code_that_prices_it():
    """A change to a share, a card's figures or a published case re-prices from the cached plans: the code a plan's
    key names (``planner._program``'s) imports nothing of the pricing, the hardware table or the calibration."""
    from jaxgpu.pricing import fingerprint

    names = {str(p.relative_to(fingerprint.ROOT)) for p in fingerprint.sources(("jaxgpu.kernels.programs",))}
    assert {"jaxgpu/kernels/transformer.py", "jaxgpu/kernels/sharding.py", "jaxgpu/kernels/parallel.py"} <= names
    assert not {n for n in names if n.startswith("jaxgpu/pricing/")}, names
    assert not names & {"jaxgpu/ground/hardware.py", "jaxgpu/ground/calibration.py"}, names


@compile_only
def test_the_plan_cache_keeps_to_its_size_and_can_be_turned_off(tmp_path):
    import os
    import time

    plan = targets.Plan(1, 2, 3, 0, 0.5, os.urandom(1500).hex(), "")  # about 2 kB gzipped
    cache = targets.PlanCache(tmp_path, limit_bytes=5_000)
    for key in ("a", "b", "c"):
        cache.put(key, plan)
        time.sleep(0.01)  # apart in time: the order they were used in
    kept = sorted(f.name for f in tmp_path.glob("*.json.gz"))
    assert kept == ["b.json.gz", "c.json.gz"], kept  # past the limit the least recently used went first
    assert cache.get("c") == plan and cache.get("a") is None
    off = targets.PlanCache(tmp_path / "off", limit_bytes=0)
    off.put("a", plan)
    assert off.get("a") is None and not (tmp_path / "off").exists()


@pytest.mark.parametrize("installed, plugin, cuda", [
    ({"jax-cuda12-plugin": "JAX"}, "jax-cuda12-plugin", "12.8.0"),
    ({"jax-cuda13-plugin": "JAX"}, "jax-cuda13-plugin", "13.0.0"),  # the lent GPU machine's
    ({"jax-cuda12-plugin": "0.0.1", "jax-cuda13-plugin": "JAX"}, "jax-cuda13-plugin", "13.0.0"),
])
def test_either_cuda_plugin_at_jaxs_version_compiles(monkeypatch, installed, plugin, cuda):
    import jax

    versions = {"jax": jax.__version__, **{k: jax.__version__ if v == "JAX" else v for k, v in installed.items()}}
    monkeypatch.setattr(targets, "_version", lambda name: versions.get(name, ""))
    assert targets.unavailable() is None and targets.plugin() == plugin
    assert f'runtime_version: "{cuda}"' in targets.config_text(targets.target("h200"))


def test_a_plugin_that_cannot_compile_is_named(monkeypatch):
    monkeypatch.setattr(targets, "_version", lambda name: {"jax-cuda13-plugin": "0.0.1", "jax": "0.10.2"}.get(name, ""))
    assert "jax-cuda13-plugin 0.0.1 does not match jax 0.10.2" in targets.unavailable()
    monkeypatch.setattr(targets, "_version", lambda name: "")
    assert "the CUDA plugin is not installed" in targets.unavailable() and targets.plugin() is None
