#!/usr/bin/env bash
# Programs whose time is not in a typical step (issue: steps and time right on every program), on the GPU machine:
# a loop replaying its own CUDA graph, inference on requests of many lengths (and the same padded to three lengths),
# gradient accumulation. Each runs plain (the truth), under `nsighttc profile` with an empty evidence cache then cached,
# recorded whole with torch.profiler by hand (record_torch.py) and with a plain `nsys profile`; the recordings come back
# as fixtures (benchmarks/strip_fixture.py: xz, what no reader takes left out).
#   bash benchmarks/gpu/gpu_steps_time.sh OUT runs|record|verify|varlen|graph|truth|attention|static|graphtrace   (source .device-carry/setup.sh first)
# runs: the plain runs and nsighttc's; record: the recordings by hand (each part fits one call of the device tool);
# verify: the variable-length loop plain and bucketed twice each (the gain a fix must hold), then nsighttc's first and
# cached runs of the graph-replay and variable-length programs; varlen: nsighttc's runs of the variable-length one only;
# graph: the graph-replay loop plain, first run, plain, cached run; truth: the variable-length loop plain and bucketed
# in three alternating rounds (the speed-up bucketing measures, each round's pair on the same host state); attention:
# it plain, bucketed and on the memory-efficient attention backend twice, then profiled first and cached; static: a
# generate() loop with a static cache (its decoding step replayed as CUDA graphs) plain, under nsys and torch.profiler;
# graphtrace: the graph-replaying loop under nsys with graphs traced whole and node by node, twice each, between plains
set -u
OUT=${1:?usage: gpu_steps_time.sh OUT runs|record|verify|varlen|graph|truth|attention|static|graphtrace}; PART=${2:-runs}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_lib.sh"
G="python3 wrappers/graph_replay.py"; V="python3 wrappers/varlen_infer.py"; A="python3 wrappers/grad_accum.py"

if [ "$PART" = runs ]; then
plain graph_replay $G --steps 2000
plain graph_eager $G --steps 300 --eager
plain varlen $V
plain varlen_bucket $V --bucket
plain accum $A
plain accum_tf32 $A --tf32
plain accum_workers $A --workers 4
plain accum_tf32_workers $A --tf32 --workers 4

for n in graph varlen accum; do
  case $n in graph) cmd="$G --steps 2000";; varlen) cmd="$V";; accum) cmd="$A";; esac
  profile "${n}_first" 300 -- $cmd
  profile "${n}_cached" 300 -- $cmd
done
fi

if [ "$PART" = verify ] || [ "$PART" = varlen ]; then
  [ "$PART" = verify ] && for i in 1 2; do plain "varlen_$i" $V; plain "varlen_bucket_$i" $V --bucket; done
  names="graph varlen"; [ "$PART" = varlen ] && names=varlen
  for n in $names; do
    case $n in graph) cmd="$G --steps 2000";; varlen) cmd="$V";; esac
    profile "${n}_first" 300 -- $cmd
    profile "${n}_cached" 300 -- $cmd
  done
fi

