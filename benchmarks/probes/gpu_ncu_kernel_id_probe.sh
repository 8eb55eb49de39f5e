#!/usr/bin/env bash
# GPU probe (issue 10): does `--kernel-id ::regex:FILTER:1` (with --kernel-name-base demangled) profile the first
# launch of each distinct kernel name, where `--filter-mode per-launch-config --launch-count 1` profiles each
# launch configuration? Counts ==PROF== lines and distinct names per filter on one program.
#   bash benchmarks/probes/gpu_ncu_kernel_id_probe.sh OUT [wrappers/resnet_amp.py]
set -u
OUT=${1:?out dir}; PROG=${2:-wrappers/resnet_amp.py}
mkdir -p "$OUT"
FILTER=$(python3 -c "from nsighttc.analysis.name_rules import NO_MATRIX_FAMILIES as F; print('^(?!.*(' + '|'.join(F) + ')).*')")
run() {  # name, ncu filter args...
  local name=$1; shift
  local t0=$(date +%s.%N)
  ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none --target-processes all "$@" \
      -o "$OUT/$name" python3 "$PROG" > "$OUT/$name.log" 2>&1
  local rc=$? t1=$(date +%s.%N)
  local n=$(grep -c '==PROF== Profiling' "$OUT/$name.log")
  local d=$(grep -o '==PROF== Profiling "[^"]*"' "$OUT/$name.log" | sort -u | wc -l)
  echo "$name rc=$rc seconds=$(python3 -c "print(round($t1-$t0,1))") profiled=$n distinct_printed_names=$d" | tee -a "$OUT/summary.txt"
}
run per_config --kernel-name "regex:$FILTER" --filter-mode per-launch-config --launch-count 1
run per_name --kernel-name-base demangled --kernel-id "::regex:$FILTER:1"
for n in per_config per_name; do
  ncu --import "$OUT/$n.ncu-rep" --csv --page raw --metrics gpu__time_duration.sum 2>/dev/null \
    | python3 -c "import csv,sys; r=list(csv.reader(sys.stdin)); h=r[0]; i=h.index('Kernel Name'); g=h.index('Grid Size'); rows=r[2:]; print('$n', 'rows', len(rows), 'distinct names', len({x[i] for x in rows}), 'distinct name+grid', len({(x[i],x[g]) for x in rows}))" | tee -a "$OUT/summary.txt"
done
