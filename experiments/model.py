"""``python -m experiments.model``: what a GPU buys a transformer: each GPU of the hardware table, on 1 and 8
devices, for a named or described decoder, trained or served.

Examples (GPU names in any spelling: h200, "H200 SXM", a100)::

    python -m experiments.model --model llama-7b --train --batch 8 --seq 2048 --devices 1,8
    python -m experiments.model --model llama-70b --serve --batch 16 --seq 4096 --gpus h100,h200
    python -m experiments.model --layers 24 --d-model 2048 --heads 16 --kv-heads 4 --ffn 5632 --vocab 32000 --train
    python -m experiments.model --model llama3-8b --train --batch 256 --seq 8192 --devices 128 --mesh hsdp --gpus h100
    python -m experiments.model --model llama-7b --train --batch 8 --lora 16 --weights nf4 --devices 1 --gpus h100

Each row is compiled for that GPU by XLA:GPU on this CPU (the gpu-compile extra) and priced, never run: bytes per
GPU from XLA's memory plan, whether that fits 75% of the card (JAX's default share), the predicted step time with
its bounds, tokens/s, MFU and what binds it. The table is printed and written as CSV and JSON (``--out``).
Bad input is one line and exit 2.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments import cli

COMMAND = "experiments.model"


def _searches(p: cli.Parser) -> None:
    """The searches the command can make in place of pricing the counts asked: one at a time."""
    p.add_argument("--fit", action="store_true",
                   help="per GPU, the fewest of --devices (default 1, 2, 4, 8: one node) that hold the step, or "
                        "'more than' the most; a train step that needs more as asked is tried with micro-batches, "
                        "activation checkpointing and bf16 state (a LoRA step's base in nf4) on fewer, the knob that "
                        "made it fit and its cost in time said")
    p.add_argument("--max-batch", action="store_true",
                   help="per GPU and count of --devices, the largest batch that fits (the sequence as --seq)")
    p.add_argument("--max-seq", action="store_true",
                   help="per GPU and count of --devices, the longest sequence that fits (the batch as --batch)")
    p.add_argument("--best", action="store_true",
                   help="with --train and one count of --devices: per GPU, the fastest layouts that fit, searched "
                        "over meshes, tp within a node, pp and vp, cp, ep, micro-batches and remat (fp8 with --fp8), "
                        "pruned by the rules, the formula's memory and the price's lower bound before compiling; the "
                        "layout flags given (--mesh, --tp, --pp, ...) name a layout priced beside them")
    p.add_argument("--top", type=int, default=3, metavar="K", help="with --best: the layouts shown (default 3)")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="with --best: stop compiling after S seconds and say what was left (default: no limit)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="with --best: compile over a Ray cluster (the ray extra): 'auto' (the one this machine "
                        "joined), 'local' (this machine's, started for the search), or its head's host:6379; "
                        "--workers plans at a time (default 8)")


def parser() -> cli.Parser:
    examples = __doc__.split("::")[1].split("\n\n")[1]
    prog = cli.prog(COMMAND)
    p = cli.Parser(prog=prog, description=__doc__.split("\n\n")[0].replace(f"python -m {COMMAND}", prog),
                   epilog="examples:\n" + examples.replace(f"python -m {COMMAND}", prog),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a named config (see --list), or describe one with --layers ... --vocab")
    p.add_argument("--config", metavar="PATH", help="a decoder described by a Hugging Face-style config.json "
                   "(hidden_size, num_hidden_layers, ...; no weights, no network); a field it cannot honour is named")
    p.add_argument("--list", action="store_true", help="list the named configs and exit")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--train", action="store_true", help="one AdamW step (the default)")
    mode.add_argument("--serve", action="store_true", help="one decode step against a KV cache of --seq tokens")
    mode.add_argument("--prefill", action="store_true", help="a --seq-token prompt through every layer")
    p.add_argument("--bf16", action="store_true", help="with --train: weights and AdamW state in bf16 too")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence, or the cache's context (default 2048)")
    p.add_argument("--devices", help="GPU counts, comma separated (default 1,8; with --pp, --ep or --cp, the "
                   "fewest they take and 8; with --fit, "
                   "those searched); past one node, every GPU of whole nodes (16: 2 nodes of 8)")
    _searches(p)
    p.add_argument("--gpus", help="GPUs of the hardware table, comma separated (default: all)")
    p.add_argument("--out", metavar="PATH", help="write PATH.csv, PATH.json and PATH.png (default: no files): the "
                   "figure is memory per GPU by kind against each card, and predicted time by kind of kernel")
    p.add_argument("--workers", type=int, metavar="N",
                   help="compile the plans the cache does not hold in N processes, a card (or a card's count) to each "
                        "(default: this machine's cores, fewer where its free memory holds fewer at 1 GB each; 1: "
                        "here, one after another)")
    for dim in ("layers", "d-model", "heads", "kv-heads", "ffn", "vocab"):
        p.add_argument(f"--{dim}", type=int, help=f"a described decoder's {dim.replace('-', ' ')}")
    p.add_argument("--style", choices=("llama", "gpt2"), default="llama", help="a described decoder's block")
    p.add_argument("--head-dim", type=int, help="a described decoder's head width, where it is not d-model / heads")
    p.add_argument("--mlp", choices=("swiglu", "geglu"), default="swiglu",
                   help="a described llama-style decoder's gated MLP (geglu: Gemma's tanh-GELU gate)")
    p.add_argument("--remat", default="none", metavar="POLICY",
                   help="with --train: a jax.checkpoint_policies policy per layer (dots_with_no_batch_dims_saveable "
                        "keeps the weights' products, nothing_saveable recomputes each layer), a framework's by its "
                        "name (maxtext:minimal_flash, pax:SAVE_QKV_OUT_PROJ, megatron:selective, ...; '--remat list' "
                        "shows each with what it saves and its source) or none (default)")
    p.add_argument("--no-flash", action="store_true", help="attention as XLA's scores, not one fused kernel")
    p.add_argument("--fp8", action="store_true", help="fp8 (e4m3) matrix products, on cards with fp8 matrix units")
    p.add_argument("--layer-loop", choices=("scan", "unroll"),
                   help="the layers as one scanned layer or unrolled (default: scanned in training and prefill, "
                        "unrolled in a decode step, as serving runs hold each layer's weights apart)")
    p.add_argument("--nodes", type=int, default=1, help=argparse.SUPPRESS)  # went: --devices counts every GPU
    p.add_argument("--weights", choices=("bf16", "int8", "fp8", "nf4"), default="bf16",
                   help="with --serve: layer matrices stored in int8 or fp8, per-channel scales; with --lora: the "
                        "frozen base in int8 or nf4 (QLoRA) (default bf16)")
    _lora_flags(p)
    p.add_argument("--tokens", type=float, metavar="N",
                   help="also the time and GPU-hours to train on N tokens (or to prefill or decode N tokens)")
    p.add_argument("--generate", type=int, default=256, metavar="K",
                   help="with --serve --tokens: tokens each sequence generates after its --seq-token prompt, whose "
                        "prefill is counted once (default 256)")
    p.add_argument("--price", action="append", default=[], metavar="GPU=USD",
                   help="with --tokens: a GPU's price per hour (yours: prices change), e.g. --price h100=2.5")
    _split_flags(p)
    return p


@dataclasses.dataclass(frozen=True)
class Asked:
    """What the command is asked, decided once from its command line (``parse_args``): the decoder (a name of
    ``MODELS``, or a ``Decoder`` described or read from a config.json, whose unread fields ``unread`` names), the
    step (``mode``, ``batch``, ``seq``, ``settings``), where (``devices`` counts, ``gpus`` by the table's names, all
    where None; ``fit``: the fewest of the counts), and what to add (time to ``tokens``, ``prices``, files at
    ``out``). ``listing``: --list, nothing else read."""

    decoder: Any = None
    mode: str = "train"
    batch: int = 8
    seq: int = 2048
    devices: tuple[int, ...] = (1, 8)
    devices_said: bool = False
    fit: bool = False
    largest: str = ""  # "batch" or "seq": per GPU and count, the largest that fits (--max-batch, --max-seq)
    gpus: tuple[str, ...] | None = None
    settings: Any = None
    tokens: float | None = None
    generate: int = 256
    prices: Mapping[str, float] = dataclasses.field(default_factory=dict)
    out: str | None = None
    config_path: str | None = None
    unread: tuple[str, ...] = ()
    listing: bool = False
    workers: int = 1  # processes compiling the plans the cache does not hold (``jaxgpu.pricing.workers``)
    best: bool = False  # --best: the fastest layouts that fit (``jaxgpu.pricing.layouts``), ``top`` of them shown
    top: int = 3
    budget_s: float | None = None
    ray: str | None = None  # --ray: a Ray cluster's address the search compiles over (``jaxgpu.pricing.cluster``)
    layout_said: bool = False  # the layout flags name a layout, priced beside the search's

    @property
    def named(self) -> bool:
        """The decoder has a name of its own (--model or --config), not the described one's."""
        return isinstance(self.decoder, str) or self.config_path is not None


