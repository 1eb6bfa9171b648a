"""The planner: a decoder's step compiled for N GPUs by XLA:GPU and priced (``plan_model``, ``fewest``, the formula
beside the plan), its collectives read off the plan, and the model command that prints it."""

import dataclasses
import os
import re
from pathlib import Path

import jax
import pytest

from jaxgpu.ground import decoders, hardware
from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.kernels import programs, sharding
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import planner, sharded

from tests.test_transformer import GEGLU, MOE, TINY_HF, _mesh


def test_a_collectives_group_is_read_off_the_plan_in_every_form_and_prices_its_share():
    from jaxgpu.ground import hardware, launches, stack

    assert stack.replica_group("x, replica_groups={{0,2,4,6},{1,3,5,7}}, to_apply=%r") == 4
    assert stack.replica_group("x, replica_groups=[4,2]<=[2,2,2]T(2,1,0), dimensions={0}") == 2
    assert stack.replica_group("replica_groups=mesh['axis_0'=1,'axis_2'=4,'axis_3'=2] {'axis_2'}, use") == 4
    assert stack.replica_group("replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a'}, dim") == 2
    assert stack.replica_group("replica_groups={}, to_apply=%r") == stack.replica_group("source_target_pairs=") == 0
    assert stack.replica_group("replica_groups=mesh['a'=2,'b'=4], dimensions={1}") == 0  # no axes named: not read
    k = launches.Kernel("all-reduce.1", 0.0, 1e6, False, 3, group=2)
    assert launches.Kernel.from_list(k.to_list()) == k
    hw = hardware.GPUS["H100 SXM"]
    pair = sharded.collectives([k], hw, 8)[3]["all-reduce"]
    every = sharded.collectives([dataclasses.replace(k, group=0)], hw, 8)[3]["all-reduce"]
    # an all-reduce moves (g - 1) / g of its bytes over a group of g: a pair's half, not all eight's 7/8
    assert pair == (3, pytest.approx(3e6 * 1 / 2)) and every == (3, pytest.approx(3e6 * 7 / 8))


def test_an_fsdp_tp_plan_holds_about_fsdps_bytes_and_runs_its_collectives_in_groups():
    """On a 2-D mesh of 8 (fsdp 4 x tp 2) XLA:GPU's plan of a train step holds about what the fsdp split holds and
    its collectives run within groups of 2 and of 4. Without ``residual_layout`` the stream between layers was
    split along d over the groups too and moved each layer: twice fsdp's bytes."""

    from jaxgpu.ground import hardware, launches
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 512, 8, 2, 1024, 4000, 2048, "llama")
    both = planner.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=StepSettings(mesh="fsdp+tp"))
    fsdp = planner.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=StepSettings(mesh="fsdp"))
    assert both.mesh == "fsdp 4 x tp 2" and fsdp.mesh == "fsdp" and both.plan == "xla:gpu h100"
    assert both.bytes_per_device < 1.25 * fsdp.bytes_per_device, (both.bytes_per_device, fsdp.bytes_per_device)
    four = planner.plan_model(c, "h100", batch=8, seq=256, devices=8, settings=StepSettings(mesh="fsdp+tp", tp=4))
    assert four.mesh == "fsdp 2 x tp 4" and "fsdp+tp mesh (tp 4)" in four.settings
    devs, label = sharded.devices_for(hardware.GPUS["H100 SXM"], 8)
    mesh = sharding.mesh_for(devs, "fsdp+tp")
    step, specs, sh = programs.decoder_step(c, "train", 8, 256, mesh, "fsdp+tp", StepSettings(mesh="fsdp+tp"))
    placed = [jax.tree.map(lambda s, h: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=h), a, b)
              for a, b in zip(specs, sh)]
    hlo = step.lower(*placed).compile().as_text()
    groups = {k.group for k in launches.kernels(hlo) if re.match(r"(all-reduce|all-gather|reduce-scatter)", k.name)}
    assert {2, 4} <= groups, groups


