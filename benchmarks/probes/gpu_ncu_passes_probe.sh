#!/usr/bin/env bash
# GPU probe (issue 10): how many replay passes each candidate metric set costs per kernel, and what profiling
# one launch costs in wall time on a real program, per set. ncu prints "- N passes" per profiled kernel.
#   bash benchmarks/probes/gpu_ncu_passes_probe.sh OUT
# Writes OUT/passes.txt (set, passes per kernel, seconds), OUT/<set>.csv (raw page of the small program) and
# OUT/resnet_<set>.txt (wall time of ResNet AMP under ncu, first 40 matrix-kernel configurations).
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"
PROG=benchmarks/probes/_tc_dtype_kernels.py
T=gpu__time_duration.sum
PCT=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
F16=sm__ops_path_tensor_src_fp16.sum; BF16=sm__ops_path_tensor_src_bf16_dst_fp32.sum
OPS="$F16,$BF16,sm__ops_path_tensor_src_fp8.sum,sm__ops_path_tensor_src_int8.sum,sm__ops_path_tensor_src_fp64.sum,sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum,sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum"
HM=sm__inst_executed_pipe_tensor_op_hmma.sum; HF=sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum
INST="$HM,$HF,sm__inst_executed_pipe_tensor_op_imma.sum,sm__inst_executed_pipe_tensor_op_dmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum"
declare -A SETS=(
  [time]="$T" [pct]="$PCT" [fp16]="$F16" [fp16_bf16]="$F16,$BF16" [ops7]="$OPS" [hmma_hfma2]="$HM,$HF"
  [inst5]="$INST" [inst5_time]="$T,$INST" [current]="$T,$OPS,$PCT" [inst5_fp16_bf16]="$INST,$F16,$BF16"
  [inst5_ops7]="$INST,$OPS" [gmma]="sm__inst_executed_pipe_tensor_op_gmma.sum"
)
for s in time pct fp16 fp16_bf16 ops7 hmma_hfma2 gmma inst5 inst5_time inst5_fp16_bf16 inst5_ops7 current; do
  t0=$(date +%s.%N)
  ncu --metrics "${SETS[$s]}" --clock-control none --cache-control none -o "$OUT/$s" -f python3 "$PROG" > "$OUT/$s.log" 2>&1
  t1=$(date +%s.%N)
  echo "$s passes=[$(grep -o '[0-9]* passes\?' "$OUT/$s.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')] kernels=$(grep -c '==PROF== Profiling' "$OUT/$s.log") seconds=$(python3 -c "print(round($t1-$t0,1))")" | tee -a "$OUT/passes.txt"
  ncu --import "$OUT/$s.ncu-rep" --csv --page raw --print-units base > "$OUT/$s.csv" 2>/dev/null
  rm -f "$OUT/$s.ncu-rep"
done
FILTER=$(python3 -c "from nsighttc.analysis.name_rules import NO_MATRIX_FAMILIES as F; print('^(?!.*(' + '|'.join(F) + ')).*')")
for s in current inst5_fp16_bf16 hmma_hfma2; do
  t0=$(date +%s.%N)
  ncu --metrics "${SETS[$s]}" --clock-control none --cache-control none --kernel-name "regex:$FILTER" \
      --filter-mode per-launch-config --launch-count 1 --launch-skip 0 -o "$OUT/resnet_$s" -f \
      python3 wrappers/resnet_amp.py --steps 10 --warmup 3 > "$OUT/resnet_$s.log" 2>&1
  t1=$(date +%s.%N)
  echo "resnet_$s profiled=$(grep -c '==PROF== Profiling' "$OUT/resnet_$s.log") passes=[$(grep -o '[0-9]* passes\?' "$OUT/resnet_$s.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')] seconds=$(python3 -c "print(round($t1-$t0,1))")" | tee -a "$OUT/passes.txt"
  rm -f "$OUT/resnet_$s.ncu-rep"
done
t0=$(date +%s.%N); python3 wrappers/resnet_amp.py --steps 10 --warmup 3 > "$OUT/resnet_plain.log" 2>&1; t1=$(date +%s.%N)
echo "resnet_plain seconds=$(python3 -c "print(round($t1-$t0,1))")" | tee -a "$OUT/passes.txt"