def _split_flags(p: cli.Parser) -> None:
    p.add_argument("--mesh", choices=("fsdp", "tp", "fsdp+tp", "hsdp", "dp", "zero1", "zero2", "zero1+tp"),
                   help="how the GPUs split the step: fsdp (over every GPU, ZeRO-3), tp (within a node), fsdp+tp on "
                        "a 2-D mesh; to train only: hsdp (fsdp within a node, the nodes replicas), dp (DDP: all "
                        "whole), zero1 (Megatron's distributed optimizer: bf16 weights whole, fp32 weights and AdamW's "
                        "moments cut), zero2 (the gradients cut too), zero1+tp (Megatron's: tp groups, zero1 over "
                        "them); fsdp+tp and zero1+tp "
                        "split the stream by sequence within a group (default: fsdp to train, tp to serve; without "
                        "--mesh, --fit tries fsdp, tp and fsdp+tp on fewer GPUs too)")
    p.add_argument("--tp", type=int, default=0, metavar="K",
                   help="with --mesh fsdp+tp or zero1+tp: GPUs per tensor-parallel group, dividing each of --devices "
                        "(default: "
                        "the largest power of two whose square is at most the count: 2 of 4 or 8)")
    p.add_argument("--accumulate", type=int, default=1, metavar="K",
                   help="with --train: the batch in K micro-batches a step, gradients summed (default 1)")
    p.add_argument("--pp", type=int, default=1, metavar="P",
                   help="with --train: the layers in P pipeline stages, each on --devices / P GPUs split by --mesh "
                        "among them, the --accumulate micro-batches flowing through them (default 1: no pipeline)")
    p.add_argument("--vp", type=int, default=1, metavar="V",
                   help="with --pp: V virtual stages a GPU (interleaved 1F1B: a smaller bubble, more sends)")
    p.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b",
                   help="with --pp: the pipeline's order of passes (default 1f1b; gpipe runs every forward first)")
    p.add_argument("--ep", type=int, default=1, metavar="E",
                   help="a mixture's experts over groups of E GPUs, tokens sent to them and back (an all-to-all each "
                        "way a layer), the rest fsdp (default 1: none)")
    p.add_argument("--cp", type=int, default=1, metavar="C",
                   help="each sequence split over groups of C GPUs, keys and values gathered a layer (context "
                        "parallel, for long contexts), the rest fsdp (default 1: none)")
    p.add_argument("--overlap", choices=("plan", "framework"), default="plan",
                   help="how the async collectives hide under compute: plan (only under the compute XLA's schedule "
                        "puts between a collective's start and its done: a JAX run) or framework (under the whole "
                        "step's compute, as PyTorch's DDP and FSDP overlap their buckets) (default plan)")
    p.add_argument("--network", type=float, default=0.0, metavar="GBPS",
                   help="each GPU's network port to other nodes in your cluster, Gb/s each way (a cloud VM's NICs "
                        "shared by its GPUs: 800 Gb/s over 8 GPUs is 100) (default: the card's DGX, 400 on an H100)")
    p.add_argument("--xla-flag", action="append", default=[], metavar="NAME=VALUE",
                   help="an XLA flag your run sets, compiled into the plan (repeat it: "
                        "--xla-flag xla_gpu_enable_latency_hiding_scheduler=true)")


