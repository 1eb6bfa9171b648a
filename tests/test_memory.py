import jax
import numpy as np
import pytest

from jaxgpu.ground import decoders
from jaxgpu.kernels import chains, mlp, stream
from jaxgpu.pricing import fit
from jaxgpu.records import results

import experiments
from experiments import memory_fit
from experiments.harness import runner
from experiments.memory_fit import measure as memory_fit_measure
from experiments.memory_fit import view as memory_fit_view


@pytest.mark.parametrize("kernel", list(stream.KERNELS))
@pytest.mark.parametrize("variant", ["jit", "loop"])
def test_stream_kernels_compute_the_right_values(kernel, variant, device):
    arrays = stream.stream_arrays(4096, sharding=jax.sharding.SingleDeviceSharding(device))
    r = stream.bench_stream(kernel, arrays, variant, loop_iters=3, target_s=0.0)
    assert r.gbytes_per_s > 0 and r.bytes_per_call == stream.stream_bytes(kernel, 4096, 4)
    fn = stream.stream_kernel(kernel)
    np.testing.assert_allclose(np.asarray(fn(*arrays)), stream.stream_reference(kernel, *arrays), rtol=1e-6)


def test_stream_counting():
    assert stream.stream_bytes("copy", 10, 4) == 80 and stream.stream_bytes("triad", 10, 4) == 120


def test_a_wrong_kernel_is_caught(monkeypatch):
    arrays = stream.stream_arrays(1024)
    monkeypatch.setitem(stream.KERNELS, "triad", (2, 1))
    monkeypatch.setattr(stream, "stream_kernel", lambda k: (lambda a, b, c: b + 2.0 * c))
    with pytest.raises(ArithmeticError, match="wrong result"):
        stream.bench_stream("triad", arrays, "jit", target_s=0.0)


@pytest.mark.parametrize("kernel", ["copy", "triad"])
def test_numpy_and_torch_peers(kernel):
    assert stream.bench_stream_numpy(kernel, 4096, target_s=0.0).gbytes_per_s > 0
    pytest.importorskip("torch")
    assert stream.bench_stream_torch(kernel, 4096, target_s=0.0).gbytes_per_s > 0


def test_roofline_points(device):
    p = chains.bench_fma(16, 4096, device, target_s=0.0)
    assert p.intensity == 4.0 and p.flops == 2 * 16 * 4096
    assert chains.bench_matvec(128, device, target_s=0.0).intensity == pytest.approx(0.5, rel=0.02)
    assert chains.matmul_point(64, device, target_s=0.0).intensity == pytest.approx(64 / 6)


def test_transfer_moves_every_byte(device):
    # an fp32 array 4 bytes off a 64-byte boundary: XLA:CPU cannot take it as its own buffer, so it copies
    n = 1 << 14
    raw = np.random.default_rng(0).standard_normal(n + 16, dtype=np.float32)
    start = next(i for i in range(1, 17) if (raw[i:].ctypes.data % 64) == 4)
    unaligned = raw[start:start + n]
    for d in ("host_to_device", "device_to_host"):
        r = stream.bench_transfer(unaligned.nbytes, d, device, target_s=0.0, host=unaligned)
        assert r.nbytes == unaligned.nbytes and r.gbytes_per_s > 0, d
    # an aligned array may be taken as it is on CPU: then the case says so rather than time nothing
    try:
        stream.bench_transfer(1 << 16, "host_to_device", device, target_s=0.0)
    except results.Unsupported as err:
        assert device.platform == "cpu" and "zero copy" in str(err)


def test_device_to_host_copies_a_fresh_array_every_time(device, monkeypatch):
    made = []
    real = stream.fresh_device_copy

    def recording(host, dev):
        x = real(host, dev)
        assert getattr(x, "_npy_value", None) is None  # no host copy cached on it yet
        made.append(x)
        return x

    monkeypatch.setattr(stream, "fresh_device_copy", recording)
    r = stream.bench_transfer(1 << 16, "device_to_host", device, target_s=0.0)
    # the check's array, then one per warm-up and timed copy: none copied twice
    assert len(made) == 1 + 2 + r.timing.n_iters
    assert len({id(x) for x in made}) == len(made)


def test_device_to_host_copies_once(device):
    # np.array(x) of a GPU array copies twice (into its host cache, then copy=True); one copy is timed
    class Dev:
        platform = "gpu"

    class OnGpu:
        """What JAX's array does: __array__ hands back its host copy, copying again only when asked to."""

        def __init__(self):
            self.asked, self.cached = [], np.arange(8, dtype=np.float32)

        def devices(self):
            return {Dev()}

        def __array__(self, dtype=None, copy=None):
            self.asked.append(copy)
            return self.cached.copy() if copy else self.cached

    x = OnGpu()
    out = stream.device_to_host(x)
    assert x.asked == [None] and np.array_equal(out, x.cached)  # the device-to-host copy only
    cpu = stream.fresh_device_copy(np.arange(1024, dtype=np.float32), device)
    got = stream.device_to_host(cpu)
    if device.platform == "cpu":  # host memory the array's view may share: a real copy, once
        assert not np.shares_memory(got, np.asarray(cpu)) and np.array_equal(got, np.arange(1024))


