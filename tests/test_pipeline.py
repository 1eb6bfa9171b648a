"""Pipeline stages: the schedules' bubble, sends and in-flight micro-batches against hand counts, on the schedule's
arithmetic alone and on a small decoder's stage plans; the issue's 70B step over 32 GPUs; what cannot be laid out."""

import dataclasses

import pytest

from jaxgpu.ground import hardware
from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.pricing import pipeline, planner, sharded, targets

SMALL = Decoder("pipe-small", 8, 512, 8, 8, 2048, 512, 256, "llama")


def test_in_flight_micro_batches_are_each_schedules_warm_up():
    """GPipe keeps every micro-batch's activations; 1F1B the stages' count (P - 1 warm-up forwards and one more);
    interleaved 1F1B Megatron's warm-up, 2 (P - 1) + (V - 1) P chunks and one more, each 1/V of the stage."""
    assert pipeline.in_flight("gpipe", 4, 16) == 16
    assert pipeline.in_flight("1f1b", 4, 16) == 4
    assert pipeline.in_flight("1f1b", 4, 2) == 2  # never more than there are
    assert pipeline.in_flight("1f1b", 4, 16, virtual=2) == (2 * 3 + 1 * 4 + 1) / 2 == 5.5
    # Korthikanti et al.'s factor: P (1 + (P - 1) / (P V)) micro-batches through a stage's layers
    assert pipeline.in_flight("1f1b", 8, 64, virtual=5) == pytest.approx(8 * (1 + 7 / (8 * 5)))


def test_the_schedule_adds_the_bubble_and_the_sends_that_outlast_compute():
    """A stage's step of two micro-batches 2.2 s, of three 3.2 s: 1 s a micro-batch, 0.2 s once. Over 4 stages and 8
    micro-batches: 8 s of work, the bubble 3 x (1 s + 2 sends), the steady state's sends hidden under compute."""
    t = pipeline.schedule(2.2, 3.2, 8, 4, 1, 0.01)
    assert (t.per, t.once) == pytest.approx((1.0, 0.2))
    assert t.bubble == pytest.approx(3 * (1.0 + 0.02))
    assert t.sends == 0.0 and t.seconds == pytest.approx(8 + 0.2 + 3.06)
    v = pipeline.schedule(2.2, 3.2, 8, 4, 2, 0.01)
    assert v.bubble == pytest.approx(3 * (0.5 + 0.02)) and v.bubble < t.bubble
    # sends slower than the compute they run under: 2 V sends a micro-batch, what outlasts 1 s added
    slow = pipeline.schedule(2.2, 3.2, 8, 4, 2, 0.4)
    assert slow.sends == pytest.approx(8 * (4 * 0.4 - 1.0))
    assert pipeline.bubble_share(4, 8) == pytest.approx(3 / 11)
    assert pipeline.bubble_share(4, 8, 2) == pytest.approx(1.5 / 9.5)


@pytest.fixture(scope="module")
def small():
    if why := targets.unavailable():
        pytest.skip(why)
    out = {}
    for name, s in {"1f1b": StepSettings(pp=4, accumulate=8), "gpipe": StepSettings(pp=4, accumulate=8,
                                                                                  schedule="gpipe"),
                    "interleaved": StepSettings(pp=4, vp=2, accumulate=8)}.items():
        out[name] = planner.plan_model(SMALL, "h100", batch=32, seq=256, devices=16, settings=s)
    one = StepSettings()
    stage = pipeline.stage_of(SMALL, 4)
    out["a"] = planner.plan_model(stage, "h100", batch=4, seq=256, devices=4, settings=one)
    two = StepSettings(accumulate=2)
    out["b"] = planner.plan_model(stage, "h100", batch=8, seq=256, devices=4, settings=two)
    for key, k in (("b3", 3), ("b8x", 8)):  # the plan of two, its loop run k times
        out[key] = planner.stage_plan(stage, "h100", batch=8, seq=256, devices=4, mode="train", settings=two, trips=k)
    out["b8"] = planner.plan_model(stage, "h100", batch=32, seq=256, devices=4, settings=StepSettings(accumulate=8))
    out["wide"] = planner.plan_model(stage, "h100", batch=8, seq=256, devices=4, settings=one)
    body = dataclasses.replace(stage, vocab=pipeline.BODY_VOCAB * 4)  # the stage's layers, a few vocabulary rows
    out["body"], out["body2"] = (planner.plan_model(body, "h100", batch=k, seq=256, devices=4, settings=one)
                                 for k in (4, 8))
    return out


def test_a_stage_is_its_share_of_the_layers_with_one_vocabulary_matrix():
    stage = pipeline.stage_of(SMALL, 4)
    assert stage.layers == 2 and stage.tied_head and "head" not in stage.shapes()
    assert stage.params() == pytest.approx(SMALL.params() * 2 / 8 + SMALL.vocab * 512 * 0.75, rel=0.01)


