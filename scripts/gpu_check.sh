#!/usr/bin/env bash
# The study's GPU check in one call, for a one-GPU machine with JAX (CUDA plugin), Flax,
# Optax, numpy, matplotlib and torch already installed, and no network:
#
#   PYTHONPATH=. bash scripts/gpu_check.sh "$OUT/gpu-check.tar.gz"
#   bash scripts/gpu_check.sh --dry-run          # every step's plan and the total, no GPU needed
#
# Steps: a preflight (nvidia-smi, the devices JAX sees), the quick study on the GPU, the GPU
# tests, the same study on the host's CPU (so the merged report pairs both sides of one
# machine), the merged report. Everything is bounded by one deadline, GPU_CHECK_S seconds
# (default 380: with the machine's own start, about a minute and a half, the call stays within
# 480 s of a ten-minute limit), from which each step's limit is computed; the studies run with a
# time budget inside their limit (key cases first; a cut run says so), and a step that overruns
# is interrupted (SIGINT, then SIGKILL), keeping every record it wrote. The archive (the result
# folders, each step's console output, a summary) is written after every step, and again on
# every exit path: a hung or crashed step, a missing pytest, Ctrl-C, or a SIGTERM from outside
# (a lease ending), which is passed to the step running and packs at once.
#
# Exit status: 0 when the GPU study finished (complete, or cut cleanly by its budget); 1 when it
# failed; 3 when it overran its step's limit (its records kept); 130 on SIGINT, 143 on SIGTERM.
# Never 124 or 137, which the device tool reads as its own time limit.
#
# Environment: GPU_CHECK_S (deadline, s), PYTHON (interpreter, default python3), PROFILE
# (study profile, default quick), MACHINE_START_S (the plan's figure for the machine's start).
set -uo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
archive=${1:-}
if [ $dry = 0 ] && [ -z "$archive" ]; then
    echo "usage: scripts/gpu_check.sh [--dry-run] ARCHIVE.tar.gz" >&2
    exit 2
fi
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
profile=${PROFILE:-quick}
total_s=${GPU_CHECK_S:-380}
machine_start_s=${MACHINE_START_S:-90}  # "a minute or more" to start a machine (the device tool's README)
case $total_s in '' | *[!0-9]*) echo "GPU_CHECK_S must be a whole number of seconds, got '$total_s'" >&2; exit 2 ;; esac

# Shares of the deadline, in percent. The packing reserve is kept back from every step.
share_preflight=4 share_gpu=58 share_tests=12 share_cpu=14 share_report=6
reserve=$(( total_s * 3 / 100 > 5 ? total_s * 3 / 100 : 5 ))
startup_margin=25  # a study's start-up (Python, JAX, CUDA) inside its limit, outside its budget
# the experiments the host's CPU study runs: the registry says (Experiment.in_host_check), importing no JAX
host_experiments() {  # host_experiments SECONDS
    timeout -k 2 "$1" "$py" -c 'import experiments; print(",".join(experiments.host_check()))'
}
gpu_tests="tests/test_gpu.py tests/test_precision.py tests/test_matmul.py"

start=$(date +%s)
deadline=$(( start + total_s ))
limit_for() {  # limit_for SHARE: seconds this step may take
    local share=$(( total_s * $1 / 100 ))
    local left=$(( deadline - $(date +%s) - reserve ))
    local lim=$(( share < left ? share : left ))
    echo $(( lim > 1 ? lim : 1 ))
}
budget_for() {  # the study's own budget inside its limit
    local b=$(( $1 - startup_margin ))
    echo $(( b > 5 ? b : 5 ))
}

