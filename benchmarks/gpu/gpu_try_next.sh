#!/usr/bin/env bash
# `nsighttc try` on programs it had not seen (issue: try that survives real programs and finds the next bottleneck),
# on the GPU machine. Source .device-carry/setup.sh first; P is the folder of ../shared/programs (default
# .device-carry/programs, the copy the device tool carries).
#   bash benchmarks/gpu/gpu_try_next.sh OUT repro|verify-a|verify-b
# repro ran the three cases before the change (one round each); verify-a/-b run them after it (rounds until each
# answer is clear), with plain runs of the changes made by hand beside them:
#   vit_eval      try --variant cuda-graphs on the ViT evaluation loop (DataLoader pin-memory thread, 4 workers)
#   accum         try (auto) on wrappers/grad_accum.py: fp32, num_workers=0, 4 micro-batches per optimizer step;
#                 plain truth (H200, reports/steps_time): tf32 1.40x, workers=4 1.02x, tf32+workers 2.43x
#   generate      try --variant cudnn-benchmark --variant static-cache on llm_generate.py (cudnn-benchmark changes
#                 nothing there: its row must read "no measurable change")
# Each try directory comes back as OUT/NAME.tgz (torch traces left out); the tables are in OUT/summary.txt.
set -u
OUT=${1:?usage: gpu_try_next.sh OUT repro|verify-a|verify-b|accum}; PART=${2:-repro}
P=${P:-.device-carry/programs}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_lib.sh"
. "$(dirname "$0")/gpu_try_lib.sh"
ORIG_OUT=$OUT; KEEP=$OUT; OUT=$W/try; mkdir -p "$OUT"
case $PART in
  repro)  # (before the change: one round each)
    run_try vit_eval --variant cuda-graphs "$P/vit_eval.py"
    run_try accum wrappers/grad_accum.py
    run_try generate --variant cudnn-benchmark --variant static-cache "$P/llm_generate.py";;
  verify-a)  # rounds until clear (the default), a budget for the launch-bound one
    run_try vit_eval --variant cuda-graphs "$P/vit_eval.py"
    run_try generate --budget 300 --variant cudnn-benchmark --variant static-cache "$P/llm_generate.py"
    for i in 1 2; do plain "generate_dynamic_$i" python3 "$P/llm_generate.py"; plain "generate_static_$i" python3 "$P/llm_generate.py" --cache static; done;;
  accum)  # the accumulation loop's try alone
    run_try accum --budget 300 wrappers/grad_accum.py;;
  verify-b)
    run_try accum --budget 300 wrappers/grad_accum.py
    plain accum python3 wrappers/grad_accum.py; plain accum_tf32 python3 wrappers/grad_accum.py --tf32
    plain accum_tf32_workers python3 wrappers/grad_accum.py --tf32 --workers 8;;
esac
