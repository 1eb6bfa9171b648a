"""``python -m experiments.preflight [--backend gpu]``: can this machine run the study? Asked in the first seconds.

A lent GPU machine is also the first place the study meets its JAX (0.11 with the CUDA 13 plugin there, 0.10 here),
so the GPU check's first step asks what would otherwise break minutes into a part, each answer on one line:

- the versions (Python, JAX, jaxlib, the CUDA plugins, NumPy, Flax, Optax, torch), and a CUDA plugin at another
  version than jaxlib's (which JAX may load for the GPU in place of the right one);
- every module of ``jaxgpu`` and ``experiments`` imports (a name JAX removed or moved shows here, named), and
  which deprecations those imports raise from the project's own code;
- one small program jits and runs on the backend and matches NumPy in float64 (a product, a GELU, a sum), with its
  compile and run times; a sharded copy of it over every device, through a mesh and ``shard_map``; XLA's memory
  and cost analyses of it, in the shapes the study reads;
- one program compiles for an H100 on XLA:GPU's compile-only path, with whichever CUDA plugin is here (what the
  study's plans need), or why it cannot.

Exit status: 0 when every check passed, 1 when one failed (the rest still ran), 2 for bad input.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import platform
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

from experiments import cli

COMMAND = "experiments.preflight"
PACKAGES = ("jaxgpu", "experiments")
DISTRIBUTIONS = ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "numpy", "flax", "optax", "torch")
# the project's own modules a deprecation is reported from (the others' are JAX's business)
OURS = r"(jaxgpu|experiments)(\.|$)"


def versions() -> list[str]:
    """``name version`` per distribution the study uses ("not installed" where it is not)."""
    out = [f"python {platform.python_version()}"]
    for name in DISTRIBUTIONS:
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} not installed")
    return out


def plugin_clash() -> str | None:
    """Why the installed CUDA plugins may not give JAX the GPU, or None: a plugin at another version than jaxlib's
    (pip adds the newest jax-cuda12-plugin, this package's dependency, to a jax[cuda13] install; JAX then finds two
    plugins for one device type and keeps whichever registers first)."""
    from jaxgpu.pricing import targets

    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        jaxlib = ""
    odd = [f"{name} {v}" for name, v in targets.installed_plugins().items() if v != jaxlib]
    if not odd:
        return None
    return (f"{', '.join(odd)} beside jaxlib {jaxlib}: JAX may load it for the GPU; uninstall it (with its -pjrt) "
            "or install it at jaxlib's version")


def module_names(root: Path | None = None) -> list[str]:
    """Every module of the package's two trees, from the files (a module no one imports yet is found too)."""
    root = root or Path(__file__).resolve().parents[1]
    names = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def import_all(names: list[str]) -> tuple[list[str], list[str]]:
    """Imports each module; returns (``module: why`` for each that failed, the deprecations the project's own code
    raised while importing, each once)."""
    failed, deprecated = [], {}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DeprecationWarning)
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as err:  # noqa: BLE001 - every module is tried; each failure is named
                failed.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    import re

    for w in seen:
        if issubclass(w.category, DeprecationWarning) and re.match(OURS, _module_of(w.filename)):
            deprecated.setdefault(str(w.message).splitlines()[0], f"{_module_of(w.filename)}:{w.lineno}")
    return failed, [f"{where}: {message}" for message, where in deprecated.items()]


def _module_of(filename: str) -> str:
    """The dotted module of a file of this checkout ("" for a file elsewhere)."""
    root = Path(__file__).resolve().parents[1]
    try:
        parts = Path(filename).resolve().relative_to(root).with_suffix("").parts
    except ValueError:
        return ""
    return ".".join(parts[:-1] if parts and parts[-1] == "__init__" else parts)


def _program(x, w):
    import jax
    import jax.numpy as jnp

    return jnp.sum(jax.nn.gelu(x @ w, approximate=True), axis=0)


def _reference(x, w):
    import numpy as np

    y = x.astype(np.float64) @ w.astype(np.float64)
    return np.sum(0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y**3))), axis=0)


def check_program(platform_name: str) -> str:
    """Jits the small program on the platform's first device, runs it, checks it against float64; one line."""
    import jax
    import numpy as np

    from jaxgpu.ground import devices

    dev = devices.devices_of(platform_name)[0]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    w = rng.standard_normal((512, 128), dtype=np.float32) / np.sqrt(512)
    xd, wd = jax.device_put(x, dev), jax.device_put(w, dev)
    t0 = time.perf_counter()
    compiled = jax.jit(_program).lower(xd, wd).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = np.asarray(jax.block_until_ready(compiled(xd, wd)), dtype=np.float64)
    run_s = time.perf_counter() - t0
    want = _reference(x, w)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    with jax.default_matmul_precision("highest"):  # the same program at fp32 proper (GPUs default to TF32)
        exact = np.asarray(jax.jit(_program)(xd, wd), dtype=np.float64)
    exact_err = float(np.max(np.abs(exact - want)) / np.max(np.abs(want)))
    if exact_err > 1e-4:
        raise AssertionError(f"the program at HIGHEST precision is off float64 by {exact_err:.1e} (relative)")
    return (f"{dev.device_kind}: jit compiled in {compile_s:.2f} s, ran in {run_s * 1e3:.1f} ms, relative error "
            f"{exact_err:.1e} (HIGHEST) and {err:.1e} (the backend's default precision)")


