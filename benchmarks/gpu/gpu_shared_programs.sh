#!/usr/bin/env bash
# The shared programs (../shared/programs, copied to .device-carry/programs) on the GPU machine: each plain, profiled
# with an empty evidence cache then cached, plain again (the folder's own run_on_gpu.sh), within a time budget; what
# comes back: the summary (wall times, costs, headlines) and an archive of each profiled run's verdict and log.
#   bash benchmarks/gpu/gpu_shared_programs.sh OUT SECONDS PROGRAM...   (source .device-carry/setup.sh first)
# e.g. bash benchmarks/gpu/gpu_shared_programs.sh $OUT 540 lit_cifar.py compiled_gpt.py "ddp_w.py --straggler 1"
set -u
OUT=${1:?usage: gpu_shared_programs.sh OUT SECONDS PROGRAM...}; LIMIT=${2:?SECONDS}; shift 2
PART=programs
. "$(dirname "$0")/gpu_lib.sh"
timeout "$LIMIT" bash .device-carry/programs/run_on_gpu.sh "$W/sp" "$@" > "$W/sp.log" 2>&1
echo "shared programs ($*): rc=$?" >> "$S"
cat "$W/sp/summary.txt" >> "$S" 2>/dev/null
# each run's verdict and what the run printed (the recordings themselves stay on the machine)
(cd "$W/sp" && tar czf "$OUT/programs.tgz" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.sqlite' \
   --exclude='*trace*.json' --exclude='*.csv' ./*.log $(find . -name 'verdict.json' -o -name 'window_events.jsonl' \
   -o -name 'run.json') 2>/dev/null)
ls -la "$OUT" >> "$S"
