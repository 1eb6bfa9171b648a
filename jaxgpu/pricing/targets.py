"""Compile for a GPU this machine does not have: XLA:GPU's plan for an H100, H200 or A100, on a CPU.

JAX can compile for a device it cannot run on: with the CUDA plugin installed (the
``gpu-compile`` extra: no driver, no GPU, no nvidia-* wheels), ``jax.experimental.topologies``
describes a GPU from a target config and ``jax.jit(f).lower(*specs).compile()`` runs XLA:GPU
down to a cubin. What comes back is a plan, never a speed: the optimised HLO (library calls,
fusions, the collectives a sharded program needs), XLA's memory analysis, the compile time.
Without a device XLA cannot autotune, so ``compile_plan`` asks for cuBLAS(Lt) GEMMs
(``xla_gpu_enable_triton_gemm=false``) rather than the fixed-tile Triton fallback: a
library choice, not a performance figure.

The target configs are written here from the GPUs' published figures (``GpuTarget``) and
rendered in the text form of XLA's ``GpuTargetConfigProto``; each entry names its sources.
The plugin (CUDA 12 or 13), jax and jaxlib must be one version (``unavailable`` says when they are not).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jaxgpu.ground import hardware, stack

# XLA cannot autotune without a device: GEMMs as cuBLAS(Lt) calls, the library plan.
COMPILE_OPTIONS = {"xla_gpu_enable_triton_gemm": False}


@dataclasses.dataclass(frozen=True)
class GpuTarget:
    """One GPU as XLA:GPU's compiler sees it. Sizes in bytes, bandwidth in bytes/s."""

    name: str  # the --compile-for name
    device_kind: str  # as JAX would report the real device
    hardware: str  # key into jaxgpu.ground.hardware.GPUS
    compute_capability: tuple[int, int]
    accelerated: bool  # sm_90a: Hopper's wgmma and FP8 Tensor Core instructions
    sms: int
    fp32_lanes_per_sm: int
    clock_ghz: float
    memory_bytes: int
    memory_bandwidth: float
    l2_bytes: int
    shared_per_sm: int
    shared_per_block_optin: int
    source: str
    shared_per_block: int = 48 * 1024  # without opting in, every compute capability since 2.0
    threads_per_sm: int = 2048
    registers_per_sm: int = 65536


def _of(hw: hardware.Hardware) -> GpuTarget:
    """The card's compile target: its ``compiled`` entry with its datasheet's SMs, lanes, clock and bandwidth."""
    c = hw.compiled
    return GpuTarget(c.name, c.device_kind, hw.name, c.compute_capability, c.accelerated, hw.cores,
                     hw.lanes_per_core, hw.clock_ghz, c.memory_mib * 2**20, hw.memory_bw_gbps * 1e9, c.l2_mb * 2**20,
                     c.shared_per_sm_kb * 1024, c.shared_per_block_kb * 1024, c.source)


# every card of the hardware table that XLA:GPU compiles for here, by its --compile-for name
TARGETS: dict[str, GpuTarget] = {hw.compiled.name: _of(hw) for hw in hardware.GPUS.values() if hw.compiled}

# The CUDA and cuDNN versions the plan assumes, by the plugin that compiles it (XLA gates features on them: FP8
# GEMMs in cuBLASLt need CUDA 12). jax-cuda12-plugin is built against CUDA 12.8 and cuDNN 9, the one every
# committed plan was made with; jax-cuda13-plugin (the lent GPU machine's) against CUDA 13.0 and cuDNN 9.
CUDA_VERSIONS = {"jax-cuda12-plugin": "12.8.0", "jax-cuda13-plugin": "13.0.0"}
CUDA_VERSION = CUDA_VERSIONS["jax-cuda12-plugin"]
CUDNN_VERSION = (9, 8, 0)


def lent_target() -> str:
    """The target of the slower card the device machines are lent with (``Hardware.lent``): the one a first call
    gets, and the one the GPU check's preflight compiles for."""
    lent = [hw for hw in hardware.GPUS.values() if hw.lent and hw.compiled]
    return min(lent, key=lambda hw: hw.memory_bw_gbps).compiled.name


def target(name: str) -> GpuTarget:
    """The named target (``TARGETS``: "h200", "h100", ...).

    Raises:
      KeyError: an unknown name; the message lists the known ones.
    """
    try:
        return TARGETS[name.lower()]
    except KeyError:
        raise KeyError(f"unknown GPU target {name!r}; known: {', '.join(TARGETS)}") from None


