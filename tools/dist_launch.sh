#!/usr/bin/env bash
# Shared launcher of dist_train.sh / dist_test.sh: bash tools/dist_launch.sh SCRIPT NPROC [script args]
# runs tools/SCRIPT under torch.distributed.run with --launcher pytorch (gloo on CPU-only hosts).
# Multi-node: set NNODES, NODE_RANK and MASTER_ADDR on every node; PORT defaults to 29500.
# PYTHON selects the interpreter (default: python on PATH).
set -euo pipefail
SCRIPT=$1
NPROC=$2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
exec "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="${NNODES:-1}" \
    --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" \
    --nproc_per_node="$NPROC" \
    --master_port="${PORT:-29500}" \
    "$ROOT/tools/$SCRIPT" "${@:3}" --launcher pytorch
