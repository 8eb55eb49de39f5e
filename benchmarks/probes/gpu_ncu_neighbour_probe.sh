#!/usr/bin/env bash
# GPU probe (issue 73): why a first run's accumulation loop (wrappers/grad_accum.py: numpy per sample, DataLoader
# without workers) took 2.2-2.3 s an optimizer step in the timeline pass against 0.24 s plain and in the cached run
# (reports/steps_time/runs_summary.txt.gz, reports/profile_overhead/rounds). The first run differs by its neighbours: the
# Nsight Compute pass's program and the replay, each under ncu, waiting at a gate. Runs the loop plain beside each kind
# of neighbour alone, and the first run itself with the processes' CPU use sampled.
#   bash benchmarks/probes/gpu_ncu_neighbour_probe.sh OUT   (source .device-carry/setup.sh first)
set -u
OUT=${1:?out dir}; W=/tmp/neighbour-probe; mkdir -p "$OUT" "$W"; P=$OUT/probe.txt
A="python3 wrappers/grad_accum.py --steps 6"
WAIT_CUDA='import time, torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize(); time.sleep(45)'
WAIT_CPU='import time, torch; torch.set_num_threads(1); time.sleep(45)'
ms() { grep -o '[0-9.]* ms per optimizer step' "$1" | head -1; }
run() {  # label [env...]: the loop plain, its ms per optimizer step
  local label=$1; shift
  env "$@" $A > "$W/$label.log" 2>&1
  echo "$label: $(ms "$W/$label.log")" | tee -a "$P"
}
beside() {  # label waiter-argv... -- env...: the loop beside a waiting process
  local label=$1; shift; local argv=()
  while [ "$1" != "--" ]; do argv+=("$1"); shift; done; shift
  "${argv[@]}" > "$W/$label.waiter.log" 2>&1 & local w=$!
  sleep 12
  ps -o pid,pcpu,nlwp,args -p $w --ppid $w > "$W/$label.ps.txt" 2>&1
  top -b -n 1 -H -w 200 | head -30 > "$W/$label.top.txt" 2>&1
  run "$label" "$@"
  top -b -n 1 -H -w 200 | head -30 >> "$W/$label.top.txt" 2>&1
  kill -- $w 2>/dev/null; pkill -f "time.sleep.45" 2>/dev/null; wait $w 2>/dev/null
}
nproc | sed 's/^/cpus: /' | tee -a "$P"
run alone_1
beside ncu_waiter ncu --profile-from-start off python3 -c "$WAIT_CUDA" --
beside cuda_waiter python3 -c "$WAIT_CUDA" --
beside cpu_waiter python3 -c "$WAIT_CPU" --
beside ncu_waiter_omp8 ncu --profile-from-start off python3 -c "$WAIT_CUDA" -- OMP_NUM_THREADS=8
run alone_2
# the first run itself, every process's CPU use every 2 s
( for i in $(seq 60); do echo "== $(date +%T.%N)"; ps -eo pid,ppid,pcpu,nlwp,stat,args --sort=-pcpu | head -15; sleep 2; done ) > "$W/first_run_ps.txt" 2>&1 & mon=$!
NSIGHTTC_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m nsighttc profile --out "$W/runs" wrappers/grad_accum.py > "$W/first_run.log" 2>&1
kill $mon 2>/dev/null
grep -E "steady after|done in" "$W/first_run.log" | tee -a "$P"
(cd "$W" && tar czf "$OUT/probe_logs.tgz" ./*.log ./*.txt runs/*/torch.log runs/*/ncu.log runs/*/ncu_replay.log runs/*/run.json runs/*/report.md 2>/dev/null)
