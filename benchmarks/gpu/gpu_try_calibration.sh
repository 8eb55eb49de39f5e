#!/usr/bin/env bash
# Issue 30's calibration on the GPU machine: `nsighttc try --variant auto --repeat 2` on the wrappers with a fix to
# make (plain runs, predicted against measured), and the same changes made by hand (the wrappers' own flags, plain
# `python3` runs, their own printed metric), alternating baseline and change.
# Usage: benchmarks/gpu/gpu_try_calibration.sh OUT GROUP...  (GROUP: try1 try2 hand1 hand2, or the session's calls:
# call2 call3; the first call was try1 hand1, cut at 570 s in hand1)   Writes OUT/summary.txt and OUT/<group>.tgz.
set -u
OUT=${1:-${OUT:-/tmp/try-cal}}
mkdir -p "$OUT"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} >> "$S" 2>&1

MNIST="wrappers/mnist_mlp.py --net large --dtype fp32 --epochs 6"
LOADER="wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp --steps 40"
RESNET="wrappers/resnet_amp.py --precision fp32 --steps 40"
TRAINER="wrappers/trainer_finetune.py"
MULTI="wrappers/multi_phase.py"

# shellcheck source=benchmarks/gpu/gpu_try_lib.sh
source "$(dirname "$0")/gpu_try_lib.sh"

hand() {  # NAME ROUNDS PATTERN, then "label|args" pairs: each wrapper run plain, alternating, its metric lines kept
  local name=$1 rounds=$2 pattern=$3; shift 3
  for r in $(seq 1 "$rounds"); do
    for spec in "$@"; do
      local label=${spec%%|*} args=${spec#*|}
      local t0; t0=$(date +%s.%N)
      # shellcheck disable=SC2086
      python3 $args > "$OUT/hand_${name}_${label}_$r.log" 2>&1
      echo "hand $name $label round $r: rc=$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$t0") s | $(grep -E "$pattern" "$OUT/hand_${name}_${label}_$r.log" | tail -6 | tr '\n' ' ')" >> "$S"
    done
  done
}

call5_group() {  # second session: the ResNet's bf16 autocast made by hand (the wrapper's --precision bf16)
  hand resnet 3 'images/s' "base|$RESNET" "bf16|${RESNET/--precision fp32/--precision bf16}"
}

call2_group() {
  run_try resnet --repeat 2 --variant auto $RESNET
  run_try trainer --repeat 2 --workers 8 --variant auto $TRAINER
  hand resnet 2 'images/s' "base|$RESNET" "tf32|$RESNET --tf32" "amp|${RESNET/--precision fp32/--precision amp}"
  hand trainer 1 'samples/s|steady' "base|$TRAINER" "tf32|$TRAINER --tf32" "workers8|$TRAINER --workers 8" \
    "bf16|$TRAINER --precision bf16"
}
call3_group() {
  hand trainer 1 'samples/s|steady' "base|$TRAINER" "tf32|$TRAINER --tf32" "workers8|$TRAINER --workers 8" \
    "bf16|$TRAINER --precision bf16"
  hand loader 2 'it/s' "base|$LOADER" "workers8|${LOADER/--workers 0/--workers 8}"
  run_try multi --repeat 2 --variant auto $MULTI
  hand multi 2 'steps/s' "base|$MULTI" "tf32|$MULTI --tf32"
}
try1_group() {
  run_try mnist --repeat 2 --variant auto $MNIST
  run_try loader --repeat 2 --workers 8 --variant auto $LOADER
  run_try resnet --repeat 2 --variant auto $RESNET
}
try2_group() {
  run_try trainer --repeat 2 --workers 8 --variant auto $TRAINER
  run_try multi --repeat 2 --variant auto $MULTI
}
hand1_group() {
  hand mnist 2 's/epoch' "base|$MNIST" "tf32|$MNIST --tf32"
  hand loader 2 'it/s' "base|$LOADER" "workers8|${LOADER/--workers 0/--workers 8}"
  hand resnet 2 'images/s' "base|$RESNET" "tf32|$RESNET --tf32" "amp|${RESNET/--precision fp32/--precision amp}"
}
hand2_group() {
  hand trainer 2 'samples/s|steady' "base|$TRAINER" "tf32|$TRAINER --tf32" "workers8|$TRAINER --workers 8" \
    "bf16|$TRAINER --precision bf16"
  hand multi 2 'steps/s' "base|$MULTI" "tf32|$MULTI --tf32"
}
for g in ${*:2}; do "${g}_group"; done
(cd "$OUT" && tar czf "$OUT/calibration.tgz" --exclude='*.tgz' $(ls -d */ 2>/dev/null | tr -d /) hand_*.log 2>/dev/null)
cat "$S"
