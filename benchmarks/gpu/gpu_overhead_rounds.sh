#!/usr/bin/env bash
# Issue 73 on the GPU machine: alternating rounds (plain, first run with an empty evidence cache, cached run) of the
# programs named, through gpu_profile_overhead.py; what comes back: OUT/summary.json (the rows) and OUT/overhead.tgz
# (each run's run.json, verdict.json, report.md and the logs; the traces stay behind).
#   bash benchmarks/gpu/gpu_overhead_rounds.sh OUT ROUNDS PROGRAM...   (source .device-carry/setup.sh first)
# e.g. bash benchmarks/gpu/gpu_overhead_rounds.sh $OUT 3 gan_loop graph_replay grad_accum shared_vit_eval
set -u
OUT=${1:?usage: gpu_overhead_rounds.sh OUT ROUNDS PROGRAM...}; ROUNDS=${2:?rounds}; shift 2
W=${W:-/tmp/gpu-overhead}; mkdir -p "$W" "$OUT"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
[ -f "$OUT/summary.json" ] && cp "$OUT/summary.json" "$W/summary.json"
python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W" --rounds "$ROUNDS" "$@" 2>&1 | tee -a "$OUT/rounds.log"
cp "$W/summary.json" "$OUT/summary.json"
(cd "$W" && tar czf "$OUT/overhead.tgz" --exclude='*trace*.json' --exclude='*.ncu-rep' --exclude='*.sqlite' \
   --exclude='*.nsys-rep' --exclude='*.csv' runs_* ./*.log 2>/dev/null)
ls -la "$OUT"
