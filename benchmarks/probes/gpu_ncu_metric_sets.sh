#!/usr/bin/env bash
# GPU check: ncu replay passes and wall time per metric set on VGG16 fp16 batch 1 (issue 4's budget).
# Usage (GPU machine, after `source .device-carry/setup.sh`): bash benchmarks/probes/gpu_ncu_metric_sets.sh OUTDIR
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"
W="wrappers/vgg16.py"
OPS="gpu__time_duration.sum,sm__ops_path_tensor_src_fp16.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum,sm__ops_path_tensor_src_int8.sum,sm__ops_path_tensor_src_fp64.sum,sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum,sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum"
INST="gpu__time_duration.sum,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum,sm__inst_executed_pipe_tensor_op_imma.sum,sm__inst_executed_pipe_tensor_op_dmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum"
NOMATRIX='regex:^(?!.*(elementwise|reduce_kernel|distribution_|max_pool|avg_pool|adaptive_|nchwToNhwc|nhwcToNchw|splitKreduce|copy_kernel|fill_kernel|CatArrayBatchedCopy|softmax|layer_norm|batch_norm|index_)).*'
run() {  # name, extra ncu args...
  local name=$1; shift
  local t0=$(date +%s%N)
  ncu --nvtx --clock-control none --target-processes all -o "$OUT/$name" --force-overwrite "$@" python3 $W > "$OUT/$name.log" 2>&1
  local t1=$(date +%s%N)
  echo "$name $(( (t1 - t0) / 1000000 )) ms, kernels $(grep -c '==PROF== Profiling' "$OUT/$name.log"), passes: $(grep -o '[0-9]* passes' "$OUT/$name.log" | sort | uniq -c | tr '\n' ' ')"
  rm -f "$OUT/$name.ncu-rep"
}
t0=$(date +%s%N); python3 $W > "$OUT/plain.log" 2>&1; t1=$(date +%s%N); echo "plain $(( (t1 - t0) / 1000000 )) ms"
SETS=${SETS:-all}
if [ "$SETS" = all ]; then
run ops_cfg --metrics "$OPS" --filter-mode per-launch-config --launch-count 1
run ops_cfg_nocache --metrics "$OPS" --filter-mode per-launch-config --launch-count 1 --cache-control none
run inst_cfg --metrics "$INST" --filter-mode per-launch-config --launch-count 1 --cache-control none
fi
run inst_cfg_matrix --metrics "$INST" --filter-mode per-launch-config --launch-count 1 --cache-control none --kernel-name "$NOMATRIX"
run ops_cfg_matrix --metrics "$OPS" --filter-mode per-launch-config --launch-count 1 --cache-control none --kernel-name "$NOMATRIX"
run ops_cfg_matrix_notrack --metrics "$OPS" --filter-mode per-launch-config --launch-count 1 --cache-control none --kernel-name "$NOMATRIX" --replay-mode kernel
t0=$(date +%s%N); python3 $W > "$OUT/plain2.log" 2>&1; t1=$(date +%s%N); echo "plain again $(( (t1 - t0) / 1000000 )) ms"