def test_the_command_prices_a_described_decoder_as_the_library_does(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    dims = dict(layers=2, d_model=256, heads=8, kv_heads=2, ffn=512, vocab=1000)
    cmd = [sys.executable, "-m", "experiments.model", "--serve", "--batch", "2", "--seq", "256", "--devices", "1,2",
           "--gpus", "h200,a100", "--out", str(tmp_path / "plan")]
    cmd += [a for k, v in dims.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "H200 SXM" in proc.stdout and "A100 80GB" in proc.stdout and "predicted, not run" in proc.stdout
    got = json.loads((tmp_path / "plan.json").read_text())
    c = Decoder("described", dims["layers"], dims["d_model"], dims["heads"], dims["kv_heads"], dims["ffn"],
                  dims["vocab"], 2048, "llama")
    want = [dataclasses.asdict(p) for p in planner.model_on_gpus(c, train=False, batch=2, seq=256, devices=(1, 2),
                                                                gpus=["h200", "a100"])]
    assert len(got) == 4
    for g, w in zip(got, want):
        assert g["gpu"] == w["gpu"] and g["devices"] == w["devices"] and g["plan"] == w["plan"]
        for key in ("bytes_per_device", "seconds", "tokens_per_s", "mfu", "comm_s"):
            assert g[key] == pytest.approx(w[key], rel=1e-9), key
    assert (tmp_path / "plan.csv").read_text().startswith("gpu,devices,bytes_per_device")


def test_the_command_splits_a_step_fsdp_tp_as_the_library_does(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    cmd = [sys.executable, "-m", "experiments.model", "--train", "--batch", "4", "--seq", "128", "--devices", "4,8",
           "--gpus", "h100", "--mesh", "fsdp+tp", "--tp", "2", "--out", str(tmp_path / "plan"), "--layers", "2",
           "--d-model", "256", "--heads", "8", "--kv-heads", "2", "--ffn", "512", "--vocab", "1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr.startswith("written: "), proc.stderr
    assert "fsdp+tp mesh (tp 2)" in proc.stdout and "4 (fsdp 2 x tp 2)" in proc.stdout  # the grid at each count
    got = json.loads((tmp_path / "plan.json").read_text())
    assert [g["mesh"] for g in got] == ["fsdp 2 x tp 2", "fsdp 4 x tp 2"]
    assert (tmp_path / "plan.csv").read_text().splitlines()[1].endswith(",fsdp 2 x tp 2")
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    want = planner.plan_model(c, "h100", batch=4, seq=128, devices=8, settings=StepSettings(mesh="fsdp+tp", tp=2))
    assert got[1]["bytes_per_device"] == want.bytes_per_device and got[1]["seconds"] == pytest.approx(want.seconds)


def test_the_model_command_keeps_the_compilers_lines_off_the_terminal(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--model", "Llama3-8B", "--serve", "--gpus",
                           "h100", "--devices", "1", "--batch", "1", "--seq", "256"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("llama3-8b, one decode step"), proc.stderr
    assert proc.stderr == ""
    assert (tmp_path / "jaxgpu" / "compiler.log").exists()


@pytest.mark.parametrize("argv, said", [
    (["--model", "lama-7b"], "unknown model 'lama-7b'; did you mean 'llama-7b'?"),
    (["--layers", "2"], "name a model (--model llama-7b; --list shows them) or describe one"),
    (["--model", "llama-7b", "--devices", "0"], "--devices takes counts from 1 to 1024"),
    (["--model", "llama-7b", "--gpus", "tpu"], "--gpus: unknown GPU 'tpu'"),
    (["--model", "llama-7b", "--batch", "0"], "--batch must be at least 1"),
    (["--model", "llama-7b", "--out", "/proc/nowhere/plan"], "--out: cannot create /proc/nowhere"),
    (["--model", "llama-7b", "--serve", "--bf16"], "--bf16 sets a train step's weights"),
    (["--model", "llama-7b", "--remat", "dots"], "--remat: unknown remat policy 'dots'"),
    (["--model", "llama-7b", "--nodes", "2"], "--nodes went: --devices counts every GPU"),
    (["--model", "llama-7b", "--devices", "12"], "past one node, GPUs come in whole nodes of 8: 12 do not"),
    (["--model", "llama-7b", "--accumulate", "0"], "--accumulate: accumulate must be at least 1 micro-batch"),
    (["--model", "llama-7b", "--weights", "int8"], "--weights int8 stores a decode step's weights (--serve) or a LoRA"),
    (["--model", "llama-7b", "--serve", "--lora", "8"], "--lora trains adapters: a training step's setting (--train)"),
    (["--model", "llama-7b", "--lora", "-1"], "--lora takes an adapter rank, 1 or more, got -1"),
    (["--model", "llama-7b", "--weights", "nf4"], "--weights nf4 is QLoRA's frozen base: give --lora R too"),
    (["--model", "llama-7b", "--lora", "8", "--weights", "fp8"], "an fp8 base is not built"),
    (["--model", "llama-7b", "--tokens", "0"], "--tokens takes a count of tokens such as 1e9, got 0"),
    (["--model", "llama-7b", "--price", "h100=2"], "--price prices the time to --tokens N; give --tokens too"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "h100=two"], "--price takes GPU=USD_PER_HOUR"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "tpu=2"], "--price: unknown GPU 'tpu'"),
    (["--model", "llama-7b", "--tokens", "1e9", "--price", "h100=-1"], "a price per hour must be above 0"),
    (["--model", "llama-7b", "--accumulate", "3"], "a node's batch of 8 does not split into 3 micro-batches"),
    (["--model", "llama-7b", "--serve", "--tokens", "1e9", "--generate", "0"], "--generate takes the tokens"),
    (["--config", "/nonexistent/config.json"], "--config: cannot read /nonexistent/config.json"),
    (["--model", "llama-7b", "--config", "x.json"], "name one decoder: --model, --config PATH, or --layers"),
    (["--config", "/proc/self/status"], "--config: /proc/self/status is not JSON"),
    (["--model", "llama-7b", "--mesh", "pp"], "argument --mesh: invalid choice: 'pp'"),
    (["--model", "llama-7b", "--serve", "--mesh", "dp"], "the dp mesh splits a training step's batch"),
    (["--model", "llama-7b", "--tp", "2"], "--tp sizes the tensor-parallel groups of the fsdp+tp or zero1+tp mesh"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "-2"], "--tp takes the GPUs of a group, 1 or more, got -2"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "3"], "none of the default counts (1, 8) splits into"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "2", "--devices", "1,8"], "1 GPU does not split into"),
    (["--model", "llama-7b", "--mesh", "fsdp+tp", "--tp", "16", "--fit"], "none of the default counts (1, 2, 4, 8)"),
    (["--model", "llama-7b", "--mlp", "geglu"], "--head-dim and --mlp describe a decoder"),
    (["--model", "llama-7b", "--xla-flag", "latency_hiding"], "--xla-flag takes NAME=VALUE with an XLA flag's name"),
    (["--model", "llama-7b", "--overlap", "nccl"], "argument --overlap: invalid choice: 'nccl'"),
    (["--layers", "2", "--d-model", "250", "--heads", "4", "--kv-heads", "2", "--ffn", "8", "--vocab", "9"],
     "must split into --heads (4) unless --head-dim is given"),
])
def test_the_command_refuses_bad_input_in_one_line(argv, said):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "experiments.model", *argv], capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("experiments.model")]
    assert proc.returncode == 2 and len(lines) == 1 and said in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_mode_plans_and_pure_bf16_holds_less_than_mixed_precision():
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = {m: planner.plan_model(c, "h200", mode=m, batch=4, seq=256, devices=2) for m in planner.MODES}
    assert all(p.plan == "xla:gpu h200" and p.bytes_per_device > 0 and p.seconds > 0 for p in plans.values())
    assert plans["train_bf16"].bytes_per_device < plans["train"].bytes_per_device  # 2-byte weights and moments
    assert plans["prefill"].tokens_per_s > plans["serve"].tokens_per_s  # a prompt's tokens go through at once
    with pytest.raises(KeyError, match="unknown mode 'pretrain'"):
        planner.plan_model(c, "h200", mode="pretrain")


