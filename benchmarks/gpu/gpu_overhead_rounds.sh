#!/usr/bin/env bash
# Issue 73 on the GPU machine: alternating rounds (plain, first run with an empty evidence cache, cached run) of the
# programs named, through gpu_profile_overhead.py; what comes back: OUT/summary.json (the rows, copied after each
# program) and OUT/overhead.tgz (each run's run.json, verdict.json, report.md and the logs; the traces stay behind).
#   bash benchmarks/gpu/gpu_overhead_rounds.sh OUT ROUNDS PROGRAM[:ROUNDS]...   (source .device-carry/setup.sh first)
# e.g. bash benchmarks/gpu/gpu_overhead_rounds.sh $OUT 3 gan_loop graph_replay grad_accum shared_vit_eval shared_lit_cifar:1
# STOP_AFTER_S (default 540): no program is started after this many seconds (the device tool's calls end at 600 s).
set -u
OUT=${1:?usage: gpu_overhead_rounds.sh OUT ROUNDS PROGRAM...}; ROUNDS=${2:?rounds}; shift 2
W=${W:-/tmp/gpu-overhead}; mkdir -p "$W" "$OUT"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
[ -f "$OUT/summary.json" ] && cp "$OUT/summary.json" "$W/summary.json"
t0=$(date +%s)
for spec in "$@"; do
  prog=${spec%%:*}; n=$ROUNDS; [ "$spec" != "$prog" ] && n=${spec#*:}
  if [ $(( $(date +%s) - t0 )) -gt "${STOP_AFTER_S:-540}" ]; then echo "not started (time): $prog" | tee -a "$OUT/rounds.log"; continue; fi
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W" --rounds "$n" "$prog" 2>&1 | tee -a "$OUT/rounds.log"
  cp "$W/summary.json" "$OUT/summary.json"
done
(cd "$W" && tar czf "$OUT/overhead.tgz" --exclude='*trace*.json' --exclude='*.ncu-rep' --exclude='*.sqlite' \
   --exclude='*.nsys-rep' --exclude='*.csv' runs_* ./*.log 2>/dev/null)
