"""Meshes over several nodes, compiled whole by XLA:GPU: each mesh's bytes a GPU and its collectives' bytes against
hand counts on a small decoder, which collectives cross nodes, and what cannot be laid out."""

import dataclasses

import pytest

from jaxgpu.ground.decoders import Decoder, StepSettings
from jaxgpu.pricing import planner, sharded, targets

# every dimension divides 16, so each array cuts evenly over 16 GPUs and the hand counts are exact
SMALL = Decoder("mesh-small", 4, 512, 8, 8, 2048, 512, 256, "llama")
P = SMALL.params()


@pytest.fixture(scope="module")
def plans():
    if why := targets.unavailable():
        pytest.skip(why)
    out = {}
    for mesh in ("fsdp", "hsdp", "dp", "zero1", "zero2"):
        out[mesh] = planner.plan_model(SMALL, "h100", batch=32, seq=256, devices=16,
                                       settings=StepSettings(mesh=mesh, accumulate=2))
    return out


def test_each_mesh_holds_between_steps_what_a_hand_count_says(plans):
    """fp32 weights (4 bytes a weight) and AdamW's two moments (8): fsdp cuts all 12 over the 16 GPUs, hsdp over a
    node's 8, dp keeps them whole; ZeRO-1 and ZeRO-2 as Megatron's distributed optimizer holds them, bf16 weights
    whole (2) and the 12 cut. Tokens are the rest."""
    tokens = 32 * 257 * 4 / 16
    want = {"fsdp": 12 * P / 16, "hsdp": 12 * P / 8, "dp": 12 * P, "zero1": 2 * P + 12 * P / 16,
            "zero2": 2 * P + 12 * P / 16}
    for mesh, p in plans.items():
        held = p.memory_split["arguments"]
        assert held == pytest.approx(want[mesh] + tokens, rel=0.01), mesh
        assert p.devices == 16 and p.estimate_parts["state"] > 0
    assert plans["hsdp"].mesh == "hsdp 2 x fsdp 8"
    # ZeRO-2 sums its micro-batches' gradients in its cut, ZeRO-1 a whole fp32 gradient on each GPU (4 bytes a weight)
    assert plans["zero2"].memory_split["temporaries"] < plans["zero1"].memory_split["temporaries"] - 3 * P
    # the formula beside it cuts the state as each mesh does: dp's 18 bytes a weight whole, fsdp's over 16
    assert plans["dp"].estimate_parts["state"] == pytest.approx(18 * SMALL.formula_params())
    assert plans["fsdp"].estimate_parts["state"] == pytest.approx(18 * SMALL.formula_params() / 16)


def test_each_mesh_moves_the_bytes_a_hand_count_says(plans):
    """Each of the 2 micro-batches' gradients in bf16 (2 bytes a weight): fsdp reduce-scatters them over 16, (n - 1) / n
    of them a GPU; hsdp over a node's 8, then all-reduces its eighth across the 2 nodes (2 (k - 1) / k of it). DDP
    and ZeRO-1 sum each GPU's micro-batches on it and reduce once a step, in fp32 (4 bytes a weight): dp all-reduces,
    2 (n - 1) / n; ZeRO-1 reduce-scatters, (n - 1) / n. fsdp gathers the weights in bf16 once for the forward pass
    and once for the backward."""
    grads = 2 * P
    moved = {m: {op: b for op, (_, b) in p.collectives.items()} for m, p in plans.items()}
    # once a micro-batch: the accumulation sums what each micro-batch's backward pass reduced
    assert moved["fsdp"]["reduce-scatter"] == pytest.approx(2 * grads * 15 / 16, rel=0.05)
    assert 2 * grads * 15 / 16 <= moved["fsdp"]["all-gather"] <= 2 * 2 * grads * 15 / 16 * 1.05
    assert moved["hsdp"]["reduce-scatter"] == pytest.approx(2 * grads * 7 / 8, rel=0.05)
    assert moved["hsdp"]["all-reduce"] == pytest.approx(2 * 2 * (1 / 2) * grads / 8, rel=0.1)
    assert moved["dp"]["all-reduce"] == pytest.approx(2 * 15 / 16 * 4 * P, rel=0.05)
    assert "all-gather" not in moved["dp"]
    assert moved["zero1"]["reduce-scatter"] == pytest.approx(15 / 16 * 4 * P, rel=0.05)
    # ZeRO-2 reduce-scatters each micro-batch's as fsdp does; ZeRO-1 and ZeRO-2 gather the updated weights once, in
    # bf16 (2 bytes a weight, (n - 1) / n of them)
    assert moved["zero2"]["reduce-scatter"] == pytest.approx(moved["fsdp"]["reduce-scatter"], rel=0.01)
    for z in ("zero1", "zero2"):
        assert moved[z]["all-gather"] == pytest.approx(2 * P * 15 / 16, rel=0.05)


