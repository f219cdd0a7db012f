#!/usr/bin/env bash
# Distributed training: bash tools/dist_train.sh CONFIG GPUS [train.py args]
# GPUS is the number of processes on this node (on a CPU-only host they train with gloo).
# Multi-node: set NNODES, NODE_RANK and MASTER_ADDR on every node; PORT defaults to 29500.
# PYTHON selects the interpreter (default: python on PATH).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: bash $0 CONFIG GPUS [train.py args]" >&2
  exit 2
fi
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
"${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$ROOT/tools/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
