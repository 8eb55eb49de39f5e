#!/usr/bin/env bash
# GPU check (issue 10): does the ncu pass waiting at its gate disturb the timeline run it overlaps? Alternates
# first runs (empty evidence cache) with --overlap none (nothing beside the timeline), cuda and context, and
# prints each timeline's step median and GPU-busy share.
#   bash benchmarks/probes/gpu_gate_ab.sh OUT [ROUNDS] [PROGRAM...]     -> OUT/gate_ab.txt
set -u
OUT=${1:?out dir}; ROUNDS=${2:-3}; shift 2 2>/dev/null; PROGS=${*:-wrappers/vgg16.py}
mkdir -p "$OUT"
for prog in $PROGS; do
  for r in $(seq "$ROUNDS"); do
    for gate in none cuda context; do
      runs="$OUT/runs_$(basename "$prog" .py)_$gate"
      t0=$(date +%s.%N)
      NSIGHTTC_CACHE_DIR=$(mktemp -d) python3 -m nsighttc profile --overlap "$gate" --out "$runs" "$prog" > /dev/null 2>&1
      t1=$(date +%s.%N)
      v=$(ls -td "$runs"/*/ | head -1)verdict.json
      python3 - "$v" "$prog" "$gate" "$r" "$(python3 -c "print(round($t1-$t0,2))")" <<'PY' | tee -a "$OUT/gate_ab.txt"
import json, sys
d = json.load(open(sys.argv[1])); s = (d.get("timeline") or {}).get("steps") or {}
print(f"{sys.argv[2]} round {sys.argv[4]} overlap={sys.argv[3]:8s} wall {sys.argv[5]} s  step median "
      f"{(s.get('median_iteration_ns') or 0) / 1e6:.2f} ms  step GPU busy {s.get('median_gpu_busy_share') or 0:.3f}  "
      f"verdict {d['timeline']['verdict']}")
PY
    done
  done
done
