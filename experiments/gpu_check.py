"""``python -m experiments.gpu_check --part N ARCHIVE``: the study's GPU check, one part per call.

A GPU machine is lent rarely, for minutes (15 in all, its start-ups of 60-120 s included, at most 10 a call), and
hands files back only when a call returns. So the check runs in parts, each one short call of at most about three
minutes (``PART_S``) with an archive of its own (``scripts/gpu_check.sh`` is the same command):

- parts 1 to 4: the quick GPU study in four runs, the most valuable first (``PARTS``: the summary's rates, then the
  train step, then the claims' other cases, then memory_fit), each run's claim-deciding cases first under a budget
  they fill to at most ``KEY_SHARE`` (the dry run holds each part to that, also with every estimate ``--slower``);
  part 1 starts with the preflight (``python -m experiments.preflight``: every module imports, one program jits on
  the GPU and matches NumPy, one XLA:GPU plan compiles), so a break with this JAX shows, named, in the first call;
- part 5: the GPU tests, verbose;
- part ``host`` (optional): the study on the same machine's CPU (8 host devices);
- ``all``: every part back to back in one call, for a GPU held longer than a lent machine's call.

Each call is one try of its part, with folders of its own: ``ROOT/part-N-try-K/`` holds its step logs, its
monitor and its run (``gpu-part-N-try-K``, a result folder the report merges), so no two tries or parts share a
path: the archives of one lease unpack into one folder without losing a record, and a part run again on the same
root measures anew beside what its earlier tries kept. A part's archive holds every try of that part on this root.

What survives: the archive is rewritten every ``PACK_EVERY_S`` seconds (records so far, each step's console, the
machine's log and the kernel's lines about the GPU, a summary), written beside and renamed over, and never replaced
by a partial or oversized one (the device tool returns files of at most 16 MiB). That saves a call cut by its time
limit, or a SIGKILL of the whole process group, while the machine lives: the archive then holds what was measured
up to a few seconds before. **A machine that is lost returns nothing**: its archive never comes home. That is why a
call on a lent machine stays under about three minutes, and why ``--part all`` (one long call) is only for a GPU
you hold yourself.

While a part runs, a monitor samples the machine every ``MONITOR_EVERY_S`` seconds into ``monitor.csv`` (host
memory, load, disk, and nvidia-smi's GPU memory, temperature, clocks, power), and ``kernel.txt`` keeps the kernel's
lines about the GPU (Xid, NVRM) or memory (out of memory), read with every pack; a watchdog ends each step at its
limit (SIGINT to its process group, SIGKILL 5 s later) and moves on without waiting on a process that does not die
(one stuck in the driver never lets a ``wait`` return).

``--dry-run --part N`` prints the part's steps, each study's plan for the card (an H100 SXM unless ``--target``
says otherwise), its claim-deciding cases' own estimate against ``KEY_SHARE`` of the budget, and whether the part
fits its deadline; ``--slower 1.3`` plans with every estimate 1.3 times longer. The host part is planned with the
CPU of the machine the dry run runs on, not the GPU machine's.

Exit status: 0 when the part's study finished (complete, or cut cleanly by its budget); 1 when it failed; 3 when
it overran its limit (its records kept); 130 on SIGINT, 143 on SIGTERM; 2 for bad input. Never 124 or 137,
which the device tool reads as its own time limit.

Environment: ``GPU_CHECK_S`` (a part's deadline, seconds; for ``all``, the whole call's, shared in proportion),
``PYTHON`` (interpreter, default this one), ``JAXGPU_CHECK_STUDY`` (a command run in place of ``python -m
experiments.run``: for the tests' stand-in study), ``JAXGPU_CHECK_PREFLIGHT`` (a command run in place of the
preflight), ``JAXGPU_CHECK_ROOT`` (where the check's folders go, default ``reports/runs/gpu-check``).
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

from jaxgpu.pricing import targets

import experiments
from experiments import cli

PROG = "python -m experiments.gpu_check"
STUDY_PART_S = 180  # a study part's deadline: three starts and three parts fit a lease's 15 minutes
TESTS_PART_S = 100  # the GPU tests: 26 items at about 2 s each, and a margin
PACK_EVERY_S = 15  # the archive is never older than this (and the time a pack takes)
MONITOR_EVERY_S = 10
PREFLIGHT_S = 30  # part 1's preflight: nvidia-smi, the versions, every import, one program jitted (about 20 s)
PREFLIGHT_ESTIMATE_S = 20
RESERVE_S = 8  # kept back from every step for the last pack and the watchdog's kill grace
STUDY_START_S = 25  # a study's start-up (Python, JAX, CUDA) inside its limit, outside its budget
TEST_ITEM_S = 2.0  # a GPU test item: a compile or two and a run
KILL_GRACE_S = 5  # SIGINT, then SIGKILL this much later
ARCHIVE_MAX_BYTES = 15 * 2**20  # the device tool returns files of at most 16 MiB
DEFAULT_TARGET = targets.lent_target()  # the slower card, and the one a first call gets
KEY_SHARE = 0.75  # of a study part's budget, at most, for its claim-deciding cases (and the info hooks)
SLOWER = 1.3  # ... also with every estimate this many times longer (tests/test_gpu_check.py holds the parts to it)

# The GPU study's parts, the most valuable first, as the experiments say (``Experiment.gpu_part``): the summary's
# rates and the claims on products, precision, memory and the libraries; the train step with the op mix; the other
# claims' cases; memory_fit last and alone (it reads the device's high-water mark, so it runs first in a fresh
# process, and its 7B cases are the longest). Every experiment with GPU cases is in one part (a test keeps it so).
PARTS: dict[str, tuple[str, ...]] = {str(k): tuple(v) for k, v in experiments.gpu_parts().items()}
TESTS_PART = "5"
HOST_PART = "host"
ORDER = (*PARTS, TESTS_PART, HOST_PART)  # what --part all runs, in this order
PART_S = {**{p: STUDY_PART_S for p in PARTS}, TESTS_PART: TESTS_PART_S, HOST_PART: STUDY_PART_S}
GPU_TESTS = ("tests/test_gpu.py", "tests/test_precision.py")
EXIT = {"ok": 0, "failed": 1, "overran": 3, "SIGINT": 130, "SIGTERM": 143}


def gpu_experiments() -> list[str]:
    """The experiments a GPU study runs: those with cases on a measured GPU (``Experiment.gpu_part``)."""
    return [n for n in experiments.names() if experiments.load(n).gpu_part]


def part_experiments(part: str) -> list[str]:
    """The experiments a part's study runs (the host part: those of the host check)."""
    if part == HOST_PART:
        return list(experiments.host_check())
    return list(PARTS.get(part, ()))


