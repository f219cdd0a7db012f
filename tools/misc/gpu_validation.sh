#!/usr/bin/env bash
# The GPU checks of issue 32 in one run, for a lent GPU host (torch + CUDA + Triton, no network, no OpenMMLab). From
# the repository root, with the kit made here (`bash ../shared/gpu-kit/make_kit.sh .gpu_kit`, git-ignored) carried
# along with the working tree:
#
#     bash tools/misc/gpu_validation.sh          # logs under $OUT (the device tool's folder) or ./gpu_logs
#
# Each step writes its own log and one line to summary.txt; a failing step does not stop the others:
#   kit             install the kit into /tmp/site and verify mmcv's CUDA ops (skipped without .gpu_kit/)
#   cuda_tests      tests/test_cuda.py (CUDA vs CPU of every backbone and the generation network, bf16, SDPA
#                   kernels) and the selective-scan tests, whose Triton kernels are compiled here
#   scan            the selective scan on the GPU: Triton against the chunked PyTorch scan, 197 and 4097 tokens
#   backbones       bf16 training steps at 224 px, batch 64, beside stock mmpretrain ViT-B
# Without a GPU every step fails or skips quickly (a check of the script itself).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
LOGS="${OUT:-gpu_logs}"
mkdir -p "$LOGS"

step() {
  local name=$1
  shift
  local start=$SECONDS
  "$@" > "$LOGS/$name.log" 2>&1
  local status=$?
  echo "$name: exit $status, $((SECONDS - start)) s" | tee -a "$LOGS/summary.txt"
}

{ nvidia-smi; python -c 'import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)'; } \
  > "$LOGS/device.txt" 2>&1
if [ -d .gpu_kit ]; then
  step kit bash -c 'bash .gpu_kit/install_on_device.sh && bash .gpu_kit/install_on_device.sh --verify'
  # shellcheck disable=SC1091
  [ -f /tmp/site/env.sh ] && source /tmp/site/env.sh
fi
step cuda_tests timeout 600 python -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py \
  tests/test_models/test_backbones/test_defocus/test_scan.py
step scan timeout 600 python tools/analysis_tools/benchmark_scan.py --device cuda --impls triton chunked \
  --shapes 1x197x1536 64x197x1536 1x4097x1536 8x4097x1536 --repeats 10
step backbones timeout 900 python tools/analysis_tools/benchmark.py \
  mmpretrain::vision_transformer/vit-base-p16_32xb128-mae_in1k.py configs/illama/illama-base-p16_32xb128_in1k.py \
  configs/vision_llama/vision-llama-base-p16_8xb128-coslr-100e_in1k.py configs/defocus/defocus-mamba-base_8xb64-300e_in1k.py \
  configs/cait/cait-s24_8xb128-400e_in1k.py --device cuda --amp --train --backbone-only --sizes 224 --batch 64 \
  --repeats 5
cat "$LOGS/summary.txt"
