#!/usr/bin/env bash
# GPU probe (issue 29): why the transformers Trainer's replay measured 11 of its 29 kernels and exited 11 (call15), leaving
# 18 kernels to a Nsight Compute pass over the program (5-6 s of its first run). One first run of
# wrappers/trainer_finetune.py keeping the replay's list and logs, then the same list replayed again: without ncu under
# Python's faulthandler (does a call crash by itself?) and under ncu as the default run starts it.
#   bash benchmarks/probes/gpu_trainer_replay_probe.sh OUT      -> OUT/trainer_replay/ (logs, replay_ops.json, run.json)
set -u
OUT=${1:?out dir}; D=$OUT/trainer_replay; mkdir -p "$D"
export NSIGHTTC_CACHE_DIR=$D/cache TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
timeout 300 python3 -m nsighttc profile --out "$D/runs" wrappers/trainer_finetune.py > "$D/profile.log" 2>&1
echo "profile rc=$?" >> "$D/profile.log"
R=$(ls -d "$D"/runs/*/ | tail -1)
for f in run.json ncu_replay.log replay_ops.json torch.stderr.log ncu.log; do cp "$R/$f" "$D/" 2>/dev/null; done
METRICS=$(python3 -c "from nsighttc import ncu_metrics; print(','.join(ncu_metrics.one_pass_metrics_for_cc('9.0')))")
timeout 120 python3 -X faulthandler -m nsighttc.runtime.replay --ops "$D/replay_ops.json" > "$D/replay_plain.log" 2>&1
echo "replay without ncu rc=$?" >> "$D/replay_plain.log"
timeout 200 ncu --nvtx --clock-control none --cache-control none --target-processes all --metrics "$METRICS" \
  -o "$D/again" --nvtx-include nsighttc-replay/ python3 -X faulthandler -m nsighttc.runtime.replay \
  --ops "$D/replay_ops.json" > "$D/replay_ncu.log" 2>&1
echo "replay under ncu rc=$?" >> "$D/replay_ncu.log"
rm -f "$D"/*.ncu-rep; rm -rf "$D/runs" "$D/cache"