def test_a_step_that_does_not_raise_the_high_water_mark_has_no_peak():
    class Device:
        def __init__(self, peaks):
            self.peaks = iter(peaks)

        def memory_stats(self):
            return {"peak_bytes_in_use": next(self.peaks), "bytes_in_use": 10}

    # a large matmul earlier left the mark at 900: a step peaking below it says nothing
    assert memory_fit_measure.device_peak_bytes(Device([900, 900]), lambda: None, 100) is None
    assert memory_fit_measure.device_peak_bytes(Device([900, 1200]), lambda: None, 100) == 1100

    class NoStats:
        def memory_stats(self):
            return None

    assert memory_fit_measure.device_peak_bytes(NoStats(), lambda: None, 0) is None


def test_last_level_cache_is_read(tmp_path):
    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "32M"), ("index9", "garbled")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    (tmp_path / "index4").mkdir()  # no size file: skipped
    assert stream.last_level_cache_bytes(str(tmp_path)) == 32 * 2**20
    assert stream.last_level_cache_bytes(str(tmp_path / "absent")) is None


def test_estimator_arithmetic_by_hand():
    assert fit.mlp_param_count(4, (3,), 2) == 4 * 3 + 3 + 3 * 2 + 2
    e = fit.mlp_train(4, (3,), 2, batch=5, optimizer="adam", preset="fp32")
    p = 23
    assert (e.params, e.optimizer, e.batch) == (4 * p, 8 * p, 5 * 4 * 4 + 5 * 4)
    # top (only) layer: its kept output 4 x 5 x 3, the gradient w.r.t. it 4 x 5 x 3, the gradient
    # from the logits 4 x 5 x 2; plus the copy of the 3x2 weight; the gradient phase: 8 x 4x3
    assert e.activations == 60 + 60 + 40 + 4 * 6 and e.gradients == 8 * 12
    assert e.total == e.state + e.batch + max(e.activations, e.gradients)
    assert fit.mlp_train(4, (3,), 2, 5, "sgd").optimizer == 0
    assert mlp.param_count(mlp.MLP(widths=(3,), n_out=2), 4) == p
    with pytest.raises(KeyError, match="unknown optimizer"):
        fit.mlp_train(4, (3,), 2, 5, "lion")


def test_transformer_table_arithmetic():
    t7 = decoders.MODELS["7B"]
    assert 6e9 < t7.formula_params() < 7.5e9
    assert fit.transformer_inference(t7, "bf16")["weights"] == 2 * t7.formula_params()
    assert fit.transformer_train(t7, "bf16")["state"] == 18 * t7.formula_params()
    assert not fit.fits(fit.transformer_train(t7, "bf16")["state"], 80)


def test_the_formula_keeps_what_a_remat_policy_keeps():
    """Korthikanti et al.'s count by policy, counted by hand for a 4-layer decoder (d 64, 4 heads, 2 KV heads of 16,
    a gated MLP of 256), 2 x 32 tokens: a token's values are 10 d + 4 q + 4 kv + 8 f = 3,072 bytes a layer, 196,608
    for the layer's 64 tokens. nothing_saveable keeps each layer's input (2 d = 128 bytes a token) and one layer
    whole while the backward recomputes it; the dots policies the products' outputs (not the MLP's second, which no
    backward pass needs: JAX keeps none, tests/test_remat.py) and the input, 2 (2 d + q + 2 kv + 2 f) = 1,536 bytes a
    token; dots_saveable without flash also the score product, 2 x 4 heads x 32 x 32 x 2."""
    t = decoders.Decoder("tiny", layers=4, d_model=64, heads=4, kv_heads=2, ffn=256, vocab=100, max_seq=64,
                         style="llama")
    acts = {r: fit.transformer_train(t, "bf16", 32, 2, flash=True, remat=r)["activations"]
            for r in ("none", "everything_saveable", "nothing_saveable", "dots_with_no_batch_dims_saveable")}
    assert acts["none"] == acts["everything_saveable"] == 4 * 196_608
    assert acts["nothing_saveable"] == 4 * 64 * 128 + 196_608
    assert acts["dots_with_no_batch_dims_saveable"] == 4 * 64 * 1_536 + 196_608
    # without flash the scores count too: 5 x 4 heads x 32 x 32 x 2 = 40,960 bytes a layer in the whole count
    scores = fit.transformer_train(t, "bf16", 32, 2, remat="dots_saveable")["activations"]
    assert scores == 4 * (64 * 1_536 + 16_384) + 196_608 + 40_960
    with pytest.raises(ValueError, match="unknown remat policy"):
        fit.transformer_train(t, remat="offload")


