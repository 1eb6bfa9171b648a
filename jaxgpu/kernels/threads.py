"""Workers: the same matmul and elementwise kernel with XLA:CPU limited to k cores, each in its own process.

XLA sizes its CPU thread pool once, at start-up, from the cores the process may run on,
so each worker count needs a fresh process: ``measure(k)`` starts
``python -m jaxgpu.kernels.threads K`` with its CPU affinity set to k cores before JAX loads,
and reads back one JSON line (the cores and OS threads it saw, and its figures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def measure(workers: int, matmul_n: int = 1024, elementwise_n: int = 1 << 24, target_s: float = 0.3,
            timeout_s: float = 300) -> dict[str, float]:
    """Runs the worker in a subprocess pinned to ``workers`` cores; returns its metrics."""
    cmd = [sys.executable, "-m", "jaxgpu.kernels.threads", str(workers), str(matmul_n), str(elementwise_n),
           str(target_s)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker process failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _worker(workers: int, matmul_n: int, elementwise_n: int, target_s: float) -> dict[str, float]:
    cores = sorted(os.sched_getaffinity(0))[:workers]
    os.sched_setaffinity(0, cores)  # before JAX starts its thread pool
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpu.ground import timing
    from jaxgpu.kernels import matmul

    r = matmul.bench_jax(matmul.operands(matmul_n, matmul_n, matmul_n, n_sets=1), "fp32", target_s=target_s)
    if r.rel_error > 1e-4:
        raise ArithmeticError("matmul off")
    x = jax.random.uniform(jax.random.key(0), (elementwise_n,), jnp.float32)
    f = jax.jit(lambda v: jnp.tanh(v) * 0.5 + v)
    if not np.allclose(np.asarray(f(x))[:1000], np.tanh(np.asarray(x)[:1000]) * 0.5 + np.asarray(x)[:1000], rtol=1e-5):
        raise ArithmeticError("elementwise off")
    t = timing.time_jitted(f, x, target_s=target_s, min_iters=3)
    return {"cores_seen": float(len(os.sched_getaffinity(0))), "os_threads": float(len(os.listdir("/proc/self/task"))),
            "matmul_gflops": r.gflops, "elementwise_gbytes_per_s": t.per_s(8 * elementwise_n, 1e9),
            "elementwise_time_s": t.median_s, "matmul_time_s": r.timing.median_s}


if __name__ == "__main__":
    k, n, e, t = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    print(json.dumps(_worker(k, n, e, t)))
