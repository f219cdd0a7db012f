#!/usr/bin/env bash
# Quick start, part 2: set up (if needed) and run the test suite (CPU). Extra arguments go to pytest,
# e.g. `bash tools/run_tests.sh -m "not e2e"` for the fast layer/unit tests only. Lints (ruff) first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup_env.sh
"$ROOT/.venv/bin/ruff" check "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest tests -ra --durations=15 "$@"
