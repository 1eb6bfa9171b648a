#!/usr/bin/env bash
# The study's GPU check in one go, for a single-GPU machine with JAX (CUDA plugin), Flax,
# Optax, numpy, matplotlib and torch already installed, and no network:
#
#   PYTHONPATH=. bash scripts/gpu_check.sh "$OUT/gpu-check.tar.gz"
#
# It runs the quick study on the GPU, the GPU tests, the same study on the host's CPU
# (so the merged report has both sides from one machine), merges the two into one
# report and packs the three folders into one archive. Each step is bounded so the
# archive is written even if a step runs long (a killed study keeps every record it
# finished; the merged report is rebuilt from them); the whole stays under 8 minutes.
set -uo pipefail
archive=${1:?usage: scripts/gpu_check.sh ARCHIVE.tar.gz}
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
root=reports/runs
gpu="gpu-$stamp"; cpu="cpu-host-$stamp"; merged="merged-$stamp"
mkdir -p "$root"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv || true
"$py" -c "import jax; print('jax', jax.__version__, jax.devices())"

timeout 300 "$py" -m experiments.run --backend gpu --profile "${PROFILE:-quick}" --out "$root/$gpu" --no-progress
echo "gpu study exit: $?"
timeout 40 "$py" -m pytest -q --backend gpu -p no:cacheprovider tests/test_gpu.py tests/test_matmul.py \
    > "$root/$gpu/pytest-gpu.txt" 2>&1
echo "gpu tests exit: $?"; tail -3 "$root/$gpu/pytest-gpu.txt"
# With one GPU, splitting over several devices (C11, C17) is shown on 8 CPU host devices.
timeout 130 "$py" -m experiments.run --backend cpu --profile quick --devices 8 \
    --only matmul,precision,training,inference,op_mix,tensor_parallel,data_parallel --out "$root/$cpu" --no-progress
echo "cpu study exit: $?"
"$py" -m experiments.report "$root/$gpu" "$root/$cpu" --out "$root/$merged"
tar czf "$archive" -C "$root" "$gpu" "$cpu" "$merged"
ls -l "$archive"
grep -m3 "Takeaway" "$root/$merged/report.md" || true
