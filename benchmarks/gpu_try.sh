#!/usr/bin/env bash
# `nsighttc try` on the GPU machine: the material's experiments as variants of the wrappers (issue 12).
# Usage: benchmarks/gpu_try.sh OUT [main|resnet]... (default: main).  Writes OUT/try.tar.gz (one run directory per experiment, torch traces
# left out) and OUT/summary.txt (every comparison's table).
set -u
OUT=${1:-${OUT:-/tmp/try-out}}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
} > "$OUT/summary.txt" 2>&1
run() {  # NAME, then nsighttc try's arguments
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  python3 -m nsighttc try --out "$OUT/runs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local d; d=$(ls -d "$OUT/runs"/*-try-* 2>/dev/null | tail -1)
  echo "## $name (rc=$rc, $(python3 -c "import time; print(round(time.time() - $t0))") s): nsighttc try $*" >> "$OUT/summary.txt"
  if [ -n "$d" ]; then
    mv "$d" "$OUT/$name"; rmdir "$OUT/runs" 2>/dev/null
    mv "$OUT/$name.log" "$OUT/$name/try.log"
    find "$OUT/$name" -name 'torch_trace.json' -delete
    sed -n '/^| variant/,/^$/p' "$OUT/$name/try.md" >> "$OUT/summary.txt"
    grep -A9 "^Chosen by" "$OUT/$name/try.md" >> "$OUT/summary.txt"
  else
    tail -5 "$OUT/$name.log" >> "$OUT/summary.txt"
  fi
}
SETS=${*:2}
main_group() {
run mnist_large_fp32 --metric 'accuracy ([\d.]+)' --variant tf32 --variant bf16-autocast \
  wrappers/mnist_mlp.py --net large --dtype fp32
run dataloader_w0 --metric '([\d.]+) it/s' --variant workers=8 --variant pin-memory --variant workers=8+pin-memory \
  wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp --steps 30
run resnet50_fp32 --metric '([\d.]+) images/s' --variant bf16-autocast wrappers/resnet_amp.py --precision fp32 --steps 20
run mnist_large_fp32_auto --metric 'accuracy ([\d.]+)' --variant auto wrappers/mnist_mlp.py --net large --dtype fp32
run dataloader_w0_auto --metric '([\d.]+) it/s' --variant auto wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp --steps 30
}
resnet_group() {  # fp16 autocast is what the explicit AMP run did; bf16 with and without channels_last
run resnet50_fp32_autocasts --metric '([\d.]+) images/s' --variant fp16-autocast --variant bf16-autocast \
  wrappers/resnet_amp.py --precision fp32 --steps 20
run resnet50_fp32_channels_last --metric '([\d.]+) images/s' --variant bf16-autocast --variant fp16-autocast \
  wrappers/resnet_amp.py --precision fp32 --channels-last --steps 20
}
for g in ${SETS:-main}; do "${g}_group"; done
tar czf "$OUT/try.tar.gz" -C "$OUT" $(cd "$OUT" && ls -d */ | tr -d /)
cat "$OUT/summary.txt"
