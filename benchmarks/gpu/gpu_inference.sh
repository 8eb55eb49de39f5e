#!/usr/bin/env bash
# Issues 44 and 47 on the GPU machine: inference programs (wrappers/llm_generate.py, wrappers/eval_loop.py) and Inductor's
# Triton kernels under Nsight Compute.
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_inference.sh OUT PART
#   PART record: plain runs (the programs' own TTFT/TPOT, images/s); recordings made without nsighttc, as users make
#                them (torch.profiler via the wrappers' --trace, plain `nsys profile`), kept small as fixtures;
#                compile_loop.py with max-autotune under ncu, Triton kernels only (tensor instruction counts), with
#                Inductor's output code (TORCH_LOGS=output_code).
#   PART profile: nsighttc's default runs of both wrappers (first and cached), their verdicts, and `try` variants.
set -u
OUT=$1 PART=$2
source "$(dirname "$0")/gpu_lib.sh"
SMALL_LLM=(--requests 3 --warmup 1 --new-tokens 24 --prompt 128 --layers 4)
case $PART in
record)
  plain llm_dynamic python3 wrappers/llm_generate.py
  plain llm_static_compile timeout 240 python3 wrappers/llm_generate.py --cache static --compile
  plain eval python3 wrappers/eval_loop.py
  # recordings made elsewhere (no nsighttc): torch.profiler by the program itself, and plain nsys
  python3 wrappers/llm_generate.py "${SMALL_LLM[@]}" --trace "$W/llm_user_trace.json" > "$W/llm_trace.log" 2>&1
  python3 benchmarks/strip_fixture.py "$W/llm_user_trace.json" "$W/fix/llm_generate_user_torch.json.gz" >> "$S" 2>&1
  python3 wrappers/eval_loop.py --batches 25 --trace "$W/eval_user_trace.json" > "$W/eval_trace.log" 2>&1
  python3 benchmarks/strip_fixture.py "$W/eval_user_trace.json" "$W/fix/eval_loop_user_torch.json.gz" >> "$S" 2>&1
  for w in llm eval; do
    if [ $w = llm ]; then cmd=(python3 wrappers/llm_generate.py "${SMALL_LLM[@]}"); else cmd=(python3 wrappers/eval_loop.py --batches 40); fi
    nsys profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -o "$W/${w}_nsys" --force-overwrite true "${cmd[@]}" \
      > "$W/${w}_nsys.log" 2>&1
    nsys export --type sqlite -o "$W/${w}_nsys.sqlite" --force-overwrite true "$W/${w}_nsys.nsys-rep" >> "$W/${w}_nsys.log" 2>&1
    python3 benchmarks/strip_fixture.py "$W/${w}_nsys.sqlite" "$W/fix/${w}_user_nsys.sqlite.gz" >> "$S" 2>&1
    grep '"wrapper"' "$W/${w}_nsys.log" | sed "s/^/nsys $w: /" >> "$S"
  done
  # Inductor's Triton kernels, measured: pointwise/reduction and matmul templates (max-autotune)
  M="sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum,sm__inst_executed_pipe_tensor_op_imma.sum,sm__inst_executed_pipe_tensor_op_dmma.sum,sm__ops_path_tensor_src_fp16.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum,sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum,gpu__time_duration.sum"
  for prec in bf16 fp32; do
    TORCH_LOGS=output_code timeout 150 ncu --clock-control none --kernel-name regex:triton_ --launch-skip 0 --launch-count 60 \
      --metrics "$M" -o "$W/triton_$prec" -f python3 wrappers/compile_loop.py --mode max-autotune --precision $prec \
      --steps 4 --dim 256 --layers 2 --seq 128 --batch 8 > "$W/triton_$prec.log" 2>&1
    echo "ncu triton $prec: rc=$?" >> "$S"
    ncu -i "$W/triton_$prec.ncu-rep" --csv --page raw --print-units base > "$W/triton_${prec}_raw.csv" 2>> "$S"
    gzip -c "$W/triton_${prec}_raw.csv" > "$W/fix/h100_triton_${prec}_ncu_raw.csv.gz"
    grep -c "" "$W/triton_${prec}_raw.csv" >> "$S"
    gzip -c "$W/triton_$prec.log" > "$W/fix/inductor_output_code_${prec}.log.gz"
  done
  ;;
esac
pack
