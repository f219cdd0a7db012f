#!/usr/bin/env bash
# The CUDA checks and GPU benchmarks in one run of about 8 minutes, for a GPU host with torch + CUDA + Triton but no
# network and no OpenMMLab. From the repository root, with the kit made on a machine with a package index
# (`bash ../shared/gpu-kit/make_kit.sh .gpu_kit`, git-ignored) beside the code:
#
#     bash tools/misc/gpu_validation.sh          # logs under $OUT (if set) or ./gpu_logs
#
# Two phases, so that nothing else runs on the GPU while a benchmark times it:
#   A (in parallel)  cuda_tests: tests/test_cuda.py (CUDA against CPU for every backbone and the generation network,
#                    bf16 autocast, SDPA kernel selection) and the selective-scan tests with compiled Triton kernels;
#                    twins: short bf16 runs of the tiny twins (classification, De-focus Mamba, segmentation,
#                    detection, MAE, the autoencoder and DiT-LLaMA) through tools/train.py, each checked for a
#                    falling loss
#   B (in turn)      scan: Triton against the chunked PyTorch scan at 197 and 4097 tokens;
#                    bench: bf16 training steps of every family beside stock mmpretrain ViT-B / DeiT-S / Swin-T /
#                    Twins-SVT-B at 224 px, the plain models at 1024 px, iLLaMA-T inference at batch 1024 (the
#                    paper's throughput setting), DiT-LLaMA beside DiT
# Eight files at most, so that a remote runner returns them all: each phase appends to one log (the twins one per
# lane), summary.txt has one line per step, twins.tgz the twins' scalar logs. Without a GPU every step fails or skips quickly (a check of the script).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
LOGS="${OUT:-gpu_logs}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"

step() {  # step NAME LOG TIMEOUT COMMAND...: run with a time limit, append to LOG, one line to the summary
  local name=$1 log=$2 limit=$3
  shift 3
  local start=$SECONDS
  echo "===== $name: $*" >> "$log"
  timeout -k 10 "$limit" "$@" >> "$log" 2>&1
  local status=$?
  echo "$name: exit $status, $((SECONDS - start)) s" >> "$SUMMARY"
}

{ nvidia-smi; python -c 'import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)'; } \
  > "$LOGS/setup.log" 2>&1
# mmpretrain 1.2's multimodal models import when transformers >= 4.28 is installed, and fail to with transformers 5
if python -c 'import sys, transformers; sys.exit(int(transformers.__version__.split(".")[0]) < 5)' 2>/dev/null; then
  python -m pip uninstall -y -q transformers >> "$LOGS/setup.log" 2>&1
fi
if [ -d .gpu_kit ] && [ ! -f /tmp/site/env.sh ]; then
  step kit "$LOGS/setup.log" 120 bash -c 'bash .gpu_kit/install_on_device.sh && bash .gpu_kit/install_on_device.sh --verify'
  # shellcheck disable=SC1091
  fi
# shellcheck disable=SC1091
[ -f /tmp/site/env.sh ] && source /tmp/site/env.sh
export PYTHONUNBUFFERED=1

# The mean logged loss of a work directory's last fifth of steps below that of its first fifth.
LOSS_FALLS='
import glob, json, sys
losses = [json.loads(line)["loss"] for path in glob.glob(f"{sys.argv[1]}/*/vis_data/scalars.json")
          for line in open(path) if "\"loss\"" in line]
