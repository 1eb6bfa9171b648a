"""The fit search that turns the knobs (jaxgpu.pricing.knobs): its order, its stopping rule and what it answers, on
a stand-in planner whose bytes a GPU follow the knobs as a step's would; and one real 7B step (slow)."""

import dataclasses
import types

import pytest

from jaxgpu.ground import hardware
from jaxgpu.ground.decoders import StepSettings
from jaxgpu.pricing import knobs, planner

CARD = hardware.find_gpu("H100 SXM").memory_gb * 1e9


def _fake(monkeypatch, whole: float, acts: float):
    """A planner whose step holds ``whole`` bytes of state split over the GPUs and ``acts`` of activations each,
    cut by micro-batches and remat as a step's are (remat dots keeps a half, nothing a tenth; bf16 state is 2/3 of
    fp32's), and takes 1 s a GPU count's share plus what each knob costs; every plan_model call is counted."""
    calls = []

    def plan_model(model, gpu, *, batch, seq, devices, mode, settings, train=True):
        calls.append((devices, mode, settings))
        a = acts / settings.accumulate * {"none": 1.0, knobs.SAVE_DOTS: 0.5, knobs.SAVE_NOTHING: 0.1}[settings.remat]
        w = whole * (2 / 3 if mode == "train_bf16" else 1.0) / devices
        t = 8.0 / devices * (1 + 0.02 * (settings.accumulate > 1) + {"none": 0, knobs.SAVE_DOTS: 0.1,
                                                                         knobs.SAVE_NOTHING: 0.33}[settings.remat])
        nbytes = w + a
        return types.SimpleNamespace(gpu=gpu, devices=devices, bytes_per_device=nbytes, seconds=t,
                                     fits=nbytes <= 0.75 * CARD, capacity=0.75 * CARD)

    def fewest(model, gpu, *, counts, batch, seq, mode, settings):
        for n in sorted(counts):
            p = plan_model(model, gpu, batch=batch, seq=seq, devices=n, mode=mode, settings=settings)
            if p.fits:
                return p
        return p

    monkeypatch.setattr(planner, "plan_model", plan_model)
    monkeypatch.setattr(planner, "fewest", fewest)
    return calls


def test_the_knobs_come_cheapest_first_and_only_where_they_apply():
    s = StepSettings()
    names = [k.name for k in knobs.knobs(s, "train", batch=32)]
    assert names[:3] == ["2 micro-batches", "4 micro-batches", "8 micro-batches"]
    assert names[3].startswith("remat dots_with_no_batch_dims_saveable") and names[4] == "bf16 weights and AdamW state"
    assert names[5].startswith("remat nothing_saveable") and names[6].startswith("8 micro-batches and remat")
    assert [k.name for k in knobs.knobs(s, "train", batch=3)][0].startswith("remat")  # 3 sequences: no passes
    assert knobs.knobs(s, "serve", batch=32) == []
    assert not any("bf16" in k.name for k in knobs.knobs(s, "train_bf16", batch=32))
    done = dataclasses.replace(s, remat=knobs.SAVE_NOTHING)
    assert not any("remat" in k.name for k in knobs.knobs(done, "train", batch=32))


def test_a_knob_takes_the_step_onto_fewer_gpus_and_says_its_cost(monkeypatch):
    # as asked: 160 GB of state split over the GPUs and 40 GB of activations on each, at 75% of an 80 GB card
    calls = _fake(monkeypatch, whole=160e9, acts=40e9)
    f = knobs.fit("llama-7b", "H100 SXM", batch=32, seq=4096)
    # as asked, 8 GPUs need 20 + 40 = 60 GB (fits); on 4, 40 + 40: two micro-batches make it 40 + 20 = 60
    assert f.plan.devices == 4 and f.knob == "2 micro-batches" and f.plan.fits
    assert f.cost == pytest.approx(0.02) and f.asked_s == pytest.approx(2.0)
    # on 2 GPUs: 80 GB of state alone: no knob holds it, and the search stopped there
    turned = {n for n, mode, settings in calls if mode != "train" or settings != StepSettings()}
    assert turned == {4, 2} and len(calls) <= 20
    assert f.raised == 4  # nothing compiled on 2 came within 90% of the card


def test_where_nothing_holds_it_the_knobs_are_tried_on_the_most_gpus_first(monkeypatch):
    _fake(monkeypatch, whole=100e9, acts=200e9)  # 8 GPUs hold 12.5 + 200 GB as asked: no
    f = knobs.fit("llama-7b", "H100 SXM", batch=32, seq=4096)
    # 8 micro-batches hold it on 8 (12.5 + 25 GB) and on 4 (25 + 25); on 2 only 8 micro-batches with each layer
    # recomputed do (50 + 2.5), the last knob tried; on 1 nothing does
    assert f.plan.fits and f.plan.devices == 2 and f.knob == "8 micro-batches and remat nothing_saveable"
    assert f.raised <= f.plan.devices


def test_a_step_that_fits_one_gpu_as_asked_turns_nothing(monkeypatch):
    calls = _fake(monkeypatch, whole=1e9, acts=1e9)
    f = knobs.fit("llama-7b", "H100 SXM", batch=32, seq=4096)
    assert f.plan.devices == 1 and f.knob == "" and f.cost == 0 and len(calls) == 1


