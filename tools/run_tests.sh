#!/usr/bin/env bash
# Quick start, part 2: set up (if needed) and run the test suite (CPU). Extra arguments go to pytest,
# e.g. `bash tools/run_tests.sh -m "not e2e"` for the fast layer/unit tests only. Lints (ruff) first.
# Two pytest-xdist workers with one intra-op thread each (MMCAUSAL_TEST_WORKERS to change; `-n 0` runs serially):
# on 2 cores that keeps both busy while a tiny twin trains in one worker (its main process computes on one core).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup_env.sh
"$ROOT/.venv/bin/ruff" check "$ROOT"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$ROOT/.venv/bin/python" -m pytest tests -ra --durations=15 -n "${MMCAUSAL_TEST_WORKERS:-2}" --dist loadgroup "$@"
