"""The published GPU measurements the predictions are checked against, and the gpu_model experiment."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from jaxgpu.ground import hardware
from jaxgpu.pricing import published
from jaxgpu.records import results

from experiments.contract import Seen
from experiments.gpu_model import view


def test_every_case_names_its_source_setup_and_gpu():
    ids = [c.id for c in published.CASES]
    assert len(ids) == len(set(ids))
    for c in published.CASES:
        assert c.gpu in hardware.GPUS, c.id
        assert c.source and c.quote and c.setup and c.workload, c.id
        assert c.published_s > 0, c.id
    first = published.out_of_sample()
    assert len(published.scored()) >= 20 and len(first) >= 10
    assert {c.kind for c in published.scored() if c.id in first} >= {"gemm", "memory", "train", "decode"}
    steps = [c for c in published.scored() if c.kind in ("train", "decode")]
    assert len(steps) >= 3 and {c.kind for c in steps} == {"train", "decode"}
    assert all(not c.calibration for c in published.scored())


def test_whole_steps_are_a_set_of_their_own():
    """At least 12 training steps and 6 prefill or decode steps, of at least four sources beyond llm.c, JAX programs
    among them; each step over GPUs names a model and settings plan_model takes."""
    from jaxgpu.ground import decoders

    scored = published.scored()
    train = [c for c in scored if c.kind == "train"]
    serve = [c for c in scored if c.kind in ("decode", "prefill")]
    assert len(train) >= 12 and len(serve) >= 6
    first = published.out_of_sample()  # out of sample, each kind has cases of its own
    assert sum(c.id in first for c in train) >= len(train) // 3 and sum(c.id in first for c in serve) >= 6
    repos = {c.source.split(" ")[0] for c in train + serve} - {"karpathy/llm.c"}
    assert len(repos) >= 4 and {"AI-Hypercomputer/maxtext", "NVIDIA/JAX-Toolbox"} <= repos, repos
    assert sum(c.source.startswith("karpathy/llm.c") for c in train) == 4
    steps = [c for c in published.CASES if c.program[0] == "step"]  # a decoder's, through plan_model
    assert {c.kind for c in steps} == {"train", "decode"}
    for c in steps:
        _, model, mode, batch, seq, devices, settings = c.program
        s = published.step_settings(c)
        assert isinstance(s, decoders.StepSettings) and s.scan == (mode != "serve" and dict(settings).get("scan", 1))
        assert published.model_config(model).params() > 0 and batch % (s.nodes * s.accumulate) == 0, c.id
    with pytest.raises(ValueError, match="plan_step prices it"):
        published.program(steps[0])


@pytest.mark.slow
def test_a_step_case_is_priced_through_plan_model():
    """A case's step, shrunk to a small batch, through the same door: plan_model's plan of it, priced whole."""
    from jaxgpu.pricing import targets

    from experiments.gpu_model import measure

    if why := targets.unavailable():
        pytest.skip(why)
    c = next(c for c in published.CASES if c.id == "pax-gpt-126m-64-h100")
    small = dataclasses.replace(c, program=("step", "pax-gpt-126m", "train", 32, 256, 8, (("nodes", 2),)))
    m = measure._step(small)
    assert m["gpu_plan"] == 1.0 and m["fits"] == 1.0 and m["internode_s"] > 0
    assert m["lower_s"] <= m["predicted_s"] <= m["upper_s"] and m["comm_s"] >= m["internode_s"]


def test_a_published_rate_becomes_seconds_per_call():
    c = next(c for c in published.CASES if c.id == "torch-mm-h100-bf16-4096")
    assert c.published_s == pytest.approx(2 * 4096**3 / 788.72e12)
    d = next(c for c in published.CASES if c.id == "torchao-llama2-7b-decode-a100")
    assert d.published_s == pytest.approx(1 / 107.38)
    pax = next(c for c in published.CASES if c.id == "pax-gpt-5b-256-a100")
    assert pax.published_s == pytest.approx(2048 / 594.13)  # the global batch over sequences a second
    maxtext = next(c for c in published.CASES if c.id == "maxtext-llama2-7b-1x8-h100")
    assert maxtext.published_s == pytest.approx(1.454, abs=1e-3)  # MaxText's own FLOP count over its rate
    with pytest.raises(ValueError, match="needs the work"):
        dataclasses.replace(c, work=0.0)
    with pytest.raises(ValueError, match="timed must be"):
        dataclasses.replace(c, timed="wall")


def test_what_the_source_timed_decides_the_seconds_compared():
    @dataclasses.dataclass
    class P:
        device_s: float = 1e-6
        device_range_s: tuple = (0.8e-6, 2e-6)
        estimate_s: float = 11e-6
        lower_s: float = 10e-6
        upper_s: float = 12e-6

    c = next(c for c in published.CASES if c.kind == "gemm")
    at = lambda timed: published.seconds(dataclasses.replace(c, timed=timed), P(), 2.5e-6, 10e-6)
    assert at("device") == (1e-6, 0.8e-6, 2e-6)
    assert at("kernels")[0] == pytest.approx(3.5e-6)
    assert at("stream")[0] == 10e-6  # a framework's dispatch of each call is longer than the kernel
    assert at("call") == (11e-6, 10e-6, 12e-6)


def test_summary_by_hand():
    s = published.summary([0.1, -0.3, 1.5, -0.6])
    assert s["median_abs_error"] == pytest.approx(0.45) and s["within_2x"] == 0.5 and s["cases"] == 4
    assert s["within_15"] == 0.25 and s["within_25"] == 0.25 and "ratio_low" not in s  # too few for an interval
    assert s["bias"] == pytest.approx((1.1 * 0.7 * 2.5 * 0.4) ** 0.25)
    assert published.summary([]) == {"cases": 0.0}
    # twenty cases: the interval is the ratio's 5th and 95th percentiles, linear between neighbours (numpy's)
    s = published.summary([i / 100 - 0.1 for i in range(20)])  # ratios 0.90 ... 1.09
    assert s["ratio_low"] == pytest.approx(0.9095) and s["ratio_high"] == pytest.approx(1.0805)


def test_a_gemm_and_a_stream_case_are_priced_on_the_gpus_plan():
    from jaxgpu.pricing import targets

    from experiments.gpu_model import measure

    m = measure.price("torch-mm-h100-bf16-8192")
    assert m["gpu_plan"] == float(targets.unavailable() is None)
    assert m["lower_s"] <= m["predicted_s"] <= m["upper_s"]
    if m["gpu_plan"]:
        assert abs(m["error"]) < 0.25
        # XLA:CPU of jax 0.10 upcasts a bf16 product in kernels of its own, which the CPU plan then prices; 0.11's
        # multiplies bf16 as it is, and its plan prices the case about as the GPU's does
        import jax
        import jax.numpy as jnp

        spec = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)
        if " convert(" in jax.jit(jnp.matmul).lower(spec, spec).compile().as_text():
            assert m["cpu_plan_error"] > 0.5
    s = measure.price("babelstream-a100-copy")
    assert s["bytes_plan"] == pytest.approx(2 * 8 * 2**25)  # float64, both arrays once: lowered under x64


def test_without_the_extra_the_case_says_the_cpu_plan_stood_in(monkeypatch):
    from jaxgpu.pricing import targets

    from experiments.gpu_model import measure

    monkeypatch.setattr(targets, "unavailable", lambda: "the CUDA plugin is not installed")
    m = measure.price("torch-mm-h100-bf16-4096")
    assert m["gpu_plan"] == 0.0 and m["predicted_s"] == m["cpu_plan_predicted_s"]


def _record(case, error, cpu_error=1.0):
    t = case.published_s * (1 + error)
    m = {"published_s": case.published_s, "predicted_s": t, "lower_s": t / 2, "upper_s": t * 2, "error": error,
         "cpu_plan_predicted_s": case.published_s * (1 + cpu_error), "cpu_plan_error": cpu_error, "gpu_plan": 1.0}
    return results.Record("gpu_model", {"case": case.id, "gpu": case.gpu, "kind": case.kind}, m, backend="cpu",
                          device_kind="cpu")


def test_the_section_scores_the_cases_without_the_calibration_ones():
    run = results.Run(Path("gpu-model"), {"env": {"backend": "cpu", "device_kind": "cpu", "cpu_model": "X"}}, ())
    recs = [_record(c, 0.1 if c.kind != "train" else 1.5) for c in published.CASES]
    pairs = [(run, r) for r in recs]
    s = view.scores(pairs)
    assert s["all"]["cases"] == len(published.scored())
    assert s["gemm"]["median_abs_error"] == pytest.approx(0.1) and s["train"]["within_2x"] == 0.0
    sec = view.section(Seen(tuple(pairs)))
    cases = sec.tables[2]  # after the table by kind and the changes cases guided
    assert len(cases.rows) == len(published.CASES)
    guided = {row[0]: row[2] for row in sec.tables[1].rows}  # a row a change, each of the changes a case names
    assert guided["7e9254f"] == "jax-toolbox-maxtext-llama2-7b-h100"
    assert "jax-toolbox-maxtext-llama2-7b-h100" in guided["e5b828d"]
    assert "nemo-gpt3-175b-fp8-pp8-128-h100" in guided["31c24d1"] and "nemo-gpt3-175b-fp8-pp8-128-h100" in guided[
        "0195ed7"]
    kinds = {row[0]: row for row in sec.tables[0].rows}  # each kind apart: the estimate's and the lower bound's
    # and the rows beside the kinds: steps over nodes and LoRA fine-tunes (the records carry no measured peak)
    sizes = [name for name, _, _ in view.SIZES]
    assert set(kinds) == set(published.KINDS) | {"decode + prefill", *published.GROUPS, *sizes}
    for group in published.GROUPS:  # pipelines, expert and context groups, encoders: each row its own cases
        assert kinds[group][5] == str(sum(group in published.groups(c) for c in published.scored())), group
    # decoders' steps again by size: each counted once (llm.c's GPT-2 124M small, Llama-2 70B large), encoders none
    assert sum(int(kinds[n][5]) for n in sizes) == sum(c.kind == "train" and c.program[0] != "encoder"
                                                        for c in published.scored())
    row = {k: view.size_row(view._BY_ID[k]) for k in ("llmc-gpt2-124m-a100", "pax-gpt-5b-256-h100",
                                                       "nemo-llama2-70b-fp8-pp4-64-h100", "jaxtoolbox-vit-b16-8-a100",
                                                       "mamf-h100-bf16")}
    assert list(row.values()) == [*sizes, None, None]
    assert all(int(kinds[g][5]) >= 1 for g in ("pipeline train", "expert-parallel train", "encoder train"))
    # in sample, the records' errors; out of sample, the first prices' own (first_prices.json), whatever the records
    assert kinds["train"][6] == "150%" and kinds["gemm"][6] == "10%" and kinds["decode + prefill"][5] == str(
        sum(c.kind in ("decode", "prefill") for c in published.scored()))
    first = published.out_of_sample()
    assert kinds["train"][1] == str(sum(c.kind == "train" and c.id in first for c in published.scored()))
    assert kinds["train"][2] == f"{s['train_first']['median_abs_error']:.0%}" != "150%"
    assert kinds["train"][11] == "25%"  # the records' lower bound is half the estimate: 2.5 / 2 - 1
    assert kinds["train"][7] == "2.50x" and kinds["train"][8] == "0%" and kinds["gemm"][8] == "100%"
    assert kinds["train"][10] == "2.50x to 2.50x" and kinds["prefill"][10].startswith("none: 2 cases")
    memory = sum(c.kind == "memory" and c.id in first for c in published.scored())
    assert memory < 8 and kinds["memory"][4].startswith(f"none: {memory} cases")  # too few for an interval, said so
    roles = {row[0]: row[8] for row in cases.rows}
    assert roles["mamf-h100-bf16"] == "calibration"
    assert roles["torch-mm-h100-bf16-2048"].startswith("first price out of sample")
    assert roles["nemo-gpt3-20b-fp8-tp2-64-h100"].startswith("in sample")
    para = sec.paragraphs[0]
    assert para.index("Out of sample") < para.index("In sample") and "not run here" in para
    assert published.OUT_OF_SAMPLE in para
    assert view.section(Seen()).tables == []


def test_the_readme_quotes_the_committed_validation():
    """The README and docs/api.md lead with the out-of-sample figure (the first prices) and name the development
    set's as such, each figure the committed report's; the first error a README reader meets is out of sample."""
    import re

    root = Path(__file__).resolve().parents[1]
    md = (root / "reports" / "study" / "report.md").read_text()
    para = next(p for p in md.split("## How good is the GPU column?")[1].split("\n\n")
                if "predicted, not run here" in p)
    lean = (r"median error (\d+)%, (\d+)% within 15%, predictions (\d+)% (fast|slow) on the geometric mean "
            r"\((\d+) cases\)")
    first = re.search(r"Out of sample, " + lean, para)
    dev = re.search(r"In sample, today's prices of the same scored cases \(the development set, whose errors shaped "
                    r"the model\): " + lean, para)
    cpu = re.search(r"predicted before\), in sample: median error (\d+)%", para)
    assert first and dev and cpu and para.index("Out of sample") < para.index("In sample"), para
    readme = (root / "README.md").read_text()
    api = (root / "docs" / "api.md").read_text()
    median, within, lean_, way, n = first.groups()
    d_median, d_within, d_lean, d_way, d_n = dev.groups()
    for text in (readme, api):
        flat = " ".join(text.split())
        said = (f"over the {n} cases with one", f"median error {median}%, {within}% within 15%, predictions {lean_}% "
                f"{way} on the geometric mean", f"today's prices of the {d_n} scored cases (the development set, "
                f"whose errors shaped the model): median error {d_median}%, {d_within}% within 15%",
                f"{d_lean}% {d_way} on the geometric mean")
        for phrase in said:
            assert phrase in flat, phrase
        assert flat.index(said[0]) < flat.index(said[2])  # out of sample first
    assert f"miss by a median of {cpu.group(1)}%" in " ".join(api.split())
    flat = " ".join(readme.split())
    assert f"the CPU plan's by {cpu.group(1)}%" in flat
    assert f"out of sample, the GPU plan's predictions missed by a median {median}%" in flat
    # the first error a reader meets, in the summary's table or the prose after it, says it is out of sample
    at = flat.index("median error") if "median error" in flat else flat.index("by a median")
    assert "out of sample" in flat[max(0, at - 40):at], flat[at - 200:at + 50]


def test_the_readme_says_what_each_priced_program_spans():
    """The README's counts of GPUs a published run used and its priced program spans are the cases' own."""
    from collections import Counter

    flat = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    spans = Counter((c.kind, published.spans(c)) for c in published.CASES)
    kernels = sum(n for (kind, _), n in spans.items() if kind in ("gemm", "memory"))
    serving = Counter(s for (kind, s), n in spans.items() for _ in range(n) if kind in ("decode", "prefill"))
    train = Counter(s for (kind, s), n in spans.items() for _ in range(n) if kind == "train")
    assert f"the {kernels} GEMM and memory cases and {serving[(1, 1)]} of the {sum(serving.values())} decode" in flat
    assert sorted(s for s in serving if s != (1, 1)) == [(2, 2), (4, 4)]
    assert f"of the {sum(train.values())} training steps, llm.c's {train[(8, 1)]} ran on 8 GPUs" in flat
    many = [s for s in train if s[0] > 8]
    # compiled whole over every node: each step's program spans the nodes its workload names
    import re
    for c in published.CASES:
        if (nodes := re.search(r"(\d+) nodes of 8", c.workload)) and published.is_step(c):
            assert c.program[5] == 8 * int(nodes.group(1)) and published.spans(c) == (c.program[5],) * 2, c.id
    assert (f"{train[(1, 1)]} ran on one GPU, {train[(8, 8)]} on one node of 8 and {sum(train[s] for s in many)} on "
            f"{min(s[0] for s in many)} to {max(s[0] for s in many)} GPUs, each priced whole") in flat


def test_the_docs_state_the_counts_the_cases_hold():
    """The README and the guide say how many published cases there are and of which kinds: the data's counts."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    n = len(published.CASES)
    train = sum(c.kind == "train" for c in published.CASES)
    serving = sum(c.kind in ("decode", "prefill") for c in published.CASES)
    readme, guide = (root / "README.md").read_text(), (root / "docs" / "guide.md").read_text()
    assert f"the {n} published GPU measurements" in readme.replace("\n  ", " ")
    assert f"checked against {n} measurements" in readme.replace("\n", " ")
    assert f"against {n} published" in guide and f"{train} whole training steps" in guide
    assert f"{serving} decode and prefill steps" in guide