def test_collectives_that_join_nodes_run_at_the_network_ports_their_rings_leave_by():
    """A group of one GPU of each of two nodes (hsdp's between the nodes) is priced at that GPU's network port (50 GB/s
    each way on an H100 DGX), 9 times NVLink's time (450 GB/s). A ring over all eight GPUs of each node runs as
    eight rings, each leaving the node through another GPU's port: eight ports' 400 GB/s (NVIDIA measures 192 GB/s
    of all-reduce bus bandwidth between DGX A100s, eight 25 GB/s ports: NVIDIA/nccl issue 812). An all-to-all over
    the same GPUs sends each GPU's share through its own port."""
    from jaxgpu.ground import hardware, launches

    hlo = ("  %all-reduce-start.1 = f32[1024]{0} all-reduce-start(f32[1024]{0} %p), channel_id=1, "
           "replica_groups=[8,2]<=[2,8]T(1,0), use_global_device_ids=true, to_apply=%add\n"
           "  %reduce-scatter.2 = f32[128]{0} reduce-scatter(f32[1024]{0} %q), channel_id=2, "
           "replica_groups=[2,8]<=[16], dimensions={0}, use_global_device_ids=true, to_apply=%add\n"
           "  %all-gather-start.3 = f32[1024]{0} all-gather-start(f32[64]{0} %r), channel_id=3, "
           "replica_groups=[1,16]<=[16], dimensions={0}, use_global_device_ids=true\n"
           "  %all-to-all.4 = f32[1024]{0} all-to-all(f32[1024]{0} %s), channel_id=4, "
           "replica_groups=[1,16]<=[16], dimensions={0}\n")
    across = sharded.crossing(hlo, 8, 16)
    assert across == {"all-reduce-start.1": 1, "all-gather-start.3": 8, "all-to-all.4": 8}
    assert sharded.crossing(hlo, 8, 8) == {}
    hw = hardware.find_gpu("h100")

    def seconds(name: str, group: int, where) -> float:
        hidden, exposed, _, _ = sharded.collectives([launches.Kernel(name, 0, 8192.0, False, 1, group=group)], hw,
                                                    16, where)
        return hidden + exposed

    # each at the share of its wire a node's collectives reach (Hardware.share: the link's, an all-reduce's own, the
    # network port's)
    link, ring, port = sharded.link_rate(hw, "all-reduce"), sharded.link_rate(hw), sharded.port_rate(hw)
    for name, group, slower in (("all-reduce-start.1", 2, link / port), ("all-gather-start.3", 16, ring / (8 * port)),
                                ("all-to-all.4", 16, ring / port)):
        near = seconds(name, group, {})
        assert near > 0 and seconds(name, group, across) == pytest.approx(near * slower), name
    assert seconds("all-reduce-start.1", 2, {"all-reduce-start.1"}) == pytest.approx(
        seconds("all-reduce-start.1", 2, across))  # named alone: one GPU a node


