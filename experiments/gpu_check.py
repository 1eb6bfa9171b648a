"""``python -m experiments.gpu_check --part N ARCHIVE``: the study's GPU check, one part per call.

A GPU machine is lent rarely, for minutes, and hands files back only when a call returns; one lost call must
not lose what was measured before it. So the check runs in parts, each one short call with an archive of its
own (``scripts/gpu_check.sh`` is the same command):

- part 1: a preflight (nvidia-smi, versions), then the quick GPU study of every experiment of ``PARTS["1"]``
  (all but the whole-step ones), key cases first under a budget;
- part 2: ``PARTS["2"]`` (memory_fit, op_mix, transformer) added to part 1's run folder where it is still on
  the machine (``--resume`` with ``--only``: run.json's ``sessions`` says what each part ran), else a fresh
  folder; then the GPU tests;
- part 3 (optional): the host-CPU study of the same machine (8 host devices);
- ``all``: every part in one call, for a GPU held longer.

Each part is planned to its deadline (``PART_S`` seconds, ``GPU_CHECK_S`` to change it): ``--dry-run --part N``
prints its steps, the study's plan for the card (an H100 SXM unless ``--target`` says otherwise) and whether
every claim-deciding case fits the budget. While it runs:

- the archive is rewritten every ``PACK_EVERY_S`` seconds (records so far, each step's console, the machine's
  log, a summary), written beside and renamed over, so a call cut by its time limit or a SIGKILL of the whole
  process group still returns a whole archive of what was measured up to a few seconds before;
- a monitor samples the machine every ``MONITOR_EVERY_S`` seconds into ``monitor.csv`` (host memory, load, disk,
  and nvidia-smi's GPU memory, temperature, clocks, power); at the end the kernel's lines about the GPU (Xid,
  NVRM) or memory (out of memory) go into ``kernel.txt`` where they can be read;
- a watchdog ends each step at its limit (SIGINT to its process group, SIGKILL 5 s later) and moves on without
  waiting on a process that does not die (one stuck in the driver never lets a ``wait`` return).

Exit status: 0 when the part's study finished (complete, or cut cleanly by its budget); 1 when it failed; 3 when
it overran its limit (its records kept); 130 on SIGINT, 143 on SIGTERM; 2 for bad input. Never 124 or 137,
which the device tool reads as its own time limit.

Environment: ``GPU_CHECK_S`` (a part's deadline, seconds), ``PYTHON`` (interpreter, default this one),
``JAXGPU_CHECK_STUDY`` (a command run in place of ``python -m experiments.run``: for the tests' hanging study),
``JAXGPU_CHECK_ROOT`` (where the check's folders go, default ``reports/runs/gpu-check``).
Nothing here imports JAX.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import experiments
from experiments import cli

PROG = "python -m experiments.gpu_check"
PART_S = 240  # a part's deadline: with the machine's start (60-120 s) a lost call leaves time for one more try
ALL_S = 560  # --part all: the parts back to back inside one ten-minute call
PACK_EVERY_S = 15  # the archive is never older than this (and the time a pack takes)
MONITOR_EVERY_S = 10
PREFLIGHT_S = 10  # nvidia-smi and the versions: no device is started
RESERVE_S = 8  # kept back from every step for the last pack and the watchdog's kill grace
STUDY_START_S = 25  # a study's start-up (Python, JAX, CUDA) inside its limit, outside its budget
TEST_ITEM_S = 2.0  # a GPU test item: a compile or two and a run
GPU_TESTS_S = 72  # part 2's GPU tests, each bounded by pytest-timeout
KILL_GRACE_S = 5  # SIGINT, then SIGKILL this much later
ARCHIVE_MAX_BYTES = 15 * 2**20  # the device tool returns files of at most 16 MiB
DEFAULT_TARGET = "h100"  # the slower card, and the one a first call gets

# The whole-step experiments go to part 2: they compile train steps (seconds each, autotuned), and memory_fit
# must run first in its process (it reads the device's high-water mark), which part 2's fresh process gives it.
PART_2 = ("memory_fit", "op_mix", "transformer")
GPU_TESTS = ("tests/test_gpu.py", "tests/test_precision.py")
EXIT = {"ok": 0, "failed": 1, "overran": 3, "SIGINT": 130, "SIGTERM": 143}


def gpu_experiments() -> list[str]:
    """The experiments a GPU study runs: those with cases on a measured GPU (gpu_model times nothing there)."""
    return [n for n in experiments.names() if n != "gpu_model"]


def part_experiments(part: str) -> list[str]:
    """The experiments a part's GPU study runs."""
    if part == "1":
        return [n for n in gpu_experiments() if n not in PART_2]
    if part == "2":
        return list(PART_2)
    return []