def test_the_committed_prices_were_made_by_todays_pricing_code():
    """Every committed run the study merges carries, for each experiment whose records hold prices (the published
    cases', the transformer plans'), the stamp of the code that priced them: a change to any module a price depends
    on (found by its imports; comments and docstrings aside) prices them again (experiments.reprice), or this
    fails."""
    from experiments import reprice

    assert reprice.stale() == {}, ("priced by other code; price them again: python -m experiments.reprice (about 11 "
                                   "minutes on two cores for priced-published, 2 for each compiled run)")


@pytest.mark.slow
def test_a_gemm_a_decode_and_a_training_case_priced_again_give_the_committed_figures():
    """The committed prices are today's: a GEMM, a decode and a training case priced again here land within 1% of
    reports/priced-published's records (where this machine compiles with the versions that priced them)."""
    from jaxgpu.pricing import fingerprint, targets

    from experiments.gpu_model import measure

    if why := targets.unavailable():
        pytest.skip(why)
    run = results.read_run(Path(__file__).resolve().parents[1] / "reports" / "priced-published")
    if run.meta["info"]["gpu_model"]["pricing_versions"] != fingerprint.versions():
        pytest.skip("priced with other compiler versions than this machine's")
    committed = {r.params["case"]: r.metrics for r in results.latest(run.records) if "case" in r.params}
    for case_id in ("torch-mm-h100-bf16-8192", "gpt-fast-llama2-7b-decode-a100", "pax-gpt-126m-64-h100"):
        assert measure.price(case_id)["predicted_s"] == pytest.approx(committed[case_id]["predicted_s"], rel=0.01)


