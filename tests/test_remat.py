"""The frameworks' recompute policies by their names (jaxgpu.ground.remat): each saves what its framework's definition
says, a step that saves no name lowers to the program it was before the tags, the formula counts the same bytes, and a
name that cannot be run is one line naming the nearest."""

import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpu.ground import remat
from jaxgpu.ground.decoders import REMAT_POLICIES, Decoder, StepSettings
from jaxgpu.kernels import checkpoints
from jaxgpu.kernels import transformer as tf
from jaxgpu.pricing import fit

LLAMA = Decoder("tiny-remat", 2, 64, 4, 2, 128, 97, 64, "llama")
GPT2 = Decoder("tiny-remat-gpt2", 2, 64, 4, 4, 256, 97, 64, "gpt2")
BATCH, SEQ = 2, 32  # the tokens a layer sees: the loss reads SEQ + 1
_BYTES = {"bf16": 2, "f32": 4, "i32": 4, "bool": 1}  # as JAX prints a residual's type


def _kept(c: Decoder, name: str, capsys) -> int:
    """Bytes a layer's backward pass keeps under the policy ``name``: JAX's own list of the residuals (the scan's
    stacked outputs, one slice a layer)."""
    params = jax.tree.map(lambda a: jnp.zeros(a.shape, jnp.bfloat16), tf.param_specs(c))
    tokens = jnp.zeros((BATCH, SEQ + 1), jnp.int32)
    capsys.readouterr()
    jax.ad_checkpoint.print_saved_residuals(lambda p: tf.loss(c, p, tokens, s=StepSettings(remat=name, flash=True)),
                                            params)
    total = 0
    for dtype, shape in re.findall(r"^(\w+)\[([\d,]+)\] output of scan", capsys.readouterr().out, re.M):
        dims = [int(x) for x in shape.split(",")]
        if dims[0] == c.layers and len(dims) > 3:  # a layer's residual, stacked over the layers
            total += int(np.prod(dims[1:])) * _BYTES[dtype]
    return total


def test_every_framework_policy_names_its_source_and_saves_only_tagged_tensors():
    for p in remat.POLICIES.values():
        assert p.name.split(":")[0] in ("maxtext", "pax", "megatron", "nemo", "torchtitan"), p.name
        assert re.search(r"@[0-9a-f]{7,}", p.source) and p.defined, p.name  # the framework's file at a commit
        assert set(p.names) <= set(remat.TAGS), p.name
        assert p.base in remat.BASES and (p.base in ("", "none") or hasattr(jax.checkpoint_policies, p.base)), p.name
    for name, (why, near) in remat.REFUSED.items():
        assert why and near in remat.POLICIES, name


def test_each_policy_keeps_the_tensors_its_framework_names(capsys):
    """Differences between policies are the named tensors' bytes, a token's values times the layer's tokens: the
    attention's output for minimal_flash over minimal, the output projection over save_qkv_proj, q, k and v over
    nothing; the fused q/k/v product
    (Pax) keeps what q, k and v apart (MaxText) do; Pax's no-batch-dims policy is MaxText's minimal."""
    kept = {n: _kept(LLAMA, n, capsys) for n in (
        "maxtext:full", "maxtext:minimal", "maxtext:minimal_flash", "maxtext:save_qkv_proj",
        "maxtext:save_dot_except_mlp", "maxtext:save_dot_except_mlpwi", "pax:SAVE_QKV_OUT_PROJ",
        "pax:SAVE_DOT_WITH_NO_BATCH_DIM", "torchtitan:selective_op")}
    tokens, c = BATCH * SEQ, LLAMA
    assert kept["maxtext:minimal_flash"] - kept["maxtext:minimal"] == 2 * tokens * c.q_dim
    # the MLP's output is not needed by any backward pass (the next layer's input is kept anyway): JAX keeps none
    assert kept["maxtext:save_dot_except_mlpwi"] == kept["maxtext:save_dot_except_mlp"]
    assert kept["maxtext:save_dot_except_mlp"] - kept["maxtext:save_qkv_proj"] == 2 * tokens * c.d_model
    assert kept["maxtext:save_qkv_proj"] - kept["maxtext:full"] == 2 * tokens * (c.q_dim + 2 * c.kv_dim)
    assert kept["pax:SAVE_QKV_OUT_PROJ"] == kept["maxtext:save_dot_except_mlp"]
    assert kept["pax:SAVE_DOT_WITH_NO_BATCH_DIM"] == kept["maxtext:minimal"]
    # torchtitan's op-level policy: q, v, the attention's output, the gate product and the MLP's output
    assert kept["torchtitan:selective_op"] - kept["maxtext:full"] == 2 * tokens * (2 * c.q_dim + c.kv_dim + c.ffn)
    # the formula counts the same differences, every layer
    for a, b in (("maxtext:minimal_flash", "maxtext:minimal"), ("maxtext:save_qkv_proj", "maxtext:full"),
                 ("maxtext:save_dot_except_mlpwi", "maxtext:save_dot_except_mlp"),
                 ("torchtitan:selective_op", "maxtext:full"), ("maxtext:minimal", "maxtext:full")):
        acts = [fit.transformer_train(c, "bf16", SEQ, BATCH, True, r)["activations"] for r in (a, b)]
        assert acts[0] - acts[1] == c.layers * (kept[a] - kept[b]), (a, b)