if [ $dry = 1 ]; then
    gl=$(( total_s * share_gpu / 100 )); cl=$(( total_s * share_cpu / 100 ))
    echo "GPU check plan: deadline GPU_CHECK_S=${total_s} s, packing reserve ${reserve} s"
    echo "0 the machine's start (before the command, on the lease): estimated ${machine_start_s} s"
    echo "1 preflight (nvidia-smi, jax.devices): limit $(( total_s * share_preflight / 100 )) s, estimated 10 s"
    echo "2 GPU study (--profile $profile, --budget-s $(budget_for $gl), limit $gl s):"
    gpu_plan=$("$py" -m experiments.run --backend gpu --profile "$profile" --dry-run) || exit 1
    echo "$gpu_plan" | sed 's/^/    /'
    # the items pytest collects (parametrized cases each), at about a second each (a compile apiece, a lead)
    n_tests=$("$py" -m pytest --collect-only -q -p no:cacheprovider -m "not slow" $gpu_tests 2>/dev/null | grep -c '::')
    echo "3 GPU tests ($n_tests items of the fast tier in $gpu_tests, 20 s each at most): limit $(( total_s * share_tests / 100 )) s, estimated $n_tests s"
    echo "4 CPU study on the same host (--devices 8, --budget-s $(budget_for $cl), limit $cl s):"
    cpu_only=$(host_experiments 60) || { echo "cannot read the experiment registry with $py" >&2; exit 1; }
    cpu_plan=$("$py" -m experiments.run --backend cpu --profile "$profile" --devices 8 --only "$cpu_only" --dry-run) || exit 1
    echo "$cpu_plan" | sed 's/^/    /'
    echo "5 merged report: limit $(( total_s * share_report / 100 )) s, estimated 10 s"
    echo "6 pack the archive: estimated 3 s"
    "$py" - "$gpu_plan" "$cpu_plan" "$(budget_for $cl)" "$total_s" "$machine_start_s" "$n_tests" <<'EOF'
import re, sys
gpu, cpu, cpu_budget, deadline, start = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
tests = float(sys.argv[6] or 30)
def total(text):
    n, s = re.search(r"^total: (\d+) cases, estimated (\d+) s", text, re.M).groups()
    return int(n), float(s)
(gn, gs), (cn, cs) = total(gpu), total(cpu)
cs = min(cs, cpu_budget + 25)  # the CPU study is budgeted: it stops within its budget (plus start-up)
likely = 10 + gs + tests + cs + 10 + 3
# the whole call: the machine's start, then the command with every step at its limit (the deadline bounds
# them all, the last step's kill grace and the packing inside its reserve)
print(f"the command: estimated {likely:.0f} s, at most {deadline:.0f} s (every step at its limit)")
print(f"total: {gn + cn} cases, the whole call at most {start + deadline:.0f} s ({start:.0f} s machine start "
      f"+ {deadline:.0f} s command)")
EOF
    exit 0
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
root=reports/runs
gpu="gpu-$stamp"; cpu="cpu-host-$stamp"; merged="merged-$stamp"; logs="check-$stamp"
mkdir -p "$root/$logs"
summary="$root/$logs/summary.txt"
echo "GPU check $stamp: GPU_CHECK_S=$total_s profile=$profile python=$py" > "$summary"
gpu_rc=none  # until the GPU study has run

archive_now() {  # the folders so far, into the archive (written after every step and at the end)
    local dirs=()
    for d in "$gpu" "$cpu" "$merged" "$logs"; do [ -d "$root/$d" ] && dirs+=("$d"); done
    tar czf "$archive.tmp" -C "$root" "${dirs[@]}" 2>> "$summary"
    # the device tool returns files of at most 16 MiB: without the HTML reports (their figures
    # are also PNG files beside them) and attachments if the archive is larger
    if [ "$(stat -c %s "$archive.tmp" 2>/dev/null || echo 0)" -gt $(( 15 * 1024 * 1024 )) ]; then
        tar czf "$archive.tmp" -C "$root" --exclude='*.html' --exclude='attachments' "${dirs[@]}"
    fi
    mv -f "$archive.tmp" "$archive"
}

pack() {
    trap - EXIT INT TERM
    echo "finished after $(( $(date +%s) - start )) s; exit $check_rc (GPU study: exit $gpu_rc)" >> "$summary"
    archive_now
    ls -l "$archive"
    cat "$summary"
    exit "$check_rc"
}

