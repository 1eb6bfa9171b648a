"""The calibration table (jaxgpu.ground.calibration): each card's share of its peaks by kind of kernel, each a published
kernel-level measurement with its source, read by the price; a card without one names the card standing in."""

import re
from pathlib import Path

import pytest

from jaxgpu.ground import calibration, hardware
from jaxgpu.pricing import published, roofline, sharded

KINDS = ("matmul:bf16", "matmul:fp8", "matmul:tf32", "matmul:fp32", "memory", "attention", "link",
         "link:all-reduce", "network", "interference")


def test_every_entry_has_a_source_a_quote_and_a_rule():
    for e in calibration.TABLE:
        # a repository at a commit, a paper, or the device tool's notes of the lent H200
        assert re.search(r"@[0-9a-f]{7}|arXiv \d{4}\.\d{4,5}|issue \d+|KINDS\.md", e.source), e
        assert e.quote.strip() and e.measured and e.peak, e
        assert 0 < e.share <= 1.1, e  # an RTX 4090 runs above its whitepaper's clock: a little over 1
        assert e.kind.split(":")[0] in calibration.RULE, e
        assert e.card == "any" or e.card in hardware.GPUS, e
    assert len({(e.card, e.kind) for e in calibration.TABLE}) == len(calibration.TABLE)


def test_no_entry_comes_from_a_whole_step_and_a_kernel_case_an_entry_reads_is_not_scored():
    """Kernel-level only: an entry may be a published GEMM or memory case, which then calibrates (no longer scored);
    the calibration's code and data name no whole step's case."""
    cases = {c.id: c for c in published.CASES}
    for e in calibration.TABLE:
        if e.case:
            assert cases[e.case].kind in ("gemm", "memory") and cases[e.case].calibration, e.case
    text = Path(calibration.__file__).read_text()
    steps = [c.id for c in published.CASES if c.kind not in ("gemm", "memory")]
    assert not [i for i in steps if i in text]


@pytest.mark.parametrize("card", sorted(hardware.GPUS))
def test_every_card_is_priced_at_a_share_of_each_kind_and_says_whose(card):
    hw = hardware.GPUS[card]
    for kind in KINDS:
        sh = hw.share(kind)
        assert sh.card == card and 0 < sh.value <= 1.1
        own = (card, kind) in {(e.card, e.kind) for e in calibration.TABLE}
        assert (sh.stand_in is None) == (own or (kind == "link:all-reduce" and sh.entry.kind == "link"
                                                 and sh.entry.card == card)), (card, kind, sh.stand_in)
        assert sh.entry.source in sh.said() and (sh.stand_in is None or f"{sh.stand_in}'s, standing in" in sh.said())
    roofs = roofline.roofs_for(hw)
    assert roofs.flops["bf16"] == pytest.approx(hw.tflops["bf16"] * 1e12 * hw.share("matmul:bf16").value)
    assert roofs.bandwidth == pytest.approx(hw.memory_bw_gbps * 1e9 * hw.share("memory").value)


def test_a_card_added_without_entries_stands_in_as_its_compile_target_or_the_h100():
    import dataclasses

    new = dataclasses.replace(hardware.GPUS["L4"], name="Some card", stand_in="A100 80GB")
    assert new.share("matmul:bf16").stand_in == "A100 80GB" and new.share("matmul:bf16").value == pytest.approx(
        271.2 / 312)
    bare = dataclasses.replace(new, stand_in=None)
    assert bare.share("memory").stand_in == "H100 SXM"


def test_fused_attention_is_priced_by_its_length_on_the_curve_its_card_measured():
    fwd, bwd = 644.0, 541.0  # cuDNN on an H200 at 8,192 causal tokens
    assert calibration.combined(fwd, bwd) == pytest.approx(3.5 / (1 / fwd + 2.5 / bwd))
    low, at, high = calibration.attention_at("H200 SXM", 8192)
    assert at == pytest.approx(calibration.combined(fwd, bwd) / 989.4) and low < at < high
    assert calibration.attention_at("H200 SXM", 1024)[1] == calibration.attention_at("H200 SXM", 2048)[1]
    mid = calibration.attention_at("H200 SXM", 6000)[1]
    assert calibration.attention_at("H200 SXM", 4096)[1] < mid < at
    # the B200's backward at GB200's ratio to its forward; the A100's band as published
    b = calibration.attention_at("B200", 16384)[1]
    assert b == pytest.approx(calibration.combined(1488.046, 1488.046 * 1328 / 1708) / 2250)
    assert calibration.attention_at("A100 80GB", 4096) == (0.50, 0.615, 0.73)
    assert roofline.flash_band("H100 SXM", 8192) == calibration.attention_at("H200 SXM", 8192)


def test_collectives_move_at_the_measured_share_of_the_link_and_the_port():
    h200, a100 = hardware.GPUS["H200 SXM"], hardware.GPUS["A100 80GB"]
    assert sharded.link_rate(h200, "all-gather") == pytest.approx(450e9 * 362.9 / 450)
    assert sharded.link_rate(h200, "all-reduce") == pytest.approx(480e9)  # NVLink SHARP reduces in the switch
    assert sharded.link_rate(a100, "all-reduce") == pytest.approx(300e9 * 230.77 / 300)  # no SHARP: the ring's
    assert sharded.port_rate(h200) == pytest.approx(50e9 * 338.82 / 15 / 25)


def test_the_command_says_the_shares_each_card_was_priced_at_and_whose():
    from types import SimpleNamespace

    from experiments import model

    [line] = model.share_lines([SimpleNamespace(gpu="B200"), SimpleNamespace(gpu="L4")], 4096, "bf16")
    assert "B200 products 0.78, attention 0.44, memory 0.90*, link 0.76, network 0.74" in line
    assert "L4 products 0.59, attention 0.61*" in line and "19% slower" in line and "calibration.md" in line