def test_a_clusters_own_network_prices_what_crosses_its_nodes():
    """A cloud VM's NICs shared among its GPUs (``StepSettings.network``, ``--network``: 800 Gb/s over 8 GPUs, 100
    Gb/s each way a GPU) rather than a DGX's 400 Gb/s port a GPU: what crosses nodes takes 4 times as long (a ring's
    eight ports 100 GB/s, not 400: under NVLink's 450 either way), what stays within a node the same time; the step
    says it, and the command refuses a negative port in one line."""
    import subprocess
    import sys

    from jaxgpu.ground import hardware, launches

    h100 = hardware.find_gpu("h100")
    cloud = hardware.with_network(h100, 100)
    assert cloud.internode_gbps == 25 and hardware.with_network(h100, 0) is h100
    across = {"all-reduce-start.1": 1, "all-gather-start.3": 8}
    for name, group in (("all-reduce-start.1", 2), ("all-gather-start.3", 16), ("all-gather-start.4", 8)):
        k = [launches.Kernel(name, 0, 8192.0, False, 1, group=group)]
        dgx, vm = (sum(sharded.collectives(k, hw, 16, across)[:2]) for hw in (h100, cloud))
        assert vm == pytest.approx(dgx * (4 if name in across else 1)), name
    if why := targets.unavailable():
        pytest.skip(why)
    s = StepSettings(mesh="hsdp")
    dgx = planner.plan_model(SMALL, "h100", batch=32, seq=256, devices=16, settings=s)
    vm = planner.plan_model(SMALL, "h100", batch=32, seq=256, devices=16, settings=dataclasses.replace(s, network=100))
    assert vm.comm_s + vm.overlapped_s > dgx.comm_s + dgx.overlapped_s
    assert "a 100 Gb/s network port a GPU" in vm.settings and "network" not in dgx.settings
    for bad in ("-1", "inf", "nan"):
        cmd = [sys.executable, "-m", "experiments.model", "--model", "llama-7b", "--gpus", "h100", "--network", bad]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--network" in proc.stderr
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="network port"):
            StepSettings(network=bad)


def test_a_70b_step_over_128_gpus_holds_a_sixteenth_of_the_8_gpu_step_s_state():
    """Llama-3 70B (its config.json's sizes) over 16 nodes of 8 H100s, fsdp over all 128, each layer recomputed:
    between steps a GPU holds its 1/128 of the fp32 weights and moments (12 bytes a weight), a sixteenth of its
    share on 8 GPUs; the step fits, and its weight gathers cross nodes, priced at the network ports."""
    from jaxgpu.ground import decoders

    if why := targets.unavailable():
        pytest.skip(why)
    c, _ = decoders.from_hf_config({"hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
                                    "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
                                    "hidden_act": "silu", "max_position_embeddings": 8192}, "llama3-70b")
    p = planner.plan_model(c, "h100", batch=256, seq=8192, devices=128,
                           settings=StepSettings(mesh="fsdp", remat="nothing_saveable"))
    assert p.memory_split["arguments"] == pytest.approx(12 * c.params() / 128, rel=0.01)
    assert p.fits and p.devices == 128
    # every collective's group spans the 16 nodes, all eight GPUs of each: its rings leave a node by its eight ports,
    # 8 x 50 GB/s each way at the share a collective across nodes reaches; most of it under the compute, which runs
    # that much slower meanwhile (the card's interference share)
    h100 = planner.hardware.find_gpu("h100")
    ports = 8 * sharded.port_rate(h100)
    slowed = h100.share("interference").value * p.overlapped_s
    assert p.overlapped_s + p.comm_s - slowed == pytest.approx(sum(b for _, b in p.collectives.values()) / ports,
                                                               rel=0.01)
    assert p.overlapped_s > p.comm_s - slowed