record() {  # name script args...: torch.profiler by hand, then nsys, each stripped and xz-compressed into W/fix
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout 240 python3 benchmarks/gpu/record_torch.py "$W/$name.torch.json" "$@" > "$W/$name.torch.log" 2>&1
  echo "torch.profiler $name: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  t0=$(date +%s.%N)
  timeout 240 nsys profile -t cuda,nvtx --cuda-graph-trace=node -f true -o "$W/$name.nsys" python3 "$@" \
    > "$W/$name.nsys.log" 2>&1 && nsys export --type sqlite -f true -o "$W/$name.nsys.sqlite" "$W/$name.nsys.nsys-rep" \
    >> "$W/$name.nsys.log" 2>&1
  echo "nsys $name: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  [ -f "$W/$name.torch.json" ] && python3 benchmarks/strip_fixture.py --keep-events "$W/$name.torch.json" \
    "$W/fix/${name}_torch.json.xz" >> "$S" 2>&1
  [ -f "$W/$name.nsys.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/$name.nsys.sqlite" \
    "$W/fix/${name}_nsys.sqlite.xz" >> "$S" 2>&1
  for f in "$W/$name.torch.json" "$W/$name.nsys.sqlite"; do  # what each plain recording says today
    [ -f "$f" ] && { echo "analyze $(basename "$f"):"; timeout 120 python3 -m nsighttc analyze "$f" --format json \
      -o "$W/fix/$(basename "$f").verdict.json" -q; python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); t=d.get('timeline') or {}; s=t.get('steps') or {}
print('  ', d['tensor_cores']['headline']); print('  ', t.get('verdict'), round(t.get('gpu_busy_share') or 0, 3), s.get('count'), s.get('name'), s.get('median_iteration_ns'), t.get('headline_cause'))
print('   first fix:', next((f['title'] + ' ' + str(f.get('gain')) for f in d['findings'] if f.get('gain')), None))" \
      "$W/fix/$(basename "$f").verdict.json"; } >> "$S" 2>&1
  done
}
if [ "$PART" = graph ]; then  # the graph-replay loop only: plain, first, plain, cached (alternating)
  plain graph_replay_1 $G --steps 2000
  profile graph_first 240 -- $G --steps 2000
  plain graph_replay_2 $G --steps 2000
  profile graph_cached 240 -- $G --steps 2000
fi

if [ "$PART" = truth ]; then
  for i in 1 2 3; do plain "varlen_$i" $V; plain "varlen_bucket_$i" $V --bucket; done
fi

if [ "$PART" = attention ]; then  # the variable-length loop: padding, bucketing and another attention backend, then
  # nsighttc's first and cached runs (the op that paid: the host's pauses before a kernel)
  for i in 1 2; do
    plain "varlen_$i" $V; plain "varlen_bucket_$i" $V --bucket; plain "varlen_efficient_$i" $V --attention efficient
  done
  CUDA_CACHE_DISABLE=1 plain varlen_nojitcache $V  # (the driver's JIT cache off: what a fresh machine's first run meets?)
  profile varlen_first 300 -- $V
  profile varlen_cached 300 -- $V
fi

if [ "$PART" = static ]; then  # generate() replaying its decoding step as CUDA graphs: plain, then recorded by hand
  L="wrappers/llm_generate.py --requests 3 --warmup 1 --new-tokens 24 --prompt 128 --layers 4 --cache static"
  plain llm_static python3 $L
  timeout 240 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node -f true \
    -o "$W/static.nsys" python3 $L > "$W/static.nsys.log" 2>&1 && nsys export --type sqlite -f true \
    -o "$W/static.nsys.sqlite" "$W/static.nsys.nsys-rep" >> "$W/static.nsys.log" 2>&1
  echo "nsys static: rc=$? | $(grep '"wrapper"' "$W/static.nsys.log" | head -1)" >> "$S"
  timeout 240 python3 $L --trace "$W/static.torch.json" > "$W/static.torch.log" 2>&1
  echo "torch.profiler static (the program's own --trace): rc=$? | $(grep '"wrapper"' "$W/static.torch.log" | head -1)" >> "$S"
  for f in "$W/static.nsys.sqlite" "$W/static.torch.json"; do
    [ -f "$f" ] && { timeout 120 python3 -m nsighttc analyze "$f" --format json -o "$W/fix/$(basename "$f").verdict.json" -q
      python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); t=d.get('timeline') or {}; s=t.get('steps') or {}; i=t.get('inference') or {}
print('  ', sys.argv[1].rsplit('/',1)[-1], s.get('count'), s.get('name'), t.get('verdict'))
print('   inference:', {k: i.get(k) for k in ('requests', 'requests_recorded', 'model_calls', 'ttft_ns', 'tpot_ns', 'request_source')})
print('   calls:', {p: (i.get(p) or {}).get('calls') for p in ('prefill', 'decode')})" "$W/fix/$(basename "$f").verdict.json"; } >> "$S" 2>&1
  done
  [ -f "$W/static.nsys.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/static.nsys.sqlite" \
    "$W/fix/llm_static_h200_nsys.sqlite.xz" >> "$S" 2>&1
fi

if [ "$PART" = graphtrace ]; then  # the graph-replaying loop under nsys, graphs traced whole and node by node: what
  # each costs a replay against the plain run (the recording's own cost, which no reading removes)
  plain graph_replay_1 $G --steps 2000
  for mode in graph node graph node; do
    t0=$(date +%s.%N)
    timeout 240 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=$mode -f true \
      -o "$W/gt_$mode" python3 wrappers/graph_replay.py --steps 2000 > "$W/gt_$mode.log" 2>&1 && nsys export \
      --type sqlite -f true -o "$W/gt_$mode.sqlite" "$W/gt_$mode.nsys-rep" >> "$W/gt_$mode.log" 2>&1
    echo "nsys --cuda-graph-trace=$mode: rc=$? $(secs "$t0" "$(date +%s.%N)") s | $(grep 'ms/step' "$W/gt_$mode.log" | tail -1)" >> "$S"
    timeout 120 python3 -m nsighttc analyze "$W/gt_$mode.sqlite" --format json -o "$W/gt_$mode.verdict.json" -q
    python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); t=d.get('timeline') or {}; s=t.get('steps') or {}
print('   read:', s.get('count'), s.get('name'), 'median', s.get('median_iteration_ns'), 'effective', s.get('median_effective_ns'), t.get('verdict'), round(t.get('gpu_busy_share') or 0, 3))" "$W/gt_$mode.verdict.json" >> "$S" 2>&1
  done
  plain graph_replay_2 $G --steps 2000
fi

if [ "$PART" = record ]; then
  record graph wrappers/graph_replay.py --steps 300
  record varlen wrappers/varlen_infer.py --batches 60
  record accum wrappers/grad_accum.py --steps 12
fi
pack
cat "$S"