def test_the_settings_price_through_the_public_api():
    import jaxgpu
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    base = jaxgpu.plan_model(GEGLU, "h100", batch=4, seq=256, devices=8)
    assert base.settings.startswith("remat none") and base.internode_s == 0 and base.nodes == 1
    fp8 = jaxgpu.plan_model(GEGLU, "h100", batch=4, seq=256, devices=8, settings=StepSettings(matmul="fp8"))
    assert fp8.seconds > 0 and "fp8 products" in fp8.settings
    two = jaxgpu.plan_model(GEGLU, "h100", batch=4, seq=256, devices=8, settings=StepSettings(nodes=2))
    assert two.nodes == 2 and two.internode_s > 0 and two.comm_s >= two.internode_s
    # each node runs half the batch: the step's own share is the smaller, the tokens per step the same
    assert two.tokens_per_s * two.seconds == pytest.approx(base.tokens_per_s * base.seconds)
    unrolled = jaxgpu.plan_model(GEGLU, "h100", batch=4, seq=256, devices=1, settings=StepSettings(scan=False))
    assert unrolled.seconds > 0
    rows = planner.model_on_gpus(GEGLU, batch=4, seq=256, devices=(8,), gpus=["h100", "a100", "l4"],
                                settings=StepSettings(matmul="fp8", nodes=2))
    said = {r.gpu: getattr(r, "reason", "") for r in rows}
    assert said["H100 SXM"] == "" and "no fp8 matrix units" in said["A100 80GB"] and "no network" in said["L4"]
    with pytest.raises(ValueError, match="a training step's settings"):
        jaxgpu.plan_model(GEGLU, "h100", mode="serve", settings=StepSettings(remat="dots_saveable"))
    with pytest.raises(ValueError, match="does not split over 3 nodes"):
        jaxgpu.plan_model(GEGLU, "h100", batch=4, settings=StepSettings(nodes=3))
    with pytest.raises(ValueError, match="batch of 2 does not split into 4 micro-batches"):
        jaxgpu.plan_model(GEGLU, "h100", batch=4, settings=StepSettings(nodes=2, accumulate=4))
    # micro-batches: the same tokens a step in less memory (each micro-batch's activations, not the batch's)
    # a batch of 64 on 8 GPUs: each micro-batch two rows a GPU (a micro-batch of fewer rows than the GPUs splitting
    # it, XLA 0.11 holds whole on each: its SPMD partitioner's "involuntary full rematerialization")
    whole = jaxgpu.plan_model(GEGLU, "h100", batch=64, seq=256, devices=8)
    four = jaxgpu.plan_model(GEGLU, "h100", batch=64, seq=256, devices=8, settings=StepSettings(accumulate=4))
    assert four.bytes_per_device < whole.bytes_per_device
    assert four.tokens_per_s * four.seconds == pytest.approx(64 * 256)
    assert four.memory_split["temporaries"] < 0.6 * whole.memory_split["temporaries"]  # as XLA's plan reports them
    assert "4 micro-batches" in four.settings


@pytest.mark.slow
def test_llama_7b_fits_8_h100s_at_16_x_4096_when_the_weights_products_are_saved():
    """The published 7B runs trained at 16 x 4096 on 8 H100s with activation checkpointing that keeps the matmul
    outputs: the plan of that step fits; without remat it says what it would need (more: 58 GB a GPU, within JAX's
    60 GB share of an H100 since the activations keep only the products' inputs, where it was 90 GB); and
    recomputing everything is not what it needs."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    plans = {r: planner.plan_model("llama-7b", "h100", batch=16, seq=4096, devices=8, settings=StepSettings(remat=r))
             for r in ("none", "dots_with_no_batch_dims_saveable", "nothing_saveable")}
    saved = plans["dots_with_no_batch_dims_saveable"]
    assert plans["none"].bytes_per_device > 1.1 * saved.bytes_per_device  # it says what it would need
    assert saved.fits and saved.bytes_per_device > plans["nothing_saveable"].bytes_per_device
    assert saved.seconds < plans["nothing_saveable"].seconds  # recomputing less costs less


def test_the_model_command_prices_a_decode_step_as_the_published_set_does(monkeypatch):
    """XLA:GPU's plan of a scanned decode (jax 0.10) copies each layer's weights out of the stack (its dynamic-slice
    fusions): the published serving runs hold each layer apart, and so do plan_model's decode steps by default, so
    the command and the validation set price the same program. (jax 0.11's plan reads each layer's weights from the
    stack in place, its GEMMs inside the dynamic-slice fusions, and prices the scanned step near the unrolled one.)"""
    from jaxgpu.ground import launches
    from jaxgpu.pricing import published, roofline, targets

    if why := targets.unavailable():
        pytest.skip(why)
    case = next(c for c in published.CASES if c.id == "torchao-llama2-7b-decode-a100")
    fn, args = published.program(case)
    checked = roofline.predict(fn, *args, on="A100 80GB").estimate_s
    plan = planner.plan_model("llama-7b", "A100 80GB", train=False, batch=1, seq=case.program[3], devices=1)
    assert "unrolled layers" in plan.settings and plan.plan == "xla:gpu a100"
    assert plan.seconds == pytest.approx(checked, rel=0.10)
    compiled, hlos = sharded.compiled, []

    def kept(*args, **kwargs):
        out = compiled(*args, **kwargs)
        hlos.append(out[1])
        return out

    monkeypatch.setattr(sharded, "compiled", kept)
    monkeypatch.setattr(planner, "_answered", lambda key: None)  # priced afresh: its plans pass by
    scanned = planner.plan_model("llama-7b", "A100 80GB", train=False, batch=1, seq=case.program[3], devices=1,
                                settings=StepSettings(scan=True, flash=False))
    # the weights a layer's products read, and how: copied out of the stack by a kernel of their own, or in place
    ks = launches.kernels(hlos[-1])
    copies = sum(k.bytes * k.count for k in ks if not k.is_dot and "dynamic_slice" in k.name)
    if copies > 10e9:  # 13.5 GB of weights, read and written again: the copies of every layer's weights
        assert scanned.seconds > 2 * plan.seconds
    else:
        assert any(k.is_dot and "dynamic_slice" in k.name for k in ks)  # the GEMMs slice the stack themselves
        assert scanned.seconds == pytest.approx(plan.seconds, rel=0.2)


def test_async_collectives_run_under_the_compute_and_only_the_rest_is_added():
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    p = planner.plan_model(GEGLU, "h100", batch=8, seq=256, devices=8)
    assert p.overlapped_s > 0  # the fsdp step's all-gathers and reduce-scatters are async pairs in XLA:GPU's plan
    assert p.lower_s <= p.seconds <= p.upper_s
    # the bound without the schedule's overlap prices every collective whole
    assert p.upper_s - p.seconds >= p.overlapped_s * (1 - 1e-9)
    one = planner.plan_model(GEGLU, "h100", batch=8, seq=256, devices=1)
    assert one.overlapped_s == 0 and one.comm_s == 0


@pytest.mark.slow
def test_a_published_jax_7b_steps_weight_gathers_run_under_its_compute():
    """NVIDIA/JAX-Toolbox @db096881 rosetta/rosetta/projects/maxtext/README.md: MaxText Llama-2 7B, 8 H100 80G SXM,
    BF16, sequence 4096, 2 sequences a GPU (global 16), FSDP 8, remat policy minimal_flash, scan off ("0.721" s a
    step: scored in the report with the other published cases). FSDP gathers each layer's bf16 weights for the
    forward pass and again for the backward, 7/8 of them a GPU; XLA:GPU's plan runs them asynchronously, so the
    step adds next to none of their time: XLA's schedule starts each a layer ahead, under the products."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    p = planner.plan_model("llama-7b", "h100", batch=16, seq=4096, devices=8,
                           settings=StepSettings(remat="dots_with_no_batch_dims_saveable", scan=False))
    weights = decoders.MODELS["llama-7b"].params()
    assert p.collectives["all-gather"][1] == pytest.approx(2 * 2 * weights * 7 / 8, rel=0.05)
    # under the compute: what they add is the compute's slowdown while they run (the card's interference share)
    slowed = hardware.find_gpu("h100").share("interference").value * p.overlapped_s
    assert p.comm_s - slowed < 0.01 * p.seconds and p.overlapped_s > 0.05
    assert p.upper_s > p.seconds + p.overlapped_s  # compute, memory and the gathers one after another: slower


