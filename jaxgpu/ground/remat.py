"""The recompute (remat) policies training frameworks name, defined as each framework defines them.

A step's ``remat`` (``StepSettings.remat``, ``--remat``) is "none", a policy of ``jax.checkpoint_policies`` that takes
no arguments (``decoders.REMAT_POLICIES``), or one of ``POLICIES`` here by its framework's name:
``maxtext:minimal_flash``, ``pax:SAVE_QKV_OUT_PROJ``, ``megatron:selective``, ... Each is a no-argument JAX policy
(``base``) and the tensors saved by name (``names``, from ``TAGS``: where ``jaxgpu.kernels.transformer`` tags them in
each layer), applied to each layer as the framework applies it; its definition is quoted from the framework's source
with the commit. A framework policy this program cannot run faithfully (offloading to host memory, a checkpoint over
several layers, one on some layers only) is refused in one line naming the nearest (``REFUSED``). JAX-free: the
command lists these without JAX.
"""

from __future__ import annotations

import dataclasses
import re

# The tensors a layer tags for a policy to save by name (jax.ad_checkpoint.checkpoint_name), as MaxText and Praxis tag
# theirs: the fused q/k/v product's output (before the split and, in a GPT-2 block, before its bias: Praxis's
# combined_qkv_proj), the queries and keys after their rotary positions and the values (MaxText's places), the
# attention's output before its projection, that projection's output, a gated MLP's gate and up products (a GELU
# MLP's one first product), the MLP's output. Scores are never tagged: a fused attention kernel has none to save.
TAGS = {
    "qkv_proj": "the fused q/k/v product's output",
    "query_proj": "the queries (after rotary positions)",
    "key_proj": "the keys (after rotary positions)",
    "value_proj": "the values",
    "context": "the attention's output, before its projection",
    "out_proj": "the attention's output projection",
    "mlpwi_0": "a gated MLP's gate product",
    "mlpwi_1": "a gated MLP's up product",
    "mlpwi": "a GELU MLP's first product",
    "mlpwo": "the MLP's output (its second product)",
}
_QKV = ("query_proj", "key_proj", "value_proj")
# what each base saves, in words
BASES = {"none": "every activation (no layer remat)", "nothing_saveable": "the layer's input",
         "everything_saveable": "every activation", "checkpoint_dots": "every product's output",
         "dots_saveable": "every product's output", "checkpoint_dots_with_no_batch_dims": "the weights' products",
         "dots_with_no_batch_dims_saveable": "the weights' products", "": ""}


@dataclasses.dataclass(frozen=True)
class Policy:
    """A framework's remat policy: saves what ``base`` (a ``jax.checkpoint_policies`` name without arguments, "" for
    nothing, "none" for no layer remat at all) and ``names`` (``TAGS``) save, the rest recomputed in each layer's
    backward pass. ``defined``: the framework's own definition at ``source``; ``note``: how this program's differs."""

    name: str
    base: str
    names: tuple[str, ...]
    source: str
    defined: str
    note: str = ""
    needs_flash: bool = False  # the framework recomputes the attention core: this program does so as a fused kernel


# MaxText, as its decoder built each policy from April 2024 (minimal_flash) to 20 August 2025 (6426085e redefined
# minimal as a list of names and made minimal_flash an alias of minimal_with_context): the runs of its published
# tables and gpu-recipes ran then. MaxText's GPU configs compute q, k and v apart (fused_qkv false), so the name
# qkv_proj its lists carry tags nothing there; here it would tag the fused product a second time, so it is left out.
_MAXTEXT = "AI-Hypercomputer/maxtext @e1a5788f MaxText/layers/decoders.py"
_MAXTEXT_HEAD = "AI-Hypercomputer/maxtext @e591f30 src/maxtext/layers/decoders.py"
_NO_FUSED = "qkv_proj left out: MaxText's GPU configs compute q, k and v apart"
_PAX = "google/praxis @feeaff1 praxis/layers/checkpoint_policy.py (custom_policy)"
_MEGATRON = "NVIDIA/Megatron-LM @d98e8a6 megatron/core/transformer/transformer_config.py"
_TITAN = "pytorch/torchtitan @820504e2 torchtitan/models/llama3/infra/parallelize.py (_save_list)"


def _p(name, base, names, source, defined, note="", needs_flash=False) -> Policy:
    return Policy(name, base, tuple(names), source, defined, note, needs_flash)


