#!/usr/bin/env bash
# The study's GPU check, one part per call of a lent GPU machine (JAX with its CUDA plugin, Flax, Optax,
# numpy, matplotlib and torch already there; no network):
#
#   PYTHONPATH=. bash scripts/gpu_check.sh --part 1 "$OUT/gpu-check-1.tar.gz"   # preflight + GPU study
#   PYTHONPATH=. bash scripts/gpu_check.sh --part 2 "$OUT/gpu-check-2.tar.gz"   # memory_fit, op_mix,
#                                                          # transformer into part 1's run; the GPU tests
#   bash scripts/gpu_check.sh --dry-run --part 1           # the part's plan on an H100, nothing run
#
# Each part plans to at most 240 s (GPU_CHECK_S to change it) and keeps its archive fresh while it runs, so a
# call cut at its limit still brings home what was measured. The parts, the monitor, the watchdog and the exit
# codes: python -m experiments.gpu_check --help (experiments/gpu_check.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m experiments.gpu_check "$@"
