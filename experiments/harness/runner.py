"""Runs experiments case by case, writing each record the moment it is measured.

``run_study`` is what ``python -m experiments.run`` calls once the backend is set up;
tests call it directly. A case that raises is recorded (``failed``, ``unsupported`` or
``does_not_fit`` with its one-line reason) and the run goes on.

With a time budget (``budget_s``) the run measures every experiment's key cases first
(the ones a claim's verdict rests on, as the caller's ``rests_on`` says: the command line
hands it ``experiments.analysis.claims.rests_on``), then shares what is left among the experiments in
proportion to their estimated time (``experiments.harness.budget``), skipping what would not
fit; run.json then says the run was cut and by how much, and ``--resume`` continues it.

The runner writes records and run.json only: the report and the analysis are the command
line's to call (``experiments.run``), and nothing here imports JAX of its own (the library's
``devices.fingerprint`` and a case's ``run`` start it).
"""

from __future__ import annotations

import dataclasses
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jaxgpu.ground import devices, hardware
from jaxgpu.records import labels, results

import experiments
from experiments.contract import Case, Experiment, RunContext
from experiments.harness import budget
from experiments.harness.settings import RunSettings

__all__ = ["Case", "RunContext", "default_out_dir", "run_study", "dry_run", "budget_plan", "check_same_machine"]


# Compile-only devices of a target: one host of 8 GPUs, the most a sharded program here splits over.
COMPILE_DEVICES = 8


def default_out_dir(platform: str, root: str | Path = "reports/runs") -> Path:
    return Path(root) / f"{platform}-{results.new_run_id()}"


def with_folder(s: RunSettings, platform: str) -> RunSettings:
    """``s`` with its result folder named: a new one under reports/runs where none was asked for."""
    if s.out:
        return s
    return dataclasses.replace(s, out=str(default_out_dir(f"compiled-{s.compile_for}" if s.compiled else platform)))