def test_reprice_finds_a_stale_run_and_puts_fresh_records_in_place(tmp_path, monkeypatch, capsys):
    """A compiled run whose transformer stamp is not today's is stale; repricing it compiles that experiment again,
    puts the new records where the old ones stood under the run's own id, stamps run.json and says when and why; the
    other experiments' records are untouched. An unknown run is refused in one line."""
    import shutil

    from jaxgpu.pricing import fingerprint

    from experiments import reprice

    root = Path(__file__).resolve().parents[1] / "reports"
    shutil.copytree(root / "compiled-h100", tmp_path / "compiled-h100")
    folder = tmp_path / "compiled-h100"
    meta = json.loads((folder / "run.json").read_text())
    meta["info"]["transformer"] = {**fingerprint.stamp("transformer"), "pricing_code": "0" * 12}
    (folder / "run.json").write_text(json.dumps(meta))
    assert reprice.stale(["compiled-h100"], tmp_path) == {"compiled-h100": ["transformer"]}
    before = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
    calls = []

    def fake_run(args):  # experiments.run writes a fresh run of one record; experiments.report is left out
        calls.append(args)
        if args[0] == "experiments.run":
            out = Path(args[args.index("--out") + 1])
            out.mkdir(parents=True)
            rec = {**next(r for r in before if r["experiment"] == "transformer"), "run_id": "fresh"}
            (out / "results.jsonl").write_text(json.dumps(rec) + "\n")
            stamp = fingerprint.stamp("transformer", [rec["params"]], "H100 SXM")
            (out / "run.json").write_text(json.dumps({"info": {"transformer": stamp}}))

    monkeypatch.setattr(reprice, "_run", fake_run)
    reprice.part(folder, "transformer", "a test")
    after = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
    assert [r for r in after if r["experiment"] != "transformer"] == [r for r in before if r["experiment"] !=
                                                                       "transformer"]
    mine = [r for r in after if r["experiment"] == "transformer"]
    assert len(mine) == 1 and mine[0]["run_id"] == meta["run_id"]
    assert calls[0][:6] == ["experiments.run", "--only", "transformer", "--compile-for", "h100", "--profile"]
    said = json.loads((folder / "run.json").read_text())["info"]
    assert said["transformer"] == fingerprint.stamp("transformer", [mine[0]["params"]], "H100 SXM") and said[
        "recompiled"].startswith(
        "transformer's records compiled again on") and ": a test. Before that:" in said["recompiled"]
    assert reprice.stale(["compiled-h100"], tmp_path) == {}
    assert reprice.main(["no-such-run"]) == 2 and "not one of the study's runs" in capsys.readouterr().err


