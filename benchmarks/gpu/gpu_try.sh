#!/usr/bin/env bash
# `nsighttc try` on the GPU machine: the material's experiments as variants of the wrappers (issue 12).
# Usage: benchmarks/gpu/gpu_try.sh OUT [main|resnet]... (default: main).  Writes OUT/try.tar.gz (one run directory per experiment, torch traces
# left out) and OUT/summary.txt (every comparison's table).
set -u
OUT=${1:-${OUT:-/tmp/try-out}}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
} > "$OUT/summary.txt" 2>&1
S=$OUT/summary.txt
# shellcheck source=benchmarks/gpu/gpu_try_lib.sh
source "$(dirname "$0")/gpu_try_lib.sh"
SETS=${*:2}
main_group() {
run_try mnist_large_fp32 --metric 'accuracy ([\d.]+)' --variant tf32 --variant bf16-autocast \
  wrappers/mnist_mlp.py --net large --dtype fp32
run_try dataloader_w0 --metric '([\d.]+) it/s' --variant workers=8 --variant pin-memory --variant workers=8+pin-memory \
  wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp --steps 30
run_try resnet50_fp32 --metric '([\d.]+) images/s' --variant bf16-autocast wrappers/resnet_amp.py --precision fp32 --steps 20
run_try mnist_large_fp32_auto --metric 'accuracy ([\d.]+)' --variant auto wrappers/mnist_mlp.py --net large --dtype fp32
run_try dataloader_w0_auto --metric '([\d.]+) it/s' --variant auto wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp --steps 30
}
resnet_group() {  # fp16 autocast is what the explicit AMP run did; bf16 with and without channels_last
run_try resnet50_fp32_autocasts --metric '([\d.]+) images/s' --variant fp16-autocast --variant bf16-autocast \
  wrappers/resnet_amp.py --precision fp32 --steps 20
run_try resnet50_fp32_channels_last --metric '([\d.]+) images/s' --variant bf16-autocast --variant fp16-autocast \
  wrappers/resnet_amp.py --precision fp32 --channels-last --steps 20
}
for g in ${SETS:-main}; do "${g}_group"; done
tar czf "$OUT/try.tar.gz" -C "$OUT" $(cd "$OUT" && ls -d */ | tr -d /)
cat "$OUT/summary.txt"