@pytest.mark.parametrize("devices, batch, kw, said", [
    (12, 32, {}, "whole nodes of 8"),
    (16, 32, {"mesh": "tp"}, "stays within a node"),
    (256, 512, {"mesh": "fsdp+tp"}, "stays within a node"),  # the automatic group of 256 is 16
    (24, 48, {"mesh": "fsdp+tp", "tp": 3}, "stays within a node"),  # a group of 3 would straddle two nodes
    (16, 32, {"nodes": 2}, "count every GPU"),
    (8, 8, {"mesh": "dp", "accumulate": 2}, "does not split over 8 GPUs x 2 micro-batches"),
    (16, 24, {"mesh": "hsdp"}, "does not split over 16 GPUs"),
    (1, 3, {"mesh": "dp", "accumulate": 2}, "does not split over 1 GPU x 2 micro-batches"),
    (8, 16, {"mesh": "zero1", "lora": 4}, "not ZeRO"),
])
def test_meshes_that_cannot_be_laid_out_are_refused_in_one_line(devices, batch, kw, said):
    with pytest.raises(ValueError, match=said):
        planner.plan_model(SMALL, "h100", batch=batch, seq=64, devices=devices, settings=StepSettings(**kw))


def test_searches_past_a_node_say_what_cannot_be_laid_out_and_try_tp_within_a_node_only(monkeypatch):
    """--fit over 8 and 16 GPUs where nothing fits: the plan of the most, tp not tried over 16 (it would straddle
    nodes); --max-batch on 12 GPUs says why it cannot lay them out, not "does not fit"."""
    from jaxgpu.pricing import knobs

    if why := targets.unavailable():
        pytest.skip(why)
    monkeypatch.setattr(sharded, "USABLE_FRACTION", 1e-6)
    p = planner.fewest(SMALL, "h100", counts=(8, 16), batch=32, seq=64)
    assert not p.fits and p.devices == 16
    with pytest.raises(ValueError, match="whole nodes of 8"):
        knobs.largest(SMALL, "h100", what="batch", devices=12, batch=32, seq=64)


def test_a_serving_step_takes_no_data_parallel_mesh():
    with pytest.raises(ValueError, match="splits a training step's batch"):
        planner.plan_model(SMALL, "h100", mode="serve", batch=4, seq=64, devices=2,
                           settings=StepSettings(mesh="dp", flash=False, scan=False))


def _zero1_tp(monkeypatch, **settings) -> tuple:
    """plan_model of SMALL's zero1+tp step over 8 GPUs in tp groups of 2, and the text of XLA:GPU's plan of it."""
    hlos = []
    compiled = sharded.compiled

    def keep(*args, **kw):
        out = compiled(*args, **kw)
        hlos.append(out[1])
        return out

    monkeypatch.setattr(sharded, "compiled", keep)
    monkeypatch.setattr(planner, "_answered", lambda key: None)  # priced afresh: its plans pass by
    p = planner.plan_model(SMALL, "h100", batch=32, seq=256, devices=8,
                           settings=StepSettings(mesh="zero1+tp", tp=2, **settings))
    return p, hlos[0]


