"""Where ``jaxgpu.pricing.fit``'s memory formula and XLA's plan of a step part, in words: ``formula_vs_plan`` of a
``jaxgpu.pricing.planner.ModelPlan``, what the model command prints under its table.
"""

from __future__ import annotations

from typing import Any

from jaxgpu.records.labels import si


def _count_said(p) -> str:
    """Whose count of activations the formula's is, and under which remat policy (``fit.transformer_train``)."""
    policy = next((w.removeprefix("remat ") for w in p.settings.split(", ") if w.startswith("remat ")), "none")
    if policy in ("none", "everything_saveable"):
        return "Korthikanti et al.'s count"
    kept = "each layer's input" if policy == "nothing_saveable" else "each layer's input and products' outputs"
    return f"Korthikanti et al.'s count under remat {policy}: {kept}, and one layer whole as it is recomputed"


def _lora_said(p, f: dict, held: float, temp: float) -> str:
    return (f"the formula counts {si(f['weights'], 'B')} of frozen weights, {si(f['state'], 'B')} of adapters with "
            f"their gradients, AdamW moments and a bf16 copy, and {si(f['activations'], 'B')} of activations "
            f"({_count_said(p)}); XLA's plan holds {si(held, 'B')} between steps (the frozen weights, the "
            f"adapters and their moments) and {si(temp, 'B')} of temporaries.")


# why XLA's plan of a flash step holds the attention's scores that the formula leaves out
_UNFUSED = ", which the program computes whole and a fused kernel never holds"


def formula_vs_plan(p: Any) -> str:
    """Where ``jaxgpu.pricing.fit``'s formula and XLA's plan of the step (a ``ModelPlan``) part, per device, in a
    sentence: what each counts and, where they differ by more than a tenth, which side holds the difference and why."""
    m, f = p.memory_split, p.estimate_parts
    if not m or not f:
        return ""
    held = m["arguments"] + m["outputs"] - m["aliased"]  # what stays between steps: weights, state, cache, tokens
    temp = m["temporaries"]
    whole = 0.0 if p.query_block or p.written_bytes else p.scores_bytes  # the scores held at once: not in a twin's
    read = p.query_block and p.written_bytes  # the twin's plan is the one read
    twin = (f" XLA's plan is of the step with its attention run {p.query_block} queries at a time, as a fused kernel "
            f"tiles it: as written, the step holds {si(p.written_bytes - p.bytes_per_device, 'B')} more a GPU, as it "
            f"computes each layer's attention scores whole ({si(p.scores_bytes, 'B')} in float32)."
            if read else "")
    if p.mode.startswith("train") and "weights" in f:  # a LoRA step: a frozen base beside its adapters' state
        return _lora_said(p, f, held, temp) + twin
    if p.mode.startswith("train"):
        # of the formula's 18 bytes a parameter, XLA keeps the gradients and the bf16 copy (6) among its temporaries,
        # Megatron's distributed optimizer the fp32 gradients' sum (4, whole or cut)
        kept, passes, passing = "the weights and moments", "the gradients and the copy", f["state"] * 6 / 18
        if p.mode == "train" and (zero := next((z for z in ("zero1", "zero2") if z in p.mesh.split()), "")):
            whole, cut = (6, 12) if zero == "zero1" else (2, 16)
            weights = f["state"] / (whole + cut / p.devices)  # the parameters a GPU's tp cut holds
            kept, passes = "the bf16 weights, a cut of the fp32 weights and moments", "the fp32 gradients' sum"
            passing = 4 * weights / (1 if zero == "zero1" else p.devices)
        acts = temp - passing
        text = (f"the formula counts {si(f['state'], 'B')} of weights, gradients, AdamW moments and a bf16 copy and "
                f"{si(f['activations'], 'B')} of activations ({_count_said(p)}); XLA's plan holds "
                f"{si(held, 'B')} between steps ({kept}) and {si(temp, 'B')} of temporaries, of "
                f"which {passes} {'are' if passes.endswith('copy') else 'is'} {si(passing, 'B')}, so "
                f"{si(max(acts, 0), 'B')} for activations and scratch")
        if acts < 0.9 * f["activations"]:
            text += (": fewer than the count, as the step recomputes its norms, MLP activation and loss in the "
                     "backward pass")
        elif acts > 1.1 * f["activations"]:
            near = 0.5 * whole < acts - f["activations"] < 1.5 * whole  # the excess is about the scores
            text += (": more than the count, which leaves out the logits over the vocabulary and the backward "
                     "pass's scratch" + (f", and one layer's attention scores ({si(whole, 'B')} in float32)"
                                         + _UNFUSED if near else ""))
        return text + "." + twin
    if p.mode == "prefill":
        text = (f"the formula counts {si(f['weights'], 'B')} of weights and {si(f['activations'], 'B')} for one "
                f"layer's values at a time; XLA's plan holds {si(held, 'B')} between steps and {si(temp, 'B')} of "
                "temporaries")
        block = p.scores_bytes * p.query_block / p.seq if read else 0.0  # the twin's block holds these
        if 0.5 * whole < temp - f["activations"] < 1.5 * whole:
            text += f": more than the count, by about one layer's attention scores ({si(whole, 'B')} in " \
                    "float32)" + _UNFUSED
        elif 0.5 * block < temp - f["activations"] < 1.5 * block:
            text += f": more than the count, by about a block's attention scores ({si(block, 'B')} in float32)"
        elif temp > 1.5 * f["activations"]:
            text += (": more than the count, which leaves out the logits, the copies XLA makes between layouts and, "
                     "split over GPUs, the values a split keeps whole on each")
        return text + "." + twin
    text = (f"the formula counts {si(f['weights'], 'B')} of weights and {si(f['kv_cache'], 'B')} of KV cache; XLA's "
            f"plan holds {si(held, 'B')} between steps and {si(temp, 'B')} of temporaries")
    if temp > 0.05 * held:
        text += (": the logits over the vocabulary, the layers' products and any copy of a weight XLA makes in "
                 "another layout, none of which the formula counts")
    return text + "."