POLICIES = {p.name: p for p in (
    _p("maxtext:full", "nothing_saveable", (), _MAXTEXT, 'assert cfg.remat_policy == "full" ... policy = None'),
    _p("maxtext:minimal", "checkpoint_dots_with_no_batch_dims", (), _MAXTEXT,
       "policy = jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims"),
    _p("maxtext:minimal_flash", "checkpoint_dots_with_no_batch_dims", ("context",), _MAXTEXT,
       "save_from_both_policies(checkpoint_dots_with_no_batch_dims, save_only_these_names('context'))",
       "context is what Transformer Engine's fused attention tags: its output (its softmax statistics, a float a "
       "query and head, are not held here)"),
    _p("maxtext:minimal_with_context", "", _QKV + ("out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo", "context"),
       _MAXTEXT_HEAD, "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'qkv_proj', 'out_proj', "
       "'mlpwi_0', 'mlpwi_1', 'mlpwi', 'mlpwo', 'context') (kv_proj: multi-head latent attention's)", _NO_FUSED),
    _p("maxtext:save_dot_with_context_except_mlp", "", _QKV + ("context", "out_proj"), _MAXTEXT,
       "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'qkv_proj', 'context', 'out_proj')", _NO_FUSED),
    _p("maxtext:save_dot_except_mlpwi", "", _QKV + ("out_proj", "mlpwo"), _MAXTEXT,
       "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'qkv_proj', 'out_proj', 'mlpwo')", _NO_FUSED),
    _p("maxtext:save_dot_except_mlp", "", _QKV + ("out_proj",), _MAXTEXT,
       "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'qkv_proj', 'out_proj')", _NO_FUSED),
    _p("maxtext:save_qkv_proj", "", _QKV, _MAXTEXT,
       "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'qkv_proj')", _NO_FUSED),
    _p("maxtext:save_out_proj", "", ("out_proj",), _MAXTEXT, "save_only_these_names('out_proj')"),
    _p("pax:SAVE_NOTHING", "nothing_saveable", (), _PAX, "jax.checkpoint_policies.nothing_saveable"),
    _p("pax:SAVE_EVERYTHING", "everything_saveable", (), _PAX, "jax.checkpoint_policies.everything_saveable"),
    _p("pax:SAVE_DOT_ONLY", "checkpoint_dots", (), _PAX, "jax.checkpoint_policies.checkpoint_dots"),
    _p("pax:SAVE_DOT_WITH_NO_BATCH_DIM", "checkpoint_dots_with_no_batch_dims", (), _PAX,
       "jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims"),
    _p("pax:SAVE_QKV_OUT_PROJ", "", ("qkv_proj", "out_proj"), _PAX,
       "save_only_these_names('combined_qkv_proj', 'out_proj')"),
    _p("pax:SAVE_QKV_OUT_PROJ_SEPARATE", "", _QKV + ("out_proj",), _PAX,
       "save_only_these_names('query_proj', 'value_proj', 'key_proj', 'out_proj')",
       "Praxis tags q and k before their rotary positions, here after: the same bytes"),
    _p("pax:SAVE_CONTEXT", "", ("context",), _PAX, "save_only_these_names('context')"),
    _p("pax:SAVE_OUT_PROJ", "", ("out_proj",), _PAX, "save_only_these_names('out_proj')"),
    _p("pax:SAVE_CONTEXT_AND_OUT_PROJ", "", ("context", "out_proj"), _PAX,
       "save_only_these_names('context', 'out_proj')"),
    _p("pax:SAVE_DOT_FOR_MLPERF_200B", "", ("qkv_proj",) + _QKV + ("context", "out_proj"), _PAX,
       "save_only_these_names('combined_qkv_proj', 'query_proj', 'value_proj', 'key_proj', 'context', 'out_proj')"),
    _p("pax:SAVE_DOT_EXCEPT_LOGITS_FFN1", "", ("qkv_proj",) + _QKV + ("context", "out_proj", "mlpwo"), _PAX,
       "save_only_these_names('combined_qkv_proj', 'query_proj', 'value_proj', 'key_proj', 'context', 'out_proj', "
       "'ffn2')", "ffn2, the feed-forward block's output, is mlpwo here"),
    _p("pax:SAVE_DOT_EXCEPT_LOGITS", "", ("qkv_proj",) + _QKV + ("context", "out_proj", "mlpwi", "mlpwi_1", "mlpwo"),
       _PAX, "save_only_these_names('combined_qkv_proj', 'query_proj', 'value_proj', 'key_proj', 'context', "
       "'out_proj', 'ffn1', 'ffn2')", "ffn1 is the first product's non-gate half (mlpwi, or mlpwi_1 where gated); "
       "Praxis tags no gate"),
    _p("megatron:selective", "none", (), _MEGATRON,
       "recompute_granularity='selective' with recompute_modules' default ['core_attn']: the attention core "
       "recomputed, every other activation kept", "a fused attention kernel recomputes its core in the backward pass "
       "(flash): the step with no layer remat", needs_flash=True),
    _p("megatron:full", "nothing_saveable", (), _MEGATRON,
       "recompute_granularity='full', recompute_method='uniform', recompute_num_layers=1: each layer's input kept"),
    _p("torchtitan:full", "nothing_saveable", (), _TITAN, "ac_config.mode == 'full': checkpoint_wrapper(each block)"),
    _p("torchtitan:selective_op", "", ("query_proj", "value_proj", "context", "mlpwi_0", "mlpwo"), _TITAN,
       "mode 'selective', selective_ac_option 'op': the attention's output saved, and every other mm of a block "
       "(wq, wv, w1, w2; wk, wo and w3 recomputed)",
       "this program's q, k and v are one fused product, so recomputing k runs it whole; q is tagged after its rotary "
       "positions (the same bytes)"),
)}
# the same definitions under the names NeMo's configs give them (NeMo trains with Megatron-Core)
POLICIES.update({f"nemo:{k.split(':')[1]}": dataclasses.replace(p, name=f"nemo:{k.split(':')[1]}")
                 for k, p in list(POLICIES.items()) if k.startswith("megatron:")})

