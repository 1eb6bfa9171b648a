#!/usr/bin/env bash
# The study's GPU check, one part per call of a lent GPU machine (JAX with its CUDA plugin, Flax, Optax,
# numpy, matplotlib and torch already there; no network):
#
#   bash scripts/gpu_check.sh --dry-run --part 1 --slower 1.3              # the part's plan on an H100, nothing run
#   PYTHONPATH=. bash scripts/gpu_check.sh --part 1 "$OUT/gpu-check-1.tar.gz"   # preflight + the study's rates
#   PYTHONPATH=. bash scripts/gpu_check.sh --part 2 "$OUT/gpu-check-2.tar.gz"   # ... parts 2-4, then 5: GPU tests
#
# Each part plans to at most 180 s and keeps its archive fresh while it runs, so a call cut at its limit still
# brings home what was measured; a machine that is lost brings home nothing, so never one long call there.
# The parts, the tries, the monitor, the watchdog and the exit codes: python -m experiments.gpu_check --help
# (experiments/gpu_check.py, docs/guide.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="${PYTHONPATH:-.}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m experiments.gpu_check "$@"