def test_the_fingerprint_follows_imports_and_ignores_words(tmp_path):
    from jaxgpu.pricing import fingerprint

    for name, text in (("a.py", '"""Doc."""\nfrom jaxgpu import b\nx = 1  # one\n'), ("b.py", "y = 2\n"),
                       ("c.py", "z = 3\n")):
        (tmp_path / "jaxgpu").mkdir(exist_ok=True)
        (tmp_path / "jaxgpu" / name).write_text(text)
    first = fingerprint.fingerprint(["jaxgpu.a"], tmp_path, with_versions=False)
    assert [p.name for p in fingerprint.sources(["jaxgpu.a"], tmp_path)] == ["a.py", "b.py"]  # not c.py
    (tmp_path / "jaxgpu" / "a.py").write_text('"""Other words."""\nfrom jaxgpu import b\nx = 1  # another\n')
    assert fingerprint.fingerprint(["jaxgpu.a"], tmp_path, with_versions=False) == first
    (tmp_path / "jaxgpu" / "b.py").write_text("y = 3\n")  # code an import reaches
    assert fingerprint.fingerprint(["jaxgpu.a"], tmp_path, with_versions=False) != first


def test_every_case_has_a_first_price_or_says_why_not():
    """A case's first price is the model's price before any change it informed (priced at the commit before it
    entered, or before the change it guided), with that commit and how; a case without one says why (in sample: it
    entered with the change that let the model express it). A new case is priced and recorded before anything is
    changed because of it (experiments.first_price)."""
    got = published.first_prices()
    assert set(got) == {c.id for c in published.CASES}, "a case added to published_cases needs its first price"
    for case_id, entry in got.items():
        if entry.get("first_price_s") is None:
            assert entry["why"].startswith("in sample"), case_id
        else:
            assert entry["first_price_s"] > 0 and entry["priced_at"] and entry["how"], case_id
            # how to price it again: the commit, the files laid over it, the call (experiments.first_price RULES)
            assert set(entry["recipe"]) == {"at", "from", "files", "rule", "jax"}, case_id
        if "corrected" in entry:  # a corrected first price keeps the value it had, and says why
            assert entry["recorded_s"] > 0 and entry["recorded_s"] != entry["first_price_s"], case_id
    # the 21 kernels' first prices left out the dispatch b86d078^'s estimate held: corrected, each keeping its value
    kernels = [c.id for c in published.CASES if c.kind in ("gemm", "memory")]
    assert len(kernels) == 21 and all("corrected" in got[k] and "dispatch" in got[k]["corrected"] for k in kernels)
    # a case that guided a change to the model is priced before it (its commit is not the entering commit's)
    toolbox = got["jax-toolbox-maxtext-llama2-7b-h100"]
    assert toolbox["priced_at"] != "1cd23a8" and "7e9254f" in toolbox["how"]


