"""One training job over several processes with JAX's own runtime (``jax.distributed``).

``launch`` starts N local worker processes (``python -m jaxgpu.kernels.distributed ...``); each
calls ``jax.distributed.initialize`` with the coordinator on 127.0.0.1 and a free port,
so the N processes see one global device list, builds a ``data`` mesh over it, and trains
the data-parallel MLP (``jit`` with ``NamedSharding``: the same step as
``parallel.data_parallel(..., "jit_sharding")``) on its slice of every global batch, made
with ``jax.make_array_from_process_local_data``. On CPU the cross-process all-reduce goes
through gloo (``jax_cpu_collectives_implementation``); on GPUs, NCCL, chosen by JAX.

Nothing here is a launcher protocol of our own: the processes meet through JAX's
coordination service. Across GPU nodes the same worker runs unchanged under SLURM or
another cluster manager: call ``jax.distributed.initialize()`` with no arguments and JAX
reads the coordinator, process count and id from the environment.

Failure handling is bounded: every process gets ``initialization_timeout`` and a
heartbeat timeout; the parent waits at most ``timeout_s`` and, when one process dies, at
most ``grace_s`` more for the others before it kills them and raises ``DistributedFailure``
naming the process, its exit code and its last line of stderr.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


class DistributedFailure(RuntimeError):
    """A process of a distributed run died, hung, or never joined; the message says which."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """What every process trains: a small MLP on synthetic global batches (seeded)."""

    widths: tuple[int, ...] = (128, 128)
    input_dim: int = 64
    global_batch: int = 64
    steps: int = 5
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class DistributedResult:
    """Per-step losses (the same on every process) and each process's training seconds."""

    processes: int
    losses: tuple[float, ...]
    train_s: tuple[float, ...]  # per process, compile excluded
    compile_s: tuple[float, ...]
    wall_s: float  # parent's clock, start of the first process to exit of the last


def global_batches(spec: Spec):
    """The global batches every process derives identically from the seed."""
    import numpy as np

    rng = np.random.default_rng(spec.seed)
    for _ in range(spec.steps):
        yield (rng.standard_normal((spec.global_batch, spec.input_dim)).astype(np.float32),
               rng.integers(0, 10, spec.global_batch).astype(np.int32))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_env(platform: str) -> dict[str, str]:
    env = dict(os.environ)
    # One device per process: the host-device count of the parent must not leak in.
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)
    env["JAX_PLATFORMS"] = "cpu" if platform == "cpu" else "cuda"
    # Each GPU process would otherwise reserve 75% of a GPU that the parent (a study run)
    # may already hold: allocate what is used, when it is used.
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def launch(processes: int, spec: Spec = Spec(), *, platform: str = "cpu", timeout_s: float = 90.0,
           grace_s: float = 10.0, die_after: tuple[int, int] | None = None,
           hang_after: tuple[int, int] | None = None) -> DistributedResult:
    """Runs ``spec`` as one job over ``processes`` local processes and returns what they trained.

    Args:
      processes: how many processes (each one device).
      platform: "cpu" (gloo collectives) or "gpu" (one GPU per process, NCCL).
      timeout_s: the whole run's bound, start-up included.
      grace_s: how long the others may take to stop once one process has failed.
      die_after: (process id, step): that process exits with code 3 after that many steps
        (a crash drill for the failure path).
      hang_after: (process id, step): that process stops responding at that step (a hang drill).

    Raises:
      DistributedFailure: a process exited non-zero, or the run passed ``timeout_s``.
      ValueError: the global batch does not split over the processes.
    """
    if processes < 1:
        raise ValueError(f"need at least 1 process, got {processes}")
    if spec.global_batch % processes:
        raise ValueError(f"global batch {spec.global_batch} does not split over {processes} processes")
    port = free_port()
    env = _worker_env(platform)
    with tempfile.TemporaryDirectory(prefix="jaxgpu-dist-") as tmp:
        procs = []
        t0 = time.perf_counter()
        for pid in range(processes):
            job = {"coordinator": f"127.0.0.1:{port}", "processes": processes, "process_id": pid,
                   "spec": json.dumps(dataclasses.asdict(spec)), "out": str(Path(tmp) / f"{pid}.json"),
                   "platform": platform, "init_timeout": max(int(timeout_s * 0.5), 5),
                   "die_after": die_after[1] if die_after and die_after[0] == pid else None,
                   "hang_after": hang_after[1] if hang_after and hang_after[0] == pid else None}
            cmd = [sys.executable, "-m", "jaxgpu.kernels.distributed", json.dumps(job)]
            err = open(Path(tmp) / f"{pid}.err", "w+")
            procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=PACKAGE_ROOT), err))
        try:
            _wait(procs, t0, timeout_s, grace_s)
        finally:
            for p, err in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                err.close()
        wall = time.perf_counter() - t0
        outs = [json.loads((Path(tmp) / f"{pid}.json").read_text()) for pid in range(processes)]
    losses = outs[0]["losses"]
    if any(o["losses"] != losses for o in outs[1:]):
        raise DistributedFailure("processes disagree on the loss of a step: "
                                 + "; ".join(f"process {i}: {o['losses']}" for i, o in enumerate(outs)))
    return DistributedResult(processes, tuple(losses), tuple(o["train_s"] for o in outs),
                             tuple(o["compile_s"] for o in outs), wall)


