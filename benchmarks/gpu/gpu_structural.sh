#!/usr/bin/env bash
# Issue 56 on the GPU machine: `try` on the structural fixes of a generate() loop (static cache, CUDA graphs,
# compile), recordings whose decode already replays graphs or whose ranges nest, and the default run's cost.
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_structural.sh OUT PART
#   PART repro: what main does (try with static-cache / compile-reduce-overhead / a variant that applies nowhere on a
#               loop that names its cache), plain nsys recordings made elsewhere (static cache with CUDA graphs,
#               same-name NVTX ranges nested per module) kept as fixtures, and their verdicts.
#   PART try: the done-when's try on the loop (its dynamic cache named by the program), both graph variants and one
#             that applies nowhere.
#   PART overhead: the default run's cost against plain runs in alternating rounds (generate and evaluation wrappers).
#   PART verify: the done-when's cost rows (the `overhead` part) and, per profiled run of the generate loop, its
#                recorded and unrecorded time per output token against the plain runs' (issue 51).
#   PART cost: where a generate() loop's default run spends its time: a plain run, the launcher's hooks alone (no
#              profiler), a first and a cached `nsighttc profile`, each launcher's own timing lines kept.
set -u
OUT=$1 PART=$2
source "$(dirname "$0")/gpu_lib.sh"
SMALL=(--requests 3 --warmup 1 --new-tokens 24 --prompt 128 --layers 4)
TRY_LLM=(--batch 8 --requests 6 --new-tokens 64 --name-cache)

record_nsys() {  # name fixture-name program args...: a plain nsys recording (no nsighttc), stripped into fix/
  local name=$1 fix=$2; shift 2
  timeout 240 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node -o "$W/$name" \
    --force-overwrite true python3 "$@" > "$W/$name.log" 2>&1
  echo "nsys $name: rc=$? | $(grep '"wrapper"' "$W/$name.log" | head -1)" >> "$S"
  nsys export --type sqlite -o "$W/$name.sqlite" --force-overwrite true "$W/$name.nsys-rep" >> "$W/$name.log" 2>&1
  python3 benchmarks/strip_fixture.py "$W/$name.sqlite" "$W/fix/$fix" >> "$S" 2>&1
  timeout 120 python3 -m nsighttc analyze "$W/$name.sqlite" -o "$W/runs_an_$name.md" > "$W/an_$name.log" 2>&1
  echo "analyze $name: rc=$?" >> "$S"
  grep -E "^\*\*|Steps|steps of|launch-bound|graph|Graph" "$W/runs_an_$name.md" | head -14 | cut -c1-400 | sed 's/^/   /' >> "$S"
}

case $PART in
repro)
  python3 -c "import torch, torch._dynamo.utils as u; print('dynamo metrics:', hasattr(u, 'compilation_time_metrics'), hasattr(u, 'counters'), hasattr(torch.compiler, 'cudagraph_mark_step_begin'))" >> "$S" 2>&1
  plain llm_b8 python3 wrappers/llm_generate.py "${TRY_LLM[@]}"
  timeout 400 python3 -m nsighttc try --out "$W/runs_try_repro" --variant static-cache --variant compile-reduce-overhead \
    --variant workers=2 -- wrappers/llm_generate.py "${TRY_LLM[@]}" > "$W/try_repro.log" 2>&1
  echo "try repro: rc=$?" >> "$S"; tail -22 "$W/try_repro.log" >> "$S"
  record_nsys static llm_static_graphs_nsys.sqlite.gz wrappers/llm_generate.py "${SMALL[@]}" --cache static
  record_nsys nested llm_nested_forward_nsys.sqlite.gz wrappers/llm_generate.py "${SMALL[@]}" --nvtx-forward forward
  record_nsys nested_hook llm_nested_hook_marks_nsys.sqlite.gz wrappers/llm_generate.py "${SMALL[@]}" \
    --nvtx-forward nsighttc.forward
  pack
  ;;