def _git(*args: str) -> str:
    import subprocess

    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _history() -> bool:
    import subprocess

    try:
        return bool(_git("rev-parse", "--verify", "--quiet", "b86d078^{commit}"))
    except (OSError, subprocess.CalledProcessError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _history(), reason="needs the project's git history (a full clone)")
def test_every_cases_role_follows_the_out_of_sample_rule():
    """published.OUT_OF_SAMPLE, recomputed for every scored case from git history and the data: a first price counts
    when the commit whose code priced it comes before the commit that added the case, and no case added before that
    prices the same program on the same GPU; first_prices.json gives a price to exactly those, the rest say why."""
    from experiments import first_price

    got = published.first_prices()
    full = lambda commit: _git("rev-parse", commit)  # noqa: E731 - commits compared whole, not by abbreviation
    entered = {}
    for c in published.scored():
        said = got[c.id]["entered"]
        entered[c.id] = full(first_price.entered(c.id) if said.startswith("after ") else said)
    for c in published.scored():
        e = got[c.id]
        at = full(e["recipe"]["at"]) if e.get("recipe") else ""
        later = [entered[c.id], *(full(commit) for commit, _ in published.guided_changes(c))]
        before = bool(at) and all(at != x and not subprocess_fails("merge-base", "--is-ancestor", at, x)
                                  for x in later)
        twin = any(o.id != c.id and o.program == c.program and o.gpu == c.gpu and entered[o.id] != entered[c.id]
                   and not subprocess_fails("merge-base", "--is-ancestor", entered[o.id], entered[c.id])
                   for o in published.scored())
        assert bool(e.get("first_price_s")) == (before and not twin), (c.id, at, entered[c.id], twin)
        if not e.get("first_price_s"):
            assert e["why"].startswith("in sample"), c.id
    # the issue's cases: code from their own commit, and the decode twins of b86d078's cases
    for case_id in ("maxtext-mixtral-8x7b-ep8-256-h200", "nemo-gpt3-20b-fp8-tp2-64-h100",
                    "gpt-fast-llama2-7b-decode-a100", "torchao-llama2-7b-int8-a100"):
        assert got[case_id]["first_price_s"] is None, case_id