def config_text(t: GpuTarget) -> str:
    """``t`` in the text form of XLA's GpuTargetConfigProto (what ``get_topology_desc`` reads)."""
    major, minor = t.compute_capability
    ext = " feature_extension: ACCELERATED_FEATURES" if t.accelerated else ""
    dnn = ".".join(map(str, CUDNN_VERSION))
    fields = {
        "threads_per_block_limit": 1024, "threads_per_warp": 32, "shared_memory_per_block": t.shared_per_block,
        "shared_memory_per_core": t.shared_per_sm, "threads_per_core_limit": t.threads_per_sm,
        "core_count": t.sms, "fpus_per_core": t.fp32_lanes_per_sm, "block_dim_limit_x": 2**31 - 1,
        "block_dim_limit_y": 65535, "block_dim_limit_z": 65535, "memory_bandwidth": int(t.memory_bandwidth),
        "l2_cache_size": t.l2_bytes, "clock_rate_ghz": t.clock_ghz, "device_memory_size": t.memory_bytes,
        "shared_memory_per_block_optin": t.shared_per_block_optin, "registers_per_core_limit": t.registers_per_sm,
        "registers_per_block_limit": t.registers_per_sm,
    }
    lines = [f"  {k}: {v}" for k, v in fields.items()]
    lines.append(f"  cuda_compute_capability {{ major: {major} minor: {minor}{ext} }}")
    cuda = CUDA_VERSIONS.get(plugin() or "", CUDA_VERSION)
    lines += [f'  runtime_version: "{cuda}"', f'  compile_time_toolkit_version: "{cuda}"',
              f'  dnn_version: "{dnn}"', f'  name: "{t.device_kind}"']
    major_d, minor_d, patch_d = CUDNN_VERSION
    return ("gpu_device_info {\n" + "\n".join(lines) + "\n}\n" + 'platform_name: "CUDA"\n'
            + f"dnn_version_info {{ major: {major_d} minor: {minor_d} patch: {patch_d} }}\n"
            + f'device_description_str: "{t.device_kind}"\n')


def installed_plugins() -> dict[str, str]:
    """The CUDA plugins installed here, by name, with their versions (none: an empty dict)."""
    return {name: v for name in CUDA_VERSIONS if (v := _version(name))}


def plugin() -> str | None:
    """The installed CUDA plugin that compiles here (``jax-cuda12-plugin`` or ``jax-cuda13-plugin``, at jax's own
    version), or None."""
    jax = _version("jax")  # read from the installed package, not the module: a cached plan is read without JAX
    found = [name for name, v in installed_plugins().items() if v == jax]
    return found[0] if found else None


def unavailable() -> str | None:
    """Why compiling for a GPU cannot work here, or None when it can: a CUDA plugin, 12 or 13, at jax's version."""
    if plugin() is not None:
        return None
    installed = [f"{name} {v}" for name, v in installed_plugins().items()]
    if installed:
        return f"{' and '.join(installed)} do{'es' if len(installed) == 1 else ''} not match jax {_version('jax')}; " \
               "install the plugin at jax's version"
    return ("the CUDA plugin is not installed: pip install -e '.[gpu-compile]' (jax-cuda12-plugin and "
            "jax-cuda12-pjrt at jax's version, or jax-cuda13-plugin and jax-cuda13-pjrt; no GPU or driver needed)")


@functools.lru_cache(maxsize=8)
def devices(name: str, n: int = 1, node: int = 0) -> tuple:
    """``n`` compile-only devices of the target: one host (``1x1xn``), or past ``node`` (0: never) hosts of ``node``
    devices each (``1xHxnode``), a host's devices neighbours in order; they can be compiled for, not run on."""
    from jax.experimental import topologies

    t = target(name)
    topo = topologies.get_topology_desc(t.name, "cuda", target_config=config_text(t), topology=topology(n, node))
    return tuple(topo.devices)


def topology(n: int, node: int = 0) -> str:
    """The topology ``devices`` asks XLA for: "1x1xn", or "1xHxnode" for H hosts of ``node`` devices past one."""
    hosts = n // node if node and n > node and n % node == 0 else 1
    return f"1x{hosts}x{n // hosts}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What XLA:GPU made of one program: bytes from its memory analysis (per device), the optimised HLO."""

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    compile_s: float
    hlo: str  # optimised, as XLA:GPU will run it
    lowered_hlo: str = ""  # before optimisation: the program as JAX wrote it (FLOPs by op are counted here)

    @property
    def total_bytes(self) -> int:
        """Arguments + outputs + temporaries - aliased: what the program holds (``timing.memory_bytes``)."""
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes

    def metrics(self) -> dict[str, float]:
        """The plan as record metrics: bytes, compile time, library calls, fusions, collectives."""
        out = {"bytes_argument": float(self.argument_bytes), "bytes_output": float(self.output_bytes),
               "bytes_temp": float(self.temp_bytes), "bytes_alias": float(self.alias_bytes),
               "bytes_compiled": float(self.total_bytes), "compile_s": self.compile_s,
               "fusions": float(stack.count_ops(self.hlo)["fusions"])}
        out.update({f"calls_{k}": float(v) for k, v in stack.library_counts(self.hlo).items()})
        for kind, (count, nbytes) in stack.collectives(self.hlo).items():
            out[f"{kind}_count"], out[f"{kind}_bytes"] = float(count), float(nbytes)
        return out


