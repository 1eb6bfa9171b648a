"""Data parallel, tensor parallel and collectives on the conftest's host devices."""

import jax
import jax.flatten_util
import numpy as np
import optax
import pytest

from jaxgpu.ground import data, timing, workload
from jaxgpu.kernels import mlp, parallel
from jaxgpu.pricing import fit

N = 4  # conftest.HOST_DEVICES


@pytest.fixture(scope="module")
def devs(platform):
    d = jax.devices(platform)
    if len(d) < N:
        pytest.skip(f"needs {N} devices, {platform} has {len(d)}")
    return d[:N]


@pytest.fixture(scope="module")
def setup():
    model, opt = mlp.MLP(widths=(32, 32)), optax.adamw(1e-2)
    state = jax.device_get(mlp.init_state(model, opt, jax.random.key(0), 16))
    batches = [data.synthetic(16, 16)] * 4  # one batch again and again: the loss must fall
    return model, opt, state, batches


@pytest.mark.parametrize("variant", parallel.DP_VARIANTS)
def test_data_parallel_variants_match_the_single_device_losses(variant, devs, setup):
    model, opt, state, batches = setup
    ref = parallel.loss_trajectory(parallel.data_parallel(model, opt, "single", devs[:1]), state, batches)
    dp = parallel.data_parallel(model, opt, variant, devs)
    got = parallel.loss_trajectory(dp, state, batches)
    assert ref[-1] < ref[0]  # it trains: a comparison of frozen losses would prove nothing
    assert parallel.trajectory_error(ref, got) < 1e-5, (ref, got)


@pytest.mark.parametrize("variant", parallel.DP_VARIANTS)
def test_data_parallel_sgd_parameters_match_too(variant, devs, setup):
    # Plain SGD: a gradient off by the device count (autodiff summing it under shard_map, then
    # pmean on top) moves the parameters n times too far; Adam's normalisation would hide it.
    model, _, _, batches = setup
    opt = optax.sgd(0.5)
    state = jax.device_get(mlp.init_state(model, opt, jax.random.key(0), 16))
    out = {}
    for v in ("single", variant):
        dp = parallel.data_parallel(model, opt, v, devs[:1] if v == "single" else devs)
        s = dp.put_state(state)
        for x, y in batches:
            s, _ = dp.step(s, dp.put_batch(x), dp.put_batch(y))
        out[v] = jax.flatten_util.ravel_pytree(dp.get_params(s))[0]
    start = jax.flatten_util.ravel_pytree(state["params"])[0]
    assert np.abs(out["single"] - start).max() > 1e-3
    np.testing.assert_allclose(out[variant], out["single"], rtol=1e-4, atol=1e-6)


def test_a_batch_that_does_not_split_is_refused():
    with pytest.raises(ValueError, match="does not split evenly"):
        parallel.check_divisible(10, 4)
    with pytest.raises(ValueError, match="unknown data-parallel variant"):
        parallel.data_parallel(mlp.MLP(), optax.sgd(0.1), "ddp", [])


def test_lines_of_code_are_counted_from_the_source():
    counts = {v: parallel.lines_of_code(v) for v in parallel.DP_VARIANTS}
    assert all(3 <= c <= 20 for c in counts.values()), counts