def subprocess_fails(*args: str) -> bool:
    import subprocess

    try:
        _git(*args)
        return False
    except subprocess.CalledProcessError:
        return True


def test_a_setting_a_source_leaves_unstated_is_priced_both_ways():
    """A step whose setup says a setting is not stated prices the plausible others (its spread in the steps table,
    never 'settings stated'); each step priced with a framework's overlap, which no case quotes from its config, also
    prices XLA's own order; NeMo's Llama-2 7B runs as its setup says, data parallel with the distributed optimizer."""
    for c in published.CASES:
        if c.kind != "train" or not published.is_step(c):
            continue
        said = dict(c.program[6])
        if re.search(r"(remat|optimizer)[^;]* not stated", c.setup) and c.program[0] == "step":
            assert c.plausible, c.id  # an encoder's step takes no settings to vary: the table says so instead
        if said.get("overlap") == "framework":
            assert (("overlap", "plan"),) in c.plausible, c.id
    nemo = dict(view._BY_ID["nemo-llama2-7b-fp8-8-h100"].program[6])
    assert nemo["mesh"] == "zero1"
    # the steps table: never "settings stated" for a case whose source leaves one unstated
    recs = []
    for c in published.CASES:
        r = _record(c, 0.1)
        if c.kind == "train" and published.is_step(c):
            r.metrics.update(published.memory_share(c, 1e9), bytes_per_device=1e9)
        recs.append(r)
    latest = {r.params["case"]: r for r in recs}
    rows = {row[0]: row[-1] for row in view._steps_table(latest).rows}
    vit = view._BY_ID["jaxtoolbox-vit-b16-8-a100"]
    assert "not stated" in vit.setup and rows[vit.id] != "settings stated" and "unstated" in rows[vit.id]
    assert rows["maxtext-llama2-7b-1x8-h100"] == "settings stated"


