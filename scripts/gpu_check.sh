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
# (default 420), from which each step's limit is computed; the studies run with a time budget
# inside their limit (key cases first; a cut run says so), and a step that overruns is
# interrupted (SIGINT, then SIGKILL), keeping every record it wrote. On every exit path (a
# hung or crashed step, a missing pytest, Ctrl-C) a trap packs the archive: the result
# folders, each step's console output and a summary. Exit status: the GPU study's.
#
# Environment: GPU_CHECK_S (deadline, s), PYTHON (interpreter, default python3), PROFILE
# (study profile, default quick).
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
total_s=${GPU_CHECK_S:-420}
case $total_s in '' | *[!0-9]*) echo "GPU_CHECK_S must be a whole number of seconds, got '$total_s'" >&2; exit 2 ;; esac

# Shares of the deadline, in percent. The packing reserve is kept back from every step.
share_preflight=5 share_gpu=58 share_tests=10 share_cpu=15 share_report=6
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
    echo "1 preflight (nvidia-smi, jax.devices): limit $(( total_s * share_preflight / 100 )) s, estimated 10 s"
    echo "2 GPU study (--profile $profile, --budget-s $(budget_for $gl), limit $gl s):"
    gpu_plan=$("$py" -m experiments.run --backend gpu --profile "$profile" --dry-run) || exit 1
    echo "$gpu_plan" | sed 's/^/    /'
    echo "3 GPU tests ($(cat $gpu_tests | grep -c '^def test_') tests in $gpu_tests): limit $(( total_s * share_tests / 100 )) s, estimated 30 s"
    echo "4 CPU study on the same host (--devices 8, --budget-s $(budget_for $cl), limit $cl s):"
    cpu_only=$(host_experiments 60) || { echo "cannot read the experiment registry with $py" >&2; exit 1; }
    cpu_plan=$("$py" -m experiments.run --backend cpu --profile "$profile" --devices 8 --only "$cpu_only" --dry-run) || exit 1
    echo "$cpu_plan" | sed 's/^/    /'
    echo "5 merged report: limit $(( total_s * share_report / 100 )) s, estimated 10 s"
    echo "6 pack the archive: estimated 3 s"
    "$py" - "$gpu_plan" "$cpu_plan" "$(budget_for $cl)" <<'EOF'
import re, sys
gpu, cpu, cpu_budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
def total(text):
    n, s = re.search(r"^total: (\d+) cases, estimated (\d+) s", text, re.M).groups()
    return int(n), float(s)
(gn, gs), (cn, cs) = total(gpu), total(cpu)
cs = min(cs, cpu_budget + 25)  # the CPU study is budgeted: it stops within its budget (plus start-up)
print(f"total: {gn + cn} cases, estimated {10 + gs + 30 + cs + 10 + 3:.0f} s")
EOF
    exit 0
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
root=reports/runs
gpu="gpu-$stamp"; cpu="cpu-host-$stamp"; merged="merged-$stamp"; logs="check-$stamp"
mkdir -p "$root/$logs"
summary="$root/$logs/summary.txt"
echo "GPU check $stamp: GPU_CHECK_S=$total_s profile=$profile python=$py" > "$summary"
gpu_rc=1  # until the GPU study says otherwise

pack() {
    trap - EXIT INT TERM
    echo "finished after $(( $(date +%s) - start )) s; GPU study exit $gpu_rc" >> "$summary"
    local dirs=()
    for d in "$gpu" "$cpu" "$merged" "$logs"; do [ -d "$root/$d" ] && dirs+=("$d"); done
    tar czf "$archive" -C "$root" "${dirs[@]}" 2>> "$summary"
    # the device tool returns files of at most 16 MiB: without the HTML reports (their figures
    # are also PNG files beside them) and attachments if the archive is larger
    if [ "$(stat -c %s "$archive" 2>/dev/null || echo 0)" -gt $(( 15 * 1024 * 1024 )) ]; then
        tar czf "$archive" -C "$root" --exclude='*.html' --exclude='attachments' "${dirs[@]}"
    fi
    ls -l "$archive"
    cat "$summary"
    exit "$gpu_rc"
}
trap pack EXIT
trap 'echo "interrupted" >> "$summary"; exit 130' INT TERM

step() {  # step NAME SHARE COMMAND...: run bounded, console to its log and here; returns its exit code
    local name=$1 share=$2; shift 2
    local lim t0 rc
    lim=$(limit_for "$share"); t0=$(date +%s)
    echo "== $name (limit $lim s)"
    timeout -s INT -k 5 "$lim" "$@" > >(tee "$root/$logs/$name.txt") 2>&1
    rc=$?
    echo "$name: exit $rc after $(( $(date +%s) - t0 )) s (limit $lim s)" >> "$summary"
    return $rc
}

step preflight $share_preflight bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv; \"$py\" -c \"import jax; print('jax', jax.__version__, jax.devices())\""
gl=$(limit_for $share_gpu)
step gpu-study $share_gpu "$py" -m experiments.run --backend gpu --profile "$profile" --out "$root/$gpu" \
    --budget-s "$(budget_for "$gl")" --no-report --no-progress
gpu_rc=$?
if [ -d "$root/$gpu" ]; then
    step gpu-tests $share_tests "$py" -m pytest -q --backend gpu -p no:cacheprovider $gpu_tests
fi
cpu_only=$(host_experiments "$(limit_for 3)") || cpu_only=devices  # a registry that cannot be read: the host's figures
cl=$(limit_for $share_cpu)
# With one GPU, splitting over several devices (C11, C17) is shown on 8 CPU host devices.
step cpu-study $share_cpu "$py" -m experiments.run --backend cpu --profile "$profile" --devices 8 \
    --only "$cpu_only" --out "$root/$cpu" --budget-s "$(budget_for "$cl")" --no-report --no-progress
runs=()
for d in "$gpu" "$cpu"; do [ -f "$root/$d/run.json" ] && runs+=("$root/$d"); done
if [ ${#runs[@]} -gt 0 ]; then
    step report $share_report "$py" -m experiments.report "${runs[@]}" --out "$root/$merged"
fi