def test_a_gpt2_block_tags_its_fused_product_and_its_first_mlp_product(capsys):
    c, tokens = GPT2, BATCH * SEQ
    full, qkv, ffn1 = (_kept(c, n, capsys) for n in ("pax:SAVE_NOTHING", "pax:SAVE_QKV_OUT_PROJ",
                                                       "pax:SAVE_DOT_EXCEPT_LOGITS_FFN1"))
    assert qkv - full == 2 * tokens * (3 * c.d_model + c.d_model)
    everything = _kept(c, "pax:SAVE_DOT_EXCEPT_LOGITS", capsys)
    assert everything - ffn1 == 2 * tokens * c.ffn  # ffn1: the GELU MLP's first product


@pytest.mark.parametrize("base", ["dots_with_no_batch_dims_saveable", "nothing_saveable", "none"])
def test_a_step_that_saves_no_name_lowers_as_it_did_untagged(base, monkeypatch):
    """A name inside a checkpoint changes the lowered program (JAX may lower it as a reduce_precision): a step whose
    policy saves no name lowers to the text it has with every tag an identity (its cached plan's key is that text);
    one whose policy saves names does not."""
    def text(r):
        step = tf.train_step(LLAMA, settings=StepSettings(remat=r, flash=True))[0]
        return step.lower(*tf.train_specs(LLAMA, BATCH, SEQ + 1)).as_text()

    tagged = {r: text(r) for r in (base, "maxtext:minimal_flash")}
    monkeypatch.setattr(checkpoints, "checkpoint_name", lambda x, name: x)
    assert text(base) == tagged[base]
    assert text("maxtext:minimal_flash") != tagged["maxtext:minimal_flash"]
    if base == "dots_with_no_batch_dims_saveable":
        assert text("pax:SAVE_DOT_WITH_NO_BATCH_DIM") == text("checkpoint_dots_with_no_batch_dims")


def test_megatrons_selective_recompute_is_the_fused_attentions_own():
    assert checkpoints.policy("megatron:selective") is None and checkpoints.policy("nemo:selective") is None
    with pytest.raises(ValueError, match="fused"):
        StepSettings(remat="megatron:selective", flash=False)


@pytest.mark.parametrize("name, says", [
    ("maxtext:custom", "the nearest: maxtext:minimal"),
    ("maxtext:qkv_proj_offloaded", "offloading to host memory"),
    ("megatron:uniform_2", "the nearest: megatron:full"),
    ("torchtitan:selective_2", "the nearest: torchtitan:full"),
    ("maxtext:nope", "maxtext's: maxtext:full"),
    ("deepspeed:x", "known: maxtext, pax"),
    ("minimal_flash", "did you mean maxtext:minimal_flash"),
])
def test_a_name_that_cannot_be_run_is_one_line_naming_the_nearest(name, says):
    with pytest.raises(KeyError) as err:
        StepSettings(remat=name)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_command_lists_every_policy_and_refuses_in_one_line():
    def run(*argv):
        return subprocess.run([sys.executable, "-m", "experiments.model", *argv], capture_output=True, text=True,
                              timeout=120)

    listed = run("--remat", "list")
    assert listed.returncode == 0 and all(n in listed.stdout for n in (*remat.POLICIES, *remat.REFUSED,
                                                                        *REMAT_POLICIES))
    refused = run("--model", "llama-7b", "--remat", "maxtext:custom")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "the nearest: maxtext:minimal" in refused.stderr.strip().splitlines()[-1]
    unfused = run("--model", "llama-7b", "--train", "--remat", "megatron:selective", "--no-flash")
    assert unfused.returncode == 2 and unfused.stderr.strip().splitlines()[-1].startswith(
        "experiments.model: error: --remat: remat 'megatron:selective' recomputes the attention core")
