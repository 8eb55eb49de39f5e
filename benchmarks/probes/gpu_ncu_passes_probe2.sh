#!/usr/bin/env bash
# GPU probe (issue 10, part 2): which single-pass metric sets decide "did the Tensor Cores do math" on Hopper.
# Part 1 (gpu_ncu_passes_probe.sh) found one replay pass for hmma+hfma2, gpu__time_duration, the pipe
# utilisation, and 3-7 passes for any ops-path (FLOP) counter.
#   bash benchmarks/probes/gpu_ncu_passes_probe2.sh OUT     -> OUT/passes2.txt, OUT/<set>.csv
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"
PROG=benchmarks/probes/_tc_dtype_kernels.py
P=sm__inst_executed_pipe_tensor.sum; HF=sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum
HM=sm__inst_executed_pipe_tensor_op_hmma.sum; IM=sm__inst_executed_pipe_tensor_op_imma.sum
DM=sm__inst_executed_pipe_tensor_op_dmma.sum; T=gpu__time_duration.sum
PCT=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
declare -A SETS=(
  [pipe_hfma2]="$P,$HF" [pipe_hfma2_pct]="$P,$HF,$PCT" [pipe_hfma2_time]="$P,$HF,$T"
  [pipe_hfma2_pct_time]="$P,$HF,$PCT,$T" [hmma_hfma2_imma_dmma]="$HM,$HF,$IM,$DM"
  [pipe_hfma2_hmma_imma_dmma]="$P,$HF,$HM,$IM,$DM"
)
for s in pipe_hfma2 pipe_hfma2_pct pipe_hfma2_time pipe_hfma2_pct_time hmma_hfma2_imma_dmma pipe_hfma2_hmma_imma_dmma; do
  t0=$(date +%s.%N)
  ncu --metrics "${SETS[$s]}" --clock-control none --cache-control none -o "$OUT/$s" -f python3 "$PROG" > "$OUT/$s.log" 2>&1
  t1=$(date +%s.%N)
  echo "$s passes=[$(grep -o '[0-9]* passes\?' "$OUT/$s.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')] kernels=$(grep -c '==PROF== Profiling' "$OUT/$s.log") errors=$(grep -c '==ERROR==' "$OUT/$s.log") seconds=$(python3 -c "print(round($t1-$t0,1))")" | tee -a "$OUT/passes2.txt"
  ncu --import "$OUT/$s.ncu-rep" --csv --page raw --print-units base > "$OUT/$s.csv" 2>/dev/null
  rm -f "$OUT/$s.ncu-rep"
done
python3 - "$OUT/pipe_hfma2_pct_time.csv" <<'PY' | tee -a "$OUT/passes2.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]
for r in rows[2:]:
    v = dict(zip(h, r))
    f = lambda k: float(v[k].replace(",", "") or "nan")
    pipe, hf = f("sm__inst_executed_pipe_tensor.sum"), f("sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum")
    print(f"{v['Kernel Name'][:70]:70s} pipe={pipe:.0f} hfma2={hf:.0f} math={'yes' if pipe - hf > 0 else 'no'} "
          f"pct={f('sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active'):.2f}")
PY
