"""Backend choice and the environment fingerprint of a run.

Ground floor: imports nothing of jaxgpu. ``configure`` must run before JAX creates
its first backend (XLA reads the host device count and the platform list once), so
entry points (``experiments/run.py``, ``tests/conftest.py``) call it first thing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any

BACKENDS = ("auto", "cpu", "gpu")

# glibc malloc settings that keep XLA:CPU's large buffers in the process between calls. Without
# them a buffer over 64 MiB comes from mmap and goes back with munmap after each call (XLA's
# worker threads' arenas cannot hold it), and every call faults in every page of its outputs
# again: measured on these 2-core VMs, a triad over 128 MiB arrays went from 4.3 to 26.5 GB/s.
# They must be in place when the process starts (mallopt later reached only half of that), so
# an entry point sets them before Python starts: ``python -m experiments.run`` restarts itself
# with them; a notebook is started with them (``allocator_command``).
TUNED_MALLOC = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "2147483647"}
ALLOCATORS = ("tuned", "system")


def allocator_in_use(environ: dict | None = None) -> str:
    """Which malloc settings this process started with: "tuned" (``TUNED_MALLOC``), "system" (none of
    them) or "custom" (some other mix)."""
    env = os.environ if environ is None else environ
    set_ = {k: env.get(k) for k in TUNED_MALLOC}
    if set_ == TUNED_MALLOC:
        return "tuned"
    return "system" if not any(set_.values()) else "custom"


def allocator_environ(kind: str, environ: dict | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the malloc settings of ``kind`` ("tuned" or "system")."""
    if kind not in ALLOCATORS:
        raise BackendError(f"unknown allocator {kind!r}; choose one of {', '.join(ALLOCATORS)}")
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in TUNED_MALLOC}
    return {**env, **TUNED_MALLOC} if kind == "tuned" else env


def allocator_command(command: str = "jupyter lab") -> str:
    """The shell line that starts ``command`` with the tuned allocator (for a notebook or a script)."""
    return " ".join(f"{k}={v}" for k, v in TUNED_MALLOC.items()) + f" {command}"
_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


class BackendError(RuntimeError):
    """The backend asked for cannot be had; the message says how to get it."""


def release_host_memory() -> bool:
    """Hands the heap's free pages back to the system (glibc's ``malloc_trim``); False where there is none.

    Under ``TUNED_MALLOC`` the heap never shrinks by itself: freed arrays stay resident, and a process
    started next (a worker with its own arrays) can find the machine's memory gone."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0)) if name else False
    except (OSError, AttributeError):  # not glibc
        return False


def _backends_initialized() -> bool:
    if sys.modules.get("jax") is None:
        return False
    try:
        from jax._src import xla_bridge  # private, but the only way to ask

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # noqa: BLE001 - an API move must not break configuration
        return False


def append_xla_flag(flags: str, flag: str, value: Any) -> str:
    """Returns ``flags`` with ``flag=value`` set, keeping every other flag the user set.

    An existing setting of the same flag is replaced (XLA would take the last one
    anyway, but a single occurrence keeps the fingerprint readable).
    """
    kept = [f for f in flags.split() if not f.startswith(flag + "=") and f != flag]
    return " ".join([*kept, f"{flag}={value}"])


def configure(backend: str = "auto", devices: int | None = None) -> None:
    """Sets the platform list and host device count before JAX starts its backends.

    Args:
      backend: ``auto`` (GPU if JAX sees one, else CPU), ``cpu`` or ``gpu``.
      devices: number of CPU host devices (only meaningful for the CPU backend).

    Raises:
      BackendError: ``backend`` is unknown, or JAX already started its backends
        with different settings.
    """
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if devices is not None and devices < 1:
        raise BackendError(f"--devices must be at least 1, got {devices}")
    if _backends_initialized():
        if devices is not None and _current_host_device_count() != devices:
            raise BackendError(
                "JAX started its backends before the host device count could be set; "
                "call jaxgpu.ground.devices.configure() before any JAX computation"
            )
        return
    if devices is not None:
        os.environ["XLA_FLAGS"] = append_xla_flag(os.environ.get("XLA_FLAGS", ""), _DEVICE_COUNT_FLAG, devices)
    if backend == "gpu" and not gpu_driver_present():
        raise BackendError(_NO_GPU + " (no NVIDIA driver on this machine); install jax[cuda12] or jax[cuda13] "
                           "where there is a GPU, or run with --backend cpu")
    if backend == "auto" and not gpu_driver_present():
        # Where a CUDA plugin is installed without a driver (to compile for a GPU, say), letting JAX
        # try it would only print the plugin's failure: there is no GPU to find.
        backend = "cpu"
    if backend == "cpu":
        # Keeps a CPU run on a GPU machine from touching (and preallocating) the GPU.
        os.environ["JAX_PLATFORMS"] = "cpu"
        if sys.modules.get("jax") is not None:  # started: told too (a process that never imports JAX is not)
            import jax

            jax.config.update("jax_platforms", "cpu")


_NO_GPU = "no GPU backend found"


def gpu_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver (its /proc entry or nvidia-smi), without starting JAX."""
    return (any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg"))  # dxg: WSL2
            or shutil.which("nvidia-smi") is not None)