# One collective of each kind over 8 devices, as XLA:GPU prints its asynchronous start in each JAX version: the
# result type lists the inputs beside the results, or does not, differently by kind and version (jax 0.10.2's
# cuda12 plugin and 0.11.2's cuda13 plugin, read off their plans of the same programs).
_STARTS = {
    "all-gather": ["(f32[32,512]{1,0}, f32[256,512]{1,0})"],
    "reduce-scatter": ["((f32[256,512]{1,0}), f32[32,512]{1,0})"],
    "all-to-all": ["((f32[256,512]{1,0}), f32[256,512]{1,0})"],
    "collective-permute": ["(f32[256,512]{1,0}, f32[256,512]{1,0})"],
    "all-reduce": ["f32[256,512]{1,0}", "((f32[256,512]{1,0}), f32[256,512]{1,0})"],  # 0.10.2, 0.11.2
}


_INPUTS = {"all-gather": "f32[32,512]{1,0}", "reduce-scatter": "f32[256,512]{1,0}"}


def _program(op: str, result: str, start: bool) -> str:
    operand = _INPUTS.get(op, "f32[256,512]{1,0}")
    done = result.rsplit(", ", 1)[-1].rstrip(")") if result.startswith("(") else result
    call = (f"  %{op}-start.1 = {result} {op}-start(%p), replica_groups=[1,8]<=[8]\n"
            f"  ROOT %{op}-done.1 = {done} {op}-done(%{op}-start.1)" if start
            else f"  ROOT %{op}.1 = {done} {op}(%p), replica_groups=[1,8]<=[8]")
    head = f"HloModule m, num_partitions=8\n\nENTRY %main (p: {operand}) -> {done} {{\n  %p = {operand} parameter(0)\n"
    return f"{head}{call}\n}}\n"


@pytest.mark.parametrize("op", sorted(_STARTS))
def test_an_async_collective_moves_what_a_synchronous_one_of_its_size_moves(op):
    """A -start's result may hold its inputs beside its results (XLA:GPU's plan, by kind and JAX version): its
    bytes are its results' and inputs', as a synchronous collective's are, and it is priced alike, hidden."""
    from jaxgpu.ground import hardware, launches, stack

    hw = hardware.GPUS["H100 SXM"]
    sync_hlo = _program(op, _STARTS[op][0], start=False)
    (sync,) = launches.kernels(sync_hlo)
    _, alone, _, once = sharded.collectives([sync], hw, 8)
    for result in _STARTS[op]:
        hlo = _program(op, result, start=True)
        ks = launches.kernels(hlo)
        started = [k for k in ks if k.name.startswith(f"{op}-start")]
        assert started and started[0].bytes == sync.bytes, (op, result, [(k.name, k.bytes) for k in ks], sync.bytes)
        assert stack.collectives(hlo) == stack.collectives(sync_hlo), (op, result)
        hidden, exposed, rest, counts = sharded.collectives(ks, hw, 8)
        assert alone > 0 and hidden == pytest.approx(alone) and exposed == 0 and counts[op] == pytest.approx(once[op])
        assert all(not k.name.startswith(op) for k in rest)