def test_the_bubble_and_memory_are_the_hand_counts_of_the_stage_plans(small):
    """16 GPUs in 4 stages of 4 (two stages a node, so a send crosses nodes at one boundary, the pace of all); 8
    micro-batches of 4 sequences. The bubble is 3 micro-batches' forward and backward and 6 sends; the first stage
    holds 4 micro-batches' activations (1F1B), 8 (GPipe), 5.5 (interleaved, V = 2) beyond the stage's plan: its
    layers', read off the stage with a vocabulary of a few rows, as the last stage computes its logits and loss
    one micro-batch at a time."""
    a, b, b3, wide = small["a"], small["b"], small["b3"], small["wide"]
    per = (b3.seconds - b3.comm_s) - (b.seconds - b.comm_s)  # a micro-batch's work, its collectives apart
    hw = hardware.find_gpu("h100")
    send = 2 * 4 * 256 * 512 / 4 / sharded.port_rate(hw)  # a micro-batch's bf16 residual, a GPU's quarter
    p = small["1f1b"]
    assert p.send_s == pytest.approx(send)
    assert p.bubble_s == pytest.approx(3 * (per + 2 * send))
    # the steady state's sends (2 a micro-batch, microseconds) run under its compute: nothing added; the stage's
    # collectives (its fsdp gathers), what XLA's schedule leaves waited in each plan, over the micro-batches
    waits = 8 * max(b3.comm_s - b.comm_s, 0) + max(b.comm_s - 2 * max(b3.comm_s - b.comm_s, 0), 0)
    assert p.seconds == pytest.approx(8 * per + max(b.seconds - b.comm_s - 2 * per, 0) + p.bubble_s + waits,
                                      rel=1e-6)
    assert p.lower_s <= p.seconds <= p.upper_s
    act = small["body2"].bytes_per_device - small["body"].bytes_per_device
    # never more than the whole stage's (here the same within 0.1%: its peak is not at the logits of 512 rows)
    assert 0 < act <= (wide.bytes_per_device - a.bytes_per_device) * 1.001
    for name, k in (("1f1b", 4), ("gpipe", 8), ("interleaved", 5.5)):
        assert small[name].in_flight == k
        assert small[name].bytes_per_device == pytest.approx(b.bytes_per_device + (k - 1) * act), name
    assert small["gpipe"].seconds == pytest.approx(p.seconds)  # the same bubble, more memory
    assert small["interleaved"].bubble_s < p.bubble_s
    assert p.collectives["pipeline send"] == (16, pytest.approx(16 * send * sharded.port_rate(hw)))
    assert p.mesh == "pp 4 x fsdp 4" and p.devices == 16 and "4 pipeline stages (1f1b)" in p.settings
    assert sum(p.time_split.values()) == pytest.approx(p.seconds, rel=1e-6)


def test_a_stages_micro_batches_cost_what_its_plan_of_all_of_them_does(small):
    """The schedule's work of M micro-batches, from the stage's plan of two in a loop priced as run two and three
    times, is XLA:GPU's own plan of all M in the loop: the loop's once-a-step work (its gradients' sum zeroed and
    copied, the update) counted once. Taken from the plans of one micro-batch (no loop) and two, that work was counted
    once a micro-batch: 8 micro-batches priced more than a tenth over their own plan (GPT3 175B's stage, 64
    micro-batches of one sequence: 69% over)."""
    work = {k: small[k].seconds - small[k].comm_s for k in ("a", "b", "b3", "b8x", "b8")}
    assert pipeline._over(work["b"], work["b3"], 8) == pytest.approx(work["b8"], rel=0.01)
    assert work["b8x"] == pytest.approx(work["b8"], rel=0.01)  # the loop run 8 times: the plan of 8
    per = work["b"] - work["a"]
    assert 8 * per + max(work["a"] - per, 0.0) > 1.1 * work["b8"]


def test_where_xla_leaves_no_loop_the_stage_is_planned_with_three_micro_batches(monkeypatch):
    """``launches.with_trips`` finds the entry computation's loop of the trips asked (none in a plan without one);
    where a plan has none (XLA unrolled it), the stage of three micro-batches is compiled as such."""
    from jaxgpu.ground import launches

    if why := targets.unavailable():
        pytest.skip(why)
    looped = "ENTRY %main (p: f32[4]) -> f32[4] {\n  %w = (s32[], f32[4]) while(%t), condition=%c, body=%b, " \
        'backend_config={"known_trip_count":{"n":"2"}}\n}'
    assert '"n":"3"' in launches.with_trips(looped, 2, 3) and launches.with_trips(looped, 4, 3) is None
    monkeypatch.setattr(launches, "with_trips", lambda hlo, of, trips: None)
    stage = pipeline.stage_of(SMALL, 4)
    p = planner.stage_plan(stage, "h100", batch=8, seq=256, devices=4, mode="train",
                           settings=StepSettings(accumulate=2), trips=3)
    assert p.batch == 12 and "3 micro-batches" in p.settings


