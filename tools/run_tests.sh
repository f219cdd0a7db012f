#!/usr/bin/env bash
# Quick start, part 2: set up (if needed) and run the test suite (CPU). Extra arguments go to pytest. Lints (ruff) first.
# `--fast` (the same as `-m "not e2e"`) runs the fast tier: no end-to-end runs and no test over ~5 s, about 3 min on
# 2 cores instead of the whole suite's ~24 (README, docs/development.md "Test commands").
# Two pytest-xdist workers with one intra-op thread each (MMCAUSAL_TEST_WORKERS to change; `-n 0` runs serially):
# on 2 cores that keeps both busy while a tiny twin trains in one worker (its main process computes on one core).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup_env.sh
"$ROOT/.venv/bin/ruff" check "$ROOT"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
args=()
for arg in "$@"; do
  if [[ $arg == '--fast' ]]; then args+=(-m "not e2e"); else args+=("$arg"); fi
done
exec "$ROOT/.venv/bin/python" -m pytest tests -ra --durations=15 -n "${MMCAUSAL_TEST_WORKERS:-2}" --dist loadgroup \
  ${args[@]+"${args[@]}"}