def test_a_quantised_decode_is_priced_on_the_plan_xla_would_pick():
    """int8 weights: XLA's autotuner picks the Triton GEMM that widens them inside the product, where cuBLAS's plan
    needs a kernel that writes a wide copy first; plan_model prices both and keeps the cheaper, as predict does."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("two-wide", 2, 4096, 32, 32, 11008, 256, 256, "llama")  # its weights' bytes bind a decode step
    plans = {w: planner.plan_model(c, "a100", mode="serve", batch=1, seq=64, settings=StepSettings(
        flash=False, scan=False, weights=w)) for w in ("bf16", "int8")}
    assert plans["int8"].plan == "xla:gpu a100, triton gemm" and plans["bf16"].plan == "xla:gpu a100"
    # fewer bytes read, the widening inside the product (on the 7B: 6.8 ms against 8.8, as the published int8 runs)
    assert plans["int8"].seconds < 0.85 * plans["bf16"].seconds


def test_the_time_to_n_tokens_is_steps_at_the_predicted_step_time(tmp_path):
    """--tokens: training's steps of batch x seq tokens (all nodes' at once), a decode's tokens at its tokens/s;
    GPU-hours over every GPU; a user's price per hour; the band the committed check's median error of the kind."""
    from types import SimpleNamespace

    from experiments import model

    train = SimpleNamespace(mode="train", batch=16, seq=4096, seconds=0.7, devices=8, nodes=2, tokens_per_s=0.0)
    k = model.to_tokens(train, 16 * 4096 * 1000, price=2.0)
    assert k["to_tokens_s"] == pytest.approx(700) and k["gpu_hours"] == pytest.approx(700 * 16 / 3600)
    assert k["cost_usd"] == pytest.approx(2 * 700 * 16 / 3600)
    serve = SimpleNamespace(mode="serve", batch=8, seq=2048, seconds=0.01, devices=1, nodes=1, tokens_per_s=800.0)
    assert model.to_tokens(serve, 8000)["to_tokens_s"] == pytest.approx(10) and "cost_usd" not in model.to_tokens(
        serve, 8000)
    # each sequence's prompt once: 8000 tokens, 100 a sequence, 8 sequences a prefill of 0.5 s: 10 prefills
    k = model.to_tokens(serve, 8000, prefill=SimpleNamespace(seconds=0.5), generate=100)
    assert k["to_tokens_s"] == pytest.approx(10 + 5) and k["prefill_s"] == pytest.approx(5)
    assert model._duration(42) == "42 s" and model._duration(3 * 3600) == "3 h" and model._duration(5 * 86400) == \
        "5 days"
    # out of sample: the interval of the training steps' first prices, as the committed report's table has it
    import csv

    table = Path(__file__).resolve().parents[1] / "reports" / "study" / "tables" / "gpu_model-1.csv"
    with table.open() as f:
        rows = {r[0]: r for r in csv.reader(f)}
    assert rows["kind"][1:5] == ["out of sample: cases", "median |error|", "bias", "90% of cases"]
    for mode, kind in (("train", "train"), ("serve", "decode + prefill")):
        checked = model.band(mode)
        if isinstance(checked, tuple):
            assert f"{checked[0]:.2f}x to {checked[1]:.2f}x" == rows[kind][4] and str(checked[2]) == rows[kind][1]
        else:  # too few for an interval: the count alone, as the table says
            assert str(checked) == rows[kind][1] and rows[kind][4].startswith("none")
    assert model.band("train")[2] >= 12


@pytest.mark.slow
def test_the_formula_honours_remat_on_a_70b_step_over_128_gpus():
    """Llama-3 70B, 256 x 8192 tokens over 128 H100s, each layer recomputed: the formula counts each layer's input,
    not every value (which said 466 GB a GPU for a plan of 53 GB), and lands within 2x of XLA's plan."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    s = dataclasses.replace(planner.default_settings("train"), remat="nothing_saveable")
    p = planner.plan_model("llama3-70b", "H100 SXM", mode="train", batch=256, seq=8192, devices=128, settings=s)
    assert 0.5 <= p.estimate_bytes / p.bytes_per_device <= 2, (p.estimate_bytes, p.bytes_per_device)
    assert "under remat nothing_saveable: each layer's input" in planner.formula_vs_plan(p)


@pytest.mark.slow
def test_formula_and_plan_agree_within_15_percent_on_every_named_configs_serve_step():
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    for name in decoders.MODELS:
        p = planner.plan_model(name, "H100 SXM", train=False, batch=8, seq=1024, devices=1)
        assert p.estimate_bytes == pytest.approx(p.bytes_per_device, rel=0.15), name
        assert set(p.memory_split) == set(sharded.MEMORY_PARTS) and set(p.estimate_parts) == {"weights", "kv_cache"}
        said = planner.formula_vs_plan(p)
        assert said.startswith("the formula counts") and "XLA's plan holds" in said, said


def test_a_prefills_formula_counts_one_layers_values_and_the_plan_holds_the_scores_beside_them(monkeypatch):
    """A prompt's layers run in turn: the formula counts the weights and one layer's values. XLA's plan of a flash
    prefill as written holds about one layer's float32 scores more (the program computes them whole), which the
    sentence names; the plan of its twin that runs the attention a block of queries at a time holds a block's, and
    is the one read where the scores come to a twentieth of the plan. The time is the step's own either way."""
    from jaxgpu.pricing import fit, targets

    t = Decoder("t", 2, 256, 8, 2, 512, 1000, 2048, "llama", tied=True)
    one = fit.transformer_prefill(t, "bf16", 1024, 4)
    assert one["weights"] == 2 * t.formula_params()
    assert one["activations"] == 4 * 1024 * 2 * (3 * 256 + 2 * 256 + 2 * 64 + 3 * 512)
    assert fit.transformer_prefill(t, "bf16", 1024, 4, flash=False)["activations"] == (
        one["activations"] + 4 * 4 * 8 * 1024 * 1024)  # float32 scores
    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    with monkeypatch.context() as m:
        m.setattr(planner, "SCORES_SHARE", float("inf"))  # the step as written
        for seq in (256, 2048):
            p = planner.plan_model(c, "h100", mode="prefill", batch=4, seq=seq, devices=1)
            assert set(p.estimate_parts) == {"weights", "activations"} and p.scores_bytes == 4 * 8 * seq * seq * 4
            extra = p.memory_split["temporaries"] - p.estimate_parts["activations"]
            assert extra > 0.7 * p.scores_bytes, (seq, extra, p.scores_bytes)
            assert p.query_block == 0
        # at 2,048 tokens the scores are most of it (at 256, XLA 0.11's plan holds 21 MB of its own beside 8 MB of
        # them, 0.10's none): the excess is about a layer's scores, and the sentence names them
        assert extra < 1.2 * p.scores_bytes and "attention scores" in planner.formula_vs_plan(p)
    blocked = planner.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1)
    # the largest block of 2,048 whose scores (537 MB a layer) a GPU holds in about 256 MB: 512 queries
    assert blocked.query_block == 512 and blocked.seconds == p.seconds and blocked.written_bytes == p.bytes_per_device
    block_scores = p.scores_bytes * blocked.query_block / 2048  # what a block holds at once, not a layer's
    assert blocked.bytes_per_device < p.bytes_per_device - p.scores_bytes + 2 * block_scores
    said = planner.formula_vs_plan(blocked)
    assert f"run {blocked.query_block} queries at a time" in said and "by about a block's attention scores" in said
    off = planner.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1,
                            settings=StepSettings(flash=False))
    assert off.scores_bytes == 0 and off.query_block == 0 and "attention scores" not in planner.formula_vs_plan(off)
    assert off.estimate_bytes == pytest.approx(off.bytes_per_device, rel=0.15)  # without flash both count them
    asked = planner.plan_model(c, "h100", mode="prefill", batch=4, seq=2048, devices=1,
                              settings=StepSettings(query_block=256))  # blocks the user set: no twin, a block's
    assert asked.query_block == 256 and asked.written_bytes == 0 and asked.scores_bytes == p.scores_bytes / 8


