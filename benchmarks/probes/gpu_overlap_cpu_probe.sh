#!/usr/bin/env bash
# GPU probe (issue 10): is the stretched timeline of an overlapped default run CPU contention? Runs the VGG16
# timeline alone (--fast), beside a CPU hog that does what the ncu side's start-up does (import torch, build
# VGG16 on the CPU, in a loop), and beside the same hog pinned to one physical core while the timeline run keeps
# the others (taskset). Prints each run's step median.   bash benchmarks/probes/gpu_overlap_cpu_probe.sh OUT [ROUNDS]
set -u
OUT=${1:?out dir}; ROUNDS=${2:-3}; mkdir -p "$OUT"
lscpu -e=CPU,CORE,SOCKET > "$OUT/lscpu.txt" 2>&1
LAST=$(awk 'NR>1{c=$2} END{print c}' "$OUT/lscpu.txt")
HOG_CPUS=$(awk -v c="$LAST" 'NR>1 && $2==c {printf "%s%s", s, $1; s=","}' "$OUT/lscpu.txt")
MAIN_CPUS=$(awk -v c="$LAST" 'NR>1 && $2!=c {printf "%s%s", s, $1; s=","}' "$OUT/lscpu.txt")
echo "hog cpus: $HOG_CPUS; timeline cpus: $MAIN_CPUS" | tee -a "$OUT/probe.txt"
HOG='import time, torch, torchvision
t = time.time()
while time.time() - t < 40:
    torchvision.models.vgg16(weights=None)'
step() { python3 -c "import json,sys,glob,os; v=max(glob.glob(sys.argv[1]+'/*/verdict.json'), key=os.path.getmtime); s=json.load(open(v))['timeline']['steps']; print(f\"{s['median_iteration_ns']/1e6:.2f} ms, GPU busy {s['median_gpu_busy_share']:.3f}\")" "$1"; }
for r in $(seq "$ROUNDS"); do
  python3 -m nsighttc profile --fast --out "$OUT/alone" wrappers/vgg16.py > /dev/null 2>&1
  echo "round $r alone:        $(step "$OUT/alone")" | tee -a "$OUT/probe.txt"
  python3 -c "$HOG" & hog=$!; sleep 1
  python3 -m nsighttc profile --fast --out "$OUT/hog" wrappers/vgg16.py > /dev/null 2>&1
  kill $hog 2>/dev/null; wait $hog 2>/dev/null
  echo "round $r beside hog:   $(step "$OUT/hog")" | tee -a "$OUT/probe.txt"
  taskset -c "$HOG_CPUS" python3 -c "$HOG" & hog=$!; sleep 1
  taskset -c "$MAIN_CPUS" python3 -m nsighttc profile --fast --out "$OUT/pinned" wrappers/vgg16.py > /dev/null 2>&1
  kill $hog 2>/dev/null; wait $hog 2>/dev/null
  echo "round $r hog pinned:   $(step "$OUT/pinned")" | tee -a "$OUT/probe.txt"
done