def test_the_case_that_guided_the_overlap_names_it():
    """The step tests/test_planner.py holds within 15% was checked on before it entered: it names the change."""
    pinned = next(c for c in published.CASES if c.id == "jax-toolbox-maxtext-llama2-7b-h100")
    assert pinned.guided.startswith("7e9254f")


@pytest.mark.slow
@pytest.mark.skipif(not _history(), reason="needs the project's git history (a full clone)")
def test_first_prices_are_priced_again_from_git_history_as_recorded():
    """--reproduce checks out the commit that priced each case in a temporary worktree, lays the case's files over it
    and prices it there: the three GEMMs the issue names land within a point of their corrected errors, a decode and
    a training step as recorded, and every one agrees with first_prices.json and the committed report's table."""
    from experiments import first_price

    want = {"torch-mm-h100-bf16-2048": -0.02, "torch-mm-h100-tf32-1024": -0.24, "mamf-h200-fp8": 0.13}
    found = first_price.reproduce([*want, "torchao-llama2-7b-decode-a100", "llmc-gpt2-124m-a100"],
                                  progress=lambda _: None)
    by = {r.case: r for r in found}
    for case_id, error in want.items():
        assert by[case_id].repriced_error == pytest.approx(error, abs=0.01), case_id
    assert all(r.agrees and r.report_error is not None for r in found), found
    assert by["llmc-gpt2-124m-a100"].repriced_s == pytest.approx(by["llmc-gpt2-124m-a100"].recorded_s, rel=1e-3)


@pytest.mark.slow
@pytest.mark.skipif(not _history(), reason="needs the project's git history (a full clone)")
def test_every_move_of_a_printed_price_is_marked_guided_or_says_why_not():
    """The list --moved computes from the committed priced runs (and each first price, itself printed) is the one
    first_prices.json records, and each move on it is marked guided or carries a reason why not."""
    from experiments import first_price

    found = first_price.moves()
    recorded = {(case, m["change"]): m for case, e in published.first_prices().items() for m in e.get("moved", ())
                if not m.get("no_longer_listed")}  # a mark the history stopped giving is kept, and said
    assert {(m["case"], m["change"]) for m in found} == set(recorded)
    assert all(m.get("guided") or m.get("why_not") for m in recorded.values())
    # the issue's: Automodel's 70B step, +75% at its first price, -28% since; MaxText's 4x8, printed before c2a2a12
    assert recorded[("automodel-llama3-70b-cp2-64-h100", "b443dd0")]["guided"]
    assert any(case == "maxtext-llama2-7b-4x8-h100" for case, _ in recorded)