def test_a_layers_scores_a_gpu_are_cut_only_by_the_axes_that_cut_the_attention():

    assert [decoders.keys_seen(s, w) for s, w in ((8192, 0), (32768, 1024), (8192, 8192), (3000, 1024))] == [
        8192, 2048, 8192, 3000]  # banded only over whole windows past one
    flash = StepSettings()
    c = decoders.MODELS["gpt2-1.5b"]  # 25 heads: tp over 8 GPUs keeps the attention whole on each
    whole = 4.0 * 25 * 1024 * 1024 * 32
    assert planner._scores_bytes(c, "prefill", 32, 1024, flash, "tp", {sharding.AXIS: 8}) == whole
    assert planner._scores_bytes(c, "prefill", 32, 1024, flash, "fsdp", {sharding.AXIS: 8}) == whole / 8
    # a batch of 4 does not split over 8
    assert planner._scores_bytes(c, "prefill", 4, 1024, flash, "fsdp", {sharding.AXIS: 8}) == whole / 32 * 4
    llama = decoders.MODELS["llama-7b"]  # 32 heads: tp cuts them; fsdp+tp's groups cut a batch of 1 by its queries
    one = 4.0 * 32 * 4096 * 4096
    assert planner._scores_bytes(llama, "prefill", 1, 4096, flash, "tp", {sharding.AXIS: 8}) == one / 8
    two_d = {sharding.AXIS: 4, sharding.MODEL: 2}
    assert planner._scores_bytes(llama, "prefill", 1, 4096, flash, "fsdp+tp", two_d) == one / 8
    assert planner._scores_bytes(llama, "train", 8, 4096, dataclasses.replace(flash, accumulate=2), "fsdp",
                                {sharding.AXIS: 8}) == 4 * one / 1  # 4 sequences a micro-batch do not split over 8
    assert planner._scores_bytes(llama, "prefill", 1, 4096, dataclasses.replace(flash, query_block=512), "fsdp",
                                {sharding.AXIS: 1}) == one / 8  # a block's
    assert planner._scores_bytes(llama, "serve", 8, 4096, StepSettings(flash=False, scan=False), "tp", {}) == 0


def test_the_formula_and_its_difference_from_the_plan_are_printed_beside_it():
    from jaxgpu.pricing import targets

    from experiments import model

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = planner.model_on_gpus(c, train=True, batch=4, seq=256, devices=(1,), gpus=["h100"])
    rows = model.table(plans)
    assert rows[0][2:4] == ["per GPU", "formula"]
    p = plans[0]
    assert p.estimate_bytes == pytest.approx(sum(p.estimate_parts.values()))
    assert p.bytes_per_device == pytest.approx(p.memory_split["arguments"] + p.memory_split["outputs"]
                                               + p.memory_split["temporaries"] - p.memory_split["aliased"])
    lines = model.formula_lines(plans)
    assert len(lines) == 1 and lines[0].startswith("per GPU on 1 H100 SXM: the formula counts")
    assert "gradients and the copy" in lines[0]


def test_a_sequence_longer_than_learned_positions_is_refused_in_words():

    with pytest.raises(ValueError, match="gpt2-124m has 1,024 learned positions"):
        planner.plan_model("gpt2-124m", "h100", train=True, seq=2048)