def _progress(total: int, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency, but a missing bar must not stop a run
        return None
    # A bar on a terminal; in a log (CI, nohup) one line per experiment instead.
    return tqdm(total=total, unit="case", file=sys.stderr, disable=not (enabled and sys.stderr.isatty()),
                dynamic_ncols=True, mininterval=0.5)


@dataclasses.dataclass
class _Plan:
    name: str
    exp: Experiment
    cases: list[Case]
    estimate_s: float  # its cases and, where a measured run calls them, its info hooks
    config: Any = None
    info_s: float = 0.0  # its info and attachments hooks, called before any case


RestsOn = Callable[[str, dict[str, Any]], bool]


def _build(s: RunSettings, ctx: RunContext, done: set[str] = frozenset(), rests_on: RestsOn | None = None
           ) -> list[_Plan]:
    """Per experiment, its config and the cases still to measure with their estimated seconds, each
    case's ``key`` set by ``rests_on(experiment, params)`` where one is given.

    In compiled mode the cases are each experiment's ``compiled_cases`` (none where only timing
    can answer), built from its GPU config."""
    compiled = ctx.mode == "compiled"
    m = budget.machine("compile") if compiled else _machine(ctx.platform, ctx.device_kind)
    plans = []
    for name in s.experiments:
        exp = experiments.load(name)
        config = experiments.config(name, s.profile, ctx.platform, s.overrides.get(name))
        make = (exp.compiled_cases or (lambda cfg, ctx: [])) if compiled else exp.cases
        cases = _still_to_do(name, make(config, ctx), done)
        if rests_on is not None:
            cases = [dataclasses.replace(c, key=rests_on(name, c.params)) for c in cases]
        info_s = m.case_seconds(exp.info_cost) if not compiled and (exp.info or exp.attachments) else 0.0
        plans.append(_Plan(name, exp, cases, budget.experiment_seconds(cases, m) + info_s, config, info_s))
    plans.sort(key=lambda p: not p.exp.run_first)
    return plans


def _still_to_do(name: str, cases: list[Case], done: set[str]) -> list[Case]:
    """The cases not yet recorded; the first of those needing a case an earlier process measured takes on its
    cost (it redoes that work here)."""
    cost_of = {results.case_key(name, c.params): c.cost for c in cases}
    out, charged = [], set()
    for c in cases:
        if results.case_key(name, c.params) in done:
            continue
        need = results.case_key(name, c.needs) if c.needs is not None else None
        if need in done and need not in charged and need in cost_of:
            c = dataclasses.replace(c, cost=cost_of[need])
            charged.add(need)
        out.append(c)
    return out


def _machine(platform: str, device_kind: str | None) -> budget.Machine:
    try:
        return budget.machine(platform, device_kind)
    except KeyError:  # a GPU the hardware table does not have: planned as the default GPU
        return budget.machine(platform)


def _dry_context(s: RunSettings, platform: str) -> tuple[RunContext, budget.Machine]:
    """The context and machine a plan is made with, without JAX: the compile-only run's for --compile-for."""
    if s.compiled:
        from jaxgpu.pricing import targets

        t = targets.target(s.compile_for)
        ctx = RunContext(platform="gpu", device_kind=t.device_kind, n_devices=COMPILE_DEVICES,
                         hardware=hardware.GPUS[t.hardware], seed=s.seed, processes=s.processes, mode="compiled",
                         target=t)
        return ctx, budget.machine("compile")
    m = budget.machine(platform, s.target)
    kind = "cpu" if platform == "cpu" else f"NVIDIA {m.hardware.name}"
    n = (s.devices or 1) if platform == "cpu" else 1
    ctx = RunContext(platform=platform, device_kind=kind, n_devices=n, hardware=m.hardware,
                     seed=s.seed, processes=s.processes)
    return ctx, _machine(platform, ctx.device_kind)


def dry_run(s: RunSettings, likely: str = "cpu") -> list[str]:
    """The plan of a run without running it (and without importing JAX): one line per experiment
    with its cases, compiles and estimated seconds, and a last ``total: N cases, estimated S s``. ``likely``: the
    platform ``--backend auto`` would find here."""
    ctx, m = _dry_context(s, s.planned_platform(likely))
    plans = _build(s, ctx)
    return budget.lines([budget.plan([(p.name, p.cases)], m)[0] for p in plans], m)


@dataclasses.dataclass(frozen=True)
class BudgetPlan:
    """What a budgeted run would measure, by the plan: its lines (per experiment, cases taken of planned and the
    key cases among those left out), its estimated seconds and the claim-deciding cases the budget would cut."""

    lines: list[str]
    estimate_s: float
    keys_cut: list[str]
    key_s: float = 0.0  # the claim-deciding cases' own estimate, with the info hooks and their experiments' set-up


def budget_plan(s: RunSettings, *, rests_on: RestsOn, likely: str = "cpu", slower: float = 1.0) -> BudgetPlan:
    """The run ``s`` (with its ``budget_s``) would make, walked in the order and with the allowance a real run uses,
    each case taking its estimated seconds (no JAX is started), the experiments' info hooks first, as a run calls
    them. A key case left out is named in ``keys_cut``. ``slower``: every estimate that many times longer (is the
    plan safe if the machine's constants prove optimistic?)."""
    ctx, m = _dry_context(s, s.planned_platform(likely))
    m = dataclasses.replace(m, slowdown=slower)
    plans = _build(s, ctx, rests_on=rests_on)
    budget_s = s.budget_s
    allow = _allowances(plans, budget_s, m)
    hooks_s = sum(p.info_s for p in plans)
    elapsed, started = hooks_s, set()
    taken: dict[str, int] = {p.name: 0 for p in plans}
    cut: list[str] = []
    for p, case in _order(plans, budget_s):
        est = m.case_seconds(case.cost)
        est += m.setup_seconds() if est and p.name not in started else 0.0
        if not p.exp.spread and not allow.take(p.name, case.key, est, elapsed):
            if case.key:
                cut.append(f"{p.name} {labels.case_label(case.params)}")
            continue
        started.add(p.name)
        taken[p.name] += 1
        elapsed += est
    key_s = _key_seconds(plans, m)
    lines = [f"{p.name:16s} {taken[p.name]:4d} of {len(p.cases):4d} cases"
             + (f", {sum(c.key for c in p.cases)} claim-deciding" if any(c.key for c in p.cases) else "")
             for p in plans if p.cases]
    if hooks_s:
        lines.append(f"info hooks       {hooks_s:.0f} s ({', '.join(p.name for p in plans if p.info_s)}), before the "
                     "first case")
    lines.append(f"claim-deciding cases and the info hooks: estimated {key_s:.0f} s"
                 + (f" ({key_s / budget_s:.0%} of the budget)" if budget_s else ""))
    lines.append(f"budget {budget_s:.0f} s: estimated {elapsed:.0f} s of measuring on {m.name}"
                 + (f", every estimate {slower:g}x" if slower != 1.0 else "") + "; "
                 + (f"{len(cut)} claim-deciding cases would be cut: {'; '.join(cut[:8])}" if cut
                    else "no claim-deciding case is cut"))
    return BudgetPlan(lines, elapsed, cut, key_s)


def _key_seconds(plans: list[_Plan], m: budget.Machine) -> float:
    """What a budgeted run spends before any case that is not claim-deciding: the info hooks, then every key case
    with its experiment's set-up."""
    return sum(p.info_s + budget.experiment_seconds([c for c in p.cases if c.key], m) for p in plans)


def _order(plans: list[_Plan], budget_s: float | None) -> list[tuple[_Plan, Case]]:
    """Experiment by experiment; when the time is budgeted, key cases of every experiment first. A run-first
    experiment's cases come before everything either way (a device's memory high-water mark, which it
    reads, is only low before anything else ran)."""
    first = [(p, c) for p in plans if p.exp.run_first for c in p.cases]
    rest = [p for p in plans if not p.exp.run_first and not p.exp.spread]
    if budget_s is None:
        body = [(p, c) for p in rest for c in p.cases]
    else:
        body = [(p, c) for key in (True, False) for p in rest for c in p.cases if c.key == key]
    return first + spread_through(body, [(p, c) for p in plans if p.exp.spread for c in p.cases])


def spread_through(body: list, extra: list) -> list:
    """``body`` with ``extra``'s (plan, case) pairs inserted in groups of one ``moment`` param, evenly from before
    its first item to after its last (one group: before it)."""
    groups: dict[Any, list] = {}
    for p, c in extra:
        groups.setdefault(c.params.get("moment"), []).append((p, c))
    gs = list(groups.values())
    slots = [round(i * len(body) / max(1, len(gs) - 1)) for i in range(len(gs))]
    out, j = [], 0
    for k, item in enumerate(body):
        while j < len(gs) and slots[j] <= k:
            out += gs[j]
            j += 1
        out.append(item)
    for g in gs[j:]:
        out += g
    return out


@dataclasses.dataclass(frozen=True)
class _Setting:
    """What a run measures on: its context, the environment it records, the machine it plans with."""

    ctx: RunContext
    env: dict[str, Any]
    machine: budget.Machine


def _setting(s: RunSettings, platform: str) -> _Setting:
    seed, processes = s.seed, s.processes
    if s.compiled:
        from jaxgpu.pricing import targets

        target = targets.target(s.compile_for)
        env = {**devices.fingerprint("cpu"), "backend": "gpu", "device_kind": target.device_kind,
               "n_devices": COMPILE_DEVICES, "device_memory_bytes": target.memory_bytes, "target": target.name}
        ctx = RunContext(platform="gpu", device_kind=target.device_kind, n_devices=COMPILE_DEVICES,
                         hardware=hardware.GPUS[target.hardware], seed=seed, processes=processes, mode="compiled",
                         target=target)
        return _Setting(ctx, env, budget.machine("compile"))
    env = devices.fingerprint(platform)
    ctx = RunContext(platform=platform, device_kind=env["device_kind"], n_devices=env["n_devices"],
                     hardware=hardware.for_device(platform, env["device_kind"]), seed=seed, processes=processes,
                     triton_plans=s.study.triton_plans)
    return _Setting(ctx, env, _machine(platform, env["device_kind"]))


def _timing(plans: list[_Plan], spent: dict[str, float]) -> dict[str, dict[str, float]]:
    return {p.name: {"planned_s": round(p.estimate_s, 2), "measured_s": round(spent.get(p.name, 0.0), 2),
                     "cases": len(p.cases)} for p in plans}


def _meta(run_id: str, s: RunSettings, setting: _Setting, plans: list[_Plan]) -> dict[str, Any]:
    """run.json as the run starts: what was asked, on what, and the plan."""
    ctx, argv, budget_s, names = setting.ctx, s.argv, s.budget_s, s.experiments
    configs = {p.name: p.config for p in sorted(plans, key=lambda p: names.index(p.name))}
    meta = {
        "run_id": run_id,
        "argv": list(argv) if argv is not None else None,
        "config": {"profile": s.profile, "backend": "cpu" if s.compiled else ctx.platform,
                   "compile_for": s.compile_for, "allocator": setting.env.get("allocator"), "experiments": list(names),
                   "seed": s.seed, "devices": s.devices, "processes": s.processes, "budget_s": budget_s,
                   "settings": {k: dict(v) for k, v in s.overrides.items()}, "study": dataclasses.asdict(s.study),
                   "per_experiment": {n: dataclasses.asdict(c) for n, c in configs.items()}},
        "env": setting.env,
        "hardware": dataclasses.asdict(ctx.hardware) if ctx.hardware else None,
        "info": {},
        "completion": {"state": "running", "cases_planned": sum(len(p.cases) for p in plans), "cases_done": 0,
                       "budget_s": budget_s},
        "mode": ctx.mode,
        "timing": _timing(plans, {}),
        # each invocation that wrote into the folder (a resume adds one): what it ran and how it ended
        "sessions": [{"run_id": run_id, "argv": list(argv) if argv is not None else None, "experiments": list(names),
                      "budget_s": budget_s, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}],
    }
    if s.compiled:
        from jaxgpu.pricing import targets

        meta.update(target=ctx.target.name, compile_options=targets.COMPILE_OPTIONS,
                    target_config=targets.config_text(ctx.target))
    return meta


def _describe_machine(writer: results.RunWriter, plans: list[_Plan], ctx: RunContext, out_dir: Path,
                      spent: dict[str, float]) -> None:
    """Each experiment's ``info`` and ``attachments`` hooks, into run.json: facts about the machine that measures.
    Their seconds count in ``spent`` (run.json's timing sets them against the plan's ``info_cost``). An experiment
    whose records hold prices (``fingerprint.PRICED``) gets the stamp of the code that prices them, in either mode."""
    info, attached = {}, {}
    for p in plans if ctx.mode == "measured" else ():
        t0 = time.perf_counter()
        try:
            if p.exp.info is not None:
                info[p.name] = p.exp.info(ctx)
            if p.exp.attachments is not None:
                attached[p.name] = p.exp.attachments(ctx, out_dir)
        except Exception as err:  # noqa: BLE001 - facts about a run must not stop it
            info[p.name] = {"error": results.status_of(err)[1]}
        spent[p.name] += time.perf_counter() - t0
    from jaxgpu.pricing import fingerprint

    card = ctx.hardware.name if ctx.hardware is not None and not ctx.hardware.estimate else None
    for p in plans:  # measured or compiled: records that hold prices say which code and data priced them
        if p.name in fingerprint.PRICED:
            stamp = fingerprint.stamp(p.name, [c.params for c in p.cases], card)
            before = writer.meta.get("info", {}).get(p.name, {}).get("pricing_data", {})  # a resumed run's
            info[p.name] = {**info.get(p.name, {}), **stamp, "pricing_data": {**before, **stamp["pricing_data"]}}
    writer.update(info={**writer.meta.get("info", {}), **info},
                  attachments={**writer.meta.get("attachments", {}), **attached})


def run_study(s: RunSettings, platform: str, *, rests_on: RestsOn | None = None,
              log: Callable[[str], None] | None = None) -> Path:
    """Runs the settings' experiments on ``platform`` ("cpu" or "gpu", ``launch.start``'s); returns the result
    folder (``s.out``, or a new one under reports/runs) holding run.json and results.jsonl.

    With ``s.resume`` the cases already recorded there are skipped; with ``s.budget_s`` key cases are measured first
    and the run stops cleanly before that many seconds; with ``s.compile_for`` each experiment's programs are
    compiled for that GPU on this machine's CPU and what XLA:GPU plans is recorded (``mode: compiled``), running
    nothing. ``rests_on(experiment, params)``: whether a verdict rests on the case (its key)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out_dir = Path(with_folder(s, platform).out)
    done = _done(out_dir, s.resume, log)
    setting = _setting(s, platform)
    if s.resume:
        check_same_machine(out_dir, setting.env)
    ctx, budget_s = setting.ctx, s.budget_s
    plans = _build(s, ctx, done, rests_on)
    run_id = results.new_run_id()
    meta = _meta(run_id, s, setting, plans)
    total = meta["completion"]["cases_planned"]
    _announce(s, setting, plans, len(done), out_dir, log)
    # The folder and run.json exist before anything else can fail (an info() hook importing a
    # broken peer, say): whatever happens next, the run leaves a result folder behind.
    writer = results.RunWriter(out_dir, meta, new=not s.resume)  # a new run claims its folder atomically
    from jaxgpu.ground import timing  # imports JAX: the run is about to start it anyway

    counts = {status: 0 for status in results.STATUSES}
    spent = {p.name: 0.0 for p in plans}
    state, skipped, t_start, why = "interrupted", 0, time.perf_counter(), {}
    bar = None
    try:  # from here every way out leaves run.json saying how the run ended
        _describe_machine(writer, plans, ctx, out_dir, spent)  # compiles programs: seconds on a fresh GPU
        bar = _progress(total, s.progress)
        with writer, timing.profiler_trace(s.trace_dir):
            skipped = _measure_all(plans, ctx, run_id, budget_s, setting.machine, writer, counts, spent, bar, log,
                                   t_start)
            state = "cut_by_budget" if skipped else "complete"
    except KeyboardInterrupt as err:  # Ctrl-C, or a SIGTERM the command line turned into one (Stopped)
        why = {"stopped_by": getattr(err, "signal_name", "SIGINT")}
        raise
    except results.RunWriteError as err:
        state, why = "write_failed", {"reason": str(err)}
        raise
    finally:
        if bar is not None:
            bar.close()
        elapsed = time.perf_counter() - t_start
        completion = {"state": state, "cases_planned": total, "cases_done": sum(counts.values()),
                      "cases_skipped": skipped, "budget_s": budget_s, "elapsed_s": round(elapsed, 1), **why}
        _close(writer, completion, setting, _timing(plans, spent), log)
    for p in plans:
        if p.cases and (bar is None or bar.disable):
            log(f"jaxgpu: {p.name}: {spent[p.name]:.0f} s (estimated {p.estimate_s:.0f} s)")
    log(f"jaxgpu: measured {sum(counts.values())} cases in {elapsed:.0f} s: "
        + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        + (f"; {skipped} cases left for the budget of {budget_s:.0f} s: continue with --resume {out_dir}"
           if skipped else ""))
    return out_dir


def _announce(s: RunSettings, setting: _Setting, plans: list[_Plan], done: int, out_dir: Path,
              log: Callable[[str], None]) -> None:
    """The run's first lines: what it measures, where, and how long it should take."""
    ctx = setting.ctx
    if s.compiled:
        log(f"jaxgpu: compiling for {ctx.target.device_kind} on this CPU; nothing runs. Without compiled cases: "
            + (", ".join(p.name for p in plans if not p.cases) or "none"))
    log(f"jaxgpu: {sum(len(p.cases) for p in plans)} cases on {ctx.platform} ({setting.env['device_kind']}, "
        f"{setting.env['n_devices']} device(s)), profile {s.profile}, estimated "
        f"{sum(p.estimate_s for p in plans):.0f} s" + (f", budget {s.budget_s:.0f} s" if s.budget_s else "")
        + (f", {done} already done" if done else "") + f" -> {out_dir}")


def _close(writer: results.RunWriter, completion: dict, setting: _Setting, timing_: dict,
           log: Callable[[str], None]) -> None:
    """run.json as the run ends, however it ended: its completion (with the process's peak memory: freed host
    memory stays with the process under the tuned allocator), its timing, and its session's end."""
    completion = {**completion, "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB
                  **_host_memory_seen(setting.env)}
    sessions = writer.meta.get("sessions") or [{}]
    try:
        writer.update(completion=completion, timing=timing_,
                      sessions=[*sessions[:-1], {**sessions[-1], "completion": completion}])
    except results.RunWriteError as err:  # the disk is still full: run.json keeps what it last said
        log(f"jaxgpu: {err}")


# what makes two runs' figures comparable: a resumed run must have been started on the same of each
SAME_MACHINE = ("backend", "device_kind", "cpu_model", "n_devices", "jax", "jaxlib", "target")


def check_same_machine(out_dir: str | Path, env: dict[str, Any]) -> None:
    """Refuses to resume a run recorded on another machine or JAX: two machines' figures under one run.json would
    be read as one machine's. Only the fields ``env`` has are compared (the command line checks what it can before
    JAX starts, the run the rest).

    Raises:
      results.ResultsError: what differs, and what to do instead.
    """
    path = Path(out_dir) / results.RUN_FILE
    if not path.exists():
        return
    import json

    try:
        old = json.loads(path.read_text(encoding="utf-8")).get("env", {})
    except (OSError, ValueError) as err:
        raise results.ResultsError(f"{path} cannot be read ({err}); start a new folder with --out") from None
    diff = [f"{k} {old.get(k)!r} there, {env.get(k)!r} here" for k in SAME_MACHINE
            if k in env and old.get(k) != env.get(k)]
    if diff:
        raise results.ResultsError(f"{out_dir} was recorded on another machine or JAX ({'; '.join(diff)}); resume "
                                   "it where it was made, or start a new folder with --out")


def _host_memory_seen(env: dict[str, Any]) -> dict[str, int]:
    """The host's memory as the run ends, where it differs from what it was at the start: a machine whose memory
    grows as it is used reports far less at start-up than it ends with."""
    now = devices.host_memory_bytes()
    return {"host_memory_bytes_at_end": now} if now and now != env.get("host_memory_bytes") else {}


def _done(out_dir: Path, resume: bool, log: Callable[[str], None]) -> set[str]:
    """The case keys a resumed run already holds (none for a new run, whose folder must not hold one)."""
    path = out_dir / results.RESULTS_FILE
    if not resume and path.exists():
        # appending a new run to an old one would mix two machines' or two days' records under one run.json
        raise FileExistsError(f"{out_dir} already holds a run; choose another folder, or resume it")
    if not (resume and path.exists()):
        return set()
    if results.set_aside_cut_line(path) is not None:
        log(f"jaxgpu: the last line of {path} was cut by a kill; set aside in {results.CUT_FILE}, and its case "
            "is measured again")
    return results.completed_keys(results.read_run(out_dir).records)


def _measure_all(plans: list[_Plan], ctx: RunContext, run_id: str, budget_s: float | None,
                 machine: budget.Machine, writer: results.RunWriter, counts: dict[str, int],
                 spent: dict[str, float], bar, log: Callable[[str], None], t_start: float) -> int:
    """Measures the plans' cases in order, writing each record as it comes; returns how many the budget skipped."""
    allow = _allowances(plans, budget_s, machine)
    current, started, skipped, left_out = None, set(), 0, set()
    from jaxgpu.ground import timing  # imports JAX: the run has started it
    from jaxgpu.pricing.plans import gpu_targets

    gpus = gpu_targets(ctx.platform, ctx.mode)
    for p, case in _order(plans, budget_s):
        est = machine.case_seconds(case.cost)
        est += machine.setup_seconds() if est and p.name not in started else 0.0
        needed = results.case_key(p.name, case.needs) if case.needs is not None else None
        # a spread experiment's probes are too small to budget, and what the rest is read against
        if budget_s is not None and not p.exp.spread and (
                needed in left_out or not allow.take(p.name, case.key, est, time.perf_counter() - t_start)):
            skipped += 1  # a case whose work it reads was left out goes too: it would redo that work unpriced
            left_out.add(results.case_key(p.name, case.params))
            continue
        if p.name != current and p.name not in started and (bar is None or bar.disable):
            log(f"jaxgpu: {p.name}: {len(p.cases)} cases")
        current = p.name
        started.add(p.name)
        if bar is not None:
            bar.set_description(p.name)
        t0 = time.perf_counter()
        with timing.collecting_programs() as programs:
            record = _measure(p.exp, case, ctx, run_id)
        writer.write(record, _plans(record, programs, ctx, gpus))
        spent[p.name] += time.perf_counter() - t0
        counts[record.status] += 1
        if record.status == "failed":
            log(f"jaxgpu: {p.name} {_short(case.params)} failed: {record.reason}")
        if bar is not None:
            bar.update(1)
    return skipped


class _Allowance:
    """The budget, shared out: key cases while any time is left, then per-experiment shares."""

    def __init__(self, shares: dict[str, float], budget_s: float):
        self.shares, self.budget_s = shares, budget_s
        self.used = {name: 0.0 for name in shares}
        self.carry = 0.0
        self.last = None

    def take(self, name: str, key: bool, estimate_s: float, elapsed_s: float) -> bool:
        if elapsed_s + estimate_s > self.budget_s:
            return False
        if key:
            return True
        if name != self.last:  # what an earlier experiment left unused passes on
            if self.last is not None:
                self.carry = max(0.0, self.shares[self.last] + self.carry - self.used[self.last])
            self.last = name
        if self.used[name] + estimate_s > self.shares[name] + self.carry:
            return False
        self.used[name] += estimate_s
        return True


def _allowances(plans: list[_Plan], budget_s: float | None, machine: budget.Machine) -> _Allowance | None:
    if budget_s is None:
        return None
    key_s = _key_seconds(plans, machine)  # the info hooks too: a run calls them inside its budget
    rest = {p.name: sum(machine.case_seconds(c.cost) for c in p.cases if not c.key) for p in plans}
    left = max(0.0, budget_s - key_s)
    total = sum(rest.values()) or 1.0
    return _Allowance({n: left * s / total if total > left else s for n, s in rest.items()}, budget_s)


def _short(params: dict[str, Any]) -> str:
    return labels.case_label(params)[:60]


def _measure(exp: Experiment, case: Case, ctx: RunContext, run_id: str) -> results.Record:
    common = dict(experiment=exp.name, params=case.params, run_id=run_id, backend=ctx.platform,
                  device_kind=ctx.device_kind, n_devices=ctx.n_devices, benchmark_version=exp.benchmark_version,
                  mode=ctx.mode)
    try:
        metrics = case.run()
    except KeyboardInterrupt:
        raise
    except Exception as err:  # noqa: BLE001 - every failure becomes a record; the run goes on
        status, reason = results.status_of(err)
        return results.Record(metrics={}, status=status, reason=reason, **common)
    return results.Record(metrics=metrics, **common)


def _plans(record: results.Record, programs: list, ctx: RunContext, gpus: Sequence[str]) -> list[dict]:
    """The compiled plans of the program ``record`` timed (``jaxgpu.pricing.plans``): none for a record that timed no
    JAX program, and none, rather than a failed case, where a plan cannot be read."""
    if record.status != "ok" or not programs or record.mode != "measured":
        return []
    from jaxgpu.pricing.plans import of_case

    try:
        return of_case(record.metrics, programs, ctx.platform, gpus, triton=ctx.triton_plans)
    except Exception:  # noqa: BLE001 - the record stands; the report prices it from its counts
        return []