def test_a_70b_step_over_32_gpus_has_the_1f1b_bubble_and_less_interleaved():
    """The issue's case: Llama-2 70B, 4 stages of a node each, 16 micro-batches of 4 x 4096 tokens. Its bubble is
    within a tenth of (P - 1) / (M + P - 1) of the step's work (what the collectives add beside), and interleaving
    (V = 2) makes it smaller."""
    if why := targets.unavailable():
        pytest.skip(why)
    s = StepSettings(pp=4, accumulate=16, remat="nothing_saveable")
    p = planner.plan_model("llama-70b", "h100", batch=64, seq=4096, devices=32, settings=s)
    assert p.bubble_s / (p.seconds - p.comm_s) == pytest.approx(3 / 19, rel=0.1)
    v = planner.plan_model("llama-70b", "h100", batch=64, seq=4096, devices=32,
                           settings=dataclasses.replace(s, vp=2))
    assert v.bubble_s < 0.6 * p.bubble_s and v.seconds < p.seconds and v.in_flight > p.in_flight


@pytest.mark.parametrize("devices, settings, words", [
    (16, StepSettings(pp=3, accumulate=3), "do not split into 3 pipeline stages"),
    (16, StepSettings(pp=4, vp=4, accumulate=8), "do not split into 4 stages x 4 virtual"),
    (16, StepSettings(pp=4, vp=2, accumulate=6), "multiples of the stages"),
    (24, StepSettings(pp=2, accumulate=2), "straddle nodes"),
])
def test_a_pipeline_that_cannot_be_laid_out_says_why(devices, settings, words):
    with pytest.raises(ValueError, match=words):
        planner.plan_model(SMALL, "h100", batch=48, seq=256, devices=devices, settings=settings)
    with pytest.raises(ValueError, match="virtual stages interleave"):
        StepSettings(pp=2, vp=2, schedule="gpipe")
    with pytest.raises(ValueError, match="pipeline stages split a training step"):
        planner.plan_model(SMALL, "h100", batch=8, seq=256, devices=8, mode="prefill", settings=StepSettings(pp=2))


def test_the_model_command_prices_a_pipeline_and_refuses_one_it_cannot_lay_out():
    """``--pp 2 --vp 2``: the stages said in the header and the grid, the bubble against its share in a line;
    ``--vp`` without ``--pp`` and a pipeline in serving: one line, exit 2."""
    import subprocess
    import sys

    if why := targets.unavailable():
        pytest.skip(why)
    cmd = [sys.executable, "-m", "experiments.model", "--layers", "4", "--d-model", "128", "--heads", "4",
           "--kv-heads", "2", "--ffn", "256", "--vocab", "128", "--batch", "8", "--seq", "64", "--gpus", "h100"]
    proc = subprocess.run(cmd + ["--pp", "2", "--vp", "2", "--accumulate", "4", "--devices", "4"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "2 pipeline stages (1f1b, 2 virtual stages a GPU)" in proc.stdout and "(pp 2 x fsdp 2)" in proc.stdout
    assert "pipeline on 4 H100 SXM: 2 stages of 2 GPUs, interleaved 1f1b, 4 micro-batches; the bubble" in proc.stdout
    for bad in (["--vp", "2"], ["--pp", "2", "--serve"]):
        proc = subprocess.run(cmd + bad, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--pp" in proc.stderr


def test_a_frameworks_collectives_hide_under_the_whole_steps_work_not_one_micro_batchs():
    """A stage whose once-a-step collectives outlast one micro-batch's compute (0.254 s against 0.088 s: a plan of
    one micro-batch would show them in the open): the step's M micro-batches hide them, so the step is its work, the
    bubble and what of every collective outlasts the whole step's work, and never under its lower bound (the
    stage plans' differences taken whole once gave a step faster than its bound)."""
    from types import SimpleNamespace as Plan

    b = Plan(seconds=0.353, comm_s=0.099, overlapped_s=0.255)  # 0.254 s of work, 0.354 s of collectives
    b3 = Plan(seconds=0.442, comm_s=0.100, overlapped_s=0.304)  # 0.342 s of work, 0.404 s of collectives
    t = pipeline.schedule(b.seconds - b.comm_s, b3.seconds - b3.comm_s, 8, 4, 1, 0.0)
    assert (t.per, t.once) == pytest.approx((0.088, 0.078))
    added, hidden = pipeline._collectives(b, b3, 8, t, "framework")
    whole = 8 * 0.05 + (0.354 - 2 * 0.05)  # a micro-batch's 0.05 s, the update's 0.254 s
    assert added + hidden == pytest.approx(whole) and added == 0.0  # under 8 micro-batches' 0.78 s of work
    # XLA's order: each micro-batch waits what its plan waits, never more than the collectives
    added, hidden = pipeline._collectives(b, b3, 8, t, "plan")
    assert added == pytest.approx(8 * 0.001 + 0.097) and added + hidden == pytest.approx(whole)