def _current_host_device_count() -> int:
    import jax

    return len(jax.devices("cpu"))


def resolve(backend: str = "auto") -> str:
    """Returns the JAX platform to run on ("cpu" or "gpu") for a configured backend.

    Raises:
      BackendError: a GPU was asked for and JAX sees none.
    """
    import jax

    if backend == "gpu":
        try:
            jax.devices("gpu")
        except RuntimeError as err:
            raise BackendError(
                f"{_NO_GPU} (jax.devices('gpu') failed: "
                f"{str(err).splitlines()[0][:120]}); install jax[cuda12] or jax[cuda13] "
                "(pip install -e '.[cuda13]') or run with --backend cpu"
            ) from None
        return "gpu"
    if backend == "cpu":
        return "cpu"
    return "gpu" if jax.default_backend() in ("gpu", "cuda", "rocm") else "cpu"


def devices_of(platform_name: str) -> list:
    """The JAX devices of a platform ("cpu" or "gpu")."""
    import jax

    return jax.devices(platform_name)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's model name as the OS reports it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The CPU features that decide how fast a low-precision product runs on XLA:CPU: AMX tiles (bf16, int8),
# AVX-512 BF16 / FP16 / VNNI dot instructions, AVX-VNNI, or none of them (then bf16 and fp16 are widened).
MATMUL_FEATURES = ("amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni",
                   "avx512f", "avx2")


def cpu_features(path: str = "/proc/cpuinfo") -> list[str]:
    """Which of ``MATMUL_FEATURES`` the CPU reports (its flags in ``path``), in that order."""
    try:
        with open(path, encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return []
    return [x for x in MATMUL_FEATURES if x in flags]


def cpu_count() -> int:
    """Cores this process may run on (the affinity mask, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def device_memory_bytes(device) -> int | None:
    """Memory the device may use: the allocator's limit on GPU, host RAM on CPU."""
    if device.platform == "cpu":
        return host_memory_bytes()
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - some plugins do not implement it
        stats = {}
    return stats.get("bytes_limit")


def _git_commit() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    if shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _nvidia_smi() -> dict[str, str]:
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    info = {}
    if m := re.search(r"Driver Version:\s*([\d.]+)", out):
        info["driver_version"] = m.group(1)
    if m := re.search(r"CUDA Version:\s*([\d.]+)", out):
        info["cuda_driver_api_version"] = m.group(1)
    return info


def fingerprint(platform_name: str) -> dict[str, Any]:
    """The environment of a run, as docs/results.md lists it (no hostname)."""
    import jax

    devs = devices_of(platform_name)
    dev = devs[0]
    env: dict[str, Any] = {
        "backend": platform_name,
        "device_kind": dev.device_kind,
        "n_devices": len(devs),
        "device_memory_bytes": device_memory_bytes(dev),
        "cpu_model": cpu_model(),
        "cpu_features": " ".join(cpu_features()),
        "cpu_cores": cpu_count(),
        "host_memory_bytes": host_memory_bytes(),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "jax_plugins": {
            d: v
            for d in ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt")
            if (v := _version(d))
        },
        "flax": _version("flax"),
        "optax": _version("optax"),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "jax_platforms": os.environ.get("JAX_PLATFORMS", ""),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "allocator": allocator_in_use(),
        "git_commit": _git_commit(),
    }
    if platform_name == "gpu":
        try:
            env["platform_version"] = dev.client.platform_version
        except Exception:  # noqa: BLE001
            pass
        env.update(_nvidia_smi())
    return env


def last_level_cache_bytes(base: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """The largest CPU cache the OS reports (``base``: Linux's sysfs for cpu0), in bytes, or None."""
    sizes = []
    try:
        entries = [e for e in os.listdir(base) if e.startswith("index")]
    except OSError:
        return None
    for e in entries:
        try:
            with open(f"{base}/{e}/size", encoding="utf-8") as f:
                s = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1024, "M": 2**20, "G": 2**30}.get(s[-1:], 1)
        try:
            sizes.append(int(s.rstrip("KMG")) * mult)
        except ValueError:
            continue
    return max(sizes) if sizes else None


def torch_available() -> bool:
    """Whether torch (the optional peer) can be imported here, asked without importing it."""
    return importlib.util.find_spec("torch") is not None