def try_folder(root: Path, part: str) -> Path:
    """This call's folder of ``part`` under ``root``: ``part-N-try-K``, K one more than any try there already."""
    tries = [int(d.name.rsplit("-", 1)[1]) for d in root.glob(f"part-{part}-try-*")
             if d.is_dir() and d.name.rsplit("-", 1)[1].isdigit()]
    return root / f"part-{part}-try-{max(tries, default=0) + 1}"


def run_folder(folder: Path, part: str) -> Path:
    """The result folder of a try's study: named for the part and the try, so that merged runs say which."""
    return folder / f"{'host' if part == HOST_PART else 'gpu'}-{folder.name}"


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
    """One call of the check: its try folders (one per part it runs), its archive, the threads that keep the
    archive fresh and watch the machine, and the watchdog that runs each step to its limit."""

    def __init__(self, parts: Sequence[str], archive: Path, deadline_s: float, root: Path, py: str):
        self.parts, self.archive, self.root, self.py = tuple(parts), archive, root, py
        self.t0 = time.monotonic()
        self.deadline = self.t0 + deadline_s
        self.deadline_s = deadline_s
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None
        self.signal: str | None = None
        self.peak_host_used = 0
        self.folder = self.enter(self.parts[0])
        self._say(f"GPU check part {'all' if len(self.parts) > 1 else self.parts[0]}: deadline {deadline_s:.0f} s, "
                  f"python {py}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")

    def enter(self, part: str) -> Path:
        """Starts the next try of ``part``: its folder, where the logs and the run go from now on."""
        folder = try_folder(self.root, part)
        folder.mkdir(parents=True)
        self.folder = folder
        earlier = sorted(d.name for d in self.root.glob(f"part-{part}-try-*") if d != folder)
        if earlier:
            self._say(f"part {part}, try {folder.name.rsplit('-', 1)[1]}: kept beside {', '.join(earlier)}")
        return folder

    # -- time ------------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.deadline - time.monotonic() - RESERVE_S

    # -- the record of the call ------------------------------------------------------------------------------
    def _say(self, line: str) -> None:
        with open(self.folder / "summary.txt", "a", encoding="utf-8") as f:
            f.write(line + "\n")
        print(f"gpu_check: {line}", flush=True)

    def _members(self) -> list[Path]:
        """The files the archive holds: every try of this call's parts on this root."""
        files = []
        for part in self.parts:
            for folder in sorted(self.root.glob(f"part-{part}-try-*")):
                files += [f for f in sorted(folder.rglob("*")) if f.is_file() and not f.name.endswith(".tmp")
                          and "attachments" not in f.relative_to(folder).parts]
        return files

    def pack(self) -> bool:
        """Writes the archive anew from what is on disk now (with the kernel's lines as they are now): beside it
        first, then renamed over it. A pack that failed part-way, or that stays over the size the device tool
        returns after dropping what can be dropped, leaves the last good archive in place; returns whether it
        replaced it."""
        (self.folder / "kernel.txt").write_text(kernel_lines(), encoding="utf-8")
        with self.lock:
            tmp = self.archive.with_name(self.archive.name + ".tmp")
            for skip in ((), (".html", ".png"), (".html", ".png", "plans.jsonl")):  # smaller until it fits
                try:
                    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
                        for path in self._members():
                            if not path.name.endswith(skip):
                                tar.add(path, arcname=str(path.relative_to(self.root.parent)))
                except OSError as err:  # a file renamed under the walk, a full disk: the next pack tries again
                    tmp.unlink(missing_ok=True)
                    print(f"gpu_check: pack failed, the last archive kept: {err}", flush=True)
                    return False
                if tmp.stat().st_size <= ARCHIVE_MAX_BYTES:
                    os.replace(tmp, self.archive)
                    return True
            size = tmp.stat().st_size
            tmp.unlink(missing_ok=True)
            print(f"gpu_check: the archive would be {size / 2**20:.1f} MiB, over {ARCHIVE_MAX_BYTES / 2**20:.0f}: "
                  "the last archive kept", flush=True)
            return False

    def _packer(self) -> None:
        while not self.stopping.wait(PACK_EVERY_S):
            try:
                self.pack()
            except OSError as err:
                self._say(f"pack failed: {err}")

    def _monitor(self) -> None:
        while True:
            row = machine_sample(self.elapsed())
            self.peak_host_used = max(self.peak_host_used, row.get("host_used_bytes") or 0)
            path = self.folder / "monitor.csv"  # the current try's: a call of several parts logs each in its own
            new = not path.exists()
            with open(path, "a", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(MONITOR_FIELDS)
                w.writerow([row.get(k, "") for k in MONITOR_FIELDS])
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
        log = open(self.folder / f"{step.name}.txt", "ab")
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

def study_argv(check_py: str, names: Sequence[str], out: Path, budget_s: float, backend: str = "gpu",
               extra: Sequence[str] = ()) -> list[str]:
    base = shlex.split(os.environ["JAXGPU_CHECK_STUDY"]) if os.environ.get("JAXGPU_CHECK_STUDY") else \
        [check_py, "-m", "experiments.run"]
    return [*base, "--out", str(out), "--backend", backend, "--profile", "quick", "--only", ",".join(names),
            "--budget-s", f"{budget_s:.0f}", "--no-report", "--no-progress", *extra]


def preflight_argv(py: str) -> list[str]:
    """nvidia-smi's view of the card, then ``experiments.preflight`` on the GPU (versions, every import, one program
    jitted and checked, one XLA:GPU plan)."""
    smi = "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv"
    check = os.environ.get("JAXGPU_CHECK_PREFLIGHT") or shlex.join([py, "-m", "experiments.preflight", "--backend",
                                                                     "gpu"])
    return ["bash", "-c", f"{smi}; {check}"]


def budget_of(limit_s: float) -> float:
    """A study's budget inside its step's limit: what is left after its start-up, were that ``SLOWER`` than planned
    (the budget's clock starts once JAX is up)."""
    return max(5.0, limit_s - STUDY_START_S * SLOWER)


def tests_argv(py: str) -> list[str]:
    # verbose: each test's name and outcome reach the log as it ends, so a cut step still names what failed
    return [py, "-m", "pytest", "-v", "-rfE", "--backend", "gpu", "-p", "no:cacheprovider", "-m", "not slow",
            "--timeout", "30", *GPU_TESTS]


def part_steps(part: str, folder: Path, py: str, deadline_s: float) -> list[Step]:
    """The steps of a part's try (its folder ``folder``), each with its limit inside the part's deadline."""
    run = run_folder(folder, part)
    if part in PARTS:
        pre = [Step("preflight", preflight_argv(py), PREFLIGHT_S)] if part == "1" else []
        limit = deadline_s - sum(s.limit_s for s in pre) - RESERVE_S
        return [*pre, Step("gpu-study", study_argv(py, part_experiments(part), run, budget_of(limit)), limit)]
    if part == TESTS_PART:
        return [Step("gpu-tests", tests_argv(py), deadline_s - RESERVE_S)]
    if part == HOST_PART:
        limit = deadline_s - RESERVE_S
        argv = study_argv(py, part_experiments(part), run, budget_of(limit), backend="cpu",
                          extra=("--devices", "8", "--allocator", "system"))
        return [Step("host-study", argv, limit)]
    raise ValueError(part)


def parts_of(part: str) -> tuple[str, ...]:
    return ORDER if part == "all" else (part,)


def deadlines(part: str, total_s: float | None) -> dict[str, float]:
    """Each part's deadline in a call of ``part``: its own ``PART_S`` (``total_s``, where set, shared in proportion
    to them)."""
    own = {p: float(PART_S[p]) for p in parts_of(part)}
    scale = total_s / sum(own.values()) if total_s else 1.0
    return {p: s * scale for p, s in own.items()}


def run_part(part: str, archive: Path, total_s: float | None, root: Path, py: str) -> int:
    shares = deadlines(part, total_s)
    check = Check(list(shares), archive, sum(shares.values()), root, py)
    previous = {s: signal.signal(s, check.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    check.start_threads()
    status = "failed"
    try:
        for i, p in enumerate(shares):
            if i:
                check.enter(p)
            # a part of a longer call gets its share, and what the parts before it left unused
            left = check.left() + RESERVE_S
            share = left if i == len(shares) - 1 else min(left, shares[p] + max(0.0, left - sum(
                list(shares.values())[i:])))
            status = _run_one(check, p, py, share)
            if check.signal:
                break
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return check.finish(status)


def _run_one(check: Check, part: str, py: str, deadline_s: float) -> str:
    status = "ok"
    for step in part_steps(part, check.folder, py, deadline_s):
        rc = check.run(step)
        if check.signal:
            return check.signal
        if step.name in ("gpu-study", "host-study", "gpu-tests"):
            status = "ok" if rc == 0 else "overran" if step.overran else "failed"
        elif rc and step.name == "preflight":
            check._say("preflight failed: a check above names what broke (the study runs anyway)")
    return status


# -- the dry run ---------------------------------------------------------------------------------------------------

def dry_run(part: str, total_s: float | None, target: str, py: str, n_tests: int, slower: float = 1.0) -> list[str]:
    """The call's plan: each part's steps with their limits, each study's plan on ``target`` (the host part's on
    this CPU) under its budget, its claim-deciding cases' own estimate against ``KEY_SHARE`` of the budget, and
    ``the command: estimated X s, at most Y s``. ``slower``: every estimate that many times longer."""
    from experiments.analysis import claims
    from experiments.harness import runner
    from experiments.harness.settings import RunSettings

    root = Path(os.environ.get("JAXGPU_CHECK_ROOT", "reports/runs/gpu-check"))
    shares = deadlines(part, total_s)
    times = f", every estimate {slower:g}x" if slower != 1.0 else ""
    out = [f"GPU check part {part} for the {target}: deadline {sum(shares.values()):.0f} s{times}"]
    likely, ok = 0.0, True
    for p, share in shares.items():
        for step in part_steps(p, root / f"part-{p}-try-1", py, share):
            if step.name in ("gpu-study", "host-study"):
                names = part_experiments(p)
                budget = float(step.argv[step.argv.index("--budget-s") + 1])
                gpu = step.name == "gpu-study"
                s = RunSettings(tuple(names), backend="gpu" if gpu else "cpu", budget_s=budget,
                                target=target if gpu else None, devices=None if gpu else 8)
                plan = runner.budget_plan(s, rests_on=claims.rests_on, slower=slower)
                where = "" if gpu else (f"; planned with this machine's CPU ({os.cpu_count()} cores), not the GPU "
                                        "machine's: a guide only")
                out.append(f"{p}.{step.name}: {', '.join(names)}; limit {step.limit_s:.0f} s, budget {budget:.0f} s"
                           + where)
                out += [f"    {line}" for line in plan.lines]
                fits = not plan.keys_cut and (not gpu or plan.key_s <= KEY_SHARE * budget)
                if gpu and plan.key_s > KEY_SHARE * budget:
                    out.append(f"    the claim-deciding cases take more than {KEY_SHARE:.0%} of the budget "
                               f"({KEY_SHARE * budget:.0f} s)")
                ok &= fits
                likely += min(plan.estimate_s, budget) + STUDY_START_S * slower
            elif step.name == "gpu-tests":
                est = (n_tests * TEST_ITEM_S + 10) * slower
                out.append(f"{p}.gpu-tests: {n_tests} items of {' '.join(GPU_TESTS)} at about {TEST_ITEM_S:g} s "
                           f"each: estimated {est:.0f} s, limit {step.limit_s:.0f} s")
                if est > step.limit_s:
                    out.append(f"    the tests may not all run in {step.limit_s:.0f} s")
                likely += est
            else:
                est = PREFLIGHT_ESTIMATE_S * slower
                out.append(f"{p}.{step.name}: limit {step.limit_s:.0f} s, estimated {est:.0f} s")
                likely += est
    likely += 3  # the last pack
    out.append(f"the command: estimated {likely:.0f} s, at most {sum(shares.values()):.0f} s (every step at its "
               "limit)")
    out.append("every claim-deciding case fits its part's budget" if ok
               else "some claim-deciding cases do not fit their part's budget (above)")
    return out


def count_tests(py: str) -> int:
    """The fast-tier items of the GPU tests (each parametrized case apart), as pytest collects them."""
    out, _ = bounded([py, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                      *GPU_TESTS], 60)
    return sum("::" in line for line in out.splitlines()) or 30


def main(argv: list[str] | None = None) -> int:
    p = cli.Parser(prog=PROG, description="The study's GPU check, one part per call of a lent GPU machine (about three "
                   "minutes each; a machine that is lost returns nothing, so never one long call there); each part "
                   "keeps its archive fresh while it runs (see experiments/gpu_check.py).")
    p.add_argument("archive", nargs="?", metavar="ARCHIVE", help="the .tar.gz the part writes (and keeps fresh)")
    p.add_argument("--part", choices=(*ORDER, "all"), required=True,
                   help="1-4: the GPU study, most valuable first (1 starts with the preflight); 5: the GPU tests; "
                        "host: the study on the machine's CPU; all: every part in one call, only for a GPU held "
                        "longer than a lent machine's call")
    p.add_argument("--dry-run", action="store_true", help="print the part's plan; nothing runs")
    p.add_argument("--target", default=DEFAULT_TARGET, help=f"the GPU the dry run plans for (default {DEFAULT_TARGET})")
    p.add_argument("--slower", type=float, default=1.0, metavar="F",
                   help="the dry run plans with every estimate F times longer (is there margin?)")
    args = p.parse_args(argv)
    py = os.environ.get("PYTHON") or sys.executable
    env_s = os.environ.get("GPU_CHECK_S", "")
    if env_s and not env_s.isdigit():
        return cli.fail("experiments.gpu_check", f"GPU_CHECK_S must be a whole number of seconds, got {env_s!r}")
    if not 0.1 <= args.slower <= 10:
        return cli.fail("experiments.gpu_check", f"--slower must be between 0.1 and 10, got {args.slower:g}")
    total_s = float(env_s) if env_s else None
    if args.dry_run:
        from jaxgpu.ground import hardware

        try:
            target = hardware.find_gpu(args.target).name
        except KeyError as err:
            return cli.fail("experiments.gpu_check", f"--target: {err.args[0]}")
        n_tests = count_tests(py) if TESTS_PART in parts_of(args.part) else 0
        print("\n".join(dry_run(args.part, total_s, target, py, n_tests, args.slower)))
        return 0
    if not args.archive:
        return cli.fail("experiments.gpu_check", "name the archive to write, e.g. \"$OUT/gpu-check-1.tar.gz\"")
    archive = Path(args.archive)
    if not archive.parent.is_dir():
        return cli.fail("experiments.gpu_check", f"the archive's folder {archive.parent} does not exist")
    root = Path(os.environ.get("JAXGPU_CHECK_ROOT", "reports/runs/gpu-check"))
    root.mkdir(parents=True, exist_ok=True)
    return run_part(args.part, archive, total_s, root, py)


if __name__ == "__main__":
    sys.exit(main())
