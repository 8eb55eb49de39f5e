#!/usr/bin/env bash
# `nsighttc fix` on programs it had not seen, on the GPU machine: each patch applied to a copy, run in rounds beside
# the launcher's variant of the same fix (source .device-carry/setup.sh first; P: ../shared/programs' copy).
#   bash benchmarks/gpu/gpu_fix.sh OUT [a|b|c]
# a: hf_bert.py (num_workers, TF32), lit_cifar.py (persistent_workers); b: llm_generate.py (static cache),
#    wrappers/varlen_infer.py (padding to a multiple of 64, written by hand); c: wrappers/grad_accum.py (workers
#    through its --workers option, bf16 autocast in its own loop, fused SGD), wrappers/vgg16.py (channels-last);
# d: wrappers/grad_accum.py --workers 8 (pin_memory at its DataLoader)
set -u
OUT=${1:?usage: gpu_fix.sh OUT [a|b]}; PART=${2:-a}
P=${P:-.device-carry/programs}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_lib.sh"
. "$(dirname "$0")/gpu_try_lib.sh"
CMD=fix; KEEP=$OUT; OUT=$W/fix; mkdir -p "$OUT"
case $PART in
  a) run_try hf_bert --budget 240 --variant workers=8 --variant tf32 "$P/hf_bert.py"
     run_try lit_cifar --budget 240 --variant persistent-workers "$P/lit_cifar.py";;
  b) run_try llm_generate --budget 180 --variant static-cache "$P/llm_generate.py"
     run_try varlen --budget 150 --full-run --metric '([\d.]+) requests/s' --variant pad-buckets \
       wrappers/varlen_infer.py;;
  c) run_try grad_accum --budget 200 --variant workers=8 --variant bf16-autocast --variant fused-optimizer \
       wrappers/grad_accum.py
     run_try vgg16 --budget 100 --variant channels-last wrappers/vgg16.py --batch 32 --iters 60;;
  d) run_try grad_accum_pin --budget 90 --variant pin-memory wrappers/grad_accum.py --workers 8;;
esac