def compile_plan(fn: Callable, *specs: Any, options: dict | None = None, cache: bool = False) -> Plan:
    """Compiles ``fn`` (jitted if it is not) for the devices its ``ShapeDtypeStruct`` specs are placed on.

    ``cache``: a plan compiled before for the same program, target, options and JAX is read from the user's cache
    folder (``plan_cache``) rather than compiled again; its ``compile_s`` is the first compile's. A run's records
    compile afresh (their compile times are measured); the model command asks for the cache."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    lowered = jitted.lower(*specs)
    key = _plan_key(lowered, specs, options) if cache else None
    if key and (hit := plan_cache().get(key)) is not None:
        return hit
    plan = _compile(lowered, options)
    if key:
        plan_cache().put(key, plan)
    return plan


@dataclasses.dataclass(frozen=True)
class Program:
    """A program to plan, said by what makes it, so that its plan is looked up before anything is traced: ``recipe``
    (values JSON can write, dataclasses among them: the step's kind, its decoder and settings, the target, the
    devices and their mesh), ``code`` (the modules that build it: their files, and the files they import, are part
    of the key) and ``build`` (no arguments: the jitted function and its placed specs), called on a miss."""

    recipe: Any
    code: tuple[str, ...]
    build: Callable[[], tuple[Callable, Sequence[Any]]]


def plan_of(program: Program, options: dict | None = None) -> Plan:
    """``compile_plan`` of ``program`` with the cache on, keyed by what makes it (``Program``), the options, XLA_FLAGS
    and the compiler's versions: a hit reads the plan without tracing, lowering or importing JAX. A miss builds
    the program and looks it up by its lowered text too (the same program made by code that changed only in its
    comments) before compiling it."""
    key = key_of(["program", program.recipe, code_of(program.code), {**COMPILE_OPTIONS, **(options or {})}])
    if (hit := plan_cache().get(key)) is not None:
        return hit
    import jax

    fn, placed = program.build()
    lowered = (fn if hasattr(fn, "lower") else jax.jit(fn)).lower(*placed)
    plan = plan_cache().get(_plan_key(lowered, placed, options)) or _compile(lowered, options)
    plan_cache().put(key, plan)  # kept once, under what makes it
    return plan


def key_of(value: Any) -> str:
    """A cache key of ``value`` (JSON's text of it, dataclasses as their fields) with XLA_FLAGS and the versions of
    JAX, jaxlib and the CUDA plugins installed."""
    import hashlib
    import json
    import os

    def plain(o: Any) -> Any:
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return dataclasses.asdict(o)
        raise TypeError(f"a cache key takes JSON's values and dataclasses, not {type(o).__name__}")

    # the host's device count (the model command sets it) changes no GPU plan: a notebook's step is the command's
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(_HOST_DEVICES)]
    # JAX's settings from the environment (the platforms apart: where a plan is compiled, not what it is), and
    # float64 turned on in this process (``precision.enable_x64``): either changes how a step lowers
    settings = {k: v for k, v in os.environ.items() if k.startswith("JAX_") and k != "JAX_PLATFORMS"}
    jax = sys.modules.get("jax")
    if jax is not None and getattr(jax.config, "jax_enable_x64", False):
        settings["x64"] = "on"
    text = json.dumps([value, flags, settings, *map(_version, ("jax", "jaxlib", *CUDA_VERSIONS))], sort_keys=True,
                      default=plain)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_HOST_DEVICES = "--xla_force_host_platform_device_count"


@functools.cache
def code_of(entries: tuple[str, ...]) -> str:
    """A hash of the files ``entries`` are made of with those they import (``fingerprint.sources``), byte for byte
    but for their tables of data (``fingerprint.raw_code``): a cache key's share, where an edit of the code must miss
    (a comment's too; ``fingerprint.fingerprint`` is the one that reads code alone) and a new card, model or case
    must not."""
    import hashlib

    from jaxgpu.pricing import fingerprint

    h = hashlib.sha256()
    for path in fingerprint.sources(entries):
        h.update(str(path.relative_to(fingerprint.ROOT)).encode() + b"\0" + fingerprint.raw_code(path))
    return h.hexdigest()[:16]


def _compile(lowered: Any, options: dict | None) -> Plan:
    t0 = time.perf_counter()
    compiled = lowered.compile(compiler_options={**COMPILE_OPTIONS, **(options or {})})
    compile_s = time.perf_counter() - t0
    m = compiled.memory_analysis()
    return Plan(m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes, m.alias_size_in_bytes,
                compile_s, compiled.as_text(), lowered.as_text(dialect="hlo"))


def _plan_key(lowered: Any, specs: Sequence[Any], options: dict | None) -> str:
    """What makes a plan: the program as JAX lowered it (shardings included), the devices it is placed on (their
    kind and count: the target), the compiler's options and XLA_FLAGS, and the JAX, jaxlib and plugin that compile
    it."""
    import hashlib
    import json
    import os

    import jax

    devices = {d for a in jax.tree.leaves(specs) if getattr(a, "sharding", None) is not None
               for d in a.sharding.device_set}
    kinds = sorted({f"{d.platform}:{d.device_kind}" for d in devices})
    h = hashlib.sha256(lowered.as_text().encode())
    h.update(json.dumps([kinds, len(devices), {**COMPILE_OPTIONS, **(options or {})}, os.environ.get("XLA_FLAGS", ""),
                         jax.__version__,
                         *map(_version, ("jaxlib", *CUDA_VERSIONS))],
                        sort_keys=True).encode())
    return h.hexdigest()[:32]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.cache
def plan_cache() -> PlanCache:
    """The user's plan cache: ``$XDG_CACHE_HOME/jaxgpu/plans`` (else ``~/.cache``), ``JAXGPU_PLAN_CACHE_MB`` at most
    (default 1024; 0 turns it off)."""
    import os
    from pathlib import Path

    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxgpu" / "plans"
    return PlanCache(root, float(os.environ.get("JAXGPU_PLAN_CACHE_MB", "1024")) * 1e6)


class PlanCache:
    """Plans on disk, one gzipped JSON file each named by its key; past ``limit_bytes`` the least recently used go.
    A file that cannot be read is a miss, never an error: the plan is compiled again."""

    def __init__(self, root, limit_bytes: float):
        self.root, self.limit = root, limit_bytes

    def get(self, key: str) -> Plan | None:
        try:
            return None if (got := self.read(key)) is None else Plan(**got)
        except TypeError:  # written by another version of Plan
            return None

    def read(self, key: str) -> dict | None:
        """The JSON object kept under ``key``, or None."""
        import gzip
        import json
        import os

        path = self.root / f"{key}.json.gz"
        if self.limit <= 0 or not path.exists():
            return None
        try:
            got = json.loads(gzip.decompress(path.read_bytes()))
            os.utime(path)  # used: the last to go
            return got if isinstance(got, dict) else None
        except (OSError, ValueError, EOFError):
            return None

    def put(self, key: str, plan: Plan) -> None:
        self.write(key, dataclasses.asdict(plan))

    def write(self, key: str, value: dict) -> None:
        """Keeps the JSON object ``value`` under ``key``; past the limit, the least recently used go."""
        import gzip
        import json
        import os

        if self.limit <= 0:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".{key}.{os.getpid()}.tmp"
            tmp.write_bytes(gzip.compress(json.dumps(value).encode(), compresslevel=6))
            os.replace(tmp, self.root / f"{key}.json.gz")
            files = sorted(self.root.glob("*.json.gz"), key=lambda f: f.stat().st_mtime)
            total = sum(f.stat().st_size for f in files)
            while files and total > self.limit:
                total -= files[0].stat().st_size
                files.pop(0).unlink()
        except OSError:  # a full or read-only disk: the answer stands, uncached
            pass


def spec(shape: Sequence[int], dtype: Any, device_or_sharding: Any) -> Any:
    """A ``jax.ShapeDtypeStruct`` placed on a compile-only device (or a sharding over several)."""
    import jax

    sharding = device_or_sharding
    if not isinstance(device_or_sharding, jax.sharding.Sharding):
        sharding = jax.sharding.SingleDeviceSharding(device_or_sharding)
    return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding)


def specs_like(tree: Any, sharding: Any) -> Any:
    """Specs for every array of ``tree`` (arrays or shape-dtype structs), each on ``sharding``
    (a sharding, a device, or a tree of shardings matching ``tree``)."""
    import jax

    if isinstance(sharding, (dict, list, tuple)):
        return jax.tree.map(lambda a, s: spec(a.shape, a.dtype, s), tree, sharding)
    return jax.tree.map(lambda a: spec(a.shape, a.dtype, sharding), tree)
