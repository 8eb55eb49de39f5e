#!/usr/bin/env bash
# GPU probe (issue 29): which of the transformers Trainer's kernels its first run's replay leaves to the program's
# Nsight Compute pass (5 of 28 in reports/window call20-22, 6 s after the timeline). One first run, keeping the
# operators' trace (gzip), the replay's list and logs, and the raw pages of both ncu reports (the kernels' full names).
#   bash benchmarks/probes/gpu_trainer_left_probe.sh OUT        -> OUT/trainer_left/
set -u
OUT=${1:?out dir}; D=$OUT/trainer_left; mkdir -p "$D"
export NSIGHTTC_CACHE_DIR=$D/cache TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
timeout 300 python3 -m nsighttc profile --out "$D/runs" wrappers/trainer_finetune.py > "$D/profile.log" 2>&1
R=$(ls -d "$D"/runs/*/ | tail -1)
for f in run.json replay_ops.json torch.stderr.log ncu_replay.stderr.log; do cp "$R/$f" "$D/" 2>/dev/null; done
gzip -c "$R/torch_ops_trace.json" > "$D/torch_ops_trace.json.gz"
for rep in ncu ncu_replay; do
  ncu --import "$R/$rep.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum > "$D/${rep}_raw.csv" 2>&1
done
rm -rf "$D/runs" "$D/cache"