def test_megatrons_layout_holds_tp_cuts_and_reduces_once_a_step(monkeypatch):
    """zero1+tp over 8 GPUs, tp groups of 2: a GPU holds the bf16 weights' tp half (2P / 2) and an eighth of the fp32
    weights and AdamW's moments (12P / 8), as Megatron's distributed optimizer does; its group's gradients (fp32, the
    tp half: 2P) are summed over the 2 micro-batches where they are and reduce-scattered over the 4 groups once a step
    (one fp32 reduce-scatter), 3/4 of them, and the updated weights gathered back in bf16 (P, 3/4 of it). The rest
    are the sequence-parallel stream's: for each of the 2 micro-batches, 2 gathers and 2 reduce-scatters a layer
    forward, as many backward, and the head's input gathered (its gradient reduce-scattered), each half of a
    micro-batch's [4, 256, 512] bf16."""
    if why := targets.unavailable():
        pytest.skip(why)
    p, hlo = _zero1_tp(monkeypatch, accumulate=2)
    assert p.mesh == "zero1 4 x tp 2"
    assert p.memory_split["arguments"] == pytest.approx(2 * P / 2 + 12 * P / 8 + 32 * 257 * 4 / 4, rel=0.01)
    fp32 = [line for line in hlo.splitlines() if "reduce-scatter-start(" in line and " ((f32[" in line]
    assert len(fp32) == 1
    stream = 2 * (4 * 4 + 1) * 4 * 256 * 512 * 2 / 2
    for op, weights in (("reduce-scatter", 2 * P), ("all-gather", P)):
        assert p.collectives[op][1] - stream == pytest.approx(3 / 4 * weights, rel=0.02), op
    with pytest.raises(ValueError, match="does not split over 4 groups"):
        planner.plan_model(SMALL, "h100", batch=12, seq=256, devices=8,
                           settings=StepSettings(mesh="zero1+tp", tp=2, accumulate=2))


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_a_tensor_parallel_step_moves_no_head_between_its_gpus(style):
    """The fused q/k/v product's columns are laid out a head group at a time, so a tp cut gives each GPU whole heads'
    queries, keys and values: its attention needs nothing from the other GPUs. Laid out q, then k, then v, XLA moved
    them with all-to-alls and collective-permutes at every layer (16 and 9 on this step). What permutes remain are the
    embedding's gather and its gradient's scatter, a [256, 128] table's piece each."""
    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder(f"tp-{style}", 4, 512, 8, 8 if style == "gpt2" else 4, 2048, 512, 256, style)
    for mesh, tp, devices in (("zero1+tp", 2, 8), ("tp", 0, 4)):  # a tp group no larger than the KV heads
        p = planner.plan_model(c, "h100", batch=32, seq=256, devices=devices, settings=StepSettings(mesh=mesh, tp=tp))
        assert "all-to-all" not in p.collectives, (style, mesh)
        permuted = p.collectives.get("collective-permute", (0, 0.0))[1]
        assert permuted <= 2 * 256 * 128 * 2 * 1.01, (style, mesh, permuted)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_megatrons_sequence_parallelism_holds_the_stream_cut_and_moves_an_all_reduces_bytes(accumulate, monkeypatch):
    """On a tp mesh the stream between a layer's products is split along its sequence over the group: the layer
    inputs saved for the backward pass are [L, rows, T / tp, d] (each group's rows, or a micro-batch's under the
    vmap of local gradients), and no all-reduce of the stream [8, 256, 512] remains. Each product's input is
    gathered and each output reduce-scattered: a layer's forward 2 gathers and 2 reduce-scatters, its recomputed
    forward 2 gathers, its backward 2 of each, each (tp - 1) / tp of the stream: 10 halves of [8, 256, 512] bf16 a
    layer, where the all-reduces they replace moved 12 (XLA's plans: 0.99 and 1.15 of the count)."""
    if why := targets.unavailable():
        pytest.skip(why)
    p, hlo = _zero1_tp(monkeypatch, remat="nothing_saveable", accumulate=accumulate)
    saved = "bf16[4,8,128,512]" if accumulate == 1 else "bf16[4,1,4,128,512]"
    assert saved in hlo and saved.replace("128", "256") not in hlo
    stream = 32 / 4 * 256 * 512 * 2
    moved = {op: b for op, (_, b) in p.collectives.items()}
    assert not [line for line in hlo.splitlines() if "all-reduce-start(" in line and "8,256,512]" in line]
    weights = 3 / 4 * (2 * P + P)  # the fp32 gradients' reduce-scatter and the bf16 weights' gather, once a step
    activations = moved["all-gather"] + moved["reduce-scatter"] - weights
    assert 0.95 <= activations / (4 * 10 * stream / 2) <= 1.2