child=""  # the step running, to pass a signal on to
stop() {  # stop SIGNAL STATUS: bash runs this at once (the steps run in the background and are waited on)
    trap '' INT TERM  # a second signal while stopping changes nothing
    echo "$1 received during ${current:-start-up}: the step is stopped and the archive packed" >> "$summary"
    if [ -n "$child" ]; then
        kill -"$1" "$child" 2>/dev/null  # timeout passes it to the step's command
        # timeout runs in a process group of its own: what is still there after its 5 s grace is killed
        # whole, so nothing of the step writes on after the archive is packed
        for _ in $(seq 14); do kill -0 "$child" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- -"$child" 2>/dev/null
        kill -KILL "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    check_rc=$2
    pack
}
check_rc=1  # until the GPU study says otherwise
trap pack EXIT
trap 'stop INT 130' INT
trap 'stop TERM 143' TERM

step() {  # step NAME SHARE COMMAND...: run bounded, console to its log and here; returns its exit code
    local name=$1 share=$2; shift 2
    local lim t0 rc
    lim=$(limit_for "$share"); t0=$(date +%s); current=$name
    echo "== $name (limit $lim s)"
    # in the background and waited on: a signal to this script is handled at once, not after the step
    timeout -s INT -k 5 "$lim" "$@" > >(tee "$root/$logs/$name.txt") 2>&1 &
    child=$!
    wait "$child"
    rc=$?
    child=""
    # overran: timeout's 124, or its 137 once the grace ran out; a 137 well inside the limit is a kill (OOM)
    overran=0
    if [ $rc = 124 ] || { [ $rc = 137 ] && [ $(( $(date +%s) - t0 )) -ge "$lim" ]; }; then overran=1; fi
    echo "$name: exit $rc after $(( $(date +%s) - t0 )) s (limit $lim s)" >> "$summary"
    archive_now
    return $rc
}

step preflight $share_preflight bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv && \"$py\" -c \"import jax; print('jax', jax.__version__, jax.devices())\""
[ $? = 0 ] || echo "preflight failed: nvidia-smi or JAX sees no GPU (the steps run anyway, and record why)" >> "$summary"
gl=$(limit_for $share_gpu)
step gpu-study $share_gpu "$py" -m experiments.run --backend gpu --profile "$profile" --out "$root/$gpu" \
    --budget-s "$(budget_for "$gl")" --no-report --no-progress
gpu_rc=$?
if [ $gpu_rc = 0 ]; then
    check_rc=0
elif [ $overran = 1 ]; then
    check_rc=3; echo "gpu-study overran its limit (timeout's $gpu_rc): its records are kept" >> "$summary"
else
    check_rc=1  # failed (a 137 inside the limit: killed from outside, an out-of-memory kill say)
fi
if [ -d "$root/$gpu" ]; then
    # the fast tier, each test bounded: one stuck test must not take the step's whole limit
    step gpu-tests $share_tests "$py" -m pytest -q --backend gpu -p no:cacheprovider -m "not slow" --timeout 20 $gpu_tests
fi
cpu_only=$(host_experiments 4) || cpu_only=devices  # a registry that cannot be read: the host's figures
cl=$(limit_for $share_cpu)
# With one GPU, splitting over several devices (C11, C17) is shown on 8 CPU host devices.
step cpu-study $share_cpu "$py" -m experiments.run --backend cpu --profile "$profile" --devices 8 \
    --only "$cpu_only" --out "$root/$cpu" --budget-s "$(budget_for "$cl")" --no-report --no-progress
runs=()
for d in "$gpu" "$cpu"; do [ -f "$root/$d/run.json" ] && runs+=("$root/$d"); done
if [ ${#runs[@]} -gt 0 ]; then
    step report $share_report "$py" -m experiments.report "${runs[@]}" --out "$root/$merged"
fi
