"""Whether a step can be run as asked, before anything is compiled: the settings a mode takes, a mesh that can be
laid out over the GPUs (whole nodes, a tensor-parallel group within one, the batch-only meshes' rows), expert and
context groups that divide what they split. Each check raises with the one line the command prints.
"""

from __future__ import annotations

from typing import Any

from jaxgpu.ground import hardware
from jaxgpu.records.results import Unsupported


def split_of(s: Any, mode: str) -> str:
    """How the settings ``s`` split a ``mode`` step: expert or context groups ("ep", "cp"), their mesh, or the mode's
    own (fsdp to train, tp to serve)."""
    if s.ep > 1 or s.cp > 1:
        return "ep" if s.ep > 1 else "cp"
    return s.mesh if s.mesh != "auto" else "fsdp" if mode.startswith("train") else "tp"


def check_settings(s, mode: str, hw: hardware.Hardware, batch: int, c: Any = None, seq: int = 0,
                    devices: int = 1) -> None:
    if c is not None and c.style == "gpt2" and seq > c.max_seq:  # learned positions: max_seq rows, no more
        raise ValueError(f"{c.name} has {c.max_seq:,} learned positions: a sequence of {seq:,} tokens is longer")
    if c is not None and c.experts > 1 and (s.weights != "bf16" or s.matmul != "bf16"):
        raise ValueError("a mixture of experts runs its experts in bf16 here: int8 or fp8 experts are not built")
    training = mode.startswith("train")
    if not training and (s.remat != "none" or s.nodes > 1 or s.accumulate > 1):
        raise ValueError("remat, nodes and micro-batches are a training step's settings; a prefill or decode step "
                         "runs on one node and keeps no activations for a backward pass")
    check_mesh(s, mode, hw, devices, batch)
    check_groups(s, mode, c, devices, batch, seq)
    if s.lora and not training:
        raise ValueError("LoRA adapters are trained: a training step's setting (--train)")
    if s.lora and (c is not None and c.experts > 1 or s.matmul != "bf16" or s.weights == "fp8"):
        raise ValueError("LoRA is built for dense decoders with bf16 products, the base in bf16, int8 or nf4: not "
                         "for a mixture of experts, fp8 products or an fp8 base")
    if mode != "serve" and s.weights != "bf16" and not s.lora:
        raise ValueError("int8 or fp8 weights are a decode step's storage (--serve), or a LoRA step's frozen base "
                         "(with lora); full training keeps its master weights")
    if mode == "serve" and s.matmul != "bf16":
        raise ValueError("fp8 products in a decode step are not built; its weights' storage is a serving setting")
    if mode == "serve" and s.flash:
        raise ValueError("a decode step's attention is XLA's, one token against its cache: flash is a setting of "
                         "training and prefill")
    if batch % s.nodes:
        raise ValueError(f"a batch of {batch} does not split over {s.nodes} nodes")
    if (batch // s.nodes) % s.accumulate:
        raise ValueError(f"a node's batch of {batch // s.nodes} does not split into {s.accumulate} micro-batches")
    if s.matmul == "fp8" and not hw.tflops.get("fp8"):
        raise Unsupported(f"the {hw.name} has no fp8 matrix units: an fp8 step would be emulated in wider types, "
                          "which is not what fp8 training buys")
    if s.nodes > 1 and not hw.internode_gbps:
        raise Unsupported(f"the hardware table knows no network between {hw.name} nodes (internode_gbps)")


def check_mesh(s, mode: str, hw: hardware.Hardware, devices: int, batch: int = 0) -> None:
    """A mesh over ``devices`` GPUs of ``hw`` that can be laid out: past one node, whole nodes joined by a network the
    table knows, a tensor-parallel group within a node, the nodes said once (a mesh over them, or ``nodes``); the
    meshes that split only the batch (hsdp, dp, ZeRO) each GPU's own rows of every micro-batch."""
    from jaxgpu.kernels import sharding

    how = split_of(s, mode)
    if how in ("hsdp", "dp", "zero1", "zero2", "zero1+tp") and not mode.startswith("train"):
        raise ValueError(f"the {how} mesh splits a training step's batch and its state; a prefill or decode step "
                         "takes fsdp, tp or fsdp+tp")
    if how in ("hsdp", "dp", "zero1", "zero2") and batch and batch % (devices * s.accumulate * s.nodes):
        raise ValueError(f"the {how} mesh gives each GPU its own rows of every micro-batch: a batch of {batch} does "
                         f"not split over {_gpus(devices)} x {s.accumulate} micro-batch"
                         f"{'es' if s.accumulate > 1 else ''}")
    groups = devices // (s.tp or sharding.tp_degree(devices))
    if how == "zero1+tp" and batch and (devices % (s.tp or 1) or batch % (groups * s.accumulate)):
        raise ValueError(f"the zero1+tp mesh gives each tp group its own rows of every micro-batch: a batch of {batch} "
                         f"does not split over {groups} groups x {s.accumulate} micro-batch"
                         f"{'es' if s.accumulate > 1 else ''}")
    if s.lora and how in ("zero1", "zero2", "zero1+tp"):
        raise ValueError("a LoRA step's adapters are small and its base takes no optimizer state: it takes fsdp, "
                         "hsdp, dp, tp or fsdp+tp, not ZeRO")
    if devices <= hw.node:
        return
    if devices % hw.node:
        raise ValueError(f"past one node, GPUs come in whole nodes of {hw.node}: {devices} do not")
    if not hw.internode_gbps:
        raise Unsupported(f"the hardware table knows no network between {hw.name} nodes (internode_gbps)")
    if s.nodes > 1:
        raise ValueError(f"{devices} GPUs already span {devices // hw.node} nodes: count every GPU in devices and "
                         "name the mesh (hsdp: each node a replica), not nodes as well")
    group = s.tp or sharding.tp_degree(devices)
    if how == "tp" or how in ("fsdp+tp", "zero1+tp") and (group > hw.node or hw.node % group):
        raise ValueError(f"a tensor-parallel group stays within a node of {hw.node} GPUs: over {devices}, take "
                         "fsdp+tp with --tp dividing the node, or fsdp"
                         + (", hsdp, dp or zero" if mode.startswith("train") else ""))


def check_groups(s, mode: str, c, devices: int, batch: int, seq: int) -> None:
    """Expert- or context-parallel groups that can be laid out: whole groups of the GPUs; ep of a mixture whose
    experts they divide, every GPU its own rows of the batch; cp of sequences they divide, the batch over the groups."""
    k = s.ep if s.ep > 1 else s.cp
    if k == 1:
        return
    what = "ep" if s.ep > 1 else "cp"
    if mode == "serve":
        raise ValueError(f"{what} groups split a training or prefill step; a decode step takes tp")
    if what == "ep" and (c is None or c.experts <= 1 or c.experts % k):
        raise ValueError(f"ep groups of {k} hold a mixture's experts between them: "
                         + (f"{c.experts} experts do not split so" if c is not None and c.experts > 1
                            else "this model has none"))
    if devices % k:
        raise ValueError(f"{devices} GPUs do not split into {what} groups of {k}")
    micro = batch // s.accumulate if mode.startswith("train") else batch
    if what == "ep" and batch and micro % devices:
        raise ValueError(f"expert parallelism sends each GPU's own tokens: {micro} sequences a micro-batch do not "
                         f"split over {_gpus(devices)}")
    if what == "cp" and (seq % k or batch and micro % (devices // k)):
        raise ValueError(f"cp groups of {k} split each sequence and the groups the batch: {seq} tokens and {micro} "
                         f"sequences a micro-batch do not split so over {_gpus(devices)}")


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"
