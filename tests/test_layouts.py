"""The layout search (jaxgpu.pricing.layouts): candidates, the judging before compiling, the search's order and its
fates, the price's lower bound against real plans, and the model command's --best."""

from __future__ import annotations

import dataclasses
import json

import pytest

from jaxgpu.ground import decoders, hardware
from jaxgpu.pricing import layouts, planner

H100 = hardware.find_gpu("h100")


def _plan(settings, seconds: float, fits: bool) -> planner.ModelPlan:
    return planner.ModelPlan(model="m", mode="train", gpu="H100 SXM", devices=8, batch=16, seq=1024,
                             bytes_per_device=1e9 if fits else 1e12, estimate_bytes=0.0, fits=fits, seconds=seconds,
                             lower_s=0.0, upper_s=0.0, comm_s=0.0, binds="compute", tokens_per_s=0.0, mfu=0.4,
                             collectives={}, plan="", memory_plan="")


def test_the_candidates_are_the_layouts_frameworks_run_and_fp8_only_when_asked():
    c = decoders.find("llama3-8b")
    got = layouts.candidates(c, H100, 16, 64, 4096)
    assert len(got) == len(set(got))
    said = {layouts.layout_words(s) for s in got}
    for layout in ("fsdp", "hsdp", "zero1", "zero2", "fsdp+tp (tp 2)", "zero1+tp (tp 8)", "fsdp, cp 4",
                   "zero1+tp (tp 4), pp 4 x vp 2, 8 micro-batches, remat megatron:selective"):
        assert layout in said, layout
    assert not any(s.matmul == "fp8" for s in got) and any(s.matmul == "fp8" for s in layouts.candidates(
        c, H100, 16, 64, 4096, fp8=True))
    assert not any(s.ep > 1 for s in got)  # a dense model has no experts to split
    assert "hsdp" not in {s.mesh for s in layouts.candidates(c, H100, 8, 64, 4096)}  # one node: fsdp's twin
    base = dataclasses.replace(decoders.StepSettings(), network=100.0, overlap="framework")
    assert {(s.network, s.overlap) for s in layouts.candidates(c, H100, 8, 64, 4096, base=base)} == {
        (100.0, "framework")}


def test_each_candidate_is_refused_in_the_libraries_words_pruned_by_the_formula_or_left_to_price():
    c = decoders.find("llama3-70b")
    s = decoders.StepSettings(mesh="zero1", accumulate=1)
    refused = layouts._judged(c, H100, s, 8, 12, 4096)
    assert refused.fate == "refused" and "does not split over 8 GPUs" in refused.why
    whole = layouts._judged(c, H100, decoders.StepSettings(mesh="fsdp"), 8, 64, 8192)
    assert whole.fate == "cannot fit" and "the formula holds" in whole.why and whole.formula_bytes > 80e9
    small = layouts._judged(decoders.find("gpt2-124m"), H100, decoders.StepSettings(mesh="fsdp"), 8, 16, 1024)
    assert small.fate == "unexplored" and small.bound_s > 0


def test_a_pipelines_formula_holds_the_micro_batches_in_flight_at_its_first_stage():
    c = decoders.find("llama3-8b")
    one = dict(mesh="fsdp", accumulate=8)
    flat = layouts.formula_bytes(c, H100, decoders.StepSettings(**one), 8, 64, 4096)
    staged = layouts.formula_bytes(c, H100, decoders.StepSettings(pp=4, **one), 8, 64, 4096)
    acts = planner._estimate(c, "train", 64, 4096, decoders.StepSettings(**one))["activations"] / 8
    assert staged - flat == pytest.approx(3 * acts)  # 1F1B: 4 micro-batches in flight, not 1


def test_the_bound_grows_with_a_pipelines_bubble_and_a_recomputed_forward_pass():
    c = decoders.find("llama3-8b")
    flat = layouts.bound_s(c, H100, decoders.StepSettings(), 8, 64, 4096)
    staged = layouts.bound_s(c, H100, decoders.StepSettings(pp=4, accumulate=8), 8, 64, 4096)
    assert staged == pytest.approx(flat * (8 + 3) / 8)
    full = layouts.bound_s(c, H100, decoders.StepSettings(remat="nothing_saveable"), 8, 64, 4096)
    assert full == pytest.approx(flat * 4 / 3)
    # the model's products at the H100's measured matrix share of its dense bf16 peak over 8 GPUs
    rate = 989.4e12 * H100.share("matmul:bf16").value * 8
    assert flat == pytest.approx(6 * (c.active_params() - c.vocab * c.d_model) * 64 * 4096 / rate)