def _last_line(err) -> str:
    err.flush()
    err.seek(0)
    lines = [ln.strip() for ln in err.read().splitlines() if ln.strip() and "WARNING" not in ln]
    return lines[-1][:200] if lines else "no error output"


def _wait(procs, t0: float, timeout_s: float, grace_s: float) -> None:
    failed_at = None
    failure = None
    while True:
        codes = [p.poll() for p, _ in procs]
        if all(c == 0 for c in codes):
            return
        now = time.perf_counter()
        if failure is None:
            bad = next(((i, c) for i, c in enumerate(codes) if c not in (None, 0)), None)
            if bad:
                i, c = bad
                failed_at = now
                failure = (f"process {i} of {len(procs)} exited with code {c} after {now - t0:.1f} s "
                           f"({_last_line(procs[i][1])})")
            elif now - t0 > timeout_s:
                hung = [i for i, c in enumerate(codes) if c is None]
                raise DistributedFailure(f"timed out after {timeout_s:.0f} s: process(es) {hung} of {len(procs)} "
                                         "still running; killed")
        if failure is not None and (all(c is not None for c in codes) or now - failed_at > grace_s):
            still = [i for i, c in enumerate(codes) if c is None]
            raise DistributedFailure(failure + (f"; process(es) {still} stopped after {grace_s:.0f} s" if still
                                                else "; the others stopped on their own"))
        time.sleep(0.05)


def _worker(args: types.SimpleNamespace) -> None:
    import jax

    if args.platform == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    init = dict(coordinator_address=args.coordinator, num_processes=args.processes, process_id=args.process_id,
                initialization_timeout=args.init_timeout, heartbeat_timeout_seconds=10)
    if args.platform == "gpu":
        init["local_device_ids"] = [args.process_id]
    jax.distributed.initialize(**init)
    import numpy as np
    import optax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxgpu.ground import timing
    from jaxgpu.kernels import mlp, parallel

    spec = Spec(**{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(args.spec).items()})
    model, opt = mlp.MLP(widths=spec.widths), optax.adamw(1e-3)
    mesh = parallel.make_mesh(jax.devices())  # every process's devices: the global list
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P(parallel.DATA))
    host_state = jax.device_get(mlp.init_state(model, opt, jax.random.key(spec.seed), spec.input_dim))
    state = jax.tree.map(lambda a: jax.make_array_from_process_local_data(replicated, np.asarray(a)), host_state)
    step = parallel.data_parallel(model, opt, "jit_sharding", jax.devices()).step  # the same shardings
    n, pid = args.processes, args.process_id
    local = lambda a: jax.make_array_from_process_local_data(split, np.split(a, n)[pid], a.shape)
    batches = [(local(x), local(y)) for x, y in global_batches(spec)]
    compiled, compile_s = timing.compile_timed(step, state, *batches[0])
    losses, train_s = [], 0.0
    for i, (x, y) in enumerate(batches):
        if args.die_after is not None and i == args.die_after:
            os._exit(3)  # a crash, not a clean exit: no shutdown, no goodbye to the coordinator
        if args.hang_after is not None and i == args.hang_after:
            time.sleep(10**6)
        (state, m), dt = timing.clock(compiled, state, x, y)
        train_s += dt
        losses.append(float(np.asarray(m["loss"].addressable_data(0))))
    Path(args.out).write_text(json.dumps({"losses": losses, "train_s": train_s, "compile_s": compile_s}))
    jax.distributed.shutdown()


def main(argv: list[str] | None = None) -> int:
    """One worker of ``launch``: its job as one JSON argument (the coordinator, the process count and id, the spec,
    the output file, the platform, the start-up timeout and the faults a test asks for), made by ``launch`` only."""
    job = json.loads((sys.argv[1:] if argv is None else argv)[0])
    _worker(types.SimpleNamespace(**{"platform": "cpu", "init_timeout": 60, "die_after": None, "hang_after": None,
                                     **job}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