# framework policies this program cannot run as defined, each with the nearest it can
REFUSED = {
    "maxtext:custom": ("its own lists of tensors to keep and to offload", "maxtext:minimal"),
    "maxtext:qkv_proj_offloaded": ("offloading to host memory is not built", "maxtext:save_qkv_proj"),
    "maxtext:minimal_offloaded": ("offloading to host memory is not built", "maxtext:minimal"),
    "pax:SAVE_QUANTIZED": ("quantized training's operands are not built", "pax:SAVE_CONTEXT_AND_OUT_PROJ"),
    "pax:SAVE_ITERATION_INPUT": ("a pipeline loop's input, not a layer's", "pax:SAVE_NOTHING"),
    "pax:SAVE_TRANSFORMER_LAYER_OUTPUT": ("an unrolled stack's remat around its layers", "pax:SAVE_NOTHING"),
    "megatron:uniform_N": ("one checkpoint over N > 1 layers is not built; uniform over one layer is full",
                           "megatron:full"),
    "megatron:block": ("a checkpoint on some layers of a stage and none on the rest is not built", "megatron:full"),
    "torchtitan:selective_N": ("a checkpoint on every n-th block is not built", "torchtitan:full"),
}
REFUSED.update({f"nemo:{k.split(':')[1]}": (why, f"nemo:{near.split(':')[1]}")
                for k, (why, near) in list(REFUSED.items()) if k.startswith("megatron:")})


def suggest(name: str) -> str:
    """A framework's policy ``name`` may mean without its prefix ("" if none)."""
    return next((k for k in POLICIES if k.split(":")[1].lower() == name.lower()), "")


def check(name: str) -> Policy | None:
    """The framework policy ``name`` (None for a name without a framework's prefix).

    Raises:
      KeyError: a framework's name that is not defined here, in one line naming the nearest that is.
    """
    if ":" not in name:
        return None
    if name in POLICIES:
        return POLICIES[name]
    said = re.sub(r"_\d+$", "_N", name)  # a count of layers (megatron:uniform_2, torchtitan:selective_2)
    if said in REFUSED:
        why, near = REFUSED[said]
        raise KeyError(f"remat {name!r} cannot be run as its framework defines it ({why}); the nearest: {near}")
    framework = name.split(":")[0]
    known = [k for k in POLICIES if k.startswith(framework + ":")]
    raise KeyError(f"unknown remat policy {name!r}; {framework}'s: {', '.join(known)}" if known else
                   f"unknown framework in remat {name!r}; known: maxtext, pax, megatron, nemo, torchtitan")
