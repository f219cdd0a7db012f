#!/usr/bin/env bash
# Quick start, part 1: set up (if needed), generate the embedded shapes data, train the demo config on
# CPU and print its validation metric. Idempotent; safe to re-run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup_env.sh
PY="$ROOT/.venv/bin/python"
CONFIG="${1:-configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py}"
WORK_DIR="work_dirs/demo/$(basename "$CONFIG" .py)"
"$PY" tools/dataset_converters/make_shapes_datasets.py --out data/shapes
"$PY" tools/train.py "$CONFIG" --work-dir "$WORK_DIR"
"$PY" tools/misc/print_metrics.py "$WORK_DIR"