def _lora_flags(p: cli.Parser) -> None:
    p.add_argument("--lora", type=int, default=0, metavar="R",
                   help="with --train: fine-tune LoRA adapters of rank R, the base frozen (default 0: train every "
                        "weight)")
    p.add_argument("--lora-on", choices=("all", "attention"), default="all",
                   help="with --lora: the matrices adapted, every matrix of a layer or the attention's (default all)")


def _list_remat() -> None:
    """The remat policies ``--remat`` takes: JAX's by name, then each framework's, what it saves and where it is
    defined, then those refused and the nearest of each."""
    from jaxgpu.ground import decoders, remat

    print("jax.checkpoint_policies: none, " + ", ".join(decoders.REMAT_POLICIES))
    for p in remat.POLICIES.values():
        saves = ", ".join(x for x in (remat.BASES[p.base], *p.names) if x)
        print(f"{p.name:42s} saves {saves}\n{'':42s} {p.source}: {p.defined}" + (f" ({p.note})" if p.note else ""))
    for name, (why, near) in remat.REFUSED.items():
        print(f"{name:42s} refused: {why}; the nearest: {near}")


def parse_args(argv: list[str] | None = None) -> Asked:
    """The command line, checked, as one frozen ``Asked``; bad input exits 2 with one line."""
    p = parser()
    args = p.parse_args(argv)
    if args.remat == "list":
        _list_remat()
        raise SystemExit(0)
    if args.list:
        return Asked(listing=True)
    dims = [args.layers, args.d_model, args.heads, args.kv_heads, args.ffn, args.vocab]
    if sum(bool(x) for x in (args.model, args.config, any(d is not None for d in dims))) > 1:
        p.error("name one decoder: --model, --config PATH, or --layers ... --vocab")
    if not args.config and not args.model and not all(d is not None for d in dims):
        p.error("name a model (--model llama-7b; --list shows them) or describe one with all of --layers, "
                "--d-model, --heads, --kv-heads, --ffn and --vocab")
    if args.bf16 and (args.serve or args.prefill):
        p.error("--bf16 sets a train step's weights; serving already keeps them in bf16")
    mode = "serve" if args.serve else "prefill" if args.prefill else "train_bf16" if args.bf16 else "train"
    for name in ("batch", "seq"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if sum((args.fit, args.max_batch, args.max_seq, args.best)) > 1:
        p.error("ask one search: --fit (the fewest GPUs), --max-batch or --max-seq (the largest on each count), or "
                "--best (the fastest layouts)")
    _check_best(p, args, mode)
    if args.tokens and (args.max_batch or args.max_seq):
        p.error("--tokens prices the step as asked; with --max-batch or --max-seq, ask it of the size found")
    if args.workers is not None and args.workers < 1:
        p.error(f"--workers must be at least 1, got {args.workers}")
    devices = _devices(p, args)
    gpus = _check_out_and_gpus(p, args)
    decoder, unread = _read_config(p, args) if args.config else (args.model or _described(args), ())
    settings = _settings(p, args, mode)
    return Asked(decoder=decoder, mode=mode, batch=args.batch, seq=args.seq,
                 devices=_check_tp(p, args, devices) if args.tp else devices, devices_said=args.devices is not None,
                 fit=args.fit, largest="batch" if args.max_batch else "seq" if args.max_seq else "",
                 gpus=gpus, settings=settings, tokens=args.tokens, generate=args.generate,
                 prices=_prices(p, args), out=args.out, config_path=args.config, unread=tuple(unread),
                 workers=args.workers or (RAY_ROUND if args.ray else _cores()), best=args.best, top=args.top,
                 budget_s=args.budget_s, ray=args.ray,
                 layout_said=any(getattr(args, k) != v for k, v in LAYOUT_FLAGS.items()))


RAY_ROUND = 8  # with --ray, the plans compiled at a time (--workers sets it)
# the flags that say a layout (their defaults): with --best, a layout they set is priced beside the search's
LAYOUT_FLAGS = {"mesh": None, "tp": 0, "pp": 1, "vp": 1, "accumulate": 1, "remat": "none", "ep": 1, "cp": 1}


def _check_best(p: cli.Parser, args: argparse.Namespace, mode: str) -> None:
    """--best's own refusals: a train step, one count, no --tokens; --top and --budget-s only with it."""
    if not args.best:
        if args.top != 3 or args.budget_s is not None or args.ray:
            p.error("--top, --budget-s and --ray are a layout search's: give --best too")
        return
    if mode != "train":
        p.error("--best searches a train step's layouts (fp32 master weights and AdamW): not --serve, --prefill or "
                "--bf16")
    if args.devices is None or "," in args.devices:
        p.error("--best searches the layouts of one count of GPUs: give it as --devices N")
    if args.tokens:
        p.error("--tokens prices the step as asked; ask it of the layout --best finds")
    if args.top < 1:
        p.error(f"--top takes 1 or more layouts, got {args.top}")
    if args.budget_s is not None and not 0 <= args.budget_s < float("inf"):
        p.error(f"--budget-s takes seconds, 0 or more, got {args.budget_s:g}")


def _cores() -> int:
    from jaxgpu.pricing import workers

    return workers.default_workers()


def _devices(p: cli.Parser, args: argparse.Namespace) -> tuple[int, ...]:
    """--devices as counts (default 1,8; with --fit, the counts of one node)."""
    from jaxgpu.pricing import planner

    # stages or groups: the fewest GPUs they take, and a node where they split it
    k = args.pp * max(args.ep, args.cp)
    plain = tuple(sorted({k, 8})) if k > 1 and 8 % k == 0 else (k,) if k > 1 else (1, 8)
    searched = [n for n in planner.NODE if n % k == 0] or [k]
    said = args.devices or ",".join(map(str, searched if args.fit else plain))
    try:
        devices = tuple(int(n) for n in said.split(",") if n.strip())
    except ValueError:
        p.error(f"--devices takes counts like 1,8, got {args.devices!r}")
    if not devices or min(devices) < 1 or max(devices) > 1024:
        p.error(f"--devices takes counts from 1 to 1024, got {list(devices)}")
    if args.nodes != 1:
        p.error("--nodes went: --devices counts every GPU (16 is 2 nodes of 8) and --mesh says how they split the "
                "step (hsdp keeps a node's shards and replicates them across nodes, as --nodes did)")
    return devices


def _check_tp(p: cli.Parser, args: argparse.Namespace, devices: tuple[int, ...]) -> tuple[int, ...]:
    """--tp K: the counts asked split into groups of K; of the default counts (and under --fit) those that do."""
    fits = tuple(n for n in devices if n % args.tp == 0)
    if not fits:
        said = "--devices" if args.devices is not None else "the default counts"
        p.error(f"--tp {args.tp}: none of {said} ({', '.join(map(str, devices))}) splits into groups of "
                f"{args.tp}")
    bad = [n for n in devices if n % args.tp]
    if bad and args.devices is not None and not args.fit:
        p.error(f"--tp {args.tp}: {', '.join(map(str, bad))} GPU{'s' if bad != [1] else ''} do"
                f"{'es' if bad == [1] else ''} not split into groups of {args.tp}")
    return fits


def _prices(p: cli.Parser, args: argparse.Namespace) -> dict[str, float]:
    """--price GPU=USD, each GPU by the hardware table's name; --tokens checked with them."""
    import math

    from jaxgpu.ground import hardware

    if args.tokens is not None and not (math.isfinite(args.tokens) and args.tokens >= 1):
        p.error(f"--tokens takes a count of tokens such as 1e9, got {args.tokens:g}")
    if args.generate < 1:
        p.error(f"--generate takes the tokens each sequence generates, at least 1, got {args.generate}")
    if args.price and args.tokens is None:
        p.error("--price prices the time to --tokens N; give --tokens too")
    out = {}
    for item in args.price:
        gpu, _, usd = item.partition("=")
        try:
            name, per_hour = hardware.find_gpu(gpu.strip()).name, float(usd)
        except KeyError as err:
            p.error(f"--price: {err.args[0]}")
        except ValueError:
            p.error(f"--price takes GPU=USD_PER_HOUR, such as h100=2.5, got {item!r}")
        if not per_hour > 0:
            p.error(f"--price: a price per hour must be above 0, got {item!r}")
        out[name] = per_hour
    return out


def _settings(p: cli.Parser, args: argparse.Namespace, mode: str):
    from jaxgpu.pricing import planner

    base = planner.default_settings(mode)  # the mode's own defaults; the flags change what they name
    if args.tp and args.mesh not in ("fsdp+tp", "zero1+tp"):
        p.error("--tp sizes the tensor-parallel groups of the fsdp+tp or zero1+tp mesh; give --mesh fsdp+tp (or "
                "zero1+tp) too")
    if args.tp < 0:
        p.error(f"--tp takes the GPUs of a group, 1 or more, got {args.tp}")
    if args.lora and not mode.startswith("train"):
        p.error("--lora trains adapters: a training step's setting (--train)")
    if args.lora < 0:
        p.error(f"--lora takes an adapter rank, 1 or more, got {args.lora}")
    if args.lora_on != "all" and not args.lora:
        p.error("--lora-on names the matrices LoRA adapts: give --lora R too")
    if args.weights == "nf4" and not args.lora:
        p.error("--weights nf4 is QLoRA's frozen base: give --lora R too")
    if args.weights != "bf16" and mode.startswith("train") and not args.lora:
        p.error(f"--weights {args.weights} stores a decode step's weights (--serve) or a LoRA step's frozen base "
                "(--lora R); full training keeps fp32 master weights")
    if args.weights == "fp8" and args.lora:
        p.error("--weights with --lora takes the base in bf16, int8 or nf4; an fp8 base is not built")
    _check_pipeline(p, args, mode)
    if not 0 <= args.network < float("inf"):
        p.error(f"--network: a port's Gb/s each way, 0 (the card's table) or more, got {args.network:g}")
    try:
        return dataclasses.replace(base, remat=args.remat, flash=base.flash and not args.no_flash,
                                   matmul="fp8" if args.fp8 else "bf16",
                                   scan=args.layer_loop == "scan" if args.layer_loop else base.scan,
                                   accumulate=args.accumulate, weights=args.weights, mesh=args.mesh or "auto",
                                   tp=args.tp, lora=args.lora, lora_on=args.lora_on, pp=args.pp, vp=args.vp,
                                   schedule=args.schedule, ep=args.ep, cp=args.cp, overlap=args.overlap,
                                   xla=tuple(_xla_flag(p, f) for f in args.xla_flag), network=args.network)
    except KeyError as err:
        p.error(f"--remat: {err.args[0]}")
    except ValueError as err:
        said = str(err)
        p.error(f"--{'accumulate' if 'accumulate' in said else 'remat' if 'remat' in said else 'lora'}: {said}")


def _xla_flag(p: cli.Parser, text: str) -> tuple[str, Any]:
    """"--xla_gpu_x=true" or "xla_gpu_x=true" as (name, value): true/false a bool, a whole number an int."""
    name, eq, value = text.lstrip("-").partition("=")
    if not name.startswith("xla_") or not eq or not value:
        p.error(f"--xla-flag takes NAME=VALUE with an XLA flag's name (xla_...), got {text!r}")
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    return name, int(value) if value.lstrip("-").isdigit() else value


def _check_pipeline(p: cli.Parser, args: argparse.Namespace, mode: str) -> None:
    if args.pp < 1 or args.vp < 1:
        p.error(f"--pp and --vp take 1 or more, got --pp {args.pp} --vp {args.vp}")
    if (args.vp > 1 or args.schedule != "1f1b") and args.pp == 1:
        p.error("--vp and --schedule shape a pipeline: give --pp P too")
    if args.pp > 1 and not mode.startswith("train"):
        p.error("--pp splits a training step into stages; a prefill or decode step takes --mesh")
    if args.vp > 1 and args.schedule == "gpipe":
        p.error("--vp interleaves a 1F1B pipeline's chunks: not with --schedule gpipe")
    if args.ep < 1 or args.cp < 1 or args.ep > 1 and args.cp > 1:
        p.error(f"--ep and --cp take 1 or more, one of them at a time; got --ep {args.ep} --cp {args.cp}")
    grouped = args.ep > 1 or args.cp > 1
    if grouped and args.mesh not in (None, "fsdp"):
        p.error(f"--ep and --cp groups split a training or prefill step with fsdp over the groups: not with --mesh "
                f"{args.mesh} or --serve")
    if grouped and mode == "serve":
        p.error("--ep and --cp split a training or prefill step; a decode step takes --mesh tp")
    if args.pp > 1 and (args.fit or args.max_batch or args.max_seq):
        p.error("--pp prices the pipeline as asked; the searches (--fit, --max-batch, --max-seq) turn other knobs")


def _check_out_and_gpus(p: cli.Parser, args: argparse.Namespace) -> tuple[str, ...] | None:
    """--out's folder writable and --gpus as the table's names (None: every GPU); a described decoder's sizes."""
    if args.out:  # checked before minutes of compiling, not after
        parent = Path(args.out).parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            p.error(f"--out: cannot create {parent}: {err.strerror or err}")
        if not os.access(parent, os.W_OK):
            p.error(f"--out: cannot write to {parent}")
    from jaxgpu.ground import hardware

    try:
        gpus = tuple(hardware.find_gpu(g).name for g in args.gpus.split(",")) if args.gpus else None
    except KeyError as err:
        p.error(f"--gpus: {err.args[0]}")
    if (args.model or args.config) and (args.head_dim is not None or args.mlp != "swiglu"):
        p.error("--head-dim and --mlp describe a decoder; drop them with --model or --config (which have their own)")
    if not args.model and not args.config:
        if (args.head_dim is None and args.d_model % args.heads) or args.heads % args.kv_heads:
            p.error(f"--d-model ({args.d_model}) must split into --heads ({args.heads}) unless --head-dim is given, "
                    f"and those into --kv-heads ({args.kv_heads})")
    return gpus


def _read_config(p: cli.Parser, args: argparse.Namespace) -> tuple[Any, list[str]]:
    """(the decoder a config.json describes, its fields not read); bad or unhonourable fields are one line, exit 2."""
    from jaxgpu.ground import decoders

    path = Path(args.config)
    try:
        d = json.loads(path.read_text())
    except OSError as err:
        p.error(f"--config: cannot read {path}: {err.strerror or err}")
    except ValueError as err:
        p.error(f"--config: {path} is not JSON: {err}")
    if not isinstance(d, dict):
        p.error(f"--config: {path} holds no object of fields")
    try:
        # a model's folder names it (Hugging Face's <model>/config.json); any other file, its own name
        name = (path.parent.name if path.name == "config.json" else "") or path.stem
        c, unread = decoders.from_hf_config(d, name)
    except ValueError as err:
        p.error(f"--config: {err}")
    return c, unread


def _described(args: argparse.Namespace):
    """The decoder --layers ... --vocab describe."""
    from jaxgpu.ground import decoders

    return decoders.Decoder("described", args.layers, args.d_model, args.heads, args.kv_heads, args.ffn, args.vocab,
                            max(args.seq, 2048), args.style, head_size=args.head_dim, mlp=args.mlp)


# --out's CSV: its columns (a plan's fields) and what each holds
COLUMNS = {"gpu": "the card", "devices": "GPUs a node", "bytes_per_device": "XLA's plan, a GPU",
           "estimate_bytes": "the formula's, a GPU", "fits": "within JAX's 75% of the card",
           "seconds": "predicted step", "lower_s": "its lower bound", "upper_s": "its upper bound",
           "tokens_per_s": "predicted", "mfu": "model FLOPs over the GPUs' peak", "binds": "what the step waits on",
           "comm_s": "collectives beyond the compute", "plan": "the program priced", "mesh": "how the GPUs split it"}


# The committed run that priced the published cases: which steps' plans hold more than their runs could (left out of
# the band, as the report leaves them out of its rows)
CHECKED = Path(__file__).resolve().parents[1] / "reports" / "priced-published"


def band(mode: str, run_dir: Path = CHECKED) -> tuple[float, float, int] | int:
    """(low, high, cases): the interval of predicted / published time over the first prices (out of sample) of the
    published whole steps of ``mode``'s kind (training, or serving: decode and prefill pooled), 90% of the cases
    (``published.summary``), the steps whose plan holds more than their run could in the committed check left out;
    where the kind has too few first prices for an interval, their count alone. A time predicted at t was measured
    between t / high and t / low in that share of the cases."""
    from jaxgpu.records import results

    from experiments.gpu_model import view

    over = (view.over_memory(results.merge([results.read_run(run_dir)]))
            if (run_dir / "results.jsonl").exists() else set())
    s = view.first_scores(over=over)[("train" if mode.startswith("train") else "serving") + "_first"]
    return (s["ratio_low"], s["ratio_high"], int(s["cases"])) if "ratio_low" in s else int(s.get("cases", 0))


def to_tokens(p, tokens: float, price: float | None = None, prefill=None, generate: int | None = None
              ) -> dict[str, float]:
    """Seconds and GPU-hours for ``tokens`` at the plan's predicted step: training's steps of batch x seq tokens
    (each node's share at once), a prefill's tokens at its tokens/s, a decode's generated tokens at its tokens/s plus,
    given the ``prefill`` plan of its batch's prompts (``seq`` tokens each, the decode's context), each sequence's
    prompt once: ``tokens / generate`` sequences, a batch of them a prefill."""
    t = tokens / (p.batch * p.seq) * p.seconds if p.mode.startswith("train") else tokens / p.tokens_per_s
    prompts = tokens / generate / p.batch * prefill.seconds if p.mode == "serve" and prefill and generate else 0.0
    hours = (t + prompts) * p.devices * p.nodes / 3600
    return {"to_tokens_s": t + prompts, "gpu_hours": hours, **({"prefill_s": prompts} if prompts else {}),
            **({"cost_usd": hours * price} if price else {})}


def table(plans, tokens: float | None = None, prices: dict | None = None, span: tuple[float, float] | None = None,
          fewest: bool = False, prefills: dict | None = None, fits: dict | None = None,
          largest: str = "") -> list[list[str]]:
    """The printed table, a row per plan (``prefills``: {(gpu, devices): (prefill plan, tokens each sequence
    generates)} for a decode's time to ``tokens``; ``fits``: {gpu: the fit search's answer}, its knob a column;
    ``largest``: "batch" or "seq", the size each plan was found at, a column after the GPUs)."""
    rows = _with_knobs(_rows(plans, tokens, prices, span, fewest, prefills), plans, fits)
    if largest:
        rows[0].insert(2, largest)
        for row, p in zip(rows[1:], plans):
            row.insert(2, f"{getattr(p, largest):,}" if hasattr(p, "seconds") else "-")
    return rows


def _with_knobs(rows: list[list[str]], plans, fits: dict | None) -> list[list[str]]:
    """The fit search's knob and what it costs in time, a column after "fits" (under --fit)."""
    if not fits:
        return rows
    rows[0].insert(5, "knob (time a step)")
    for row, p in zip(rows[1:], plans):
        f = fits.get(p.gpu) if hasattr(p, "seconds") else None
        row.insert(5, "-" if f is None or not p.fits else
                   f"{f.knob} ({f.cost:+.0%})" if f.knob else "as asked")
    return rows


def _fits(p) -> str:
    """Whether the plan fits the card: "yes" within JAX's default 75%, "at 90%" where it needs the share raised
    (``knobs.RAISED``, with ``XLA_PYTHON_CLIENT_MEM_FRACTION``), else "no"."""
    from jaxgpu.pricing import knobs

    return "yes" if p.fits else f"at {knobs.RAISED:.0%}" if knobs.fits_raised(p) else "no"


def raised_note(plans) -> str:
    """The line that says what "at 90%" means, where a row says it."""
    from jaxgpu.pricing import knobs, sharded

    if not any(hasattr(p, "seconds") and _fits(p).startswith("at ") for p in plans):
        return ""
    return (f"fits \"at {knobs.RAISED:.0%}\": over JAX's default share of the card ({sharded.USABLE_FRACTION:.0%}), "
            f"within {knobs.RAISED:.0%} of it: set {knobs.RAISE_WITH}={knobs.RAISED} before JAX starts.")


def raised_lines(fits: dict) -> list[str]:
    """Under --fit, per card, what a raised memory share would change: the fewest GPUs among the plans compiled
    that hold the step within it, where fewer than at JAX's default."""
    from jaxgpu.pricing import knobs, sharded

    default = f"{sharded.USABLE_FRACTION:.0%}"
    out = ["knob: what made the step fit on that many GPUs; its time a step against the step as asked on as many "
           f"GPUs, priced though it does not fit them (fits: within JAX's default {default} of the card)."
           ] if any(f.knob for f in fits.values()) else []
    for f in fits.values():
        if f.raised and (f.raised < f.plan.devices or not f.plan.fits):
            how = f" with {f.raised_knob}" if f.raised_knob else " as asked"
            out.append(f"{f.plan.gpu}: with {knobs.RAISE_WITH}={knobs.RAISED} (JAX's share of the card raised from "
                       f"{default}, as MaxText's and Pax's scripts raise it) {f.raised} "
                       f"GPU{'s' if f.raised > 1 else ''} hold it{how}.")
    return out


def _rows(plans, tokens, prices, span, fewest, prefills) -> list[list[str]]:
    from jaxgpu.records import labels

    rows = [["GPU", "GPUs", "per GPU", "formula", "fits", "step", "bounds", "tokens/s", "MFU", "binds", "plan"]]
    if tokens:
        rows[0][10:10] = [f"to {labels.si(tokens, 'tokens')}", "GPU-hours"] + (["cost"] if prices else [])
    for p in plans:
        if not hasattr(p, "seconds"):  # a card that cannot run the step as asked
            rows.append([p.gpu, str(p.devices)] + ["-"] * (len(rows[0]) - 3) + [f"cannot run: {p.reason}"])
            continue
        gpus = f"{p.nodes} x {p.devices}" if p.nodes > 1 else str(p.devices)
        if fewest and not p.fits:  # none of the counts holds it
            gpus = f"more than {gpus}"
        elif fewest or " x " in p.mesh:  # how they split it: the fewest's mesh, or a 2-D mesh's grid at this count
            gpus = f"{gpus} ({p.mesh})"
        rows.append([p.gpu, gpus, labels.si(p.bytes_per_device, "B"), labels.si(p.estimate_bytes, "B"),
                     _fits(p),
                     labels.si(p.seconds, "s"), f"{labels.si(p.lower_s, 's')}-{labels.si(p.upper_s, 's')}",
                     labels.si(p.tokens_per_s, "tokens/s"), f"{p.mfu:.0%}", p.binds, p.plan])
        if fewest and not p.fits:  # no time for a step that no count of these GPUs holds
            rows[-1][5:10] = ["-"] * 5
            rows[-1][10:10] = ["-"] * (len(rows[0]) - len(rows[-1]))
            continue
        if tokens:
            k = to_tokens(p, tokens, (prices or {}).get(p.gpu), *(prefills or {}).get((p.gpu, p.devices), (None, None)))
            t = k["to_tokens_s"]
            # the measured time, where the kind's ratios predicted / measured lay: t / high to t / low
            likely = f" ({_duration(t / span[1])}-{_duration(t / span[0])})" if span else ""
            cells = [_duration(t) + likely, f"{k['gpu_hours']:,.3g}"]
            rows[-1][10:10] = cells + ([f"${k['cost_usd']:,.0f}" if "cost_usd" in k else "-"] if prices else [])
    return rows


def formula_lines(plans) -> list[str]:
    """Per device count, where the package's formula (the "formula" column) and XLA's plan ("per GPU") part, said
    of the first GPU priced: what the compiler's plan knows that the formula does not."""
    from jaxgpu.pricing import planner

    out, said = [], set()
    for p in plans:
        if hasattr(p, "memory_split") and p.devices not in said and planner.formula_vs_plan(p):
            said.add(p.devices)
            out.append(f"per GPU on {p.devices} {p.gpu}: " + planner.formula_vs_plan(p))
    return out


def pipeline_lines(plans) -> list[str]:
    """Per pipelined plan, its stages, bubble and sends in a line: where its time and memory go."""
    from jaxgpu.pricing import pipeline
    from jaxgpu.records import labels

    out = []
    for p in plans:
        if getattr(p, "pp", 1) > 1:
            ideal = pipeline.bubble_share(p.pp, p.micro_batches, p.vp)
            gpus, micro = p.devices // p.pp, p.micro_batches
            out.append(f"pipeline on {p.devices} {p.gpu}: {p.pp} stages of {gpus} GPU{'s' if gpus > 1 else ''}, "
                       f"{p.schedule}, {micro} micro-batch{'es' if micro > 1 else ''}; "
                       f"the bubble {labels.si(p.bubble_s, 's')} "
                       f"({p.bubble_s / p.seconds:.0%} of the step; (P-1)/V of M + (P-1)/V micro-batches is "
                       f"{ideal:.0%}); a send between stages {labels.si(p.send_s, 's')}; the first stage holds "
                       f"{p.in_flight:g} micro-batches' activations at its peak. Priced from the heaviest stage's "
                       "plans (its layers, the head and the loss), not compiled whole.")
    return out


def share_lines(plans, seq: int, matmul: str) -> list[str]:
    """One line: per GPU, the share of its datasheet peaks each kind of kernel is priced at, a star where another
    card's measurement stands in (``jaxgpu.ground.calibration``)."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import roofline

    def said(sh) -> str:
        return f"{sh.value:.2f}" + ("*" if sh.stand_in else "")

    cards = []
    for hw in {p.gpu: hardware.find_gpu(p.gpu) for p in plans}.values():
        attention = hw.share("attention")
        cards.append(f"{hw.name} products {said(hw.share('matmul:' + matmul))}, attention "
                     f"{roofline.flash_band(hw.name, seq)[1]:.2f}{'*' if attention.stand_in else ''}, memory "
                     f"{said(hw.share('memory'))}, link {said(hw.share('link'))}, network {said(hw.share('network'))}")
    slower = hardware.find_gpu(plans[0].gpu).share("interference").value if plans else 0.0
    return [f"kernels priced at these shares of each card's peaks (published measurements, * another card's; compute "
            f"under an overlapped collective {slower:.0%} slower; docs/research/calibration.md): "
            + "; ".join(cards) + "."] if cards else []


def _duration(s: float) -> str:
    """Seconds in the unit a person plans in: "42 s", "3.1 h", "12 days"."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * size:
            return f"{s / size:,.3g} {unit}"
    return f"{s:.3g} s"


def _plans(a: Asked) -> list | str:
    """The step's plans for each GPU and device count, or what was wrong in one line."""
    from jaxgpu.ground import devices

    devices.configure("cpu", max(a.devices))  # compile on this CPU; its host devices stand in without the extra
    from jaxgpu.pricing import planner

    try:
        if a.largest:
            return _largest(a)
        if a.fit:
            from jaxgpu.pricing import knobs

            return knobs.fit_on_gpus(a.decoder, mode=a.mode, batch=a.batch, seq=a.seq, counts=a.devices,
                                     gpus=a.gpus, settings=a.settings, workers=a.workers)
        return planner.model_on_gpus(a.decoder, mode=a.mode, batch=a.batch, seq=a.seq, devices=a.devices,
                                     gpus=a.gpus, settings=a.settings, workers=a.workers)
    except KeyError as err:
        return err.args[0]
    except ValueError as err:
        return str(err)
    except RuntimeError as err:  # the compiler failed: its own lines say why
        return f"{err} (the compiler's log: {cli.compiler_log()})"


def _largest(a: Asked) -> list:
    """--max-batch / --max-seq: per GPU and count, the plan of the largest size that fits, or why none does; each
    card's count searched apart, in ``a.workers`` processes where its plans are not cached."""
    from jaxgpu.ground import hardware
    from jaxgpu.pricing import workers

    hws = [hardware.find_gpu(g) for g in a.gpus] if a.gpus else list(hardware.GPUS.values())
    calls = [dict(decoder=a.decoder, gpu=hw.name, devices=n, what=a.largest, mode=a.mode, batch=a.batch, seq=a.seq,
                  settings=a.settings) for hw in hws for n in a.devices]
    return workers.each(_largest_on, calls, a.workers)


def _largest_on(decoder: Any, gpu: str, devices: int, what: str, mode: str, batch: int, seq: int,
                settings: Any) -> Any:
    """``knobs.largest`` on one card and count, or a ``NotPriced`` saying why nothing is found there."""
    from jaxgpu.pricing import knobs, planner
    from jaxgpu.records.results import Unsupported

    name = decoder if isinstance(decoder, str) else decoder.name
    smallest = "1 sequence" if what == "batch" else f"{knobs.SEQ_UNIT} tokens"
    try:
        found = knobs.largest(decoder, gpu, what=what, devices=devices, mode=mode, batch=batch, seq=seq,
                              settings=settings)
    except Unsupported as why:
        return planner.NotPriced(name, mode, gpu, devices, str(why))
    return found or planner.NotPriced(name, mode, gpu, devices, f"even {smallest} does not fit")


def main(argv: list[str] | None = None) -> int:
    # XLA's and the CUDA plugin's log lines (a missing driver, rematerialisation warnings) go to a file from before
    # JAX loads, not to the answer's terminal; a failure says where they are
    with cli.native_stderr_to(cli.compiler_log()):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    a = parse_args(argv)
    if a.listing or a.best:
        return _listed() if a.listing else _best(a)
    plans = _plans(a)
    if isinstance(plans, str):
        return cli.fail(cli.name(COMMAND), plans)
    from jaxgpu.pricing.knobs import Fit

    # under --fit each card's answer: its plan, and the knob that made it fit
    fits = {f.plan.gpu: f for f in plans if isinstance(f, Fit)}
    plans = [f.plan if isinstance(f, Fit) else f for f in plans]
    checked = band(a.mode) if a.tokens else None
    few = checked if isinstance(checked, int) else None
    checked = None if isinstance(checked, int) else checked
    prefills = _prefills(a, plans) if a.tokens and a.mode == "serve" else {}
    rows = table(plans, a.tokens, a.prices, checked[:2] if checked else None, fewest=a.fit, prefills=prefills,
                 fits=fits, largest=a.largest)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    what = {"train": "train step", "train_bf16": "pure-bf16 train step", "prefill": "prefill",
            "serve": "decode step"}[a.mode]
    name = plans[0].model if a.named and plans else "described decoder"  # the table's spelling
    print(f"{name}, one {what}, batch {a.batch} x {a.seq:,} tokens, "
          f"{a.settings.words()} (compiled for each GPU on this CPU, predicted, not run)"
          + (f"; per GPU the fewest of {', '.join(map(str, a.devices))} that hold it" if a.fit else "")
          + (f"; per GPU and count the largest {a.largest} that fits (the rows' column)" if a.largest else "") + ":")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for line in formula_lines(plans) + pipeline_lines(plans) + share_lines(plans, a.seq, a.settings.matmul):
        print(line)
    for line in [raised_note(plans), *raised_lines(fits)]:
        if line:
            print(line)
    from jaxgpu.ground import hardware

    for hw in {p.gpu: hardware.find_gpu(p.gpu) for p in plans}.values():
        if hw.lacks:  # what the card could run that no step here is priced in
            print(f"the {hw.name} also has {hw.lacks}.")
    if a.unread:
        print(f"{a.config_path}: fields not read, which the plan does not reflect: {', '.join(a.unread)}")
    if a.tokens:
        kind = "training steps" if a.mode.startswith("train") else "decode and prefill steps"
        print(f"time to {a.tokens:,.0f} tokens at the predicted step time; " + (
            f"in brackets, where 90% of {checked[2]} published {kind} were measured, out of sample (their first "
            f"prices, before any change they informed, were {checked[0]:.2f}x to {checked[1]:.2f}x the measured; "
            "jaxgpu/pricing/first_prices.json)" if checked
            else f"no interval: {few or 'no'} published {kind} with a first price (out of sample), too few for one")
              + (f"; each sequence's {a.seq:,}-token prompt prefilled once (bf16 weights) for every "
               f"{a.generate:,} tokens it generates" if a.mode == "serve" else "") + ".")
    if a.out:
        return _write(Path(a.out), plans, a, prefills, fits, f"{name}, one {what}, batch {a.batch} x {a.seq:,} "
                      "(compiled, predicted, not run)")
    return 0


def _listed() -> int:
    from jaxgpu.ground import decoders

    for c in decoders.MODELS.values():
        print(f"{c.name:12s} {c.style:6s} {c.layers:3d} layers, width {c.d_model:5d}, {c.heads} heads "
              f"({c.kv_heads} KV), ffn {c.ffn}, vocab {c.vocab}, {c.params() / 1e9:.2f} B parameters")
    return 0


def _best(a: Asked) -> int:
    """--best: the fastest layouts that fit (``experiments.best_layouts``)."""
    from jaxgpu.ground import devices

    from experiments import best_layouts

    devices.configure("cpu", a.devices[0])  # compile on this CPU; its host devices stand in without the extra
    return best_layouts.answer(a, COMMAND)


def _write(out: Path, plans, a: Asked, prefills: dict, fits: dict, title: str) -> int:
    """--out PATH: PATH.csv, PATH.json and PATH.png; 1 where the machine could not take the write."""
    try:
        with open(out.with_suffix(".csv"), "w", newline="") as f:
            w = csv.writer(f)
            extra = (("to_tokens_s", "prefill_s", "gpu_hours", "cost_usd") if a.tokens else ()) + (
                ("knob", "knob_cost", "asked_s", "raised_fraction", "raised_devices", "raised_knob") if fits else ())
            w.writerow((*COLUMNS, *extra))
            w.writerows([[getattr(p, c, "") for c in COLUMNS]
                         + [(_tokens_of(p, a, prefills) | _knob_of(p, fits)).get(c, "") for c in extra]
                         for p in plans])
        out.with_suffix(".json").write_text(json.dumps([dataclasses.asdict(p) | _tokens_of(p, a, prefills)
                                                        | _knob_of(p, fits) for p in plans], indent=1) + "\n")
        _figure(plans, title).savefig(out.with_suffix(".png"), dpi=150, metadata={"Software": None})
    except OSError as err:  # the input was fine: the machine could not take the write
        print(f"{cli.name(COMMAND)}: error: cannot write {out}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(f"written: {out.with_suffix('.csv')}, {out.with_suffix('.json')} and {out.with_suffix('.png')}",
          file=sys.stderr)
    return 0


def _knob_of(p, fits: dict) -> dict:
    """Under --fit, the knob that made the step fit, its cost in time and the raised share's answer, for the JSON."""
    f = fits.get(p.gpu) if hasattr(p, "seconds") else None
    if f is None:
        return {}
    from jaxgpu.pricing import knobs

    return {"knob": f.knob, "knob_cost": f.cost, "asked_s": f.asked_s, "raised_fraction": knobs.RAISED,
            "raised_devices": f.raised, "raised_knob": f.raised_knob}


def _tokens_of(p, a: Asked, prefills: dict) -> dict[str, float]:
    if not (a.tokens and hasattr(p, "seconds")):
        return {}
    return to_tokens(p, a.tokens, a.prices.get(p.gpu), *prefills.get((p.gpu, p.devices), (None, None)))


def _figure(plans, title: str):
    """Memory per GPU by kind against each card, and time by kind of kernel (``figures.step_figure``)."""
    from jaxgpu.records import figures

    return figures.step_figure([p for p in plans if hasattr(p, "seconds")], title)


def _prefills(a: Asked, plans) -> dict:
    """{(gpu, devices): (the prefill plan of a decode's batch of prompts, tokens each sequence generates)}: what a
    decode's time to N tokens adds for its prompts (bf16 weights: a prefill of int8 or fp8 weights is not built)."""
    from jaxgpu.pricing import planner
    from jaxgpu.records.results import Unsupported

    out = {}
    for p in plans:
        if hasattr(p, "seconds"):
            try:
                out[(p.gpu, p.devices)] = (planner.plan_model(a.decoder, p.gpu, mode="prefill", batch=p.batch,
                                                              seq=p.seq, devices=p.devices), a.generate)
            except (KeyError, ValueError, Unsupported):  # a prompt this card cannot plan: the decode's time alone
                continue
    return out


if __name__ == "__main__":
    sys.exit(main())