def test_first_price_records_a_new_case_once_and_refuses_bad_input(tmp_path, monkeypatch, capsys):
    """The first-price tool writes a new case's price with the commit that priced it, and refuses in one line an
    unknown case, a case already priced, and pricing code changed from HEAD."""
    from experiments import first_price
    from experiments.gpu_model import measure

    prices = {k: v for k, v in published.first_prices().items() if k != "mamf-a100-bf16"}
    path = tmp_path / "first_prices.json"
    path.write_text(json.dumps(prices))
    monkeypatch.setattr(published, "FIRST_PRICES", path)
    monkeypatch.setattr(measure, "price", lambda case_id: {"predicted_s": 1e-3})
    assert first_price.main(["no-such-case"]) == 2
    assert first_price.main(["mamf-h100-fp8"]) == 2  # priced already
    assert "never priced again" in capsys.readouterr().err
    monkeypatch.setattr(first_price, "changed_pricing_code", lambda: ["jaxgpu/pricing/roofline.py"])
    assert first_price.main(["mamf-a100-bf16"]) == 2
    assert "differs from HEAD" in capsys.readouterr().err
    monkeypatch.setattr(first_price, "changed_pricing_code", lambda: [])
    assert first_price.main(["mamf-a100-bf16"]) == 0
    entry = json.loads(path.read_text())["mamf-a100-bf16"]
    assert entry["first_price_s"] == 1e-3 and entry["priced_at"] == first_price.head()
    assert first_price.main(["mamf-a100-bf16"]) == 2
    # --reproduce and --correct: one line each for what cannot be done
    assert first_price.main([]) == 2 and "at least one CASE_ID" in capsys.readouterr().err
    assert first_price.main(["--correct", "why", "mamf-h100-fp8"]) == 2
    assert first_price.main(["--reproduce", "no-such-case"]) == 2
    assert first_price.main(["--reproduce", "nemo-gpt3-5b-fp8-64-h100"]) == 2  # in sample: nothing to reproduce
    assert "no first price to reproduce" in capsys.readouterr().err
    assert first_price.main(["--moved", "mamf-h100-fp8"]) == 2


def test_the_steps_table_says_each_runs_settings_as_its_source_does():
    """A step's settings in the report's table of training steps: its XLA flags as its script writes them, its
    cluster's network in Gb/s a GPU (MaxText's A3 High VMs), the rest as the case names them."""
    said = view._settings_said(view._BY_ID["maxtext-llama2-7b-2x8-h100"].program[6])
    assert "--xla_gpu_enable_latency_hiding_scheduler=true" in said and "network 100 Gb/s a GPU" in said
    assert "mesh=hsdp" in said and "network" not in view._settings_said(view._BY_ID["pax-gpt-5b-256-h100"].program[6])


def test_a_case_whose_source_names_a_frameworks_remat_policy_is_priced_with_it():
    """A run whose setup quotes its framework's policy (MaxText's remat_policy, Pax's CHECKPOINT_POLICY, torchtitan's
    selective per-op checkpointing) prices that policy by its name (jaxgpu.ground.remat), unless the policy is one this
    program cannot run as defined (refused: the setup says which it priced instead)."""
    import re

    from jaxgpu.ground import remat

    named = 0
    for c in published.CASES:
        if not published.is_step(c):
            continue
        said = dict(c.program[6]).get("remat", "none")
        for m in re.finditer(r"remat_policy[= ]([a-z_]+)|CHECKPOINT_POLICY (?:not set in \w+: )?([A-Z_]+)"
                             r"|(selective activation checkpointing per op)", c.setup):
            name = (f"maxtext:{m.group(1)}" if m.group(1) else f"pax:{m.group(2)}" if m.group(2)
                    else "torchtitan:selective_op")
            if name in remat.REFUSED:
                assert remat.REFUSED[name][0] and said != name, c.id
                continue
            base = remat.POLICIES[name].base
            assert said == name or (name.startswith("pax:") and said == base) or (
                name == "maxtext:full" and said == "nothing_saveable"), (c.id, name, said)
            named += 1
    assert named >= 10