@pytest.mark.parametrize("shape", [(1, 2), (1, 4), (2, 2)])
def test_tensor_parallel_mlp_equals_the_unsharded_one(shape, devs):
    model, opt = mlp.MLP(widths=(64, 64, 64)), optax.adamw(1e-3)
    state = jax.device_get(mlp.init_state(model, opt, jax.random.key(0), 32))
    x, y = data.synthetic(8, 32)
    ref = np.asarray(mlp.make_infer_step(model)(state["params"], x))
    ref_state, ref_m = mlp.make_train_step(model, opt, donate=False)(state, x, y)
    mesh = parallel.make_mesh(devs[: shape[0] * shape[1]], shape, (parallel.DATA, parallel.MODEL))
    tp = parallel.tensor_parallel(model, opt, state, mesh)
    params = jax.device_put(state["params"], tp.params_sharding)
    # the weights really are split: a device holds 1/m of a column layer's kernel
    k0 = params["Dense_0"]["kernel"]
    assert k0.addressable_shards[0].data.shape == (32, 64 // shape[1])
    out = np.asarray(tp.infer_step(params, jax.device_put(x, tp.batch_sharding)))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    s, m = tp.train_step(jax.device_put(state, tp.state_sharding), jax.device_put(x, tp.batch_sharding),
                         jax.device_put(y, tp.batch_sharding))
    assert abs(float(m["loss"]) - float(ref_m["loss"])) < 1e-6
    np.testing.assert_allclose(jax.flatten_util.ravel_pytree(jax.device_get(s["params"]))[0],
                               jax.flatten_util.ravel_pytree(ref_state["params"])[0], rtol=1e-4, atol=1e-6)


def test_tensor_parallel_memory_per_device_falls_and_matches_the_estimate(devs):
    model, opt = mlp.MLP(widths=(256, 256, 256)), optax.adamw(1e-3)
    state = jax.device_get(mlp.init_state(model, opt, jax.random.key(0), 64))
    x, y = data.synthetic(32, 64)
    measured = {}
    for m in (1, 2, 4):
        tp = parallel.tensor_parallel(model, opt, state, parallel.make_mesh(devs[:m], (1, m), ("data", "model")))
        c = tp.train_step.lower(jax.device_put(state, tp.state_sharding), jax.device_put(x, tp.batch_sharding),
                                jax.device_put(y, tp.batch_sharding)).compile()
        measured[m] = timing.memory_bytes(c)
        predicted = fit.mlp_train_tensor_parallel(64, (256, 256, 256), 10, 32, m).total
        assert abs(predicted / measured[m] - 1) < 0.15, (m, predicted, measured[m])
    assert measured[4] < 0.35 * measured[1], measured


def test_megatron_split_alternates_and_replicates_what_does_not_divide():
    assert [workload.megatron_split(i, 8, 8, 2) for i in range(3)] == ["column", "row", "column"]
    assert workload.megatron_split(0, 8, 10, 4) is None  # 10 outputs over 4 devices: replicated
    specs = parallel.tensor_parallel_specs({f"Dense_{i}": {"kernel": np.zeros((8, 10 if i == 2 else 8))}
                                            for i in range(3)}, 4)
    assert specs["Dense_0"]["kernel"] == jax.sharding.PartitionSpec(None, "model")
    assert specs["Dense_1"]["kernel"] == jax.sharding.PartitionSpec("model", None)
    assert specs["Dense_2"]["kernel"] == jax.sharding.PartitionSpec()


@pytest.mark.parametrize("name", parallel.COLLECTIVES)
def test_collectives_compute_the_right_values(name, devs):
    x = np.arange(N * 8, dtype=np.float32) + 1
    sharded = jax.device_put(x, jax.sharding.NamedSharding(parallel.make_mesh(devs),
                                                           jax.sharding.PartitionSpec("data")))
    out = np.asarray(parallel.collective(name, devs)(sharded))
    np.testing.assert_allclose(out, parallel.collective_reference(name, x, N))
    # the reference itself, by hand on 4 shards of 8
    shards = x.reshape(N, 8)
    hand = {"all_reduce": np.tile(shards.sum(0), N), "all_gather": np.tile(x, N),
            "reduce_scatter": shards.sum(0), "ppermute": np.roll(shards, 1, axis=0).ravel(),
            "all_to_all": shards.reshape(N, N, 2).transpose(1, 0, 2).ravel()}[name]
    np.testing.assert_allclose(out, hand)


def test_bus_bandwidth_follows_nccl_tests():
    r = parallel.bench_collective("all_reduce", jax.devices()[:N], 1 << 16, target_s=0.01)
    assert r.rel_error == 0.0 and r.nbytes == 1 << 16
    assert r.busbw == pytest.approx(r.algbw * 2 * (N - 1) / N)
    g = parallel.bench_collective("all_gather", jax.devices()[:N], 1 << 16, target_s=0.01)
    assert g.nbytes == 1 << 16 and g.busbw == pytest.approx(g.algbw * (N - 1) / N)


def test_shard_map_falls_back_to_the_experimental_module(monkeypatch, devs):
    # jax < 0.7 has no top-level jax.shard_map; the same call must work through the old module
    import warnings

    monkeypatch.delattr(jax, "shard_map")
    P = jax.sharding.PartitionSpec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        f = jax.jit(parallel.shard_map(lambda x: jax.lax.psum(x, "data"), mesh=parallel.make_mesh(devs),
                                       in_specs=P("data"), out_specs=P("data")))
        out = np.asarray(f(np.ones(N, np.float32)))
    np.testing.assert_array_equal(out, np.full(N, N, np.float32))


def test_to_varying_follows_the_installed_api(monkeypatch):
    tree = {"a": np.zeros(2), "b": np.ones(3)}
    calls = []
    monkeypatch.delattr(jax.lax, "pcast", raising=False)
    monkeypatch.setattr(jax.lax, "pvary", lambda a, axis: calls.append(axis) or a, raising=False)
    assert parallel.to_varying(tree) is not tree and calls == ["data", "data"]  # jax 0.6-0.7: pvary
    monkeypatch.delattr(jax.lax, "pvary")
    assert parallel.to_varying(tree) is tree  # before replication typing: nothing to do