try)
  # the done-when's try: both graph variants on the loop that names its own (dynamic) cache, and one that applies
  # nowhere (no DataLoader)
  timeout 570 python3 -m nsighttc try --out "$W/runs_try_check" --variant static-cache \
    --variant compile-reduce-overhead --variant workers=2 -- wrappers/llm_generate.py "${TRY_LLM[@]}" > "$W/try.log" 2>&1
  echo "try check: rc=$?" >> "$S"; grep -v "^\[" "$W/try.log" | tail -30 >> "$S"
  d=$(ls -d "$W/runs_try_check"/*/ | tail -1); cp "$d/try.json" "$d/try.md" "$OUT/" 2>/dev/null
  pack
  ;;
overhead)
  # the default run's cost: first run (empty evidence cache) and cached run against plain runs, alternating rounds
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" --rounds 2 llm_generate eval_loop > "$W/ov.log" 2>&1
  echo "overhead: rc=$?" >> "$S"; cp "$W/ov/summary.json" "$OUT/summary_overhead.json" 2>/dev/null
  python3 -c "import json,sys; [print(e['program'], e['plain_s'], e['default_s'], e.get('warm_s'), e['ratio'], e.get('ratio_warm'), e.get('passes')) for e in json.load(open(sys.argv[1]))]" "$W/ov/summary.json" >> "$S" 2>&1
  grep -h "not run again\|Nsight Compute\|replay" "$W"/ov/*_cold.log 2>/dev/null | sort | uniq -c | head >> "$S"
  pack
  ;;
verify)
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" --rounds 2 llm_generate eval_loop > "$W/ov.log" 2>&1
  echo "overhead: rc=$?" >> "$S"; cp "$W/ov/summary.json" "$OUT/summary_overhead.json" 2>/dev/null
  python3 -c "import json,sys; [print(e['program'], e['plain_s'], e['default_s'], e.get('warm_s'), e['ratio'], e.get('ratio_warm')) for e in json.load(open(sys.argv[1]))]" "$W/ov/summary.json" >> "$S" 2>&1
  grep -h '"wrapper"' "$W"/ov/llm_generate_plain.log | cut -c1-400 >> "$S"
  for v in "$W"/ov/runs_llm_generate/*/verdict.json; do
    python3 benchmarks/gpu/verdict_speed.py "$v" >> "$S" 2>&1
  done
  grep -h "nsighttc.launch: \(wrote\|window\)" "$W"/ov/runs_llm_generate/*/torch.stderr.log | cut -c1-300 >> "$S"
  mkdir -p "$W/runs_ov"; cp -r "$W"/ov/runs_* "$W/runs_ov/" 2>/dev/null
  pack
  ;;
cost)
  LLM=(--requests 8 --new-tokens 96)
  python3 -c "import compileall; compileall.compile_dir('nsighttc', quiet=1)"
  plain llm python3 wrappers/llm_generate.py "${LLM[@]}"
  plain llm_hooks python3 -m nsighttc.runtime.launch --annotate script --step-times "$W/hooks_steps.json" -- \
    wrappers/llm_generate.py "${LLM[@]}"
  export NSIGHTTC_CACHE_DIR=$W/cache_cost; rm -rf "$NSIGHTTC_CACHE_DIR"
  profile llm_first 300 -- wrappers/llm_generate.py "${LLM[@]}"
  profile llm_cached 300 -- wrappers/llm_generate.py "${LLM[@]}"
  plain llm_again python3 wrappers/llm_generate.py "${LLM[@]}"
  for d in "$W"/runs_llm_first/*/ "$W"/runs_llm_cached/*/; do
    echo "-- $d" >> "$S"; grep -hE "nsighttc\.(launch|window)|wrote operators|trace written|recorded from" "$d"/*.log \
      2>/dev/null | cut -c1-400 | head -20 >> "$S"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get('phase_seconds')), json.dumps([p.get('window') for p in d.get('passes', [])])[:900])" "$d/run.json" >> "$S" 2>&1
  done
  pack
  ;;
esac
