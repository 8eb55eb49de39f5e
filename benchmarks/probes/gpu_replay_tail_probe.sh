#!/usr/bin/env bash
# GPU probe (issue 10): where the replay's last second goes. Replays ResNet-50 AMP's recorded operator list
# (tests/fixtures/replay_ops_resnet_amp.json) under ncu as the default run does and timestamps every output line
# (the replay's calls, ncu's ==PROF== lines, process exit, report written), then times reading the report.
# EXIT=fast: the replay process ends with os._exit(0) once its output is flushed (no interpreter shutdown, no
# C++ static destructors) instead of returning normally.
#   [EXIT=fast] bash benchmarks/probes/gpu_replay_tail_probe.sh OUT [ROUNDS]   -> OUT/replay_tail_probe.txt
set -u
OUT=${1:?out dir}; ROUNDS=${2:-2}; mkdir -p "$OUT/tail"
OPS=tests/fixtures/replay_ops_resnet_amp.json
METRICS=sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum,sm__inst_executed_pipe_tensor_op_imma.sum,sm__inst_executed_pipe_tensor_op_dmma.sum
FILTER=$(python3 -c "from nsighttc.analysis.families import ncu_kernel_filter; print(ncu_kernel_filter())")
TS='import sys,time
t=time.time()
for l in sys.stdin: print(f"{time.time()-t:8.3f} {l.rstrip()[:160]}", flush=True)'
for r in $(seq "$ROUNDS"); do
  rep="$OUT/tail/r$r"
  { ncu --nvtx --clock-control none --cache-control none --target-processes all --metrics "$METRICS" -o "$rep" \
      --nvtx-include nsighttc-replay/ --kernel-name "$FILTER" python3 -u -c "
import sys, time, atexit
atexit.register(lambda: print('replay: atexit', flush=True))
from nsighttc import replay
rc = replay.main(['--ops', '$OPS'])
print('replay: main returned', flush=True)
import os
if os.environ.get('EXIT') == 'fast':
    sys.stdout.flush(); sys.stderr.flush(); os._exit(rc)
sys.exit(rc)" 2>&1; echo "ncu exited"; } | python3 -c "$TS" > "$rep.log"
  echo "round $r, exit ${EXIT:-normal}:" | tee -a "$OUT/replay_tail_probe.txt"
  grep -E "call\(s\) made|main returned|atexit|Disconnected|Report|ncu exited" "$rep.log" | tee -a "$OUT/replay_tail_probe.txt"
  grep "==PROF== Profiling" "$rep.log" | tail -1 | tee -a "$OUT/replay_tail_probe.txt"
  python3 -c "
import time; t=time.perf_counter()
from nsighttc.parse import load
k=load('$rep.ncu-rep').kernels
print(f'round $r: report {__import__(\"os\").path.getsize(\"$rep.ncu-rep\")/1e6:.1f} MB, {len(k)} kernels read in {time.perf_counter()-t:.2f} s')" \
    | tee -a "$OUT/replay_tail_probe.txt"
done