def check_sharded(platform_name: str) -> str:
    """The program over every device of the platform: a mesh, a NamedSharding, ``shard_map`` and a psum."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    from jaxgpu.kernels import parallel

    devs = jax.devices(platform_name)
    mesh = parallel.make_mesh(devs)
    x = np.arange(len(devs) * 8 * 16, dtype=np.float32).reshape(len(devs) * 8, 16)
    xs = jax.device_put(x, NamedSharding(mesh, PartitionSpec(parallel.DATA)))

    def total(block):
        return jax.lax.psum(block.sum(axis=0), parallel.DATA)

    got = jax.jit(parallel.shard_map(total, mesh=mesh, in_specs=PartitionSpec(parallel.DATA),
                                     out_specs=PartitionSpec()))(xs)
    if not np.allclose(np.asarray(got), x.sum(axis=0)):
        raise AssertionError("shard_map's psum over the mesh does not match NumPy")
    return f"{len(devs)} device(s): NamedSharding, shard_map and psum match NumPy"


def check_analyses(platform_name: str) -> str:
    """XLA's memory and cost analyses of the program, in the shapes the study reads."""
    import jax
    import numpy as np

    from jaxgpu.ground import devices

    dev = devices.devices_of(platform_name)[0]
    x = jax.device_put(np.ones((256, 512), np.float32), dev)
    w = jax.device_put(np.ones((512, 128), np.float32), dev)
    compiled = jax.jit(_program).lower(x, w).compile()
    mem = compiled.memory_analysis()
    if mem is None or getattr(mem, "argument_size_in_bytes", None) is None:
        raise AssertionError(f"memory_analysis() gave {mem!r}, not argument/output/temp sizes")
    if mem.argument_size_in_bytes < x.nbytes + w.nbytes:
        raise AssertionError(f"memory_analysis() counts {mem.argument_size_in_bytes} argument bytes, under the "
                             f"{x.nbytes + w.nbytes} passed")
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) and cost else cost
    flops = (cost or {}).get("flops")
    return (f"memory_analysis: {mem.argument_size_in_bytes:,} argument, {mem.temp_size_in_bytes:,} temp bytes; "
            f"cost_analysis: {'flops ' + format(flops, '.3g') if flops is not None else 'no flops (read from HLO)'}")


def check_gpu_plan() -> str:
    """One program compiled for an H100 on XLA:GPU's compile-only path (``jaxgpu.pricing.targets``)."""
    from jaxgpu.pricing import targets

    if why := targets.unavailable():
        return f"skipped: {why}"
    dev = targets.devices(targets.lent_target())[0]
    plan = targets.compile_plan(_program, targets.spec((256, 512), "float32", dev),
                                targets.spec((512, 128), "float32", dev))
    m = plan.metrics()
    gemms = int(sum(v for k, v in m.items() if k.startswith("calls_")))
    return f"an H100 plan through {targets.plugin()} in {plan.compile_s:.2f} s: {int(m.get('fusions', 0))} fusions, " \
           f"{gemms} library calls"


def run(backend: str, say: Callable[[str], None] = print) -> int:
    """Every check, each on its line; returns how many failed."""
    for line in versions():
        say(f"version   {line}")
    bad = 0
    if clash := plugin_clash():
        say(f"FAILED    plugins: {clash}")
        bad += 1
    t0 = time.perf_counter()
    names = module_names()
    failed, deprecated = import_all(names)
    say(f"imports   {len(names) - len(failed)} of {len(names)} modules in {time.perf_counter() - t0:.1f} s")
    for line in failed:
        say(f"FAILED    import {line}")
    for line in deprecated:
        say(f"deprecated {line}")
    bad += len(failed)
    from jaxgpu.ground import devices

    try:
        devices.configure(backend)
        platform_name = devices.resolve(backend)
    except devices.BackendError as err:
        say(f"FAILED    backend: {err}")
        return bad + 1
    checks = {"program": lambda: check_program(platform_name), "sharded": lambda: check_sharded(platform_name),
              "analyses": lambda: check_analyses(platform_name), "gpu plan": check_gpu_plan}
    for name, check in checks.items():
        t0 = time.perf_counter()
        try:
            say(f"{name:9s} {check()} ({time.perf_counter() - t0:.1f} s)")
        except Exception as err:  # noqa: BLE001 - each check is named with where it broke; the rest still run
            where = traceback.extract_tb(err.__traceback__)[-1]
            say(f"FAILED    {name}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''} "
                f"({Path(where.filename).name}:{where.lineno})")
            bad += 1
    return bad


def main(argv: list[str] | None = None) -> int:
    prog = cli.prog(COMMAND)
    p = cli.Parser(prog=prog, description=__doc__.split("\n\n")[0].replace(f"python -m {COMMAND}", prog))
    p.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto",
                   help="the backend the program runs on (default: the GPU where there is one)")
    args = p.parse_args(argv)
    if importlib.util.find_spec("jax") is None:
        return cli.fail(cli.name(COMMAND), f"JAX is not installed in {sys.executable}; run with a Python that has it")
    bad = run(args.backend, lambda line: print(line, flush=True))
    print(f"preflight: {'every check passed' if not bad else f'{bad} check(s) failed'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
