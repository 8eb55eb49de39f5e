#!/usr/bin/env bash
# Issues 44 and 47 on the GPU machine: inference programs (wrappers/llm_generate.py, wrappers/eval_loop.py) and Inductor's
# Triton kernels under Nsight Compute.
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_inference.sh OUT PART
#   PART record: plain runs (the programs' own TTFT/TPOT, images/s); recordings made without nsighttc, as users make
#                them (torch.profiler via the wrappers' --trace, plain `nsys profile`), kept small as fixtures;
#                compile_loop.py with max-autotune under ncu, Triton kernels only (tensor instruction counts), with
#                Inductor's output code (TORCH_LOGS=output_code).
#   PART profile: nsighttc's default runs of both wrappers against plain runs (first and cached,
#                 benchmarks/gpu/gpu_profile_overhead.py), small default runs kept as fixtures, and `try --variant
#                 static-cache` on the generation loop.
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
profile)
  # the default run's cost against plain runs (first run, cached run), one round each, and its verdicts
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" --rounds 1 llm_generate eval_loop > "$W/ov.log" 2>&1
  echo "overhead: rc=$?" >> "$S"; cp "$W/ov/summary.json" "$W/summary_overhead.json" 2>/dev/null
  python3 -c "import json,sys; [print(e['program'], e['plain_s'], e['default_s'], e.get('warm_s'), e['ratio'], e.get('ratio_warm')) for e in json.load(open(sys.argv[1]))]" "$W/ov/summary.json" >> "$S" 2>&1
  # fixtures: small default runs with the hooks, the timeline only (--fast: no Nsight Compute pass)
  profile llm_fix 200 --fast -- wrappers/llm_generate.py --requests 6 --warmup 1 --new-tokens 32 --prompt 128 --layers 4
  profile eval_fix 200 --fast -- wrappers/eval_loop.py --batches 40
  for name in llm_fix eval_fix; do
    d=$(ls -d "$W/runs_$name"/*/ | tail -1); t=$(ls "$d"/*trace*.json* 2>/dev/null | head -1)
    [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/${name}_default_torch.json.gz" >> "$S" 2>&1
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); tl=d['timeline']; print(sys.argv[2], d['tensor_cores']['headline']); print('  ', tl['verdict'], round(tl['gpu_busy_share'],3), tl['steps'].get('count'), tl['steps'].get('name'), json.dumps({k: tl.get('inference', {}).get(k) for k in ('requests','ttft_ns','tpot_ns','tokens_per_s')}))" "$d/verdict.json" "$name" >> "$S" 2>&1
    grep -h "launch-bound\|Estimated gain\|### 1\." "$d/report.md" | head -4 >> "$S"
  done
  # try: the static-cache variant on the generation loop, beside its launch-bound finding's range
  timeout 240 python3 -m nsighttc try --out "$W/try_llm" --variant static-cache -- wrappers/llm_generate.py \
    --requests 8 --new-tokens 96 > "$W/try_llm.log" 2>&1
  echo "try static-cache: rc=$?" >> "$S"; tail -25 "$W/try_llm.log" >> "$S"
  ;;
check)
  # the program's own TTFT/TPOT: plain, and under the launcher with the hooks and the step timer (try's plain runs)
  SMALL=(--requests 6 --warmup 1 --new-tokens 32 --prompt 128 --layers 4)
  plain llm_small python3 wrappers/llm_generate.py "${SMALL[@]}"
  plain llm_small2 python3 wrappers/llm_generate.py "${SMALL[@]}"
  plain llm_small_launcher python3 -m nsighttc.runtime.launch --step-times "$W/st_small.json" -- wrappers/llm_generate.py "${SMALL[@]}"
  plain llm_launcher python3 -m nsighttc.runtime.launch --step-times "$W/st_big.json" -- wrappers/llm_generate.py --requests 3 --new-tokens 96
  plain llm_big python3 wrappers/llm_generate.py --requests 3 --new-tokens 96
  timeout 200 python3 -m nsighttc try --out "$W/try_small" --variant static-cache -- wrappers/llm_generate.py "${SMALL[@]}" \
    > "$W/try_small.log" 2>&1
  echo "try static-cache (small): rc=$?" >> "$S"; tail -6 "$W/try_small.log" >> "$S"
  d=$(ls -d "$W/try_small"/*/ | tail -1); cp -r "$d" "$W/runs_try_small"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(k, [round(x/1e6,2) for x in (v.get('gpu_ns') or v.get('host_ns'))[:60]]) for k,v in d['phases'].items()]" "$W/st_big.json" >> "$S" 2>&1
  ;;
esac
pack
