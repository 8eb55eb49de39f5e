#!/usr/bin/env bash
# GPU check (issue 10): what the torch.profiler timeline pass costs, and what record_shapes (needed by the
# replay pass) adds. Per program: a plain run, the launcher under torch.profiler without and with
# --record-shapes (whole process, plus the launcher's own split: program / profiler stop / trace written),
# and the trace sizes.
#   bash benchmarks/probes/gpu_timeline_cost_probe.sh OUT [ROUNDS] [PROGRAM...]   -> OUT/timeline_cost.txt
set -u
OUT=${1:?out dir}; ROUNDS=${2:-1}; shift 2 2>/dev/null; PROGS=${*:-wrappers/resnet_amp.py wrappers/vgg16.py wrappers/multi_phase.py}
mkdir -p "$OUT/tl"
for prog in $PROGS; do
  name=$(basename "$prog" .py)
  for r in $(seq "$ROUNDS"); do
    for mode in plain trace shapes; do
      t0=$(date +%s.%N)
      case $mode in
        plain) python3 "$prog" > "$OUT/tl/$name.$mode.log" 2>&1 ;;
        trace) python3 -m nsighttc.runtime.launch --torch-trace "$OUT/tl/$name.trace.json" -- "$prog" > "$OUT/tl/$name.$mode.log" 2>&1 ;;
        shapes) python3 -m nsighttc.runtime.launch --torch-trace "$OUT/tl/$name.shapes.json" --record-shapes -- "$prog" > "$OUT/tl/$name.$mode.log" 2>&1 ;;
      esac
      t1=$(date +%s.%N)
      size=$( [ -f "$OUT/tl/$name.$mode.json" ] && du -m "$OUT/tl/$name.$mode.json" | cut -f1 || echo -)
      split=$(grep -o "(program.*)" "$OUT/tl/$name.$mode.log" | tail -1)
      step=$(grep -Eo "[0-9.]+ ms/step|[0-9.]+ ms/iter[a-z]*|median [0-9.]+ ms" "$OUT/tl/$name.$mode.log" | head -1)
      echo "$name round $r $mode: $(python3 -c "print(round($t1-$t0,2))") s, trace ${size} MB $split $step" | tee -a "$OUT/timeline_cost.txt"
      rm -f "$OUT/tl/$name.$mode.json"
    done
  done
done
rm -rf "$OUT/tl"
