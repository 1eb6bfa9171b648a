"""The one description of a decoder (``jaxgpu.ground.decoders``): its counts, the named models, a config.json read into
one, and the settings a step takes."""

import re

import jax
import pytest

from jaxgpu.ground import decoders
from jaxgpu.ground.decoders import StepSettings

from tests.test_transformer import GEGLU, TINY_HF


def test_a_model_is_named_in_any_case_and_punctuation():

    for said in ("llama3-8b", "Llama3-8B", "LLAMA3_8B", "llama38b", "Llama 3 8B"):
        assert decoders.find(said).name == "llama3-8b", said
    assert decoders.find("GPT2-1.5B").name == "gpt2-1.5b" and decoders.find("llama-1B").name == "llama-1b"


def test_step_settings_refuse_what_no_run_sets():
    with pytest.raises(KeyError, match="unknown remat policy 'dots'; known: none, dots_saveable"):
        StepSettings(remat="dots")
    with pytest.raises(KeyError, match="unknown matmul type 'int4'"):
        StepSettings(matmul="int4")
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        StepSettings(nodes=0)
    with pytest.raises(ValueError, match="accumulate must be at least 1 micro-batch"):
        StepSettings(accumulate=0)
    assert StepSettings().words() == "remat none, flash attention, bf16 products, scanned layers"
    assert StepSettings(nodes=2).words().endswith(", 2 nodes")
    assert StepSettings(accumulate=4).words().endswith(", 4 micro-batches")

    assert all(callable(getattr(jax.checkpoint_policies, name)) for name in decoders.REMAT_POLICIES)


def test_a_model_is_named_in_any_case():

    assert decoders.find("LLaMA3-8B") is decoders.MODELS["llama3-8b"] and decoders.find(GEGLU) is GEGLU
    with pytest.raises(KeyError, match="unknown model 'llama3-8'; did you mean 'llama3-8b'"):
        decoders.find("llama3-8")


def test_the_formula_counts_each_named_models_parameters_within_2_percent():
    """Norms, biases and learned positions left out (a small GPT's 2048 positions are 1.2% of it); grouped-query
    attention, the MLP's width, a gated MLP's third matrix and an untied output head counted: Llama-3 8B's 8.03 B
    parameters, where 12 L d^2 + V d says 6.97 B (13% low)."""
    from jaxgpu.pricing import fit

    for c in decoders.MODELS.values():
        assert c.formula_params() == pytest.approx(c.params(), rel=0.02), c.name
    c = decoders.MODELS["llama3-8b"]
    classic = 12 * c.layers * c.d_model ** 2 + c.vocab * c.d_model
    assert classic < 0.9 * c.params() and 8.02e9 < c.formula_params() < 8.04e9
    seven = decoders.MODELS["7B"]  # the formula's classic shapes count that way
    assert seven.formula_params() == 12 * 32 * 4096 ** 2 + 32000 * 4096
    kv = fit.transformer_inference(c, "bf16", 2048, 8)["kv_cache"]
    assert kv == 2 * 32 * 2048 * 8 * (8 * 128) * 2  # 8 key/value heads of 128, not the model's width


@pytest.mark.parametrize("change, said", [
    ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok (9): between 1 and"),
    ({"hidden_act": "relu"}, "hidden_act ('relu')"),
    ({"attention_bias": True}, "attention_bias (true): biases are not built"),
    ({"vocab_size": None}, "needs vocab_size"),
])
def test_a_config_field_that_cannot_be_honoured_is_named(change, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        decoders.from_hf_config({**TINY_HF, **change}, "tiny")
    assert decoders.from_hf_config(TINY_HF, "tiny")[0].window == 32  # each token sees the last 32
    assert decoders.from_hf_config({**TINY_HF, "use_sliding_window": False}, "tiny")[0].window == 0
    c, unread = decoders.from_hf_config({**TINY_HF, "tie_word_embeddings": None, "router_z_loss": 1.0}, "t")
    assert unread == ["router_z_loss"]  # named back, not silently dropped
    gemma, _ = decoders.from_hf_config({**TINY_HF, "model_type": "gemma", "hidden_act": "gelu_pytorch_tanh",
                                  "head_dim": 32, "tie_word_embeddings": False}, "g")
    assert gemma.tied is False and gemma.mlp == "geglu" and gemma.head_dim == 32  # said false: untied
    untold = {k: v for k, v in TINY_HF.items() if k != "tie_word_embeddings"}
    assert decoders.from_hf_config(untold | {"model_type": "gemma"}, "g")[0].tied  # absent: Gemma's class ties