def test_fit_finds_the_fewest_gpus_whose_plan_holds_the_step_or_says_more_than(monkeypatch):
    """``fewest`` agrees with compiling every count: the smallest whose XLA plan fits; past the last, the plan of
    the most, not fitting ("more than 8")."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 512, 8, 2, 1024, 4000, 2048, "llama")
    every = {n: planner.plan_model(c, "h100", train=True, batch=8, seq=256, devices=n).bytes_per_device
             for n in planner.NODE}
    assert every[1] > every[2] > every[4]
    card = planner.hardware.find_gpu("h100").device_bytes  # what "fits" is a share of: the memory the card reports
    cap = (every[2] + every[4]) / 2  # between two and four GPUs' shares: four is the fewest
    monkeypatch.setattr(sharded, "USABLE_FRACTION", cap / card)
    fsdp = StepSettings(mesh="fsdp")
    p = planner.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp)
    assert p.fits and p.devices == 4
    monkeypatch.setattr(sharded, "USABLE_FRACTION", min(every.values()) / 2 / card)
    p = planner.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp)
    assert not p.fits and p.devices == 8
    assert planner.fewest(c, "h100", train=True, batch=8, seq=256, counts=(1, 2), settings=fsdp).devices == 2
    # the mesh left to the mode: tp is tried on fewer GPUs too, and kept only where it holds the step on fewer
    tp2 = planner.plan_model(c, "h100", train=True, batch=8, seq=256, devices=2,
                            settings=StepSettings(mesh="tp")).bytes_per_device
    # on two GPUs, which split holds less is XLA's plan's to say (tp on jax 0.10, fsdp on 0.11); with the card
    # between the two, two GPUs hold the step on that one, and only there
    monkeypatch.setattr(sharded, "USABLE_FRACTION", (tp2 + every[2]) / 2 / card)
    fewest = planner.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp)
    assert fewest.devices == (4 if tp2 < every[2] else 2)
    p = planner.fewest(c, "h100", train=True, batch=8, seq=256)
    assert p.fits and p.devices == 2 and p.mesh == ("tp" if tp2 < every[2] else "fsdp")
    # fsdp+tp, on four GPUs and more, where the mode's own came near there: kept where it alone holds the step
    both4, tp4 = (planner.plan_model(c, "h100", train=True, batch=8, seq=256, devices=4,
                                    settings=StepSettings(mesh=m)).bytes_per_device for m in ("fsdp+tp", "tp"))
    assert both4 < min(every[4], tp4)  # this decoder's activations, cut by tp within each pair, hold less
    monkeypatch.setattr(sharded, "USABLE_FRACTION", (both4 + min(every[4], tp4)) / 2 / card)
    p = planner.fewest(c, "h100", train=True, batch=8, seq=256)
    assert p.fits and p.devices == 4 and p.mesh == "fsdp 2 x tp 2"
    assert planner.fewest(c, "h100", train=True, batch=8, seq=256, settings=fsdp).devices == 8
    # where no count holds it on the mode's own mesh, the others are tried on the most too: a batch of 4 does not
    # split over 8 GPUs under fsdp, but does over fsdp+tp's 4 pairs
    fsdp8, both8 = (planner.plan_model(c, "h100", train=True, batch=4, seq=512, devices=8,
                                      settings=StepSettings(mesh=m)).bytes_per_device for m in ("fsdp", "fsdp+tp"))
    assert both8 < fsdp8
    monkeypatch.setattr(sharded, "USABLE_FRACTION", (both8 + fsdp8) / 2 / card)
    p = planner.fewest(c, "h100", train=True, batch=4, seq=512)
    assert p.fits and p.devices == 8 and p.mesh == "fsdp 4 x tp 2"


def test_the_fit_option_prints_the_fewest_per_gpu(tmp_path):
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "experiments.model", "--train", "--fit", "--gpus", "h100,l4", "--batch", "4",
           "--seq", "256", "--tokens", "1e9", "--layers", "2", "--d-model", "256", "--heads", "8", "--kv-heads", "2",
           "--ffn", "512", "--vocab", "1000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "per GPU the fewest of 1, 2, 4, 8 that hold it" in proc.stdout

    rows = [re.split(r"\s{2,}", ln) for ln in proc.stdout.splitlines() if ln.startswith(("H100 SXM", "L4 "))]
    assert [r[:2] for r in rows] == [["H100 SXM", "1 (fsdp)"], ["L4", "1 (fsdp)"]], rows  # small: one holds it


def test_a_figure_per_answer_memory_by_kind_against_each_card_and_time_by_kernel_kind(tmp_path):
    """The model command's figure (--out PATH writes PATH.png), by the report's palette rules; each bar's parts sum
    to the plan's bytes and its predicted device time."""
    from jaxgpu.pricing import targets
    from jaxgpu.records import figures

    from tests import test_palette

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    plans = planner.model_on_gpus(c, train=True, batch=4, seq=256, devices=(1, 2), gpus=["h100", "a100"])
    for p in plans:
        # each kind priced alone: within a tenth of the step priced whole (a tiny step's launches weigh most)
        assert set(p.time_split) == set(sharded.KINDS) and sum(p.time_split.values()) == pytest.approx(p.seconds,
                                                                                                       rel=0.1)
        # 75% of what the card reports: 81,559 MiB for an H100, 81,920 MiB for an A100 80GB
        assert p.capacity == pytest.approx(0.75 * {"H100 SXM": 81559, "A100 80GB": 81920}[p.gpu] * 2**20)
    fig = figures.step_figure(plans, "a described decoder")
    fig.draw_without_rendering()
    plot = [figures.Plot("step", fig, "")]
    test_palette.check_colours(plot)
    test_palette.check_legends(plot)
    test_palette.check_labels(plot)
    bars = [b for b in fig.axes[0].patches if b.get_gid() == "variant:held between steps"]
    assert len(bars) == 4


def test_the_command_plans_a_config_json_for_training_and_serving(tmp_path):
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**TINY_HF, "foo": 1}))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for mode in ("--train", "--serve"):
        proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), mode, "--gpus", "h100",
                               "--devices", "1", "--batch", "2", "--seq", "16"], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("tiny, one ") and "xla:gpu h100" in proc.stdout
        assert "fields not read, which the plan does not reflect: foo" in proc.stdout
    path.write_text(json.dumps({**TINY_HF, "hidden_act": "relu"}))
    proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), "--seq", "64"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "hidden_act ('relu')" in proc.stderr


def test_mixtral_is_counted_as_published_and_its_experts_split_over_the_gpus():
    """Mixtral 8x7B: 46.7 B parameters, 12.9 B read a token (its model card); the formula counts both within 1%;
    on 8 GPUs each holds its own expert's matrices (experts split over devices)."""

    c = decoders.MODELS["mixtral-8x7b"]
    assert 46.6e9 < c.params() < 46.8e9 and 12.8e9 < c.active_params() < 13.0e9
    assert c.formula_params() == pytest.approx(c.params(), rel=0.01)
    mesh = _mesh(4)
    for how in ("fsdp", "tp"):
        specs = sharding.shard_specs(tf.param_specs(MOE)["layers"], mesh, how)
        assert all(specs[k].spec[1] == sharding.AXIS for k in ("w_gate", "w_up", "w_down")), (how, specs)


