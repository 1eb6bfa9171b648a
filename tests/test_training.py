import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxgpu.ground import data, stack
from jaxgpu.kernels import mlp


@pytest.fixture(scope="module")
def digits():
    return data.digits()


def test_digits_split_is_fixed_and_disjoint(digits):
    again = data.digits()
    np.testing.assert_array_equal(digits.y_test, again.y_test)
    assert digits.x_train.shape[0] + digits.x_test.shape[0] == 1797 and digits.n_classes == 10
    assert 0.0 <= digits.x_train.min() and digits.x_train.max() <= 1.0


def test_tiny_mlp_learns_digits(digits, device):
    r = mlp.train(mlp.MLP(widths=(64,)), optax.adamw(3e-3), digits, epochs=15, device=device)
    losses = [c[1] for c in r.curve]
    assert losses[-1] < losses[0] / 3
    assert r.final_accuracy >= 0.93 and r.time_to_target_s is not None


def test_bf16_trains_within_two_points_of_fp32(digits, device):
    acc = {p: mlp.train(mlp.MLP(widths=(128,)), optax.adamw(2e-3), digits, preset=p, epochs=15,
                        device=device).final_accuracy for p in ("fp32", "bf16")}
    assert acc["fp32"] >= 0.95 and acc["bf16"] >= acc["fp32"] - 0.02, acc


def test_train_step_gradients_match_finite_differences():
    # With plain SGD at learning rate 1, the train step's update is exactly minus its gradient.
    model = mlp.MLP(widths=(5,), n_out=3, activation="tanh")
    opt = optax.sgd(1.0)
    x = jax.random.normal(jax.random.key(1), (4, 3))
    y = jnp.array([0, 1, 2, 1])
    state = mlp.init_state(model, opt, jax.random.key(0), 3)
    new, _ = mlp.make_train_step(model, opt, "fp32", donate=False)(state, x, y)
    flat, unravel = jax.flatten_util.ravel_pytree(state["params"])
    step_grad = flat - jax.flatten_util.ravel_pytree(new["params"])[0]
    loss = lambda v: float(mlp.cross_entropy(model.apply({"params": unravel(v)}, x), y))
    eps = 1e-2
    for i in range(flat.size):
        e = jnp.zeros_like(flat).at[i].set(eps)
        fd = (loss(flat + e) - loss(flat - e)) / (2 * eps)
        assert abs(fd - float(step_grad[i])) < 2e-3, (i, fd, float(step_grad[i]))


def test_loss_scaling_skips_nonfinite_steps_and_adjusts_the_scale():
    model = mlp.MLP(widths=(8,), n_out=2)
    opt = optax.sgd(0.1)
    ls = mlp.LossScale(initial=2.0**10, period=2)
    state = mlp.init_state(model, opt, jax.random.key(0), 4, ls)
    step = mlp.make_train_step(model, opt, "fp16", ls, donate=False)
    x, y = jnp.ones((2, 4)), jnp.array([0, 1])
    before = state["params"]
    bad, m = step(state, x * jnp.inf, y)
    assert float(m["skipped"]) == 1.0 and float(bad["scale"]) == 2.0**9
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), bad["params"], before))
    s1, m1 = step(bad, x, y)
    s2, m2 = step(s1, x, y)
    assert float(m1["skipped"]) == float(m2["skipped"]) == 0.0
    assert float(s2["scale"]) == 2.0**10  # grew after `period` finite steps


def test_op_mix_shares_sum_to_one_and_match_xla():
    model = mlp.MLP(widths=(32, 32))
    opt = optax.adamw(1e-3)
    state = mlp.init_state(model, opt, jax.random.key(0), 16)
    lowered = mlp.make_train_step(model, opt, donate=False).lower(state, jnp.ones((8, 16)), jnp.zeros(8, jnp.int32))
    flops = stack.op_flops(lowered.as_text(dialect="hlo"))
    total = sum(flops.values())
    shares = [v / total for v in flops.values()]
    assert abs(sum(shares) - 1) < 1e-12 and flops["dot"] / total > 0.5
    xla = lowered.compile().cost_analysis()["flops"]
    assert total == pytest.approx(xla, rel=0.05)


def test_dots_only_program_reproduces_the_dots():
    hlo = jax.jit(lambda a, b: jnp.tanh(a @ b)).lower(jnp.ones((4, 3)), jnp.ones((3, 5))).as_text(dialect="hlo")
    specs = stack.dot_shapes(hlo)
    assert [(s["lhs"], s["rhs"]) for s in specs] == [([4, 3], [3, 5])]
    prog, args = stack.dots_only(hlo)
    (out,) = prog(args)
    np.testing.assert_allclose(np.asarray(out), np.asarray(args[0][0]) @ np.asarray(args[0][1]), rtol=1e-5)
