#!/usr/bin/env bash
# GPU probe (issue 29), after the replay's fix for host-side seeds (nsighttc.runtime.replay.HOST_TENSOR_ARGUMENTS):
# 1. the transformers Trainer's replay list (tests/fixtures/replay_ops_trainer.jsonl, recorded by its first run on
#    H100 in call18) replayed under ncu as the default run does: does every call run, which kernels are measured;
# 2. the kernels of torch._foreach_norm (gradient-norm clipping: multi_tensor_apply_kernel, lpnorm_cleanup), for fp32,
#    fp16 and bf16 lists, under ncu with the Tensor Core counters: the replay cannot rebuild a TensorList, so their
#    name rule decides whether the program must run under ncu for them.
#   bash benchmarks/probes/gpu_replay_fix_probe.sh OUT     -> OUT/replay_fix/*.log, *.csv
set -u
OUT=${1:?out dir}; D=$OUT/replay_fix; mkdir -p "$D"
METRICS=$(python3 -c "from nsighttc import ncu_metrics; print(','.join(ncu_metrics.one_pass_metrics_for_cc('9.0')))")
timeout 200 ncu --nvtx --clock-control none --cache-control none --target-processes all --metrics "$METRICS" \
  -o "$D/trainer" --nvtx-include nsighttc-replay/ python3 -X faulthandler -m nsighttc.runtime.replay \
  --ops tests/fixtures/replay_ops_trainer.jsonl > "$D/trainer_replay.log" 2>&1
echo "replay under ncu rc=$?" >> "$D/trainer_replay.log"
ncu --import "$D/trainer.ncu-rep" --csv --page raw --metrics "$METRICS" > "$D/trainer_replay_raw.csv" 2>&1
timeout 120 ncu --clock-control none --cache-control none --metrics "$METRICS" --csv --page raw python3 -c "
import torch
for dt in (torch.float32, torch.float16, torch.bfloat16):
    ts = [torch.randn(n, device='cuda', dtype=dt) for n in (768, 768 * 768, 3072, 30522 * 768)]
    torch._foreach_norm(ts, 2.0)
torch.cuda.synchronize()
" > "$D/foreach_norm_raw.csv" 2>&1
echo "foreach probe rc=$?" >> "$D/foreach_norm_raw.csv"
rm -f "$D"/*.ncu-rep