def test_the_search_prices_cheapest_bound_first_and_says_why_each_other_lost(monkeypatch):
    """With a stand-in price (the bound times 1.7; a layout without remat or micro-batches does not fit): the best
    fits; a layout recomputing more than one that fits is dominated, never compiled; one whose bound passes the best
    cannot beat it; the ranking puts what fits first, by its seconds, then what does not."""
    priced = []

    def fake(model, gpu, batch, seq, devices, settings):
        priced.append(settings)
        fits = settings.remat != "none" or settings.accumulate > 1
        return _plan(settings, 1.7 * layouts.bound_s(model, H100, settings, devices, batch, seq), fits)

    monkeypatch.setattr(layouts, "_priced", fake)
    seen = []
    found = layouts.best_layouts("gpt2-124m", "h100", devices=8, batch=16, seq=1024,
                                 progress=lambda done, total, k: seen.append((done, total, k.fate)))
    counts = found.counts()
    assert counts["best"] == 1 and counts["dominated"] > 0 and counts["cannot beat"] > 0
    assert found.compiled == len(priced) == counts["best"] + counts["slower"] + counts["does not fit"]
    best = found.candidates[0]
    assert best.fate == "best" and best.fits and all(k.seconds >= best.seconds for k in found.top(100))
    dominated = [k for k in found.candidates if k.fate == "dominated"]
    assert not {k.settings for k in dominated} & set(priced)
    assert all("fits, with less recomputation or fewer passes" in k.why for k in dominated)
    beaten = next(k for k in found.candidates if k.fate == "cannot beat")
    assert beaten.bound_s >= best.seconds and "above the best found" in beaten.why
    fates = [layouts.FATES.index(k.fate if k.fate != "best" else "slower") for k in found.candidates]
    assert fates == sorted(fates)
    assert len(seen) == len(priced) and seen[-1][0] == len(priced)


def test_a_layout_given_is_priced_whatever_its_bound_and_the_budget_leaves_the_rest_unexplored(monkeypatch):
    monkeypatch.setattr(layouts, "_priced", lambda model, gpu, batch, seq, devices, settings: _plan(
        settings, 1.0, True))
    mine = decoders.StepSettings(mesh="zero1+tp", tp=2, pp=2, accumulate=4)
    found = layouts.best_layouts("gpt2-124m", "h100", devices=8, batch=16, seq=1024, layout=mine, budget_s=0)
    assert found.compiled == 1 and next(k for k in found.candidates if k.settings == mine).seconds == 1.0
    assert found.counts()["unexplored"] > 0
    assert all(k.why == "the budget was spent first" for k in found.candidates if k.fate == "unexplored")
    with pytest.raises(ValueError, match="budget"):
        layouts.best_layouts("gpt2-124m", "h100", devices=8, batch=16, seq=1024, budget_s=-1)


def test_a_refusal_at_compile_time_is_a_fate_not_a_failure(monkeypatch):
    monkeypatch.setattr(layouts, "_priced", lambda model, gpu, batch, seq, devices, settings: "no loop of 3 trips")
    found = layouts.best_layouts("gpt2-124m", "h100", devices=2, batch=4, seq=256, remats=("none",))
    assert found.top() == [] and all(k.fate in ("refused", "cannot fit") for k in found.candidates)
    assert any(k.why == "no loop of 3 trips" for k in found.candidates)


def test_the_bound_is_below_every_price_xla_plans(tmp_path):
    """The lower bound holds against real plans of unlike layouts (a mesh, tensor-parallel groups, each layer
    recomputed): none is priced below it."""
    c = decoders.find("gpt2-124m")
    for s in (decoders.StepSettings(mesh="fsdp"), decoders.StepSettings(mesh="zero1+tp", tp=2),
              decoders.StepSettings(mesh="fsdp", remat="nothing_saveable")):
        plan = planner.plan_model(c, "h100", batch=16, seq=512, devices=8, mode="train", settings=s)
        assert layouts.bound_s(c, H100, s, 8, 16, 512) <= plan.seconds, layouts.layout_words(s)


