"""Memory bandwidth: STREAM's four kernels (jit, loop, sharded, numpy, torch, a worker process) and host<->device
transfer.

Bandwidth is counted STREAM's way: bytes of every array the kernel reads plus every
array it writes, once per element (copy and scale: 2 arrays, add and triad: 3), over the
median time. Caches, allocation and first touch are what make such figures lie:

- arrays are several times the last-level cache (read from the machine);
- inputs are made and touched once before timing; a first touch of fresh memory is
  never timed as bandwidth;
- the plain ``jit`` variant gets a fresh output buffer from XLA on every call, and the
  OS maps its pages on first write: the minor page faults per call are measured and
  recorded, because on CPU they, not DRAM, set that variant's speed. The ``loop``
  variant runs many kernels inside one compiled ``fori_loop`` so buffers are reused,
  and the ``sharded`` variant splits the arrays over host devices.

The roofline's compute chains (FMA, transcendental, pow, matvec) are ``jaxgpu.kernels.chains``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import resource
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpu.ground import timing
from jaxgpu.ground.devices import last_level_cache_bytes  # noqa: F401 - part of this module's API
from jaxgpu.ground.workload import KERNELS, stream_bytes  # noqa: F401 - part of this module's API

SCALAR = 3.0


def stream_kernel(kernel: str) -> Callable:
    """The kernel as a function of (a, b, c) returning the one array it writes."""
    return {
        "copy": lambda a, b, c: jnp.copy(a),
        "scale": lambda a, b, c: SCALAR * a,
        "add": lambda a, b, c: a + b,
        "triad": lambda a, b, c: b + SCALAR * c,
    }[kernel]


def stream_loop(kernel: str, iters: int) -> Callable:
    """``iters`` STREAM kernels in one compiled ``fori_loop``, as a function of (a, b, c) returning the array
    the last one wrote.

    The loop carries only the array each kernel writes; its inputs are the program's arguments, read in
    place every iteration. (A carry of all three arrays, rotated, made XLA:GPU copy two of them whole in
    the loop body: seven arrays moved for the three counted.) STREAM's kernels never read what they write,
    so each iteration's kernel takes a scalar made from the iteration number that equals 1 but that XLA
    cannot know: without it every iteration computes the same thing and XLA may hoist it out of the loop.
    Copy and add multiply by it (memory-bound either way: the bytes are STREAM's); scale and triad fold
    it into their scalar."""
    def one(i, dtype):
        k = (i + 1).astype(jnp.float32)
        return (k / k).astype(dtype)

    step = {
        "copy": lambda a, b, c, u: a * u,
        "scale": lambda a, b, c, u: (SCALAR * u) * a,
        "add": lambda a, b, c, u: (a + b) * u,
        "triad": lambda a, b, c, u: b + (SCALAR * u) * c,
    }[kernel]

    def run(a, b, c):
        first = step(a, b, c, one(jnp.int32(0), a.dtype))
        return jax.lax.fori_loop(1, iters, lambda i, out: step(a, b, c, one(i, a.dtype)), first)

    return run


def stream_reference(kernel: str, a, b, c) -> np.ndarray:
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    return {"copy": a, "scale": SCALAR * a, "add": a + b, "triad": b + SCALAR * c}[kernel]


@dataclasses.dataclass(frozen=True)
class BandwidthResult:
    kernel: str
    variant: str
    n: int
    dtype: str
    timing: timing.Timing
    bytes_per_call: int
    page_faults_per_call: float | None = None
    kernels_per_call: int = 1  # a loop variant's kernels in one timed call; its times are per kernel

    @property
    def gbytes_per_s(self) -> float:
        return self.timing.per_s(self.bytes_per_call, 1e9)

    def metrics(self) -> dict[str, float]:
        out = self.timing.metrics(gbytes_per_s=self.gbytes_per_s, bytes_per_call=float(self.bytes_per_call))
        if self.kernels_per_call > 1:  # times per kernel, XLA's counts the loop program's: a model needs both
            out["kernels_per_call"] = float(self.kernels_per_call)
        if self.page_faults_per_call is not None:
            out["page_faults_per_call"] = self.page_faults_per_call
        return out


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def stream_arrays(n: int, dtype: str = "float32", sharding=None, seed: int = 0):
    """Three device arrays of n random values (made and touched once, outside any timing)."""
    keys = jax.random.split(jax.random.key(seed), 3)
    make = jax.jit(lambda k: jax.random.uniform(k, (n,), jnp.float32, 1.0, 2.0).astype(dtype),
                   out_shardings=sharding)
    arrs = [make(k) for k in keys]
    jax.block_until_ready(arrs)
    return arrs


def check_stream(kernel: str, out, a, b, c, dtype: str, sample: int = 1 << 16) -> float:
    """Max relative error of a STREAM kernel's output on a sample of elements."""
    idx = np.linspace(0, a.shape[0] - 1, min(sample, a.shape[0])).astype(np.int64)
    take = lambda x: np.asarray(jnp.asarray(x)[idx].astype(jnp.float32), dtype=np.float64)
    ref = stream_reference(kernel, take(a), take(b), take(c))
    got = take(out)
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


def bench_stream(kernel: str, arrays, variant: str = "jit", loop_iters: int = 10,
                 target_s: float = 0.5) -> BandwidthResult:
    """Times one STREAM kernel on three existing device arrays.

    variant ``jit``: one compiled call per kernel (a fresh output each call).
    ``loop``: ``loop_iters`` kernels inside one ``fori_loop`` (``stream_loop``) that carries only
    the array each writes, so XLA reuses its buffer; time per kernel = call time / iters.
    """
    a, b, c = arrays
    fn = stream_kernel(kernel)
    tol = 1e-2 if a.dtype == jnp.bfloat16 else 1e-6
    if variant in ("jit", "sharded"):
        compiled, compile_s = timing.compile_timed(jax.jit(fn), a, b, c)
        err = check_stream(kernel, compiled(a, b, c), a, b, c, str(a.dtype))
        iters = 1
    elif variant == "loop":
        compiled, compile_s = timing.compile_timed(jax.jit(stream_loop(kernel, loop_iters)), a, b, c)
        err = check_stream(kernel, compiled(a, b, c), a, b, c, str(a.dtype))  # every iteration writes the same
        iters = loop_iters
    else:
        raise ValueError(f"unknown variant {variant!r}")
    if not err <= tol:
        raise ArithmeticError(f"{kernel} {variant}: wrong result (rel. error {err:.1e}); timing discarded")
    f0 = _faults()
    t = timing.time_compiled(compiled, [(a, b, c)], compile_s=compile_s, target_s=target_s, min_iters=3, warmup=1)
    faults = (_faults() - f0) / (t.n_iters + 1)
    if iters > 1:
        t = dataclasses.replace(t, times_s=tuple(x / iters for x in t.times_s))
        faults /= iters
    nbytes = stream_bytes(kernel, a.shape[0], a.dtype.itemsize)
    return BandwidthResult(kernel, variant, a.shape[0], str(a.dtype), t, nbytes, faults, iters)


def _exit_words(rc: int) -> str:
    import signal

    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else f"signal {-rc}"
        return f"killed by {name}" + (" (out of memory?)" if rc == -signal.SIGKILL else "")
    return f"exited {rc}"


def _last_message(stderr: str) -> str:
    """The worker's last line that is not a native library's log line (absl's "I0000 ...", "WARNING: ...")."""
    lines = [ln for ln in stderr.strip().splitlines()
             if ln.strip() and not re.match(r"^[IWE]\d{4} |^WARNING: All log messages", ln)]
    return lines[-1] if lines else "no message"


def bench_stream_process(kernel: str, n: int, dtype: str = "float32", allocator: str = "system",
                         target_s: float = 0.3, timeout_s: float = 300) -> dict[str, float]:
    """``bench_stream`` (plain jit) in a fresh CPU process started with the host allocator ``allocator``
    ("system" or "tuned", see ``jaxgpu.ground.devices.TUNED_MALLOC``); returns its metrics.

    Malloc reads its settings when a process starts, so comparing allocators takes a process each.
    """
    import json
    import subprocess
    import sys

    from jaxgpu.ground import devices

    env = devices.allocator_environ(allocator)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()  # one device, as a plain run
                                if not f.startswith("--xla_force_host_platform_device_count"))
    proc = subprocess.run([sys.executable, "-m", "jaxgpu.kernels.stream", kernel, str(n), dtype, str(target_s)],
                          env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"stream worker {_exit_words(proc.returncode)}: {_last_message(proc.stderr)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_stream_numpy(kernel: str, n: int, dtype: str = "float32", target_s: float = 0.5) -> BandwidthResult:
    """numpy's STREAM kernel with preallocated outputs (``out=``); triad and scale in two passes."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(1, 2, n).astype(dtype) for _ in range(3))
    out = np.empty_like(a)
    run = {
        "copy": lambda: np.copyto(out, a),
        "scale": lambda: np.multiply(a, SCALAR, out=out),
        "add": lambda: np.add(a, b, out=out),
        "triad": lambda: np.add(b, np.multiply(c, SCALAR, out=out), out=out),
    }[kernel]
    run()
    err = float(np.max(np.abs(out[:4096] - stream_reference(kernel, a[:4096], b[:4096], c[:4096]))
                       / stream_reference(kernel, a[:4096], b[:4096], c[:4096])))
    if not err <= 1e-6:
        raise ArithmeticError(f"numpy {kernel}: wrong result")
    f0 = _faults()
    t = timing.time_host(run, target_s=target_s, min_iters=3, warmup=1)
    return BandwidthResult(kernel, "numpy", n, dtype, t, stream_bytes(kernel, n, np.dtype(dtype).itemsize),
                           (_faults() - f0) / (t.n_iters + 1))


def bench_stream_torch(kernel: str, n: int, dtype: str = "float32", device: str = "cpu",
                       target_s: float = 0.5) -> BandwidthResult:
    """torch's STREAM kernel into a preallocated output (one fused pass for triad)."""
    import torch

    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cpu").manual_seed(0)
    a, b, c = (torch.rand(n, generator=g).add_(1).to(device=device, dtype=tdt) for _ in range(3))
    out = torch.empty_like(a)
    run = {
        "copy": lambda: out.copy_(a),
        "scale": lambda: torch.mul(a, SCALAR, out=out),
        "add": lambda: torch.add(a, b, out=out),
        "triad": lambda: torch.add(b, c, alpha=SCALAR, out=out),
    }[kernel]
    run()
    sl = slice(0, 4096)
    ref = stream_reference(kernel, *(x[sl].float().cpu().numpy() for x in (a, b, c)))
    if not float(np.max(np.abs(out[sl].float().cpu().numpy() - ref) / ref)) <= (1e-2 if dtype == "bfloat16" else 1e-6):
        raise ArithmeticError(f"torch {kernel}: wrong result")
    sync = (lambda _: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda _: None)
    f0 = _faults()
    t = timing.time_host(run, sync=sync, target_s=target_s, min_iters=3, warmup=1)
    return BandwidthResult(kernel, "torch", n, dtype, t, stream_bytes(kernel, n, a.element_size()),
                           (_faults() - f0) / (t.n_iters + 1))


# ---------------------------------------------------------------- transfer


@dataclasses.dataclass(frozen=True)
class TransferResult:
    direction: str  # "host_to_device" or "device_to_host"
    nbytes: int
    timing: timing.Timing

    @property
    def gbytes_per_s(self) -> float:
        return self.timing.per_s(self.nbytes, 1e9)

    def metrics(self) -> dict[str, float]:
        return self.timing.metrics(gbytes_per_s=self.gbytes_per_s)


def bench_transfer(nbytes: int, direction: str, device=None, target_s: float = 0.3,
                   host: np.ndarray | None = None) -> TransferResult:
    """Copies ``nbytes`` of fp32 between host (numpy) and device, checking every byte arrived.

    ``host``: the fp32 host array to copy (default: ``nbytes`` of random normals), for a caller who
    needs to say where it lies (an unaligned array is never taken as it is by XLA:CPU).

    Both directions copy from or into pageable host memory (numpy's, not pinned): what a training
    loop that feeds numpy batches gets, and below what a pinned buffer reaches over PCIe.

    host_to_device: ``jax.device_put`` of a numpy array (blocked until ready).
    device_to_host: one copy (``device_to_host``) of a device array made fresh, off the clock,
    before each timed copy: JAX keeps the host copy of an array once made, so copying the same
    array again would time nothing or a host memcpy.
    """
    device = device or jax.devices()[0]
    if host is None:
        host = np.random.default_rng(3).standard_normal(nbytes // 4, dtype=np.float32)
    if direction == "host_to_device":
        put = lambda: jax.device_put(host, device, **_NO_ALIAS)
        if not np.array_equal(np.asarray(put()), host):
            raise ArithmeticError("host_to_device: data changed in transit")
        if device.platform == "cpu" and put().unsafe_buffer_pointer() == host.ctypes.data:
            from jaxgpu.records.results import Unsupported

            raise Unsupported(f"the CPU device took the {nbytes / 1e6:.0f} MB host array as it is (zero copy, "
                              "asked not to alias or not): no transfer happens, so there is no bandwidth to time")
        t = timing.time_host(put, sync=jax.block_until_ready, target_s=target_s, min_iters=3)
    elif direction == "device_to_host":
        if not np.array_equal(device_to_host(fresh_device_copy(host, device)), host):
            raise ArithmeticError("device_to_host: data changed in transit")
        t = timing.time_host(device_to_host, fresh=lambda i: (fresh_device_copy(host, device),), target_s=target_s,
                             min_iters=3)
    else:
        raise ValueError(f"unknown direction {direction!r}")
    return TransferResult(direction, host.nbytes, t)


# XLA:CPU may hand back a device array that aliases an aligned numpy array (no copy at all): a
# "transfer" timed that way measured 24 TB/s at 1 GB here. Asked not to alias it copies where it
# can; where it still aliases (seen from 256 MB up) the case is unsupported, not timed.
_NO_ALIAS = {"may_alias": False} if "may_alias" in inspect.signature(jax.device_put).parameters else {}


def device_to_host(x: jax.Array) -> np.ndarray:
    """``x`` copied once into new host memory.

    ``np.array(x)`` copies twice on a GPU: into the array's host cache, then again (``copy=True``);
    ``np.asarray(x)`` makes the one device-to-host copy and hands back the cached array. A CPU device's
    buffer is host memory that ``np.asarray`` may only alias, so there ``np.array`` makes the one copy.
    """
    if all(d.platform == "cpu" for d in x.devices()):
        return np.array(x)
    return np.asarray(x)


def fresh_device_copy(host: np.ndarray, device) -> jax.Array:
    """A new device array holding ``host``, with no host copy cached on it (a real device buffer
    on CPU too: ``device_put`` of numpy may alias the numpy memory there)."""
    return _copy(jax.device_put(host, device))


_copy = jax.jit(lambda x: x * 1)  # integer 1: XLA's output is a new buffer either way


if __name__ == "__main__":  # the worker of bench_stream_process
    import json
    import sys

    _kernel, _n, _dtype, _target = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    print(json.dumps(bench_stream(_kernel, stream_arrays(_n, _dtype), "jit", target_s=_target).metrics()))
