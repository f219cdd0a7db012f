#!/usr/bin/env bash
# Distributed training: bash tools/dist_train.sh CONFIG GPUS [train.py args]
# GPUS is the number of processes on this node (on a CPU-only host they train with gloo).
# Environment: see tools/dist_launch.sh (NNODES, NODE_RANK, MASTER_ADDR, PORT, PYTHON).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: bash $0 CONFIG GPUS [train.py args]" >&2
  exit 2
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_launch.sh" train.py "$2" "$1" "${@:3}"