@dataclasses.dataclass
class Step:
    """One bounded command of a part: its name, its argv, its share of the part's time and its exit code."""

    name: str
    argv: list[str]
    limit_s: float
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    rc: int | None = None
    seconds: float = 0.0
    overran: bool = False


class Check:
    """One call of the check: its folders, its archive, the threads that keep the archive fresh and watch the
    machine, and the watchdog that runs each step to its limit."""

    def __init__(self, part: str, archive: Path, deadline_s: float, root: Path, py: str):
        self.part, self.archive, self.root, self.py = part, archive, root, py
        self.t0 = time.monotonic()
        self.deadline = self.t0 + deadline_s
        self.deadline_s = deadline_s
        self.logs = root / f"part-{part}"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.summary = self.logs / "summary.txt"
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None
        self.signal: str | None = None
        self.peak_host_used = 0
        self._say(f"GPU check part {part}: deadline {deadline_s:.0f} s, python {py}, started "
                  f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")

    # -- time ------------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.deadline - time.monotonic() - RESERVE_S

    # -- the record of the call ------------------------------------------------------------------------------
    def _say(self, line: str) -> None:
        with open(self.summary, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        print(f"gpu_check: {line}", flush=True)

    def pack(self) -> None:
        """Writes the archive anew from what is on disk now: beside it first, then renamed over it."""
        with self.lock:
            tmp = self.archive.with_name(self.archive.name + ".tmp")
            for skip in ((), (".html", ".png"), (".html", ".png", "plans.jsonl")):  # smaller until it fits
                try:
                    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
                        for path in sorted(self.root.rglob("*")):
                            if path.is_file() and not path.name.endswith(skip) and "attachments" not in path.parts \
                                    and not path.name.endswith(".tmp"):
                                tar.add(path, arcname=str(path.relative_to(self.root.parent)))
                except OSError:
                    continue  # a file renamed under the walk: the next pack has it
                if tmp.stat().st_size <= ARCHIVE_MAX_BYTES:
                    break
            if tmp.exists():
                os.replace(tmp, self.archive)

    def _packer(self) -> None:
        while not self.stopping.wait(PACK_EVERY_S):
            try:
                self.pack()
            except OSError as err:
                self._say(f"pack failed: {err}")

    def _monitor(self) -> None:
        path = self.logs / "monitor.csv"
        with open(path, "a", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(MONITOR_FIELDS)
            while True:
                row = machine_sample(self.elapsed())
                self.peak_host_used = max(self.peak_host_used, row.get("host_used_bytes") or 0)
                w.writerow([row.get(k, "") for k in MONITOR_FIELDS])
                f.flush()
                if self.stopping.wait(MONITOR_EVERY_S):
                    return

    def start_threads(self) -> None:
        for target in (self._monitor, self._packer):
            threading.Thread(target=target, daemon=True).start()

    # -- steps -----------------------------------------------------------------------------------------------
    def run(self, step: Step) -> int:
        """Runs one step to its limit (or the part's deadline, whichever is first); returns its exit code."""
        limit = max(1.0, min(step.limit_s, self.left()))
        self._say(f"== {step.name} (limit {limit:.0f} s): {shlex.join(step.argv)}")
        t0 = time.monotonic()
        log = open(self.logs / f"{step.name}.txt", "ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **step.env}
        try:
            # in this process's group and session: a kill of the whole call (the device tool's, a test's) takes
            # the step with it, and nothing of it runs on into the next call
            self.child = subprocess.Popen(step.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        except OSError as err:
            self._say(f"{step.name}: cannot start: {err}")
            step.rc = 127
            return step.rc
        reader = threading.Thread(target=_copy, args=(self.child.stdout, log), daemon=True)
        reader.start()
        while self.child.poll() is None and self.signal is None:
            if time.monotonic() - t0 > limit:
                step.overran = True
                self._say(f"{step.name}: past its limit of {limit:.0f} s: stopped (SIGINT, then SIGKILL)")
                break
            time.sleep(0.2)
        if self.child.poll() is None:
            self._end_child()
        step.rc = self.child.returncode if self.child.returncode is not None else 137
        step.seconds = time.monotonic() - t0
        reader.join(timeout=2)
        self.child = None
        self._say(f"{step.name}: exit {step.rc} after {step.seconds:.0f} s (limit {limit:.0f} s)")
        try:
            self.pack()
        except OSError as err:
            self._say(f"pack failed: {err}")
        return step.rc

    def _end_child(self) -> None:
        """SIGINT to the step (the study keeps what it measured), SIGKILL to it and every process it started after
        the grace; never waits past that: a process stuck in the driver is left behind."""
        child = self.child
        try:
            child.send_signal(signal.SIGINT)
            child.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        for pid in [child.pid, *descendants(child.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            child.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._say(f"process {child.pid} did not die (stuck in the kernel?): left behind")

    def on_signal(self, signum, frame) -> None:
        self.signal = signal.Signals(signum).name

    # -- the end ---------------------------------------------------------------------------------------------
    def finish(self, status: str) -> int:
        self.stopping.set()
        if self.child is not None and self.child.poll() is None:
            self._end_child()
        (self.logs / "kernel.txt").write_text(kernel_lines(), encoding="utf-8")
        if self.peak_host_used:
            self._say(f"host memory used at its peak: {self.peak_host_used / 1e9:.1f} GB")
        status = self.signal or status
        self._say(f"finished after {self.elapsed():.0f} s: {status} (exit {EXIT[status]})")
        try:
            self.pack()
        except OSError as err:
            print(f"gpu_check: the archive could not be written: {err}", file=sys.stderr)
        print(f"gpu_check: archive {self.archive} ({self.archive.stat().st_size if self.archive.exists() else 0} "
              "bytes)", flush=True)
        return EXIT[status]


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (read from /proc; none where it cannot be read)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _copy(stream, log) -> None:
    """The step's console, line by line, into its log and onto this call's output."""
    for line in iter(stream.readline, b""):
        log.write(line)
        log.flush()
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
    log.close()


MONITOR_FIELDS = ("elapsed_s", "host_total_bytes", "host_available_bytes", "host_used_bytes", "load_1m",
                  "disk_free_bytes", "gpu_memory_used_mib", "gpu_memory_total_mib", "gpu_temperature_c",
                  "gpu_sm_clock_mhz", "gpu_memory_clock_mhz", "gpu_power_w", "gpu_utilization_pct", "gpu_error")
_SMI_FIELDS = ("memory.used", "memory.total", "temperature.gpu", "clocks.sm", "clocks.mem", "power.draw",
               "utilization.gpu")


def machine_sample(elapsed: float) -> dict[str, float | str]:
    """One line of the machine's log: host memory (/proc/meminfo), load, free disk, and nvidia-smi's view of the
    GPU (bounded: a hung driver gives an error field, not a hung monitor)."""
    row: dict[str, float | str] = {"elapsed_s": round(elapsed, 1)}
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        total = int(info["MemTotal"].split()[0]) * 1024
        avail = int(info["MemAvailable"].split()[0]) * 1024
        row.update(host_total_bytes=total, host_available_bytes=avail, host_used_bytes=total - avail)
    except (OSError, KeyError, ValueError):
        pass
    try:
        row["load_1m"] = os.getloadavg()[0]
    except OSError:
        pass
    row["disk_free_bytes"] = shutil.disk_usage(".").free
    out, err = bounded(["nvidia-smi", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"], 5)
    if out:
        values = [v.strip() for v in out.splitlines()[0].split(",")]
        row.update(zip(MONITOR_FIELDS[6:13], values))
    else:
        row["gpu_error"] = err
    return row


def bounded(argv: Sequence[str], timeout: float) -> tuple[str, str]:
    """A command's stdout, or ("", why not): at most ``timeout`` seconds, and never waiting on what will not die."""
    try:
        p = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    except OSError as err:
        return "", f"{argv[0]}: {err.strerror or err}"
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        return "", f"{argv[0]}: no answer in {timeout:g} s"
    if p.returncode:
        return "", f"{argv[0]}: exit {p.returncode}: {(err or out).strip()[:200]}"
    return out, ""


def kernel_lines() -> str:
    """The kernel's last lines about the GPU or memory (Xid, NVRM, the OOM killer), where they can be read."""
    out, err = bounded(["dmesg", "--ctime"], 5)
    if not out:
        return f"the kernel log could not be read ({err})\n"
    keys = ("xid", "nvrm", "out of memory", "oom", "killed process", "nvidia")
    lines = [line for line in out.splitlines() if any(k in line.lower() for k in keys)]
    return "\n".join(lines[-40:]) + "\n" if lines else "no kernel lines about the GPU or memory\n"


# -- the parts ---------------------------------------------------------------------------------------------------

def study_dir(root: Path) -> Path:
    return root / "study"


def study_argv(check_py: str, names: Sequence[str], out: Path, budget_s: float, resume: bool,
               backend: str = "gpu", extra: Sequence[str] = ()) -> list[str]:
    base = shlex.split(os.environ["JAXGPU_CHECK_STUDY"]) if os.environ.get("JAXGPU_CHECK_STUDY") else \
        [check_py, "-m", "experiments.run"]
    where = ["--resume", str(out)] if resume else ["--out", str(out), "--backend", backend, "--profile", "quick"]
    return [*base, *where, "--only", ",".join(names), "--budget-s", f"{budget_s:.0f}", "--no-report",
            "--no-progress", *extra]


_VERSIONS = """\
import importlib.metadata as m, platform
print("python", platform.python_version())
for p in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "optax", "numpy", "torch"):
    try:
        print(p, m.version(p))
    except m.PackageNotFoundError:
        print(p, "not installed")
"""


def preflight_argv(py: str) -> list[str]:
    """nvidia-smi's view of the card and the installed versions, without starting a device."""
    smi = "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv"
    return ["bash", "-c", f"{smi}; {shlex.quote(py)} -c {shlex.quote(_VERSIONS)}"]


def budget_of(limit_s: float) -> float:
    return max(5.0, limit_s - STUDY_START_S)


def part_steps(part: str, root: Path, py: str, deadline_s: float) -> list[Step]:
    """The steps of a part, each with its limit inside the part's deadline."""
    study = study_dir(root)
    if part == "1":
        limit = deadline_s - PREFLIGHT_S - RESERVE_S
        return [Step("preflight", preflight_argv(py), PREFLIGHT_S),
                Step("gpu-study", study_argv(py, part_experiments("1"), study, budget_of(limit), False), limit)]
    if part == "2":
        tests_s = min(GPU_TESTS_S, 0.3 * deadline_s)
        limit = deadline_s - PREFLIGHT_S - tests_s - RESERVE_S
        resume = (study / "run.json").exists()
        names = part_experiments("2")
        return [Step("preflight", preflight_argv(py), PREFLIGHT_S),
                Step("gpu-study", study_argv(py, names, study, budget_of(limit), resume), limit),
                Step("gpu-tests", [py, "-m", "pytest", "-q", "--backend", "gpu", "-p", "no:cacheprovider", "-m",
                                   "not slow", "--timeout", "30", *GPU_TESTS], tests_s)]
    if part == "3":
        limit = deadline_s - RESERVE_S
        argv = study_argv(py, experiments.host_check(), root / "host", budget_of(limit), False, backend="cpu",
                          extra=("--devices", "8", "--allocator", "system"))
        return [Step("host-study", argv, limit)]
    raise ValueError(part)


def run_part(part: str, archive: Path, deadline_s: float, root: Path, py: str) -> int:
    check = Check(part, archive, deadline_s, root, py)
    previous = {s: signal.signal(s, check.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    check.start_threads()
    status = "failed"
    try:
        parts = ("1", "2", "3") if part == "all" else (part,)
        for i, p in enumerate(parts):
            share = check.left() + RESERVE_S if part != "all" else (check.left() + RESERVE_S) / (len(parts) - i)
            status = _run_one(check, p, root, py, share)
            if check.signal:
                break
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return check.finish(status)


def _run_one(check: Check, part: str, root: Path, py: str, deadline_s: float) -> str:
    status = "ok"
    for step in part_steps(part, root, py, deadline_s):
        if step.name == "gpu-study" and "--resume" in step.argv:
            check._say(f"part {part} adds {', '.join(part_experiments(part))} to the run in {study_dir(root)}")
        rc = check.run(step)
        if check.signal:
            return check.signal
        if step.name == "gpu-study" and rc == 2 and "--resume" in step.argv:
            # the folder was recorded on another machine (experiments.run refuses it): a fresh one
            fresh = study_dir(root).with_name(f"study-{int(time.time())}")
            check._say(f"the run in {study_dir(root)} is not this machine's; part {part} starts {fresh}")
            step = dataclasses.replace(step, argv=study_argv(py, part_experiments(part), fresh,
                                                             budget_of(check.left()), False))
            rc = check.run(step)
        if step.name in ("gpu-study", "host-study"):
            status = "ok" if rc == 0 else "overran" if step.overran else "failed"
        elif rc and step.name == "preflight":
            check._say("preflight failed: nvidia-smi or the versions could not be read (the steps run anyway)")
    return status


# -- the dry run ---------------------------------------------------------------------------------------------------

def dry_run(part: str, deadline_s: float, target: str, py: str, n_tests: int) -> list[str]:
    """The part's plan: its steps with their limits, the study's plan on ``target`` under its budget, whether
    every claim-deciding case fits, and ``the command: estimated X s, at most Y s``."""
    from experiments.analysis import claims
    from experiments.harness import runner
    from experiments.harness.settings import RunSettings

    root = Path(os.environ.get("JAXGPU_CHECK_ROOT", "reports/runs/gpu-check"))
    parts = ("1", "2", "3") if part == "all" else (part,)
    out, likely, ok = [f"GPU check part {part} for the {target}: deadline {deadline_s:.0f} s"], 0.0, True
    for p in parts:
        share = deadline_s / len(parts)
        for step in part_steps(p, root, py, share):
            if step.name in ("gpu-study", "host-study"):
                names = part_experiments(p) if step.name == "gpu-study" else experiments.host_check()
                budget = float(step.argv[step.argv.index("--budget-s") + 1])
                platform = "gpu" if step.name == "gpu-study" else "cpu"
                s = RunSettings(tuple(names), backend=platform, budget_s=budget,
                                target=target if platform == "gpu" else None, devices=8 if platform == "cpu" else None)
                plan = runner.budget_plan(s, rests_on=claims.rests_on)
                out.append(f"{p}.{step.name}: {', '.join(names)}; limit {step.limit_s:.0f} s, budget {budget:.0f} s")
                out += [f"    {line}" for line in plan.lines]
                ok &= not plan.keys_cut
                likely += min(plan.estimate_s, budget) + STUDY_START_S
            elif step.name == "gpu-tests":
                est = n_tests * TEST_ITEM_S + 10
                out.append(f"{p}.gpu-tests: {n_tests} items of {' '.join(GPU_TESTS)} at about {TEST_ITEM_S:g} s "
                           f"each: estimated {est:.0f} s, limit {step.limit_s:.0f} s")
                if est > step.limit_s:
                    out.append(f"    the tests may not all run in {step.limit_s:.0f} s")
                likely += est
            else:
                out.append(f"{p}.{step.name}: limit {step.limit_s:.0f} s, estimated 3 s")
                likely += 3
    likely += 3  # the last pack
    out.append(f"the command: estimated {likely:.0f} s, at most {deadline_s:.0f} s (every step at its limit)")
    out.append("every claim-deciding case fits its part's budget" if ok
               else "some claim-deciding cases do not fit their part's budget (above)")
    return out


def count_tests(py: str) -> int:
    """The fast-tier items of the GPU tests (each parametrized case apart), as pytest collects them."""
    out, _ = bounded([py, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                      *GPU_TESTS], 60)
    return sum("::" in line for line in out.splitlines()) or 30


def main(argv: list[str] | None = None) -> int:
    p = cli.Parser(prog=PROG, description="The study's GPU check, one part per call of a lent GPU machine; each part "
                   "keeps its archive fresh while it runs (see experiments/gpu_check.py).")
    p.add_argument("archive", nargs="?", metavar="ARCHIVE", help="the .tar.gz the part writes (and keeps fresh)")
    p.add_argument("--part", choices=("1", "2", "3", "all"), required=True, help="which part of the check")
    p.add_argument("--dry-run", action="store_true", help="print the part's plan; nothing runs")
    p.add_argument("--target", default=DEFAULT_TARGET, help=f"the GPU the dry run plans for (default {DEFAULT_TARGET})")
    args = p.parse_args(argv)
    py = os.environ.get("PYTHON") or sys.executable
    env_s = os.environ.get("GPU_CHECK_S", "")
    if env_s and not env_s.isdigit():
        return cli.fail("experiments.gpu_check", f"GPU_CHECK_S must be a whole number of seconds, got {env_s!r}")
    deadline_s = float(env_s) if env_s else (ALL_S if args.part == "all" else PART_S)
    if args.dry_run:
        from jaxgpu.ground import hardware

        try:
            target = hardware.find_gpu(args.target).name
        except KeyError as err:
            return cli.fail("experiments.gpu_check", f"--target: {err.args[0]}")
        print("\n".join(dry_run(args.part, deadline_s, target, py, count_tests(py))))
        return 0
    if not args.archive:
        return cli.fail("experiments.gpu_check", "name the archive to write, e.g. \"$OUT/gpu-check-1.tar.gz\"")
    archive = Path(args.archive)
    if not archive.parent.is_dir():
        return cli.fail("experiments.gpu_check", f"the archive's folder {archive.parent} does not exist")
    root = Path(os.environ.get("JAXGPU_CHECK_ROOT", "reports/runs/gpu-check"))
    root.mkdir(parents=True, exist_ok=True)
    return run_part(args.part, archive, deadline_s, root, py)



if __name__ == "__main__":
    sys.exit(main())
