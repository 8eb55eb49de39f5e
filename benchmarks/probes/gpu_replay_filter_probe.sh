#!/usr/bin/env bash
# GPU check (issue 10): ResNet-50 AMP's whole replay list under ncu with the replay pass's options, once with
# `--filter-mode per-launch-config --launch-count 1` and once profiling every launch in the range; lists the
# cutlass kernels each measured and how long each took.
#   bash benchmarks/probes/gpu_replay_filter_probe.sh OUT      -> OUT/replay_filter_probe.txt
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"
FILTER=$(python3 -c "from nsighttc.analysis.name_rules import ncu_kernel_filter; print(ncu_kernel_filter())")
METRICS=$(python3 -c "from nsighttc import ncu_metrics; print(','.join(ncu_metrics.one_pass_metrics_for_cc('9.0')))")
for mode in perconfig every; do
  extra=(--filter-mode per-launch-config --launch-count 1); [ $mode = every ] && extra=()
  t0=$(date +%s.%N)
  ncu --clock-control none --cache-control none --target-processes all --nvtx --nvtx-include nsighttc-replay/ \
      --metrics "$METRICS" --kernel-name "$FILTER" "${extra[@]}" -o "$OUT/$mode" -f \
      python3 -m nsighttc.runtime.replay --ops tests/fixtures/replay_ops_resnet_amp.json > "$OUT/$mode.log" 2>&1
  t1=$(date +%s.%N)
  n=$(grep -c "==PROF== Profiling" "$OUT/$mode.log")
  echo "== $mode: $(python3 -c "print(round($t1-$t0,1))") s, $n profiles" | tee -a "$OUT/replay_filter_probe.txt"
  ncu --import "$OUT/$mode.ncu-rep" --page raw --csv 2>/dev/null | python3 -c "
import csv, sys
rows = list(csv.reader(sys.stdin)); i = rows[0].index('Kernel Name'); g = rows[0].index('Grid Size'); b = rows[0].index('Block Size')
for r in rows[2:]:
    if 'cutlass' in r[i]: print('   ', r[i].split('<')[1][:60], r[g], r[b])
" | sort | uniq -c | tee -a "$OUT/replay_filter_probe.txt"
  rm -f "$OUT/$mode.ncu-rep"
done
