"""Runs experiments case by case, writing each record the moment it is measured.

``run_study`` is what ``python -m experiments.run`` calls once the backend is set up;
tests call it directly. A case that raises is recorded (``failed``, ``unsupported`` or
``does_not_fit`` with its one-line reason) and the run goes on.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jaxgpu import devices, hardware, results

import experiments


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: its params (the axes compared) and a function returning its metrics."""

    params: dict[str, Any]
    run: Callable[[], dict[str, float]]


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What an experiment needs to know about the run it is part of."""

    platform: str  # "cpu" or "gpu"
    profile: str
    device_kind: str
    n_devices: int
    hardware: hardware.Hardware | None
    seed: int = 0
    processes: int | None = None  # --processes, for the distributed experiment

    @property
    def device(self):
        return devices.devices_of(self.platform)[0]


def default_out_dir(platform: str, root: str | Path = "reports/runs") -> Path:
    return Path(root) / f"{platform}-{results.new_run_id()}"


def _progress(total: int, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency, but a missing bar must not stop a run
        return None
    # A bar on a terminal; in a log (CI, nohup) one line per experiment instead.
    return tqdm(total=total, unit="case", file=sys.stderr, disable=not (enabled and sys.stderr.isatty()),
                dynamic_ncols=True, mininterval=0.5)


def run_study(names: Sequence[str], *, platform: str, profile: str = "quick", out_dir: str | Path,
              resume: bool = False, seed: int = 0, host_devices: int | None = None, processes: int | None = None,
              trace_dir: str | Path | None = None, progress: bool = True, report: bool = True,
              argv: Sequence[str] | None = None, log: Callable[[str], None] | None = None) -> Path:
    """Runs the named experiments on ``platform`` and writes the result folder ``out_dir``.

    Args:
      names: registered experiment names, in order.
      platform: "cpu" or "gpu" (see ``jaxgpu.devices.resolve``).
      profile: "tiny" (tests), "quick" (the default study) or "full" (reference runs).
      out_dir: the result folder; with ``resume``, cases already recorded there are skipped.

    Returns:
      ``out_dir``, holding run.json, results.jsonl and (with ``report``) the report.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out_dir = Path(out_dir)
    done: set[str] = set()
    if resume and (out_dir / results.RESULTS_FILE).exists():
        done = results.completed_keys(results.read_run(out_dir).records)
    env = devices.fingerprint(platform)
    ctx = RunContext(platform=platform, profile=profile, device_kind=env["device_kind"],
                     n_devices=env["n_devices"], hardware=hardware.for_device(platform, env["device_kind"]),
                     seed=seed, processes=processes)
    modules = {name: experiments.load(name) for name in names}
    configs = {name: mod.config(profile, platform) for name, mod in modules.items()}
    run_id = results.new_run_id()
    meta = {
        "run_id": run_id,
        "argv": list(argv) if argv is not None else None,
        "config": {"profile": profile, "backend": platform, "experiments": list(names), "seed": seed,
                   "devices": host_devices, "processes": processes,
                   "per_experiment": {n: dataclasses.asdict(c) for n, c in configs.items()}},
        "env": env,
        "hardware": dataclasses.asdict(ctx.hardware) if ctx.hardware else None,
        "info": {},
    }
    plans = []
    for name, mod in modules.items():
        cases = [c for c in mod.cases(configs[name], ctx) if results.case_key(name, c.params) not in done]
        plans.append((name, mod, cases))
        if hasattr(mod, "info"):
            meta["info"][name] = mod.info(ctx)
        if hasattr(mod, "attachments"):
            meta.setdefault("attachments", {})[name] = mod.attachments(ctx, out_dir)
    total = sum(len(c) for _, _, c in plans)
    skipped = len(done)
    log(f"jaxgpu: {total} cases on {platform} ({env['device_kind']}, {env['n_devices']} device(s)), "
        f"profile {profile}" + (f", {skipped} already done" if skipped else "") + f" -> {out_dir}")
    bar = _progress(total, progress)
    counts = {s: 0 for s in results.STATUSES}
    t_start = time.perf_counter()
    import contextlib

    import jax

    trace = jax.profiler.trace(str(trace_dir), create_perfetto_trace=True) if trace_dir else contextlib.nullcontext()
    with results.RunWriter(out_dir, meta) as writer, trace:
        for name, mod, cases in plans:
            if bar is None or bar.disable:
                log(f"jaxgpu: {name}: {len(cases)} cases")
            t_exp = time.perf_counter()
            for case in cases:
                if bar is not None:
                    bar.set_description(name)
                record = _measure(name, mod, case, ctx, run_id)
                writer.write(record)
                counts[record.status] += 1
                if record.status == "failed":
                    log(f"jaxgpu: {name} {_short(case.params)} failed: {record.reason}")
                if bar is not None:
                    bar.update(1)
            if cases and (bar is None or bar.disable):
                log(f"jaxgpu: {name}: done in {time.perf_counter() - t_exp:.0f} s")
    if bar is not None:
        bar.close()
    log(f"jaxgpu: measured {total} cases in {time.perf_counter() - t_start:.0f} s: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if report:
        from experiments import report as report_mod

        paths = report_mod.write_report([out_dir], out_dir)
        log(f"jaxgpu: report: {paths[0]}")
    return out_dir


def _short(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())[:60]


def _measure(name: str, mod: Any, case: Case, ctx: RunContext, run_id: str) -> results.Record:
    common = dict(experiment=name, params=case.params, run_id=run_id, backend=ctx.platform,
                  device_kind=ctx.device_kind, n_devices=ctx.n_devices,
                  benchmark_version=mod.BENCHMARK_VERSION)
    try:
        metrics = case.run()
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - every failure becomes a record; the run goes on
        status, reason = results.status_of(err)
        return results.Record(metrics={}, status=status, reason=reason, **common)
    return results.Record(metrics=metrics, **common)
