"""Any step on N GPUs through the public door (``jaxgpu.price_step``): a Flax ViT-B/16 and a T5 train step on 8 GPUs,
a tensor-parallel MLP's collective against a hand count, and what cannot be laid out."""

import math
import re
from pathlib import Path

import pytest

import jaxgpu
from jaxgpu.pricing import targets

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def gpu_target():
    if why := targets.unavailable():
        pytest.skip(why)


def _params(tree) -> int:
    import jax

    return sum(math.prod(a.shape) for a in jax.tree.leaves(tree))


def test_a_flax_vit_b16_train_step_is_priced_on_8_gpus():
    """ViT-B/16 (86.6 M weights), 256 images of 224 x 224 split over 8 H100s, the weights and AdamW's state whole on
    each: a GPU holds the fp32 weights and two moments (12 bytes a weight) and its 32 images between steps, and
    all-reduces the gradients once a step, 2 (n - 1) / n of them (in bf16 or fp32, as XLA places the conversion)."""
    from jax.sharding import PartitionSpec as P

    from jaxgpu.kernels import encoders

    model = encoders.vit("vit-b/16")
    s = encoders.vit_train_step(model, batch=256)
    params = _params(s.specs[0])
    assert params == pytest.approx(86.6e6, rel=0.01)
    plan = jaxgpu.price_step(s.step, *s.specs, in_specs=(None, None, P("data"), P("data")), mesh={"data": 8},
                             gpu="h100", donate=(0, 1), name="ViT-B/16", model_flops=6 * params * 256 * 197)
    assert plan.devices == 8 and plan.mesh == "data 8" and plan.plan == "xla:gpu h100"
    images = 32 * 224 * 224 * 3 * 2
    assert plan.memory_split["arguments"] == pytest.approx(12 * params + images + 32 * 4, rel=0.01)
    count, moved = plan.collectives["all-reduce"]
    assert any(moved == pytest.approx(2 * 7 / 8 * b * params, rel=0.05) for b in (2, 4)), moved / params
    assert plan.fits and 0 < plan.comm_s + plan.overlapped_s and plan.lower_s <= plan.seconds <= plan.upper_s
    assert 0.05 < plan.mfu < 0.8
    assert "ViT-B/16" in plan.table()._repr_html_()


def test_a_t5_train_step_is_priced_through_the_same_door():
    """A small T5 v1.1 (8 + 8 layers) over 8 GPUs, data parallel: its weights counted by hand (the shared embedding,
    the head, 4 matrices an attention, 3 an MLP, the relative-position biases, the norms)."""
    from jax.sharding import PartitionSpec as P

    from jaxgpu.kernels import encoders

    model = encoders.t5("t5-v1.1-small")
    s = encoders.t5_train_step(model, batch=64, inputs=512, targets=128)
    d, layers, heads, ff, v = 512, 8, 6, 1024, encoders.T5_VOCAB
    attn = 4 * d * heads * 64
    want = 2 * v * d + layers * (attn + 3 * d * ff) + layers * (2 * attn + 3 * d * ff) + 2 * 32 * heads \
        + (2 * layers + 3 * layers + 2) * d
    assert _params(s.specs[0]) == want
    plan = jaxgpu.price_step(s.step, *s.specs, in_specs=(None, None, P("data"), P("data")), mesh={"data": 8},
                             gpu="a100", donate=(0, 1))
    assert plan.gpu == "A100 80GB" and plan.seconds > 0 and "all-reduce" in plan.collectives


def test_a_tensor_parallel_product_all_reduces_its_activations():
    """A two-matrix MLP with the first cut by columns and the second by rows over a "model" axis of 4 (Megatron's
    cut): its forward pass all-reduces the [B, d] output once, 2 (n - 1) / n of its bf16 bytes a GPU."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    b, d, f = 4096, 2048, 8192
    x = jax.ShapeDtypeStruct((b, d), jnp.bfloat16)
    w1, w2 = jax.ShapeDtypeStruct((d, f), jnp.bfloat16), jax.ShapeDtypeStruct((f, d), jnp.bfloat16)
    plan = jaxgpu.price_step(lambda x, a, c: jax.nn.gelu(x @ a) @ c, x, w1, w2,
                             in_specs=(None, P(None, "model"), P("model", None)), mesh={"model": 4}, gpu="h200")
    _, moved = plan.collectives["all-reduce"]
    assert moved == pytest.approx(2 * 3 / 4 * b * d * 2, rel=0.01)
    assert plan.memory_split["arguments"] == pytest.approx(2 * (b * d + 2 * d * f / 4), rel=0.01)


def test_a_mesh_that_cannot_be_laid_out_says_why():
    import jax
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct((16,), jnp.float32)
    with pytest.raises(ValueError, match="whole nodes of 8"):
        jaxgpu.price_step(lambda a: a * 2, x, mesh={"data": 12})
    with pytest.raises(ValueError, match="1 or more"):
        jaxgpu.price_step(lambda a: a * 2, x, mesh={"data": 0})
    with pytest.raises(ValueError, match="in_specs has 2 entries"):
        jaxgpu.price_step(lambda a: a * 2, x, in_specs=(None, None), mesh={"data": 2})


def test_the_api_pages_example_runs_as_written():
    """docs/api.md's example of the door (a user's own Flax ViT step on 8 GPUs), executed as the page shows it."""
    page = (ROOT / "docs" / "api.md").read_text()
    code = re.search(r"<!-- price_step example -->\n```python\n(.*?)```", page, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)
    plan = scope["plan"]
    assert plan.devices == 8 and plan.seconds > 0 and plan.fits
