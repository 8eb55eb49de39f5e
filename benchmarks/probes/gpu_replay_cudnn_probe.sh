#!/usr/bin/env bash
# GPU check (issue 10): which kernels do ResNet-50 AMP's recorded 1x1 convolutions launch when replayed, alone,
# under ncu (the replay pass's exact options) and without it? The program ran cutlass `..._nn_align2` kernels
# for them; the replay pass did not measure those.
#   bash benchmarks/probes/gpu_replay_cudnn_probe.sh OUT      -> OUT/replay_cudnn_probe.txt
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"
python3 - "$OUT/ops.json" <<'PY'
import json, sys
calls = json.load(open("tests/fixtures/replay_ops_resnet_amp.json"))
json.dump([c for c in calls if any("nn_align2" in k for k in c["kernels"])], open(sys.argv[1], "w"))
PY
{
echo "== without ncu (torch.profiler names)"
python3 - "$OUT/ops.json" <<'PY'
import json, sys, torch
from nsighttc import replay
for c in json.load(open(sys.argv[1])):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        replay.call_op(torch, c, torch.device("cuda")); torch.cuda.synchronize()
    print(c["dims"][:2], "wanted", [k.split("<")[1][:70] for k in c["kernels"]])
    print("   got", sorted({e.name[:110] for e in p.events() if "Kernel2" in e.name or "xmma" in e.name or "nvjet" in e.name}))
PY
for mode in perconfig all; do
  echo "== under ncu ($mode)"
  extra=(--filter-mode per-launch-config --launch-count 1); [ $mode = all ] && extra=()
  ncu --clock-control none --cache-control none --nvtx --nvtx-include nsighttc-replay/ \
      --metrics sm__inst_executed_pipe_tensor_op_hmma.sum "${extra[@]}" \
      python3 -m nsighttc.runtime.replay --ops "$OUT/ops.json" 2>&1 | grep -E "Profiling|replay:" | cut -c1-200
done
} | tee "$OUT/replay_cudnn_probe.txt"