fifth = max(1, len(losses) // 5)
first, last = sum(losses[:fifth]) / fifth, sum(losses[-fifth:]) / fifth
print(f"{sys.argv[1]}: {len(losses)} logged losses, first fifth {first:.4f}, last fifth {last:.4f}")
sys.exit(0 if last < first else 1)
'

twin() {  # twin LANE NAME CONFIG OPTIONS...: a short bf16 run of a tiny twin into twins_LANE.log, then its loss check
  local log="$LOGS/twins_$1.log" name=$2 config=$3
  shift 3
  step "twin_$name" "$log" 60 python tools/train.py "$config" --amp --work-dir "work_dirs/gpu_$name" \
    --cfg-options optim_wrapper.dtype=bfloat16 default_hooks.logger.interval=5 "$@"
  step "twin_${name}_loss_falls" "$log" 30 python -c "$LOSS_FALLS" "work_dirs/gpu_$name"
}

twins() {  # three lanes in parallel: correctness only, nothing is timed
  step shapes_data "$LOGS/twins_a.log" 120 python tools/dataset_converters/make_shapes_datasets.py
  {
    twin a illama configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py train_cfg.max_epochs=4 train_cfg.val_interval=4
    twin a defocus_mamba configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py train_cfg.max_epochs=4 \
      train_cfg.val_interval=4
    twin a mae configs/vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py train_cfg.max_epochs=4
  } &
  {
    twin b upernet configs/pyramid_vision_llama/upernet_pyramid-vision-llama-nano_1xb8-800i_shapes-64x64.py \
      train_cfg.max_iters=200 train_cfg.val_interval=200 default_hooks.checkpoint.interval=200
    twin b mask_rcnn configs/pyramid_vision_llama/mask-rcnn_pyramid-vision-llama-nano_fpn_1xb4-36e_shapes-128px.py \
      train_cfg.max_epochs=2 train_cfg.val_interval=2
  } &
  {
    twin c autoencoder configs/dit_llama/tiny-ae-nano-f4_1xb32-400i_shapes-32px.py
    twin c dit_llama configs/dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py train_cfg.max_iters=400 \
      default_hooks.checkpoint.interval=400 model.autoencoder.checkpoint=work_dirs/gpu_autoencoder/iter_400.pth
  } &
  wait
}

# Phase A: correctness and training, in parallel (PHASES=B skips it)
if [[ "${PHASES:-AB}" == *A* ]]; then
step cuda_tests "$LOGS/cuda_tests.log" 150 python -m pytest -q -p no:cacheprovider -rs -n 4 tests/test_cuda.py \
  tests/test_models/test_defocus/test_scan.py &
twins
wait
tar czf "$LOGS/twins.tgz" work_dirs/gpu_*/*/vis_data/scalars.json work_dirs/gpu_*/*/*.log 2>/dev/null
fi

# Phase B: timings, one at a time
[[ "${PHASES:-AB}" == *B* ]] || exit 0
BENCH=(python tools/analysis_tools/benchmark.py)
BENCH_FLAGS=(--device cuda --amp --backbone-only --repeats 10)  # after the configs: --sizes and --batch take lists
step train_224 "$LOGS/bench.log" 120 "${BENCH[@]}" \
  mmpretrain::vision_transformer/vit-base-p16_32xb128-mae_in1k.py mmpretrain::deit/deit-small_4xb256_in1k.py \
  mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py mmpretrain::twins/twins-svt-base_8xb128_in1k.py \
  configs/illama/illama-base-p16_32xb128_in1k.py configs/vision_llama/vision-llama-base-p16_8xb128-coslr-100e_in1k.py \
  configs/pyramid_vision_llama/pyramid-vision-llama-base_8xb128-300e_in1k.py \
  configs/defocus/defocus-vit-base_8xb64-300e_in1k.py configs/defocus/defocus-retnet-base_8xb64-300e_in1k.py \
  configs/defocus/defocus-mamba-base_8xb64-300e_in1k.py configs/cait/cait-s24_8xb128-400e_in1k.py \
  "${BENCH_FLAGS[@]}" --train --sizes 224 --batch 64
step train_1024 "$LOGS/bench.log" 45 "${BENCH[@]}" mmpretrain::vision_transformer/vit-base-p16_32xb128-mae_in1k.py \
  configs/illama/illama-base-p16_32xb128_in1k.py configs/vision_llama/vision-llama-base-p16_8xb128-coslr-100e_in1k.py \
  "${BENCH_FLAGS[@]}" --train --sizes 1024 --batch 8
step infer_illama_tiny "$LOGS/bench.log" 30 "${BENCH[@]}" configs/illama/illama-tiny-p16_32xb128_in1k.py \
  mmpretrain::deit/deit-tiny_4xb256_in1k.py "${BENCH_FLAGS[@]}" --sizes 224 --batch 1024
step train_dit "$LOGS/bench.log" 50 "${BENCH[@]}" configs/dit_llama/dit-base-p4_8xb32-400k_in1k-256px.py \
  configs/dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py configs/dit_llama/dit-xlarge-p2_8xb32-2400k_in1k-256px.py \
  configs/dit_llama/dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py "${BENCH_FLAGS[@]}" --train --sizes 32 --batch 32
step scan "$LOGS/bench.log" 60 python tools/analysis_tools/benchmark_scan.py --device cuda --impls triton chunked \
  --shapes 1x197x1536 1x4097x1536 --repeats 10
cat "$SUMMARY"
