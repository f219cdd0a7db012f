#!/usr/bin/env bash
# Distributed testing: bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py args]
# GPUS is the number of processes on this node (on a CPU-only host they run with gloo).
# Environment: see tools/dist_launch.sh (NNODES, NODE_RANK, MASTER_ADDR, PORT, PYTHON).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: bash $0 CONFIG CHECKPOINT GPUS [test.py args]" >&2
  exit 2
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_launch.sh" test.py "$3" "$1" "$2" "${@:4}"