@pytest.mark.parametrize("widths,batch,preset", [((64, 64), 16, "fp32"), ((128,), 64, "fp32"), ((256, 64), 512,
                                                                                                "bf16")])
def test_estimate_is_within_tolerance_of_xla(widths, batch, preset, device):
    ctx = runner.RunContext("cpu", device.device_kind, 1, None)
    cfg = memory_fit.Config(input_dim=32)
    m = memory_fit_measure.validate(widths, batch, preset, cfg, ctx)
    assert abs(m["prediction_error"]) <= memory_fit_view.TOLERANCE, m


def test_a_size_that_cannot_fit_is_predicted_and_recorded():
    cfg = experiments.config("memory_fit", "tiny", "cpu")
    ctx = runner.RunContext("cpu", "cpu", 1, None)
    recs = [runner._measure(memory_fit.EXPERIMENT, c, ctx, "r") for c in memory_fit.cases(cfg, ctx)
            if c.params.get("widths") == list(cfg.too_big) or c.params.get("case") == "allocate_past_memory"]
    assert [r.status for r in recs] == ["does_not_fit", "does_not_fit"]
    assert all(" GB" in r.reason and "available" in r.reason for r in recs)


def test_the_backward_walk_peaks_at_the_layer_with_the_most_kept_below_it():
    fp32 = fit.mlp_train(8, (16, 16), 2, batch=4, preset="fp32")
    # layer 2 first: layer 1's 8 bytes/element kept + its own 4 + the two gradients, then the weight copies
    assert fp32.activations == max(8 * 64 + 4 * 64 + 4 * 64 + 4 * 4 * 2, 8 * 64 + 4 * 64 + 4 * 64) + 4 * (256 + 32)
    bf16 = fit.mlp_train(8, (16, 16), 2, batch=4, preset="bf16")
    assert bf16.activations == 6 * 64 + 6 * 64 + 4 * 64 + 4 * 4 * 2 + 4 * 4 * 8 + 4 * (256 + 32)
    wide = fit.mlp_train(8, (16, 64, 16), 2, batch=4, preset="fp32")
    assert wide.activations == 8 * 64 + 8 * 256 + 4 * 256 + 4 * 64 + 4 * (16 * 64 + 64 * 16 + 32)
    own = fit.Lowering(keep=1, keep_last=1, input_copy=0, weight_copy=0)
    assert fit.mlp_train(8, (16,), 2, 4, lowering=own).activations == 64 + 4 * 64 + 4 * 4 * 2
    with pytest.raises(KeyError, match="no lowering known"):
        fit.mlp_train(8, (16,), 2, 4, preset="int8")


def _loop_body(hlo: str) -> str:
    import re

    body = re.search(r"while\([^)]*\), condition=%?[\w.\-]+, body=%?([\w.\-]+)", hlo).group(1)
    return re.search(r"^%?" + re.escape(body) + r" \([^\n]*\{\n(.*?)\n\}", hlo, re.M | re.S).group(1)


@pytest.mark.parametrize("kernel", list(stream.KERNELS))
def test_the_stream_loop_copies_no_array_in_its_body(kernel):
    # a carry of all three arrays made XLA:GPU copy two of them whole each iteration (7 arrays moved, 3 counted)
    import re

    import jax.numpy as jnp

    from jaxgpu.pricing import targets

    array_copy = re.compile(r"= \w+\[\d[\d,]*\]\S* copy\(")  # a copy of an array (the loop counter's is a scalar)
    n = 1 << 16
    x = jnp.ones(n)
    cpu = jax.jit(stream.stream_loop(kernel, 10)).lower(x, x, x).compile().as_text()
    assert not array_copy.search(_loop_body(cpu)), _loop_body(cpu)
    if targets.unavailable() is None:
        dev = targets.devices("h200", 1)[0]
        gpu = targets.compile_plan(stream.stream_loop(kernel, 10), *[targets.spec((n,), "float32", dev)] * 3).hlo
        assert not array_copy.search(_loop_body(gpu)), _loop_body(gpu)
    r = stream.bench_stream(kernel, stream.stream_arrays(n), "loop", target_s=0.0)  # checked inside
    assert r.bytes_per_call == stream.stream_bytes(kernel, n, 4)


def test_the_allocators_dump_is_held_and_one_line_passed_on(capfd):
    # XLA's allocator prints every bin and chunk on fd 2 as it refuses an allocation: the log keeps one line
    import os

    from experiments.memory_fit import measure

    with measure.stderr_kept() as said:
        os.write(2, b"W allocator: Allocator (GPU_0_bfc) ran out of memory trying to allocate 86.0GiB\n")
        os.write(2, b"".join(b"I Bin (%d): Total Chunks: 1\n" % (256 << i) for i in range(200)))
    err = capfd.readouterr().err
    assert said == ["W allocator: Allocator (GPU_0_bfc) ran out of memory trying to allocate 86.0GiB"]
    assert err.strip() == said[0] and "Bin (" not in err