@pytest.mark.slow
def test_a_7b_step_maxtext_trains_on_8_h100s_fits_8_with_a_knob():
    """Llama-2 7B at 32 x 4096 (MaxText's per-device batch 4 on 8 H100s): as asked (no remat) it needs more than 8
    H100s at JAX's 75%; the search answers 8 or fewer, names the knob and its cost, within about 20 compiles."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        pytest.skip(why)
    calls = []
    plan_model = planner.plan_model

    def counted(*args, **kwargs):
        calls.append(kwargs.get("devices"))
        return plan_model(*args, **kwargs)

    planner.plan_model = counted
    try:
        f = knobs.fit("llama-7b", "H100 SXM", batch=32, seq=4096)
    finally:
        planner.plan_model = plan_model
    assert f.plan.fits and f.plan.devices <= 8 and f.knob and len(calls) <= 20
    as_asked = planner.plan_model("llama-7b", "H100 SXM", batch=32, seq=4096, devices=8)
    assert not as_asked.fits and as_asked.bytes_per_device > 80e9  # 86.9 GB a GPU without remat (the issue's)


def _linear(monkeypatch, fixed: float, per: float, what: str, ceiling: int | None = None):
    """A planner whose step holds ``fixed`` bytes plus ``per`` for each unit of ``what`` (sequences or tokens), at
    75% of an 80 GB card; past ``ceiling`` the model refuses the size (as a GPT-2's learned positions do)."""
    calls = []

    def plan_model(model, gpu, *, batch, seq, devices, mode, settings):
        x = {"batch": batch, "seq": seq}[what]
        calls.append(x)
        if ceiling and x > ceiling:
            raise ValueError("longer than the model's positions")
        nbytes = fixed + per * x
        return types.SimpleNamespace(gpu=gpu, devices=devices, batch=batch, seq=seq, bytes_per_device=nbytes,
                                     seconds=1.0, fits=nbytes <= 0.75 * CARD, capacity=0.75 * CARD)

    monkeypatch.setattr(planner, "plan_model", plan_model)
    return calls


def test_the_largest_batch_is_found_by_doubling_then_halving_the_gap(monkeypatch):
    calls = _linear(monkeypatch, fixed=10e9, per=1e9, what="batch")  # 50 sequences fit 60 GB
    p = knobs.largest("llama-7b", "H100 SXM", what="batch", devices=1, batch=8, seq=2048)
    assert p.batch == 50 and len(calls) <= 12
    assert knobs.largest("llama-7b", "H100 SXM", what="batch", devices=1, batch=64, seq=2048).batch == 50  # shrinks
    # fsdp over 8 GPUs splits the batch: it grows by 8 (a batch they do not split is held whole on each)
    assert knobs.largest("llama-7b", "H100 SXM", what="batch", devices=8, batch=8, seq=2048).batch == 48


def test_the_longest_sequence_is_a_whole_number_of_blocks_and_stops_at_the_models_ceiling(monkeypatch):
    _linear(monkeypatch, fixed=10e9, per=1e6, what="seq")  # 50,000 tokens fit
    assert knobs.largest("llama-7b", "H100 SXM", what="seq", devices=1, batch=1, seq=2048).seq == 49920
    _linear(monkeypatch, fixed=10e9, per=1e6, what="seq", ceiling=4096)
    assert knobs.largest("gpt2-124m", "H100 SXM", what="seq", devices=1, batch=1, seq=1024).seq == 4096


def test_nothing_is_the_largest_where_even_the_smallest_does_not_fit(monkeypatch):
    _linear(monkeypatch, fixed=70e9, per=1e9, what="batch")
    assert knobs.largest("llama-70b", "H100 SXM", what="batch", devices=1, batch=8, seq=2048) is None
    with pytest.raises(ValueError, match="must be one of"):
        knobs.largest("llama-7b", what="heads")


def test_the_command_asks_one_search():
    from experiments import model

    for argv in (["--model", "llama-7b", "--fit", "--max-batch"], ["--model", "llama-7b", "--max-seq", "--tokens",
                                                                    "1e9"]):
        with pytest.raises(SystemExit) as err:
            model.parse_args(argv)
        assert err.value.code == 2
    assert model.parse_args(["--model", "llama-7b", "--max-seq"]).largest == "seq"


def test_the_commands_largest_searches_each_card_and_count_apart_and_says_where_nothing_fits(monkeypatch):
    """--max-batch: one search per card and count (``workers.each``'s calls, here in this process), a card where even
    one sequence does not fit, or that cannot run the step, a row that says why."""
    from jaxgpu.records.results import Unsupported

    from experiments import model

    def largest(decoder, gpu, **kw):
        if gpu == "L4":
            raise Unsupported("no network")
        return None if kw["devices"] == 1 else ("found", gpu, kw["devices"], kw["what"])

    monkeypatch.setattr(knobs, "largest", largest)
    a = dataclasses.replace(model.parse_args(["--model", "llama-7b", "--max-batch", "--devices", "1,2", "--gpus",
                                              "h100,l4"]), workers=1)
    got = model._largest(a)
    assert got[1] == ("found", "H100 SXM", 2, "batch") and len(got) == 4
    assert got[0].reason == "even 1 sequence does not fit" and got[0].devices == 1
    assert got[2].reason == "no network" and got[3].gpu == "L4"


def test_the_command_says_fits_at_a_raised_share_and_how_to_raise_it():
    """A plan over JAX's default 75% of the card but within 90% fits "at 90%", and one line says which variable
    raises the share; past 90% it does not fit."""
    from experiments import model

    def plan(gb):
        return types.SimpleNamespace(seconds=1.0, fits=gb * 1e9 <= 0.75 * CARD, bytes_per_device=gb * 1e9,
                                     capacity=0.75 * CARD)

    assert [model._fits(plan(gb)) for gb in (50, 70, 75)] == ["yes", "at 90%", "no"]
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=0.9" in model.raised_note([plan(50), plan(70)])
    assert model.raised_note([plan(50), plan(75)]) == ""