def test_the_command_prints_the_best_layouts_and_writes_the_ranked_candidates(tmp_path, monkeypatch, capfd):
    from experiments import model

    monkeypatch.setattr(layouts, "_priced", lambda model, gpu, batch, seq, devices, settings: _plan(
        settings, 1.0 + settings.accumulate + (settings.mesh != "fsdp"), settings.remat != "nothing_saveable"))
    out = tmp_path / "best"
    rc = model.main(["--model", "gpt2-124m", "--train", "--batch", "16", "--seq", "1024", "--devices", "4", "--gpus",
                     "h100", "--best", "--top", "2", "--mesh", "zero1", "--out", str(out)])
    text = capfd.readouterr()  # the command's stderr is a copy of the terminal's descriptor (cli.native_stderr_to)
    assert rc == 0, text.err
    lines = text.out.splitlines()
    assert lines[0].startswith("gpt2-124m, one train step, batch 16 x 1,024 tokens on 4 H100 SXM: the fastest")
    assert lines[2].split()[:2] == ["1", "fsdp"] and lines[3].startswith("2 ")
    assert any(line.startswith("the layout asked (zero1): slower, rank") for line in lines)
    assert "candidates:" in lines[-1] and "refused by the rules" in lines[-1]
    rows = json.loads(out.with_suffix(".json").read_text())
    assert rows[0]["fate"] == "best" and {"layout", "fits", "seconds", "bytes_per_device", "mfu", "fate"} <= set(
        rows[0])
    assert out.with_suffix(".csv").read_text().startswith("gpu,n_devices,layout,fate")
    assert out.with_suffix(".png").stat().st_size > 0
    assert "priced, " in text.err  # progress while compiling


@pytest.mark.parametrize("argv, said", [
    (["--serve", "--devices", "8"], "--best searches a train step's layouts"),
    (["--devices", "8,16"], "one count of GPUs"),
    (["--devices", "8", "--top", "0"], "--top takes 1 or more"),
    (["--devices", "8", "--budget-s", "-3"], "--budget-s takes seconds"),
    (["--devices", "8", "--fit"], "ask one search"),
])
def test_the_command_refuses_a_search_it_cannot_make_in_one_line(argv, said, capsys):
    from experiments import model

    with pytest.raises(SystemExit) as exit_:
        model.parse_args(["--model", "gpt2-124m", "--best", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert said in err[-1], err


def test_top_and_budget_need_best(capsys):
    from experiments import model

    with pytest.raises(SystemExit):
        model.parse_args(["--model", "gpt2-124m", "--top", "5"])
    assert "give --best too" in capsys.readouterr().err


def _ray_reason() -> str:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "the ray extra is not installed here (pip install -e '.[ray]')"
    return ""


@pytest.mark.slow
@pytest.mark.skipif(bool(_ray_reason()), reason=_ray_reason() or "ray is installed")
def test_a_search_over_a_local_ray_cluster_prices_as_the_processes_here_do(tmp_path, monkeypatch):
    """--ray local: the plans not cached compiled as Ray tasks of a cluster of this machine, kept in this process's
    plan cache (an empty one here); the answer the same as the search's in this process, which reads them."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    step = dict(devices=2, batch=4, seq=128, remats=("none",))
    there = layouts.best_layouts("gpt2-124m", "h100", ray="local", workers=2, **step)
    here = layouts.best_layouts("gpt2-124m", "h100", **step)
    assert len(list((tmp_path / "jaxgpu" / "plans").iterdir())) >= there.compiled > 0
    assert [(k.layout, k.fate, k.seconds) for k in there.candidates] == [
        (k.layout, k.fate, k.seconds) for k in here.candidates]


def test_a_search_over_ray_without_ray_installed_is_one_line(monkeypatch):
    import sys

    from jaxgpu.pricing import cluster
    from jaxgpu.pricing import workers as pool

    def not_cached(**kw):
        raise pool.NotCached("k")

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where the extra is not installed
    with pytest.raises(RuntimeError, match=r"Ray is not installed here: pip install 'jaxgpu\[ray\]'"):
        cluster.each(not_cached, [{}], "local")
    assert cluster.each(lambda **kw: 3, [{}], "local") == [3]  # a cached answer needs no cluster