def test_a_mixtral_shaped_moe_trains_and_serves_on_xla_gpus_plan_its_experts_split(tmp_path):
    """A small Mixtral-shaped decoder (4 experts, 2 a token) through a train step and a decode step, on 1 and 4
    GPUs: XLA:GPU plans both; split over 4 each GPU holds its own expert, and the model FLOPs count the top-k
    experts' weights only. The same through a config.json and the command."""
    import json
    import subprocess
    import sys

    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("moe", 2, 256, 8, 2, 384, 1000, 2048, "llama", experts=4, top_k=2)
    for mode in ("train", "serve"):
        one, four = (planner.plan_model(c, "h100", mode=mode, batch=8, seq=256, devices=n) for n in (1, 4))
        assert one.plan == four.plan == "xla:gpu h100" and four.bytes_per_device < one.bytes_per_device
        assert one.mfu == pytest.approx(one.tokens_per_s * (6 if mode == "train" else 2) * c.active_params()
                                        / 989.4e12, rel=1e-6)
    with pytest.raises(ValueError, match="int8 or fp8 experts are not built"):
        planner.plan_model(c, "h100", mode="serve", settings=StepSettings(flash=False, scan=False, weights="int8"))
    path = tmp_path / "moe" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**TINY_HF, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}))
    assert decoders.from_hf_config(json.loads(path.read_text()), "moe")[0].experts == 4
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for mode in ("--train", "--serve"):
        proc = subprocess.run([sys.executable, "-m", "experiments.model", "--config", str(path), mode, "--gpus", "h100",
                               "--devices", "1,4", "--batch", "4", "--seq", "16"], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0 and proc.stderr == "" and "xla:gpu h100" in proc.stdout, proc.stderr


def test_the_model_commands_question_is_one_frozen_record():
    from experiments import model

    a = model.parse_args(["--model", "Llama3-8B", "--serve", "--gpus", "h100,B200", "--devices", "1,2", "--tokens",
                          "1e6", "--price", "h100=2"])
    assert isinstance(a, model.Asked) and a.gpus == ("H100 SXM", "B200") and a.devices == (1, 2)
    assert (a.mode, a.decoder, a.named, a.prices, a.settings.flash) == ("serve", "Llama3-8B", True,
                                                                        {"H100 SXM": 2.0}, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.batch = 4
    described = model.parse_args(["--layers", "2", "--d-model", "64", "--heads", "4", "--kv-heads", "2", "--ffn",
                                  "128", "--vocab", "256", "--tp", "2", "--mesh", "fsdp+tp"])
    assert described.decoder.layers == 2 and not described.named and described.devices == (8,)
    assert model.parse_args(["--list"]).listing


def _scheduled(*lines: str) -> str:
    """A hand-written plan over 8 GPUs in the order given: ``ar`` starts an all-reduce, ``done`` waits for it
    (``ar2``/``done2`` a second), ``mul`` is a kernel of compute, ``late`` a done before its start (a loop's)."""
    body = {"ar": "%all-reduce-start.1 = f32[1024,1024]{1,0} all-reduce-start(%p), replica_groups=[1,8]<=[8], "
                  "to_apply=%sum",
            "ar2": "%all-reduce-start.2 = f32[1024,1024]{1,0} all-reduce-start(%p), replica_groups=[1,8]<=[8], "
                   "to_apply=%sum",
            "done": "%all-reduce-done.1 = f32[1024,1024]{1,0} all-reduce-done(%all-reduce-start.1)",
            "done2": "%all-reduce-done.2 = f32[1024,1024]{1,0} all-reduce-done(%all-reduce-start.2)"}
    out, n = [], 0
    for line in lines:
        if line == "mul":
            n += 1
            out.append(f"%m.{n} = f32[1024,1024]{{1,0}} multiply(%p, %p)")
        else:
            out.append(body[line])
    return ("HloModule m, num_partitions=8\n\n%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
            "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\n"
            "ENTRY %main (p: f32[1024,1024]) -> f32[1024,1024] {\n  %p = f32[1024,1024]{1,0} parameter(0)\n"
            + "".join(f"  {x}\n" for x in out) + "  ROOT %r = f32[1024,1024]{1,0} bitcast(%p)\n}\n")


def test_an_async_collective_adds_what_the_compute_between_its_start_and_done_does_not_cover():
    """XLA's schedule decides what an async collective runs under: the compute between its -start and its -done.
    A gradients' all-reduce started after the last kernel is waited for whole, however long the step; started
    before the compute, it is hidden up to that compute's length; two in flight run one after the other; a done
    met before its start (a loop that starts the next step's collective) waits for nothing."""
    from jaxgpu.ground import hardware, launches
    from jaxgpu.pricing import roofline

    hw = hardware.GPUS["A100 80GB"]
    roofs = roofline.roofs_for(hw)

    def waited(hlo: str, compute_s: float) -> float:
        ks = launches.kernels(hlo)
        return sharded.waited(ks, hlo, hw, 8, frozenset(), roofs, compute_s)

    t = sharded.collectives(launches.kernels(_scheduled("ar", "done")), hw, 8)[0]  # one all-reduce's seconds
    assert t > 0
    last = _scheduled("mul", "mul", "mul", "mul", "ar", "done")
    assert waited(last, 100 * t) == pytest.approx(t) and waited(last, t / 100) == pytest.approx(t)
    under = _scheduled("ar", "mul", "mul", "mul", "mul", "done")
    assert waited(under, 10 * t) == 0.0  # hidden whole
    assert waited(under, t / 4) == pytest.approx(3 * t / 4)  # what outlasts the compute
    # half the compute before the start: only the other half covers it
    assert waited(_scheduled("mul", "mul", "ar", "mul", "mul", "done"), t) == pytest.approx(t / 2)
    # two in flight share one stream: the second ends 2t after both start
    assert waited(_scheduled("ar", "ar2", "mul", "mul", "done", "done2"), t) == pytest.approx(t)
    assert waited(_scheduled("done", "mul", "ar"), t / 4) == 0.0  # pipelined: started the step before


def test_a_data_parallel_steps_gradient_all_reduce_waits_in_xlas_order_and_not_as_a_framework_buckets_it():
    """XLA:GPU's plan of a dp step sums the gradients after the backward pass: priced on the plan's schedule
    ("plan") that all-reduce adds to the step; a framework that overlaps its buckets ("framework": PyTorch's DDP)
    hides it under the compute, adding only the compute's slowdown while it runs. The run's XLA flags compile into
    the plan (the latency-hiding scheduler)."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    plans = {how: planner.plan_model(GEGLU, "a100", batch=64, seq=256, devices=16, settings=StepSettings(
        mesh="dp", scan=False, overlap=how)) for how in decoders.OVERLAPS}
    slowed = hardware.find_gpu("a100").share("interference").value * plans["framework"].overlapped_s
    assert plans["framework"].comm_s == pytest.approx(slowed) and plans["framework"].overlapped_s > 0
    assert plans["plan"].comm_s > 0.5 * plans["framework"].overlapped_s
    assert plans["plan"].collectives == plans["framework"].collectives  # the same plan, ordered otherwise
    lhs = planner.plan_model(GEGLU, "a100", batch=64, seq=256, devices=16, settings=StepSettings(
        mesh="dp", scan=False, xla=(("xla_gpu_enable_latency_hiding_scheduler", True),)))
    assert lhs.settings.endswith("the run's 1 XLA flag") and lhs.comm_s <= plans["plan"].comm_s
    with pytest.raises(KeyError, match="unknown overlap"):
        StepSettings(overlap="nccl")
    with pytest.raises(ValueError, match="xla flags"):
        StepSettings(xla=("--xla_gpu_enable_latency_hiding_scheduler=true",))
