#!/usr/bin/env bash
# Programs whose time is not in a typical step (issue: steps and time right on every program), on the GPU machine:
# a loop replaying its own CUDA graph, inference on requests of many lengths (and the same padded to three lengths),
# gradient accumulation. Each runs plain (the truth), under `nsighttc profile` with an empty evidence cache then cached,
# recorded whole with torch.profiler by hand (record_torch.py) and with a plain `nsys profile`; the recordings come back
# as fixtures (benchmarks/strip_fixture.py: xz, what no reader takes left out).
#   bash benchmarks/gpu/gpu_steps_time.sh OUT runs|record|verify|varlen|graph|truth|attention|static|graphtrace|probe|final|final2|compiled|final4|train|novel|novel2|novel3|novel4|novel5|novel6|novel7|novel8|novel9|novel10|forked|trainer_accum|trainer_accum_small|twographs|twographs2   (source .device-carry/setup.sh first)
# runs: the plain runs and nsighttc's; record: the recordings by hand (each part fits one call of the device tool);
# verify: the variable-length loop plain and bucketed twice each (the gain a fix must hold), then nsighttc's first and
# cached runs of the graph-replay and variable-length programs; varlen: nsighttc's runs of the variable-length one only;
# graph: the graph-replay loop plain, first run, plain, cached run; truth: the variable-length loop plain and bucketed
# in three alternating rounds (the speed-up bucketing measures, each round's pair on the same host state); attention:
# it plain, bucketed and on the memory-efficient attention backend twice, then profiled first and cached; static: a
# generate() loop with a static cache (its decoding step replayed as CUDA graphs) plain, under nsys and torch.profiler;
# graphtrace: the graph-replaying loop under nsys with graphs traced whole and node by node, twice each, between plains;
# probe: wrappers/graph_partial.py and wrappers/varlen_conv.py plain, profiled first and cached, and recorded by hand;
# final: the graph-replaying, variable-length and image-size loops plain and profiled (first, cached), a smaller image
# loop plain and under nsys (the fixture), each profiled run's verdict and window events kept; then the shared programs;
# final2: the image loop profiled first and cached again (verdicts and events kept), then the shared vit_eval.py
# (NO_SHARED=1: not); compiled: the variable-length loop under torch.compile(mode="reduce-overhead") (a CUDA graph
# recorded per new length) plain and bucketed, profiled first and cached, recorded by hand with torch.profiler; then
# wrappers/compile_loop.py --mode reduce-overhead (a training step replayed as CUDA graphs) plain and profiled first;
# final4: the compiled variable-length loop, BERT eager and the image loop, each plain and bucketed around its profiled
# first and cached runs (verdicts and window events kept: the gain ranges against what bucketing measured); train:
# wrappers/varlen_train.py (a fine-tune padded to each batch's longest text) the same way, then recorded by hand;
# novel: wrappers/graph_serve.py, GPT-2 and a statically compiled BERT at many lengths (see the part); novel2: the
# first two again at later code, the server's live recordings kept, GPT-2 recorded by hand, the shared programs;
# novel3: the server plain around its first and cached runs; twographs: graph_replay.py --two-graphs (two replays a
# step) plain, profiled first and cached, recorded by hand; twographs2: the same at later code, and 40 steps under
# nsys with graphs traced whole; novel4: graphs with gradient accumulation (5 replays a step) and dynamic batching;
# novel5: the first again at later code, recorded short by hand (node and graph traces), then the shared programs;
# novel6: the graph-replaying loops (accumulation, one and two graphs a step, the server) at the last code; novel7:
# two graphs a step and the accumulation loop, first and cached, with the launcher's syncs after the window left out;
# novel8: dynamic batching bucketed with filler requests and with empty rows on a fresh machine, then vit_eval.py;
# novel9: wrappers/graph_loader.py (a graphed step fed by a DataLoader) plain on the GPU's own batches, with 2 and 8
# workers and eager, profiled first and cached, recorded by hand; graph_replay.py --accum 4 graphed and eager;
# novel10: graph_loader.py with 2 and 8 workers in turn around its first and cached runs (the launcher says the
# loader's workers now), then the shared programs whose loaders have workers (vit_eval.py, lit_cifar.py; run again
# at the final code as call 3); forked: graph_loader.py plain around its first run with and without its DataLoader
# workers' operators kept out of the first session (NSIGHTTC_RECORD_FORKED=1: as before), its cached run, then the
# shared programs whose loaders have workers (lit_cifar.py, vit_eval.py); trainer_accum: wrappers/trainer_finetune.py
# --grad-accum 4 (the Trainer's accumulation) plain around its first and cached runs, then recorded by hand;
# trainer_accum_small: the same with a tiny BERT plain twice, then under a plain nsys (the fixture) and analysed;
# plainrec: programs of every kind recorded as a user does without marks: a plain `nsys profile -t cuda` and
# torch.profiler's CUDA activity alone (record_torch.py --cuda-only), each analysed, beside a plain run (the truth);
# slowsteps: wrappers/checkpoint_loop.py (checkpoints and slow reads: slow steps at known shapes) plain around its
# first and cached runs, then recorded by hand (torch.profiler, plain nsys) and analysed
# checkpoint: the same program's fixes measured plain (a checkpoint every 15 steps as written; every 30: "save less
# often"; --save-mode thread: pinned copies and a writer thread, "off the loop"; none), around its first and cached
# runs and its recordings by hand: the `checkpoint-in-loop` finding's gain range against what the fixes measure
# final_ck: the same at the final code, shorter (as written and none, plain; first and cached runs), and a small model
# saving every step (its checkpoint in every step, so among the steady ones: the host's `torch.save` frames)
# litkind: ../shared/programs/lit_cifar.py plain around a first and two cached runs (headline kind per run), as fixtures
# encoder: benchmarks/gpu/probe_encoder_varlen.py (a variable-length loop not built like the wrappers) plain padded and
# bucketed around its first and cached runs, then recorded by hand; encoder2: its plain pairs in four alternating
# rounds (the rate after the first batch too) around a first and a cached run; encoder3: its batches at lengths seen
# before timed plain, under the launcher's step hooks alone and with its host sampler, and in a cached run;
# vitdata: ../shared/programs/vit_eval.py plain as written, with 8 workers and with its batches loaded before the loop
# readback: wrappers/checkpoint_loop.py --save-mode copy (the weights copied to the host every 15 steps and averaged
# there: a checkpoint's bytes, no torch.save) plain (as written, every 30, none) around its first and cached runs, a
# first run of the torch.save loop beside it, then recorded by hand; runs' traces and host samples as fixtures;
# readback2: at the code that reads the host's stacks in those steps: the copying loop's first and cached runs around
# plain runs (as written, none), the writer-thread save's first run, then shared programs (hf_bert.py, vit_eval.py)
# users: three programs written as their libraries' docs show (benchmarks/gpu/user_programs/), see the part; users2:
# the compiled one again (fixed), and the eval loop's bucketing gain in two more pairs (NO_EV=1: not);
# users3: three more (a graphed transformer step with capturable AdamW, a transformers pipeline over texts of many
# lengths, Lightning's accumulate_grad_batches): plain, first and cached runs, then recorded by hand while time is left;
# users3rec: the three recorded by hand, each analysis timed (the graph loop's under py-spy), fixtures cut with --until;
# users3b: Lightning's first and cached runs at the window that counts its steps at the new rate, a pipeline pair,
# then the graph loop's whole torch.profiler recording read under py-spy (pip install --target: the image has none);
# users3c: the final code on the three: each plain (the pipeline's pair first on a fresh machine), first and cached;
# users4: generate() over prompts of many lengths, each batch left-padded to its longest (user_programs/gen_varlen.py):
# plain pairs (bucketed to multiples of 128) around first and cached runs, then recorded by hand while time is left;
# users4b: its plain runs with the prompts bucketed, a static cache, both, and as written again; users4c: its first and
# cached runs again (at the code that pays a request's calls per length);
# users5: a program that profiles itself as PyTorch's profiler recipe shows (user_programs/sched_cycles.py: a schedule
# whose cycle repeats, one trace file per cycle), eager and graph-replaying: plain, with its own profiler (the log
# folders read by `nsighttc analyze`, kept as fixtures), and under `nsighttc profile` (its profiler beside ours);
# users5c: Lightning's Trainer(profiler="pytorch") (user_programs/lit_profiler.py): plain (its own trace read by
# `nsighttc analyze`), then its first run (the profiler held off, Lightning's stop of ours left off);
# users5b: the same at the code that joins a profiler's cycles and holds the program's own profiler off: plain, its log
# folders analysed, its first and cached runs (torch.profiler), the graph-replaying one's first run;
# hfsave: ../shared/programs/hf_bert.py saving a Trainer checkpoint every 15 steps (save_strategy="steps": safetensors
# of the model, torch.save of AdamW's state), plain with and without saving around its first and cached runs
set -u
# users6: a transformers image-classification pipeline fed one photo a call (user_programs/hf_pipeline_images.py:
# its preprocessing on the host; plain as written, with the pipeline's batching and workers, recorded by hand, first
# and cached runs) and a GPU-bound loop recorded by hand from a step at which its GPU still had steps queued
# (user_programs/async_window.py): each recording read by `nsighttc analyze`, and kept stripped for the CPU tests
# users6b: the pipeline again at later code: recorded by hand and read as recorded (not stripped: its Python calls
# begin past its first megabytes), its first and cached runs between plain runs as written and batched
# final6: the stop's final code: the pipeline's first and cached runs beside plain runs, then the graph-replaying,
# variable-length (plain and bucketed) and accumulation loops' first and cached runs, each skipped past 480 s;
# final6b: the pipeline's first and cached runs again between plain runs (a window moved to its extension only after
# a plateau)
# firstcost: why a first run of a host-bound program is slower than its cached and plain runs: the machine's cores
# (SMT siblings), the pipeline plain alone and beside two idle-class spinners (as the ncu frontends are), its first
# run with each process's CPU time sampled (proc_cpu_sampler.py), a first run with nothing beside the timeline
# (--overlap none), the cached run; the accumulation loop plain, first (sampled) and first with --overlap none
# firstcost2: the same first and cached runs at the code whose gated programs pause the frontends above them
# (runtime/paused_frontends.py), each run's paused seconds from run.json, then ../shared/programs' hf_bert and vit_eval
# firstcost3: the graph-replaying and variable-length loops' first runs at that code, beside their plain runs
# firstcost4: the graph-replaying loop's first runs with the gate after the CUDA context and before the first line
# torchrun: ../shared/programs' torchrun programs on two GPUs (kind nvidia-h200-x2): plain, first, cached and plain runs of
# each (TORCHRUN="prog args|..." picks them), their verdicts kept as fixtures
# final7: the issue's three kinds (graph replay, variable lengths, accumulation) plain around their first and cached
# runs at the code whose ranges nest whole (parse/range_paths.py), final7s: the shared single-GPU programs
# (lit_cifar, hf_bert, vit_eval, compiled_gpt, then llm_generate while time is left); ddp_shared: with no two-GPU
# machine, a torchrun job of two ranks sharing GPU 0 (wrappers/ddp_train.py --share-gpu, gloo), rank 1 sleeping 30 ms a
# step, plain around its first and cached runs, then rank 0 sleeping with no ranges (a first run keeps rank 0's window)
OUT=${1:?usage: gpu_steps_time.sh OUT runs|record|verify|varlen|graph|truth|attention|static|graphtrace|probe|final|final2|compiled|final4|train|novel|novel2|novel3|novel4|novel5|novel6|novel7|novel8|novel9|novel10|forked|trainer_accum|trainer_accum_small|twographs|twographs2|plainrec|slowsteps|checkpoint|final_ck|every_ck|litkind|encoder|encoder2|encoder3|vitdata|readback|readback2|hfsave|users|users2|users3|users3rec|users3b|users3c|users4|users4b|users4c|users5|users5b|users5c|users6|users6b|final6|final6b|firstcost|firstcost2|firstcost3|firstcost4|torchrun|final7|final7s|ddp_shared}; PART=${2:-runs}
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

pairs_around_runs() {  # name fix limit flags -- cmd...: the program plain and with its fix's flags plain, its first and
  # cached profiled runs (limit seconds each), then both plain again (NAME_1, NAME_FIX_1, NAME_first, NAME_cached, ...)
  local n=$1 fx=$2 limit=$3 flags=() ; shift 3
  while [ "$1" != -- ]; do flags+=("$1"); shift; done; shift
  plain "${n}_1" "$@"; plain "${n}_${fx}_1" "$@" "${flags[@]}"
  profile "${n}_first" "$limit" -- "$@"; profile "${n}_cached" "$limit" -- "$@"
  plain "${n}_2" "$@"; plain "${n}_${fx}_2" "$@" "${flags[@]}"
}

keep_runs() {  # name...: each profiled run's verdict and window events, into W/fix/NAME (for the CPU tests)
  local n d
  for n in "$@"; do
    d=$(ls -d "$W/runs_$n"/*/ 2>/dev/null | tail -1)
    [ -n "$d" ] && mkdir -p "$W/fix/$n" && cp "$d/verdict.json" "$W/fix/$n/" 2>/dev/null
    [ -n "$d" ] && grep -h "nsighttc.launch: window" "$d"/torch.stderr.log 2>/dev/null | head -50 > "$W/fix/$n/window_events.txt"
  done
}

shared_after() {  # part limit program...: the part's files packed, then the shared programs in the time left to limit
  local part=$1 limit=$2; shift 2
  echo "$part part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  [ -z "${NO_SHARED:-}" ] && timeout $(( limit - $(date +%s) + T0 )) bash .device-carry/programs/run_on_gpu.sh "$W/sp" \
    "$@" > "$W/programs.log" 2>&1; echo "shared programs: rc=$?" >> "$S"
  cp "$W/sp/summary.txt" "$OUT/programs_summary.txt" 2>/dev/null
  echo "$part took $(( $(date +%s) - T0 )) s" >> "$S"
}

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
  [ "${RECORD_ANALYZE:-1}" = 0 ] && return  # (a large recording: read on the CPU from its fixture instead)
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
  [ -f "$W/static.torch.json" ] && python3 benchmarks/strip_fixture.py "$W/static.torch.json" \
    "$W/fix/llm_static_h200_torch.json.xz" >> "$S" 2>&1
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

if [ "$PART" = probe ]; then  # programs of kinds no fixture holds: a model graphed by make_graphed_callables (two graphs
  # and eager kernels a step) and image inference at 25 sizes under cudnn.benchmark (cuDNN times algorithms per shape)
  P="python3 wrappers/graph_partial.py"; C="python3 wrappers/varlen_conv.py"
  plain partial $P; plain partial_eager $P --eager
  profile partial_first 200 -- $P
  profile partial_cached 200 -- $P
  record partial wrappers/graph_partial.py --steps 300
  timeout 200 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$W/partial_g.nsys" $P --steps 300 \
    > "$W/partial_g.log" 2>&1 && nsys export --type sqlite -f true -o "$W/fix/partial_graphs.nsys.sqlite" \
    "$W/partial_g.nsys.nsys-rep" >> "$W/partial_g.log" 2>&1
  echo "nsys graph-level partial: rc=$?" >> "$S"
  plain conv $C; plain conv_bucket $C --bucket; plain conv_nobench $C --no-benchmark; plain conv_2 $C
  plain conv_bucket_2 $C --bucket
  profile conv_first 240 -- $C
  profile conv_cached 240 -- $C
  record conv wrappers/varlen_conv.py
  for f in "$W/fix/partial_graphs.nsys.sqlite"; do
    [ -f "$f" ] && timeout 120 python3 -m nsighttc analyze "$f" -q > "$W/partial_graphs.analyze.txt" 2>&1
    head -12 "$W/partial_graphs.analyze.txt" >> "$S"
    python3 benchmarks/strip_fixture.py "$f" "$W/fix/partial_graphs_nsys.sqlite.xz" >> "$S" 2>&1; rm -f "$f"
  done
fi

if [ "$PART" = final ]; then
  T0=$(date +%s)
  plain graph_1 $G --steps 2000
  profile graph_first 200 -- $G --steps 2000
  profile graph_cached 200 -- $G --steps 2000
  plain varlen_warm $V  # (the driver's JIT cache filled: the runs below are all warm-cache ones)
  plain varlen_1 $V; plain varlen_bucket_1 $V --bucket
  profile varlen_first 240 -- $V
  profile varlen_cached 240 -- $V
  plain varlen_2 $V; plain varlen_bucket_2 $V --bucket
  C="python3 wrappers/varlen_conv.py"; CS="$C --batches 80 --size-step 16"
  profile conv_first 200 -- $C
  profile conv_cached 200 -- $C
  plain conv_small $CS; plain conv_small_bucket $CS --bucket; plain conv_small_nobench $CS --no-benchmark
  timeout 200 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$W/conv_small.nsys" $CS \
    > "$W/conv_small.nsys.log" 2>&1 && nsys export --type sqlite -f true -o "$W/conv_small.nsys.sqlite" \
    "$W/conv_small.nsys.nsys-rep" >> "$W/conv_small.nsys.log" 2>&1
  echo "nsys conv_small: rc=$? | $(grep 'images/s' "$W/conv_small.nsys.log" | tail -1)" >> "$S"
  [ -f "$W/conv_small.nsys.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/conv_small.nsys.sqlite" \
    "$W/fix/varlen_conv_nsys.sqlite.xz" >> "$S" 2>&1 && timeout 120 python3 -m nsighttc analyze \
    "$W/fix/varlen_conv_nsys.sqlite.xz" -q 2>&1 | head -12 >> "$S"
  keep_runs graph_first graph_cached varlen_first varlen_cached conv_first conv_cached  # (for the CPU tests)
  echo "final part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  if [ $(( $(date +%s) - T0 )) -lt 330 ] && [ -d .device-carry/programs ]; then
    timeout $(( 540 - $(date +%s) + T0 )) bash .device-carry/programs/run_on_gpu.sh "$W/sp" hf_bert.py llm_generate.py vit_eval.py \
      > "$W/sp.log" 2>&1
    echo "shared programs: rc=$?" >> "$S"; cp "$W/sp/summary.txt" "$OUT/programs_summary.txt" 2>/dev/null
  fi
fi

if [ "$PART" = final2 ]; then
  plain conv_1 python3 wrappers/varlen_conv.py
  profile conv_first 200 -- python3 wrappers/varlen_conv.py
  profile conv_cached 200 -- python3 wrappers/varlen_conv.py
  keep_runs conv_first conv_cached
  [ -d .device-carry/programs ] && [ -z "${NO_SHARED:-}" ] && timeout 300 bash .device-carry/programs/run_on_gpu.sh \
    "$W/sp" vit_eval.py > "$W/sp.log" 2>&1; echo "shared programs: rc=$?" >> "$S"
  cp "$W/sp/summary.txt" "$OUT/programs_summary.txt" 2>/dev/null
fi

if [ "$PART" = compiled ]; then
  T0=$(date +%s); VC="$V --compile reduce-overhead"
  plain vc_1 $VC; plain vc_bucket_1 $VC --bucket
  profile vc_first 240 -- $VC
  profile vc_cached 200 -- $VC
  t0=$(date +%s.%N)
  timeout 200 python3 benchmarks/gpu/record_torch.py "$W/vc.torch.json" wrappers/varlen_infer.py --batches 60 \
    --compile reduce-overhead > "$W/vc.torch.log" 2>&1
  echo "torch.profiler vc: rc=$? $(secs "$t0" "$(date +%s.%N)") s | $(grep 'requests/s' "$W/vc.torch.log" | tail -1)" >> "$S"
  [ -f "$W/vc.torch.json" ] && python3 benchmarks/strip_fixture.py --keep-events "$W/vc.torch.json" \
    "$W/fix/varlen_compiled_torch.json.xz" >> "$S" 2>&1 && timeout 120 python3 -m nsighttc analyze \
    "$W/fix/varlen_compiled_torch.json.xz" -q 2>&1 | head -12 >> "$S"
  keep_runs vc_first vc_cached
  echo "compiled part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  if [ $(( $(date +%s) - T0 )) -lt 360 ]; then
    plain cl_ro python3 wrappers/compile_loop.py --mode reduce-overhead
    profile cl_ro_first $(( 560 - $(date +%s) + T0 )) -- python3 wrappers/compile_loop.py --mode reduce-overhead
  fi
fi

if [ "$PART" = final4 ]; then
  T0=$(date +%s); VC="$V --compile reduce-overhead"; C="python3 wrappers/varlen_conv.py"
  plain vc_1 $VC; plain vc_bucket_1 $VC --bucket
  profile vc_first 200 -- $VC
  profile vc_cached 200 -- $VC
  plain vc_2 $VC; plain vc_bucket_2 $VC --bucket
  plain varlen_1 $V; plain varlen_bucket_1 $V --bucket
  profile varlen_first 200 -- $V
  profile varlen_cached 200 -- $V
  plain varlen_2 $V; plain varlen_bucket_2 $V --bucket
  plain conv_1 $C; plain conv_bucket_1 $C --bucket
  profile conv_first 200 -- $C
  profile conv_cached 200 -- $C
  plain conv_2 $C; plain conv_bucket_2 $C --bucket
  keep_runs vc_first vc_cached varlen_first varlen_cached conv_first conv_cached
  echo "final4 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = train ]; then  # a fine-tune on texts of many lengths (dynamic padding): plain and bucketed around its
  # profiled first and cached runs (verdicts and window events kept), then recorded whole by hand (torch.profiler, nsys)
  T0=$(date +%s); VT="python3 wrappers/varlen_train.py"
  plain vt_1 $VT; plain vt_bucket_1 $VT --bucket
  profile vt_first 200 -- $VT
  profile vt_cached 200 -- $VT
  plain vt_2 $VT; plain vt_bucket_2 $VT --bucket
  keep_runs vt_first vt_cached
  echo "train part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack  # (what comes back if the recordings below run out of time)
  # 40 steps recorded (60 made a 330 MB trace whose reading did not fit the call)
  [ $(( $(date +%s) - T0 )) -lt 330 ] && RECORD_ANALYZE=0 record varlen_train wrappers/varlen_train.py --steps 40
  echo "train took $(( $(date +%s) - T0 )) s" >> "$S"
fi

gpt2_runs() {  # GPT-2 at many lengths: a plain pair (padded, bucketed) around its profiled first and cached runs, twice
  local VG="$V --model gpt2"
  plain vg_1 $VG; plain vg_bucket_1 $VG --bucket
  profile vg_first 200 -- $VG
  profile vg_cached 200 -- $VG
  plain vg_2 $VG; plain vg_bucket_2 $VG --bucket
}

if [ "$PART" = novel ]; then  # programs of kinds no fixture holds: a server replaying one of three hand-captured
  # CUDA graphs a batch and reading each answer back; GPT-2 on batches padded to their longest text (and bucketed);
  # BERT under torch.compile(dynamic=False), which compiles again at every new length. Each plain around its profiled
  # first and cached runs (verdicts and window events kept), then the server recorded whole by hand
  T0=$(date +%s); GS="python3 wrappers/graph_serve.py"
  VS="$V --compile static --layers 2 --batches ${STATIC_BATCHES:-40}"
  plain gs_1 $GS; plain gs_eager $GS --eager
  profile gs_first 200 -- $GS
  profile gs_cached 200 -- $GS
  gpt2_runs
  keep_runs gs_first gs_cached vg_first vg_cached
  echo "novel part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  if [ $(( $(date +%s) - T0 )) -lt 300 ]; then
    plain vs_1 $VS; plain vs_bucket_1 $VS --bucket
    profile vs_first $(( 560 - $(date +%s) + T0 )) -- $VS
    keep_runs vs_first
  fi
  [ $(( $(date +%s) - T0 )) -lt 440 ] && record graph_serve wrappers/graph_serve.py --batches 300
  echo "novel took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = novel2 ]; then  # the server and GPT-2 again at this code: the server's live recordings kept (the
  # eager calls before its replays), GPT-2 plain around its runs and recorded by hand; then the shared programs
  T0=$(date +%s); GS="python3 wrappers/graph_serve.py"
  plain gs_1 $GS
  profile gs_first 200 -- $GS
  profile gs_cached 200 -- $GS
  for n in gs_first gs_cached; do
    d=$(ls -d "$W/runs_$n"/*/ 2>/dev/null | tail -1)
    [ -f "$d/torch_trace.json" ] && python3 benchmarks/strip_fixture.py "$d/torch_trace.json" \
      "$W/fix/graph_serve_${n#gs_}_live.json.xz" >> "$S" 2>&1
  done
  gpt2_runs
  keep_runs gs_first gs_cached vg_first vg_cached
  echo "novel2 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  [ $(( $(date +%s) - T0 )) -lt 260 ] && record varlen_gpt2 wrappers/varlen_infer.py --model gpt2 --batches 60
  echo "novel2 part 2 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  if [ $(( $(date +%s) - T0 )) -lt 330 ] && [ -d .device-carry/programs ]; then
    timeout $(( 570 - $(date +%s) + T0 )) bash .device-carry/programs/run_on_gpu.sh "$W/sp" hf_bert.py llm_generate.py \
      > "$W/sp.log" 2>&1
    echo "shared programs: rc=$?" >> "$S"; cp "$W/sp/summary.txt" "$OUT/programs_summary.txt" 2>/dev/null
  fi
fi

if [ "$PART" = novel3 ]; then  # the server once more at the code that tells the window where its replays begin
  GS="python3 wrappers/graph_serve.py"
  plain gs_1 $GS
  profile gs_first 200 -- $GS
  profile gs_cached 200 -- $GS
  plain gs_2 $GS
  keep_runs gs_first gs_cached
fi

if [ "$PART" = twographs ]; then  # a training step captured as two graphs (forward+backward, the optimizer's step),
  # both replayed each step: what the steps are, live and recorded by hand (reproduced before any change)
  G2="$G --steps 2000 --two-graphs"
  plain graph_one $G --steps 2000; plain graph_two $G2
  profile two_first 200 -- $G2
  profile two_cached 200 -- $G2
  keep_runs two_first two_cached
  pack
  record graph_two wrappers/graph_replay.py --steps 300 --two-graphs
fi

if [ "$PART" = twographs2 ]; then  # the same at the code that groups graphs replayed in turn: profiled first and
  # cached, then a short run under nsys with graphs traced whole (the CPU fixture: one record a replay)
  G2="$G --steps 2000 --two-graphs"
  plain graph_two $G2
  profile two_first 200 -- $G2
  profile two_cached 200 -- $G2
  keep_runs two_first two_cached
  timeout 200 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$W/two_g.nsys" $G --steps 40 \
    --two-graphs > "$W/two_g.log" 2>&1 && nsys export --type sqlite -f true -o "$W/two_g.sqlite" "$W/two_g.nsys.nsys-rep" \
    >> "$W/two_g.log" 2>&1
  echo "nsys graph-level two graphs: rc=$? | $(grep 'ms/step' "$W/two_g.log" | tail -1)" >> "$S"
  [ -f "$W/two_g.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/two_g.sqlite" \
    "$W/fix/graph_two_nsys_graphs.sqlite.xz" >> "$S" 2>&1 && timeout 120 python3 -m nsighttc analyze \
    "$W/fix/graph_two_nsys_graphs.sqlite.xz" -q 2>&1 | head -8 >> "$S"
fi

if [ "$PART" = novel4 ]; then  # two more kinds: gradient accumulation with graphs (the forward and backward graph
  # replayed for 4 micro-batches, then the optimizer's graph: 5 replays an optimizer step) and a server's dynamic
  # batching (1-64 requests of 128 tokens a batch, bucketed to 16/32/64 requests), each plain around its profiled first
  # and cached runs (verdicts and window events kept); then the first recorded by hand
  T0=$(date +%s); GA="$G --steps 400 --accum 4"; VB="$V --vary batch"
  plain ga_1 $GA; plain ga_eager $G --steps 100 --eager
  profile ga_first 200 -- $GA
  profile ga_cached 200 -- $GA
  plain ga_2 $GA
  plain vb_1 $VB; plain vb_bucket_1 $VB --bucket
  profile vb_first 200 -- $VB
  profile vb_cached 200 -- $VB
  plain vb_2 $VB; plain vb_bucket_2 $VB --bucket
  keep_runs ga_first ga_cached vb_first vb_cached
  echo "novel4 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  [ $(( $(date +%s) - T0 )) -lt 380 ] && record graph_accum wrappers/graph_replay.py --steps 100 --accum 4
  echo "novel4 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi

if [ "$PART" = novel5 ]; then  # the accumulation loop at the code that finds cycles of up to 64 replays: plain around
  # its profiled first and cached runs; short recordings by hand under nsys with graphs traced node by node and whole
  # (the CPU fixtures); the dynamic-batching pair twice more; then the shared programs
  T0=$(date +%s); GA="$G --steps 400 --accum 4"; VB="$V --vary batch"
  plain ga_1 $GA
  profile ga_first 200 -- $GA
  profile ga_cached 200 -- $GA
  plain ga_2 $GA
  keep_runs ga_first ga_cached
  for how in node graph; do
    n=$([ $how = node ] && echo 12 || echo 40)
    timeout 200 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=$how -f true \
      -o "$W/ga_$how.nsys" $G --steps $n --accum 4 --layers 4 > "$W/ga_$how.log" 2>&1 && nsys export --type sqlite \
      -f true -o "$W/ga_$how.sqlite" "$W/ga_$how.nsys.nsys-rep" >> "$W/ga_$how.log" 2>&1
    echo "nsys $how accumulation: rc=$? | $(grep 'ms/step' "$W/ga_$how.log" | tail -1)" >> "$S"
    [ -f "$W/ga_$how.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/ga_$how.sqlite" \
      "$W/fix/graph_accum_nsys_$how.sqlite.xz" >> "$S" 2>&1 && timeout 120 python3 -m nsighttc analyze \
      "$W/fix/graph_accum_nsys_$how.sqlite.xz" -q 2>&1 | head -8 >> "$S"
  done
  for i in 3 4; do plain vb_$i $VB; plain vb_bucket_$i $VB --bucket; done
  shared_after novel5 560 hf_bert.py llm_generate.py
fi

if [ "$PART" = novel6 ]; then  # the last code on the graph-replaying loops: the accumulation loop plain around its
  # profiled first and cached runs (the cached run stopped on too few replays after its window before), one and two
  # graphs a step and the three-graph server profiled once each beside a plain run
  T0=$(date +%s); GA="$G --steps 400 --accum 4"; GS="python3 wrappers/graph_serve.py"
  plain ga_1 $GA
  profile ga_first 200 -- $GA
  profile ga_cached 200 -- $GA
  plain ga_2 $GA
  plain graph_one $G --steps 2000; profile one_cached 200 -- $G --steps 2000
  plain graph_two $G --steps 2000 --two-graphs; profile two_cached 200 -- $G --steps 2000 --two-graphs
  plain gs_1 $GS; profile gs_cached 200 -- $GS
  keep_runs ga_first ga_cached one_cached two_cached gs_cached
  echo "novel6 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi

if [ "$PART" = novel7 ]; then  # the loops whose host runs ahead of their graphs, after the launcher's own syncs past
  # the window are left out: two graphs a step plain around its first and cached runs, the accumulation loop cached
  T0=$(date +%s); GA="$G --steps 400 --accum 4"; G2="$G --steps 2000 --two-graphs"
  plain graph_two $G2
  profile two_first 200 -- $G2
  profile two_cached 200 -- $G2
  plain graph_two_2 $G2
  profile ga_first 200 -- $GA
  profile ga_cached 200 -- $GA
  plain ga_1 $GA
  keep_runs two_first two_cached ga_first ga_cached
  echo "novel7 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi

if [ "$PART" = novel8 ]; then  # dynamic batching's bucketed runs on a fresh machine: padding rows as filler requests
  # (no attention mask, the kernel the unbucketed loop runs) and as rows of no tokens (a mask: another kernel, compiled
  # on its first run), alternating with the unbucketed loop; then the unbucketed loop profiled first and cached, and
  # the shared vit_eval.py
  T0=$(date +%s); VB="$V --vary batch"
  plain vb_1 $VB; plain vb_full_1 $VB --bucket; plain vb_empty_1 $VB --bucket --pad-rows empty
  plain vb_empty_2 $VB --bucket --pad-rows empty; plain vb_full_2 $VB --bucket; plain vb_2 $VB
  plain vb_full_3 $VB --bucket; plain vb_3 $VB
  profile vb_first 200 -- $VB
  profile vb_cached 200 -- $VB
  keep_runs vb_first vb_cached
  shared_after novel8 560 vit_eval.py
fi

if [ "$PART" = novel9 ]; then  # a graphed step fed by a DataLoader's workers; the accumulation loop eager and graphed
  T0=$(date +%s); GL="python3 wrappers/graph_loader.py"
  plain gl_dev $GL --on-device; plain gl_1 $GL; plain gl_w8 $GL --workers 8; plain gl_eager $GL --eager
  plain gl_2 $GL
  profile gl_first 200 -- $GL
  profile gl_cached 200 -- $GL
  plain gl_3 $GL
  keep_runs gl_first gl_cached
  record gl wrappers/graph_loader.py --steps 150
  plain accum_graph $G --accum 4 --steps 1000; plain accum_eager $G --eager --accum 4 --steps 300
  plain accum_graph_2 $G --accum 4 --steps 1000; plain accum_eager_2 $G --eager --accum 4 --steps 300
  echo "novel9 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = novel10 ]; then  # the data-loading gain against the loader's own workers, at this code
  T0=$(date +%s); GL="python3 wrappers/graph_loader.py"
  plain gl_1 $GL; plain gl_w8_1 $GL --workers 8
  profile gl_first 200 -- $GL
  profile gl_cached 200 -- $GL
  plain gl_w8_2 $GL --workers 8; plain gl_2 $GL
  keep_runs gl_first gl_cached
  shared_after novel10 570 vit_eval.py lit_cifar.py
fi

if [ "$PART" = forked ]; then  # DataLoader workers forked while a first run records every operator (forked_children)
  T0=$(date +%s); GL="python3 wrappers/graph_loader.py"
  plain gl_1 $GL
  NSIGHTTC_CACHE_DIR=$W/cache_new profile gl_first 200 -- $GL
  NSIGHTTC_CACHE_DIR=$W/cache_old NSIGHTTC_RECORD_FORKED=1 profile gl_first_as_before 200 -- $GL
  NSIGHTTC_CACHE_DIR=$W/cache_new profile gl_cached 200 -- $GL
  plain gl_2 $GL
  keep_runs gl_first gl_first_as_before gl_cached
  shared_after forked 570 lit_cifar.py vit_eval.py
fi

if [ "$PART" = trainer_accum ]; then  # the Trainer with gradient_accumulation_steps=4 (accelerate skips the step)
  T0=$(date +%s); TR="python3 wrappers/trainer_finetune.py --grad-accum 4"
  plain tr_accum_1 $TR --steps 40
  profile tr_accum_first 240 -- $TR --steps 40
  profile tr_accum_cached 240 -- $TR --steps 40
  plain tr_accum_2 $TR --steps 40
  keep_runs tr_accum_first tr_accum_cached
  record tr_accum wrappers/trainer_finetune.py --grad-accum 4 --steps 12
  echo "trainer_accum took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = trainer_accum_small ]; then  # the same with a tiny BERT: a plain nsys recording small enough to keep
  T0=$(date +%s); TS="wrappers/trainer_finetune.py --grad-accum 4 --tiny --seq 32 --steps 10"
  plain tr_small_1 python3 $TS; plain tr_small_2 python3 $TS
  timeout 240 nsys profile -t cuda,nvtx -f true -o "$W/tr_small.nsys" python3 $TS > "$W/tr_small.nsys.log" 2>&1 && \
    nsys export --type sqlite -f true -o "$W/tr_small.nsys.sqlite" "$W/tr_small.nsys.nsys-rep" >> "$W/tr_small.nsys.log" 2>&1
  echo "nsys tr_small: rc=$? $(grep -E 'samples/s' "$W/tr_small.nsys.log" | tail -1)" >> "$S"
  python3 benchmarks/strip_fixture.py "$W/tr_small.nsys.sqlite" "$W/fix/trainer_accum_nsys.sqlite.xz" >> "$S" 2>&1
  timeout 120 python3 -m nsighttc analyze "$W/tr_small.nsys.sqlite" -o "$W/fix/tr_small_nsys.md" -q >> "$S" 2>&1
  grep -E "steady steps|^\*\*GPU busy|^First fix" "$W/fix/tr_small_nsys.md" | head -4 >> "$S"
  echo "trainer_accum_small took $(( $(date +%s) - T0 )) s" >> "$S"
fi

plainrec() {  # name script args...: plain, then a plain nsys (CUDA only) and torch.profiler's CUDA activity alone
  local name=$1; shift
  plain "$name" python3 "$@"
  local t0; t0=$(date +%s.%N)
  timeout 200 nsys profile -t cuda -f true -o "$W/$name.nsys" python3 "$@" > "$W/$name.nsys.log" 2>&1 && \
    nsys export --type sqlite -f true -o "$W/$name.nsys.sqlite" "$W/$name.nsys.nsys-rep" >> "$W/$name.nsys.log" 2>&1
  echo "nsys $name: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  t0=$(date +%s.%N)
  timeout 200 python3 benchmarks/gpu/record_torch.py --cuda-only "$W/$name.cuda.json" "$@" > "$W/$name.cuda.log" 2>&1
  echo "torch.profiler CUDA only $name: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  for f in "$W/$name.nsys.sqlite" "$W/$name.cuda.json"; do
    [ -f "$f" ] || continue
    timeout 120 python3 -m nsighttc analyze "$f" -o "$W/fix/$(basename "$f").md" -q >> "$S" 2>&1
    { echo "analyze $(basename "$f"):"; grep -E "^Start-up|^\*\*GPU busy|^First fix|^Where" "$W/fix/$(basename "$f").md" | \
      cut -c1-400 | sed 's/^/   /'; } >> "$S"
  done
  [ -f "$W/$name.nsys.sqlite" ] && python3 benchmarks/strip_fixture.py "$W/$name.nsys.sqlite" \
    "$W/fix/${name}_nsys.sqlite.xz" >> "$S" 2>&1
  [ -f "$W/$name.cuda.json" ] && python3 benchmarks/strip_fixture.py --keep-events "$W/$name.cuda.json" \
    "$W/fix/${name}_cuda_torch.json.xz" >> "$S" 2>&1
}

if [ "$PART" = plainrec ]; then
  T0=$(date +%s)
  plainrec compiled wrappers/compile_loop.py --steps 30 --layers 4
  plainrec compiled_ro wrappers/compile_loop.py --steps 30 --layers 4 --mode reduce-overhead
  plainrec accum wrappers/grad_accum.py --steps 12
  plainrec varlen wrappers/varlen_infer.py --batches 40
  plainrec graph wrappers/graph_replay.py --steps 300
  plainrec trainer wrappers/trainer_finetune.py --tiny --seq 32 --steps 20
  [ $(( $(date +%s) - T0 )) -lt 420 ] && plainrec lightning wrappers/lightning_module.py --steps 40
  echo "plainrec took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = slowsteps ]; then
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py"
  plain ck_1 $CK
  profile ck_first 200 -- $CK
  profile ck_cached 200 -- $CK
  plain ck_2 $CK
  keep_runs ck_first ck_cached
  record ck wrappers/checkpoint_loop.py
  for f in "$W/ck.torch.json" "$W/ck.nsys.sqlite"; do
    [ -f "$f" ] && timeout 120 python3 -m nsighttc analyze "$f" -o "$W/fix/$(basename "$f").md" -q >> "$S" 2>&1 && \
      grep -E "^Start-up|^\*\*GPU busy|^First fix|^Where" "$W/fix/$(basename "$f").md" | cut -c1-700 | sed 's/^/   /' >> "$S"
  done
  for d in "$W"/runs_ck_*/*/; do [ -f "$d/report.md" ] && grep -E "^Start-up|^\*\*GPU busy|^First fix|^Where" \
    "$d/report.md" | cut -c1-700 | sed "s|^|   $(basename "$(dirname "$d")"): |" >> "$S"; done
  echo "slowsteps took $(( $(date +%s) - T0 )) s" >> "$S"
fi

findings_of() {  # VERDICT: its headline's cause and first four findings with their gains, to the summary (named by
  # its run folder, runs_NAME, or its file)
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); t=d.get('timeline') or {}
print(sys.argv[1].split('/')[-3 if '/runs_' in sys.argv[1] else -1])
print('   headline cause:', t.get('headline_cause'))
print('   steps:', (t.get('steps') or {}).get('count'), (t.get('loop_time') or {}).get('slow_steps'))
for f in d['findings'][:4]:
    g = f.get('gain') or {}; print('  ', f['id'], g.get('low'), g.get('high'), g.get('of', 'step'), '|', f['title'][:150], '|', (g.get('basis') or '')[:600])" "$1" >> "$S" 2>&1
}

findings_of_each() {  # VERDICT...: findings_of for each that exists (a glob that matched nothing stays unexpanded)
  local v
  for v in "$@"; do [ -f "$v" ] && findings_of "$v"; done
}

keep_recordings() {  # name...: keep_runs, and each run's trace (stripped) and host samples as fixtures, its findings
  local n d
  keep_runs "$@"
  for n in "$@"; do
    d=$(ls -d "$W/runs_$n"/*/ 2>/dev/null | tail -1)
    [ -f "$d/torch_trace.json" ] && python3 benchmarks/strip_fixture.py "$d/torch_trace.json" \
      "$W/fix/$n/torch_trace.json.xz" >> "$S" 2>&1
    [ -f "$d/host_samples.json" ] && xz -c "$d/host_samples.json" > "$W/fix/$n/host_samples.json.xz"
    [ -f "$d/verdict.json" ] && findings_of "$d/verdict.json"
  done
}

steps_of() {  # VERDICT...: each run's steps (count, source, name, median) and its loop's parts, to the summary
  local v
  for v in "$@"; do [ -f "$v" ] && python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); t=d.get('timeline') or {}; s=t.get('steps') or {}; lt=t.get('loop_time') or {}
print('  ', sys.argv[1].split('/')[-3], 'steps', s.get('count'), s.get('source'), s.get('name'), 'median', s.get('median_iteration_ns'),
      'loop', lt.get('total_ns'), [(p['part'], round(p['share'], 3)) for p in lt.get('parts', [])])" "$v" >> "$S" 2>&1; done
}

checkpoint_of() {  # VERDICT...: the loop's slow steps and its checkpoint account (less its causes), to the summary
  local v
  for v in "$@"; do [ -f "$v" ] && python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); lt=(d.get('timeline') or {}).get('loop_time') or {}
print('  ', sys.argv[1].split('/')[-3], 'loop:', {k: lt.get(k) for k in ('slow_steps', 'new_shape_steps')}, 'checkpoint:',
      {k: v for k, v in ((lt.get('slow_causes') or {}).get('checkpoint') or {}).items() if k != 'causes'})" \
      "$v" >> "$S" 2>&1; done
}

if [ "$PART" = checkpoint ]; then
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py"
  plain ck15_1 $CK
  plain ck30 $CK --save-every 30
  plain ckthread $CK --save-mode thread
  plain ck0 $CK --save-every 0
  profile ck_first 200 -- $CK
  profile ck_cached 200 -- $CK
  plain ck15_2 $CK
  keep_runs ck_first ck_cached
  record ck wrappers/checkpoint_loop.py
  findings_of_each "$W"/runs_ck_*/*/verdict.json "$W"/fix/ck.*.verdict.json  # each verdict's findings and their gains
  echo "checkpoint took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = final_ck ]; then
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py"
  plain ck15_1 $CK
  profile ck_first 200 -- $CK
  profile ck_cached 200 -- $CK
  plain ck0 $CK --save-every 0
  plain every1 $CK --dim 1024 --save-every 1
  plain every0 $CK --dim 1024 --save-every 0
  profile every_first 200 -- $CK --dim 1024 --save-every 1
  keep_runs ck_first ck_cached every_first
  findings_of_each "$W"/runs_*/*/verdict.json
  echo "final_ck took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = every_ck ]; then  # a small model saving every step: plain with and without, a first run, by hand
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py --dim 1024"
  plain every1 $CK --save-every 1
  plain every0 $CK --save-every 0
  profile every_first 200 -- $CK --save-every 1
  plain every1_2 $CK --save-every 1
  keep_runs every_first
  timeout 120 python3 benchmarks/gpu/record_torch.py "$W/every.torch.json" wrappers/checkpoint_loop.py --dim 1024 \
    --save-every 1 --steps 16 --stall-every 0 > "$W/every.torch.log" 2>&1
  python3 benchmarks/strip_fixture.py "$W/every.torch.json" "$W/fix/every_torch.json.xz" >> "$S" 2>&1
  findings_of_each "$W"/runs_*/*/verdict.json
  timeout 120 python3 -m nsighttc analyze "$W/every.torch.json" --format json -o "$W/fix/every.verdict.json" -q && \
    findings_of "$W/fix/every.verdict.json"
  echo "every_ck took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = litkind ]; then  # ../shared/programs/lit_cifar.py: one headline kind on every run? Plain around a
  # first run and two cached runs; each run's verdict, its trace (stripped) and its host samples come back (fixtures)
  T0=$(date +%s); LC="python3 .device-carry/programs/lit_cifar.py"
  plain lc_1 $LC
  profile lc_first 200 -- $LC
  profile lc_cached 200 -- $LC
  profile lc_cached2 200 -- $LC
  plain lc_2 $LC
  keep_recordings lc_first lc_cached lc_cached2
  echo "litkind took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = encoder ]; then  # a variable-length loop of another build (probe_encoder_varlen.py: nn.TransformerEncoder,
  # bf16 autocast, a padding mask): plain padded and bucketed around its first and cached runs, then recorded by hand
  T0=$(date +%s); E="python3 benchmarks/gpu/probe_encoder_varlen.py"
  plain enc_pad_1 $E
  plain enc_bucket_1 $E --bucket
  profile enc_first 200 -- $E
  profile enc_cached 200 -- $E
  plain enc_pad_2 $E
  plain enc_bucket_2 $E --bucket
  keep_runs enc_first enc_cached
  findings_of_each "$W"/runs_enc_*/*/verdict.json
  record enc benchmarks/gpu/probe_encoder_varlen.py --batches 60
  findings_of_each "$W"/fix/enc.*.verdict.json
  echo "encoder took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = encoder2 ]; then  # the same probe's plain pairs in alternating rounds (each printing its rate after the
  # first batch too), around a first and a cached run
  T0=$(date +%s); E="python3 benchmarks/gpu/probe_encoder_varlen.py"
  for r in 1 2; do plain enc_pad_r$r $E; plain enc_bucket_r$r $E --bucket; done
  profile enc_first 200 -- $E
  profile enc_cached 200 -- $E
  for r in 3 4; do plain enc_pad_r$r $E; plain enc_bucket_r$r $E --bucket; done
  keep_runs enc_first enc_cached
  findings_of_each "$W"/runs_enc_*/*/verdict.json
  echo "encoder2 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = encoder3 ]; then  # where the launcher's unrecorded steps lose time: the probe's batches at lengths
  # seen before, plain, under the launcher's step hooks alone, with its host sampler too, and in a cached run
  T0=$(date +%s); E=benchmarks/gpu/probe_encoder_varlen.py; L="python3 -m nsighttc.runtime.launch --annotate script"
  plain enc_pad_a python3 $E
  plain enc_bucket_a python3 $E --bucket
  plain enc_hooks_a $L --step-times "$W/st_a.json" -- $E
  plain enc_sampled_a $L --step-times "$W/st_b.json" --host-samples "$W/hs_b.json" -- $E
  profile enc_first 200 -- python3 $E
  profile enc_cached 200 -- python3 $E
  plain enc_pad_b python3 $E
  plain enc_hooks_b $L --step-times "$W/st_c.json" -- $E
  plain enc_bucket_b python3 $E --bucket
  grep -h "requests/s" "$W"/runs_enc_*/*/*.log 2>/dev/null | sed 's/^/   profiled: /' >> "$S"
  keep_runs enc_first enc_cached
  findings_of_each "$W"/runs_enc_*/*/verdict.json
  echo "encoder3 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = vitdata ]; then  # ../shared/programs/vit_eval.py: is its DataLoader or its forward's host work the
  # limit? Plain as written, with 8 workers, and with its batches loaded before the loop (no loader in it), alternating
  T0=$(date +%s); P=.device-carry/programs/vit_eval.py
  sed 's/num_workers=4/num_workers=8/' $P > "$W/vit_w8.py"
  sed 's/^n, t0 = 0, None$/dl = list(dl); n, t0 = 0, None/' $P > "$W/vit_pre.py"
  grep -n "num_workers\|dl = list" "$W/vit_w8.py" "$W/vit_pre.py" >> "$S"
  for r in 1 2; do
    plain vit_as_is_$r python3 $P; plain vit_w8_$r python3 "$W/vit_w8.py"; plain vit_pre_$r python3 "$W/vit_pre.py"
  done
  echo "vitdata took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = readback ]; then  # large copies to the host that are no checkpoint: are they read as one?
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py"
  plain cp15_1 $CK --save-mode copy
  plain cp30 $CK --save-mode copy --save-every 30
  plain cp0 $CK --save-mode copy --save-every 0
  profile cp_first 200 -- $CK --save-mode copy
  profile cp_cached 200 -- $CK --save-mode copy
  plain cp15_2 $CK --save-mode copy
  profile ck_first 200 -- $CK
  keep_recordings cp_first cp_cached ck_first
  pack  # (what is here comes back, should the recordings by hand run past the call's limit)
  [ $(( $(date +%s) - T0 )) -lt 400 ] && record cp wrappers/checkpoint_loop.py --save-mode copy
  findings_of_each "$W"/fix/cp.*.verdict.json
  echo "readback took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = readback2 ]; then
  T0=$(date +%s); CK="python3 wrappers/checkpoint_loop.py"
  plain cp15_1 $CK --save-mode copy
  profile cp_first 200 -- $CK --save-mode copy
  profile cp_cached 200 -- $CK --save-mode copy
  plain cp0 $CK --save-mode copy --save-every 0
  plain cp30 $CK --save-mode copy --save-every 30
  profile ckthread_first 200 -- $CK --save-mode thread
  keep_runs cp_first cp_cached ckthread_first
  findings_of_each "$W"/runs_*/*/verdict.json
  checkpoint_of "$W"/runs_*/*/verdict.json
  shared_after readback2 560 hf_bert.py vit_eval.py
fi

if [ "$PART" = hfsave ]; then  # a checkpoint nobody here wrote: the Trainer's own save, read from its stacks?
  T0=$(date +%s); P=.device-carry/programs/hf_bert.py
  sed 's/save_strategy="no",/save_strategy="steps", save_steps=15,/' $P > "$W/hf_save.py"
  grep -c 'save_steps=15' "$W/hf_save.py" >> "$S"
  plain hfs_1 python3 "$W/hf_save.py"
  plain hf_nosave python3 $P
  profile hfs_first 240 -- python3 "$W/hf_save.py"
  profile hfs_cached 240 -- python3 "$W/hf_save.py"
  plain hfs_2 python3 "$W/hf_save.py"
  keep_recordings hfs_first hfs_cached
  checkpoint_of "$W"/runs_hfs_*/*/verdict.json
  echo "hfsave took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users ]; then  # programs written as their libraries' docs show (benchmarks/gpu/user_programs/): a
  # DataLoader eval padding each batch to its longest text, Accelerate's gradient accumulation, a training step compiled
  # with mode="reduce-overhead"; each plain (and its fix plain), profiled first and cached, recordings kept
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  pairs_around_runs ev bucket 150 --bucket -- $U/loader_varlen_eval.py
  plain acc_1 $U/accel_accum.py
  profile acc_first 150 -- $U/accel_accum.py
  profile acc_cached 150 -- $U/accel_accum.py
  if [ $(( $(date +%s) - T0 )) -lt 300 ]; then  # (what fits the device tool's 600 s a call: the compiler's runs last)
    plain ro_1 $U/compiled_graphs.py
    plain ro_default $U/compiled_graphs.py --mode default
    profile ro_first 150 -- $U/compiled_graphs.py
    [ $(( $(date +%s) - T0 )) -lt 420 ] && profile ro_cached 120 -- $U/compiled_graphs.py
  fi
  keep_recordings ev_first ev_cached acc_first acc_cached ro_first ro_cached
  steps_of "$W"/runs_*/*/verdict.json
  echo "users took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users2 ]; then  # the compiled loop again, now marking its steps as reduce-overhead asks (it failed
  # in users: a graph's output overwritten by the next replay), and the eval loop's bucketing gain in two more pairs
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain ro_1 $U/compiled_graphs.py
  plain ro_default $U/compiled_graphs.py --mode default
  profile ro_first 150 -- $U/compiled_graphs.py
  profile ro_cached 120 -- $U/compiled_graphs.py
  plain ro_2 $U/compiled_graphs.py
  [ -z "${NO_EV:-}" ] && for i in 3 4; do plain ev_$i $U/loader_varlen_eval.py; plain ev_bucket_$i $U/loader_varlen_eval.py --bucket; done
  keep_recordings ro_first ro_cached
  steps_of "$W"/runs_*/*/verdict.json
  echo "users2 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users3 ]; then  # three more programs as their libraries' docs show (benchmarks/gpu/user_programs/):
  # a whole transformer step replayed as a CUDA graph, a pipeline over texts of many lengths, Lightning's accumulation
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain gr_1 $U/graph_adamw.py
  plain gr_eager $U/graph_adamw.py --eager --steps 500
  profile gr_first 120 -- $U/graph_adamw.py
  profile gr_cached 120 -- $U/graph_adamw.py
  pairs_around_runs pv pad 120 --pad-to 256 -- $U/pipe_varlen.py
  plain la_1 $U/lit_accum.py
  profile la_first 150 -- $U/lit_accum.py
  profile la_cached 150 -- $U/lit_accum.py
  keep_recordings gr_first gr_cached pv_first pv_cached la_first la_cached
  steps_of "$W"/runs_*/*/verdict.json
  echo "users3 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  for n in gr pv la; do  # recorded by hand, while the call has time
    [ $(( $(date +%s) - T0 )) -gt 470 ] && break
    case $n in gr) f=graph_adamw.py;; pv) f=pipe_varlen.py;; la) f=lit_accum.py;; esac
    record "$n" "benchmarks/gpu/user_programs/$f"
  done
  echo "users3 took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users3rec ]; then  # users3's programs recorded by hand (record_torch.py; a plain nsys), each recording
  # read by today's code and its time to a verdict said; the graph loop's reading sampled by py-spy (it ran past 120 s
  # in users3); fixtures cut to their first seconds (xz of a whole recording of 1,500 replays is minutes)
  T0=$(date +%s); U=benchmarks/gpu/user_programs
  for n in gr pv la; do
    [ $(( $(date +%s) - T0 )) -gt 420 ] && break
    case $n in gr) f=graph_adamw.py; cut=1.5;; pv) f=pipe_varlen.py; cut=4;; la) f=lit_accum.py; cut=3;; esac
    t0=$(date +%s.%N)
    timeout 200 python3 benchmarks/gpu/record_torch.py "$W/$n.torch.json" "$U/$f" > "$W/$n.torch.log" 2>&1
    echo "torch.profiler $n: rc=$? $(secs "$t0" "$(date +%s.%N)") s, $(stat -c %s "$W/$n.torch.json" 2>/dev/null) B" >> "$S"
    t0=$(date +%s.%N)
    if [ $n = gr ]; then
      timeout 240 py-spy record -r 10 --format raw -o "$OUT/analyze_gr_pyspy.txt" -- python3 -m nsighttc analyze \
        "$W/$n.torch.json" --format json -o "$W/fix/$n.torch.verdict.json" -q > "$W/$n.analyze.log" 2>&1
    else
      timeout 150 python3 -m nsighttc analyze "$W/$n.torch.json" --format json -o "$W/fix/$n.torch.verdict.json" -q \
        > "$W/$n.analyze.log" 2>&1
    fi
    echo "analyze $n.torch.json: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
    steps_of "$W/fix/$n.torch.verdict.json"; findings_of "$W/fix/$n.torch.verdict.json"
    timeout 100 python3 benchmarks/strip_fixture.py --until $cut "$W/$n.torch.json" "$W/fix/${n}_torch_until.json.xz" >> "$S" 2>&1
    rm -f "$W/$n.torch.json"
    [ $(( $(date +%s) - T0 )) -gt 450 ] && break
    t0=$(date +%s.%N)
    timeout 150 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$W/$n.nsys" python3 "$U/$f" \
      > "$W/$n.nsys.log" 2>&1 && nsys export --type sqlite -f true -o "$W/$n.nsys.sqlite" "$W/$n.nsys.nsys-rep" \
      >> "$W/$n.nsys.log" 2>&1
    echo "nsys $n: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
    t0=$(date +%s.%N)
    [ -f "$W/$n.nsys.sqlite" ] && timeout 100 python3 -m nsighttc analyze "$W/$n.nsys.sqlite" --format json \
      -o "$W/fix/$n.nsys.verdict.json" -q > /dev/null 2>&1
    echo "analyze $n.nsys.sqlite: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
    steps_of "$W/fix/$n.nsys.verdict.json"; findings_of "$W/fix/$n.nsys.verdict.json"
    [ -f "$W/$n.nsys.sqlite" ] && timeout 60 python3 benchmarks/strip_fixture.py "$W/$n.nsys.sqlite" \
      "$W/fix/${n}_nsys.sqlite.xz" >> "$S" 2>&1
  done
  echo "users3rec took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users3b ]; then
  T0=$(date +%s); U=benchmarks/gpu/user_programs
  pip install -q --target /tmp/pyspy .device-carry/py_spy*.whl > /dev/null 2>&1
  plain la_2 python3 $U/lit_accum.py
  profile la_first 150 -- python3 $U/lit_accum.py
  profile la_cached 150 -- python3 $U/lit_accum.py
  plain pv_3 python3 $U/pipe_varlen.py
  plain pv_pad_3 python3 $U/pipe_varlen.py --pad-to 256
  keep_runs la_first la_cached
  steps_of "$W"/runs_*/*/verdict.json
  pack
  t0=$(date +%s.%N)
  timeout 120 python3 benchmarks/gpu/record_torch.py "$W/gr.torch.json" "$U/graph_adamw.py" > "$W/gr.torch.log" 2>&1
  echo "torch.profiler gr: rc=$? $(secs "$t0" "$(date +%s.%N)") s, $(stat -c %s "$W/gr.torch.json" 2>/dev/null) B" >> "$S"
  t0=$(date +%s.%N); lim=$(( 560 - $(date +%s) + T0 ))
  timeout -s INT $lim /tmp/pyspy/bin/py-spy record -r 5 --format raw -o "$OUT/analyze_gr_pyspy.txt" -- python3 -m nsighttc \
    analyze "$W/gr.torch.json" --format json -o "$W/fix/gr.torch.verdict.json" -q -v > "$W/gr.analyze.log" 2>&1
  echo "analyze gr.torch.json (py-spy, limit $lim s): rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  tail -5 "$W/gr.analyze.log" >> "$S"
  steps_of "$W/fix/gr.torch.verdict.json"; findings_of "$W/fix/gr.torch.verdict.json"
  echo "users3b took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = users3c ]; then
  T0=$(date +%s); U=benchmarks/gpu/user_programs
  plain pv_4 python3 $U/pipe_varlen.py
  plain pv_pad_4 python3 $U/pipe_varlen.py --pad-to 256
  profile pv_first 120 -- python3 $U/pipe_varlen.py
  profile pv_cached 120 -- python3 $U/pipe_varlen.py
  plain pv_5 python3 $U/pipe_varlen.py
  plain gr_2 python3 $U/graph_adamw.py
  profile gr_first 120 -- python3 $U/graph_adamw.py
  profile gr_cached 120 -- python3 $U/graph_adamw.py
  plain la_3 python3 $U/lit_accum.py
  profile la_first 150 -- python3 $U/lit_accum.py
  profile la_cached 150 -- python3 $U/lit_accum.py
  keep_runs pv_first pv_cached gr_first gr_cached la_first la_cached
  for n in pv_first pv_cached gr_first gr_cached la_first la_cached; do
    findings_of_each "$W"/runs_$n/*/verdict.json
  done
  steps_of "$W"/runs_*/*/verdict.json
  echo "users3c took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = record ]; then
  record graph wrappers/graph_replay.py --steps 300
  record varlen wrappers/varlen_infer.py --batches 60
  record accum wrappers/grad_accum.py --steps 12
fi
if [ "$PART" = users4 ]; then  # generate() over prompts of many lengths (benchmarks/gpu/user_programs/gen_varlen.py):
  # plain pairs (each batch padded to its longest prompt / to a multiple of 128) around its first and cached runs,
  # then recorded by hand (torch.profiler, nsys) while the call has time
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  pairs_around_runs gv bucket 150 --bucket -- $U/gen_varlen.py
  keep_recordings gv_first gv_cached
  steps_of "$W"/runs_*/*/verdict.json
  echo "users4 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  [ $(( $(date +%s) - T0 )) -lt 300 ] && record gv benchmarks/gpu/user_programs/gen_varlen.py
  echo "users4 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users5 ]; then  # a program profiling itself in cycles (user_programs/sched_cycles.py), see the header
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs/sched_cycles.py"
  plain sc_eager $U --no-profile
  plain sc_graph $U --graph --no-profile
  plain sc_eager_log $U --log "$W/fix/sc_eager_log"
  plain sc_graph_log $U --graph --log "$W/fix/sc_graph_log" --steps 60
  plain sc_eager_rep $U --log "$W/fix/sc_eager_rep" --repeat 2 --wait 8
  plain sc_eager_2 $U --no-profile
  for d in sc_eager_log sc_graph_log sc_eager_rep; do
    ls "$W/fix/$d" >> "$S" 2>&1
    timeout 180 python3 -m nsighttc analyze "$W/fix/$d" -o "$W/fix/$d.md" -q >> "$S" 2>&1
    timeout 180 python3 -m nsighttc analyze "$W/fix/$d" --format json -o "$W/fix/$d.verdict.json" -q >> "$S" 2>&1
    echo "analyze $d:" >> "$S"; grep -E "^\*\*|^Start-up|^Where|Steps \|" "$W/fix/$d.md" | head -8 >> "$S"
    (cd "$W/fix" && tar cJf "$d.tar.xz" "$d" && rm -rf "$d")
  done
  echo "users5 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  profile sc_own 240 -- $U --log "$W/own_log"
  ls "$W/own_log" >> "$S" 2>&1
  tail -15 "$W/sc_own.profile.log" >> "$S"
  profile sc_own_nsys 240 --timeline-engine nsys -- $U --log "$W/own_log_nsys"
  ls "$W/own_log_nsys" >> "$S" 2>&1
  tail -8 "$W/sc_own_nsys.profile.log" >> "$S"
  keep_runs sc_own sc_own_nsys
  echo "users5 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users5b ]; then  # see the header: the cycles joined, the program's own profiler held off
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs/sched_cycles.py"
  plain sc_eager $U --no-profile
  plain sc_graph $U --graph --no-profile
  plain sc_eager_log $U --log "$W/fix/sc_eager_log"
  plain sc_graph_log $U --graph --log "$W/fix/sc_graph_log" --steps 60
  for d in sc_eager_log sc_graph_log; do
    timeout 180 python3 -m nsighttc analyze "$W/fix/$d" -o "$W/fix/$d.md" -q >> "$S" 2>&1
    echo "analyze $d:" >> "$S"; grep -E "^\*\*GPU|^Start-up|^Where" "$W/fix/$d.md" | head -4 >> "$S"
    rm -rf "$W/fix/$d"
  done
  profile sc_own_first 240 -- $U --log "$W/own_log"
  profile sc_own_cached 240 -- $U --log "$W/own_log2"
  profile sc_own_graph 240 -- $U --graph --steps 60 --log "$W/own_log3"
  ls "$W"/own_log* >> "$S" 2>&1
  for n in sc_own_first sc_own_cached sc_own_graph; do
    grep -E "own torch.profiler|exited with code" "$W/$n.profile.log" | head -3 >> "$S"
  done
  plain sc_eager_2 $U --no-profile
  keep_runs sc_own_first sc_own_cached sc_own_graph
  echo "users5b took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users5c ]; then  # Lightning's own profiler (user_programs/lit_profiler.py), see the header
  T0=$(date +%s); L=$PWD/benchmarks/gpu/user_programs/lit_profiler.py
  mkdir -p "$W/litp" && (cd "$W/litp" && plain lit_prof python3 "$L")
  f=$(ls "$W"/litp/*.pt.trace.json 2>/dev/null | head -1)
  echo "its own trace: $f" >> "$S"
  [ -n "$f" ] && timeout 180 python3 -m nsighttc analyze "$f" -q > "$W/lit_prof_analyze.md" 2>&1
  grep -E "^\*\*GPU|^Start-up|^Where" "$W/lit_prof_analyze.md" | head -4 >> "$S"
  [ -n "$f" ] && python3 benchmarks/strip_fixture.py "$f" "$W/fix/lit_profiler_gpu_torch.json.xz" >> "$S" 2>&1
  profile lit_prof_first 300 -- python3 "$L"
  grep -E "own torch.profiler|exited with code" "$W/lit_prof_first.profile.log" | head -3 >> "$S"
  keep_runs lit_prof_first
  echo "users5c took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users6 ]; then  # see the header: a pipeline's host preprocessing; a recording begun mid-queue
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain pipe_1 $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  plain pipe_workers $U/hf_pipeline_images.py --batch-size 1 --workers 8
  plain pipe_trace $U/hf_pipeline_images.py --images 80 --trace "$W/fix/pipe_trace.json"
  plain aw_1 $U/async_window.py
  plain aw_trace $U/async_window.py --trace "$W/fix/aw_trace.json"
  for d in pipe_trace aw_trace; do
    timeout 120 python3 -m nsighttc analyze "$W/fix/$d.json" -o "$W/$d.md" -q >> "$S" 2>&1
    echo "analyze $d:" >> "$S"; grep -E "^\*\*GPU|^Start-up|^Where|^First fix" "$W/$d.md" | head -5 >> "$S"
    python3 benchmarks/strip_fixture.py "$W/fix/$d.json" "$W/fix/$d.json.xz" >> "$S" 2>&1 && rm -f "$W/fix/$d.json"
  done
  echo "users6 part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
  profile pipe_first 200 -- $U/hf_pipeline_images.py
  profile pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_2 $U/hf_pipeline_images.py
  plain pipe_batched_2 $U/hf_pipeline_images.py --batch-size 32 --workers 8
  keep_runs pipe_first pipe_cached
  echo "users6 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users6b ]; then  # see the header: the pipeline's own recording read whole; first and cached runs
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain pipe_1 $U/hf_pipeline_images.py
  plain pipe_trace $U/hf_pipeline_images.py --images 80 --trace "$W/pipe_trace.json"
  timeout 150 python3 -m nsighttc analyze "$W/pipe_trace.json" -o "$W/pipe_trace_raw.md" -q >> "$S" 2>&1
  echo "analyze pipe_trace (as recorded, $(stat -c %s "$W/pipe_trace.json") B):" >> "$S"
  grep -E "^\*\*GPU|^Where|^First fix|^\| .Pipeline|^\| .run_single" "$W/pipe_trace_raw.md" | head -8 >> "$S"
  rm -f "$W/pipe_trace.json"
  profile pipe_first 200 -- $U/hf_pipeline_images.py
  profile pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  plain pipe_2 $U/hf_pipeline_images.py
  keep_runs pipe_first pipe_cached
  echo "users6b took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = final6b ]; then  # see the header
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain pipe_1 $U/hf_pipeline_images.py
  profile pipe_first 200 -- $U/hf_pipeline_images.py
  profile pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  keep_runs pipe_first pipe_cached
  echo "final6b took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = firstcost ]; then  # see the header
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  { nproc; lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|CPU max|On-line)"
    echo "siblings of cpu0: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>&1)"; } >> "$S" 2>&1
  sampled() {  # name timeout options -- cmd: a profile run with the CPU sampler beside it (W/fix/NAME_cpu.csv)
    local n=$1; python3 benchmarks/gpu/proc_cpu_sampler.py "$W/fix/${n}_cpu.csv" --watch "$W/runs_$n" & local sp=$!
    profile "$@"; kill $sp; wait $sp 2>/dev/null; gzip -f "$W/fix/${n}_cpu.csv"
  }
  plain pipe_1 $U/hf_pipeline_images.py
  # (not in a command substitution: it would wait for the spinners' stdout to close)
  chrt -i 0 python3 -c "while True: pass" > /dev/null 2>&1 & s1=$!
  chrt -i 0 python3 -c "while True: pass" > /dev/null 2>&1 & s2=$!
  plain pipe_beside_idle_spinners $U/hf_pipeline_images.py; kill $s1 $s2
  NSIGHTTC_CACHE_DIR=$W/cache_a sampled pipe_first 200 -- $U/hf_pipeline_images.py
  NSIGHTTC_CACHE_DIR=$W/cache_b sampled pipe_first_nothing_beside 200 --overlap none -- $U/hf_pipeline_images.py
  NSIGHTTC_CACHE_DIR=$W/cache_a sampled pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_2 $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  echo "firstcost part 1 took $(( $(date +%s) - T0 )) s" >> "$S"
  plain accum_1 $A
  NSIGHTTC_CACHE_DIR=$W/cache_c sampled accum_first 200 -- $A
  NSIGHTTC_CACHE_DIR=$W/cache_d sampled accum_first_nothing_beside 200 --overlap none -- $A
  plain accum_2 $A
  keep_runs pipe_first pipe_first_nothing_beside pipe_cached accum_first accum_first_nothing_beside
  echo "firstcost took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = firstcost2 ]; then  # see the header
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  sampled() {  # name timeout options -- cmd: a profile run with the CPU sampler beside it (W/fix/NAME_cpu.csv)
    local n=$1; python3 benchmarks/gpu/proc_cpu_sampler.py "$W/fix/${n}_cpu.csv" --watch "$W/runs_$n" & local sp=$!
    profile "$@"; kill $sp; wait $sp 2>/dev/null; gzip -f "$W/fix/${n}_cpu.csv"
    echo "   paused: $(grep -ho '"paused_s": [0-9.]*' "$W/runs_$n"/*/run.json | tr '\n' ' ')" >> "$S"
  }
  plain pipe_1 $U/hf_pipeline_images.py
  NSIGHTTC_CACHE_DIR=$W/cache_a sampled pipe_first 200 -- $U/hf_pipeline_images.py
  NSIGHTTC_CACHE_DIR=$W/cache_a sampled pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  plain accum_1 $A
  NSIGHTTC_CACHE_DIR=$W/cache_c sampled accum_first 200 -- $A
  keep_runs pipe_first pipe_cached accum_first
  shared_after firstcost2 530 hf_bert.py vit_eval.py
  grep -ro '"paused_s": [0-9.]*' "$W/sp" --include=run.json >> "$S"
fi
if [ "$PART" = firstcost3 ]; then  # see the header
  T0=$(date +%s)
  plain graph_1 $G --steps 2000
  NSIGHTTC_CACHE_DIR=$W/cache_g profile graph_first 200 -- $G --steps 2000
  echo "   paused: $(grep -ho '"paused_s": [0-9.]*' "$W"/runs_graph_first/*/run.json | tr '\n' ' ')" >> "$S"
  plain varlen_1 $V; plain varlen_bucket_1 $V --bucket
  NSIGHTTC_CACHE_DIR=$W/cache_v profile varlen_first 200 -- $V
  echo "   paused: $(grep -ho '"paused_s": [0-9.]*' "$W"/runs_varlen_first/*/run.json | tr '\n' ' ')" >> "$S"
  keep_runs graph_first varlen_first
  echo "firstcost3 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = firstcost4 ]; then  # see the header
  T0=$(date +%s)
  for o in context start; do
    NSIGHTTC_CACHE_DIR=$W/cache_$o profile graph_first_$o 150 --overlap $o -- $G --steps 2000
    echo "   paused: $(grep -ho '"paused_s": [0-9.]*' "$W"/runs_graph_first_$o/*/run.json | tr '\n' ' ')" >> "$S"
  done
  keep_runs graph_first_context graph_first_start
  echo "firstcost4 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = final6 ]; then  # see the header
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  room() { [ $(( $(date +%s) - T0 )) -lt 480 ] || { echo "skipped $1: past 480 s" >> "$S"; return 1; }; }
  plain pipe_1 $U/hf_pipeline_images.py
  profile pipe_first 200 -- $U/hf_pipeline_images.py
  profile pipe_cached 200 -- $U/hf_pipeline_images.py
  plain pipe_batched $U/hf_pipeline_images.py --batch-size 32 --workers 8
  room graph && { plain graph_1 $G --steps 2000; profile graph_first 200 -- $G --steps 2000
                  profile graph_cached 200 -- $G --steps 2000; }
  room varlen && { plain varlen_1 $V; plain varlen_bucket_1 $V --bucket; profile varlen_first 200 -- $V; }
  room varlen_cached && profile varlen_cached 200 -- $V
  room accum && { plain accum_1 $A; profile accum_first 200 -- $A; }
  keep_runs pipe_first pipe_cached graph_first graph_cached varlen_first varlen_cached accum_first
  echo "final6 took $(( $(date +%s) - T0 )) s" >> "$S"
  pack
fi
if [ "$PART" = users4b ]; then  # gen_varlen.py's plain runs with the fixes the shape-churn finding names: prompts
  # bucketed, a static key/value cache (one decode shape), both; then as written again
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  plain gv_3 $U/gen_varlen.py
  plain gv_static $U/gen_varlen.py --cache static
  plain gv_bucket_static $U/gen_varlen.py --bucket --cache static
  plain gv_bucket_3 $U/gen_varlen.py --bucket
  plain gv_4 $U/gen_varlen.py
  echo "users4b took $(( $(date +%s) - T0 )) s" >> "$S"
fi
if [ "$PART" = users4c ]; then  # gen_varlen.py's first and cached runs at the code that pays a request's calls per
  # length (no plain runs: users4 and users4b measured them)
  T0=$(date +%s); U="python3 benchmarks/gpu/user_programs"
  profile gv_first 150 -- $U/gen_varlen.py
  profile gv_cached 150 -- $U/gen_varlen.py
  findings_of_each "$W"/runs_gv_*/*/verdict.json
  echo "users4c took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = torchrun ]; then  # the shared torchrun programs (kind nvidia-h200-x2): run_on_gpu.sh's plain, first,
  # cached and plain runs of each; TORCHRUN="prog args|prog args" picks them (default: all four); verdicts kept
  T0=$(date +%s); IFS='|' read -r -a progs <<< "${TORCHRUN:-ddp_w.py --straggler 1|ddp_plain.py --slow-rank 1|fsdp_slow.py|fsdp_train.py}"
  timeout $(( ${LIMIT:-560} )) bash .device-carry/programs/run_on_gpu.sh "$W/sp" "${progs[@]}" > "$W/programs.log" 2>&1
  echo "shared programs: rc=$?" >> "$S"; cp "$W/sp/summary.txt" "$OUT/programs_summary.txt" 2>/dev/null
  for v in "$W"/sp/*/*/verdict.json; do [ -f "$v" ] && d="$W/fix/tr_$(basename "$(dirname "$(dirname "$v")")")_$(basename "$(dirname "$v")")" && mkdir -p "$d" && cp "$v" "$d/"; done
  (cd "$W/sp" && tar czf "$OUT/torchrun_logs.tgz" ./*.log) 2>/dev/null
  echo "torchrun took $(( $(date +%s) - T0 )) s" >> "$S"
fi

if [ "$PART" = final7 ]; then  # see the header
  T0=$(date +%s)
  plain graph_1 $G --steps 2000; profile graph_first 200 -- $G --steps 2000; profile graph_cached 200 -- $G --steps 2000
  plain varlen_1 $V; plain varlen_bucket_1 $V --bucket; profile varlen_first 200 -- $V; profile varlen_cached 200 -- $V
  plain accum_1 $A; profile accum_first 200 -- $A; profile accum_cached 200 -- $A
  keep_runs graph_first graph_cached varlen_first varlen_cached accum_first accum_cached
  echo "final7 took $(( $(date +%s) - T0 )) s" >> "$S"
fi
if [ "$PART" = final7s ]; then  # see the header
  T0=$(date +%s); shared_after final7s 570 lit_cifar.py hf_bert.py vit_eval.py compiled_gpt.py llm_generate.py
fi

if [ "$PART" = ddp_shared ]; then  # see the header
  T0=$(date +%s); J="python3 -m torch.distributed.run --standalone --nproc-per-node 2 wrappers/ddp_train.py --share-gpu --delay-ms 30 --steps 40"
  plain ddp1_1 $J --straggler-rank 1
  profile ddp1_first 240 -- $J --straggler-rank 1
  profile ddp1_cached 240 -- $J --straggler-rank 1
  plain ddp1_2 $J --straggler-rank 1
  plain ddp0_1 $J --straggler-rank 0 --no-annotate
  profile ddp0_first 240 -- $J --straggler-rank 0 --no-annotate
  keep_runs ddp1_first ddp1_cached ddp0_first
  for n in ddp1_first ddp1_cached ddp0_first; do  # the ranks' line and the window of each run
    d=$(ls -d "$W/runs_$n"/*/ 2>/dev/null | tail -1); [ -n "$d" ] && python3 -c "
import json, sys; v = json.load(open(sys.argv[1] + 'verdict.json')); d = v.get('distributed') or {}
print('$n ranks:', [(r.get('rank'), r.get('complete'), r.get('incomplete_reason'), r.get('median_step_ns')) for r in v.get('ranks') or []][:4])
s = d.get('straggler') or {}
print('$n straggler:', s.get('rank'), s.get('own_excess_ns'), 'incomplete:', d.get('incomplete_ranks'), 'run_cost:', json.dumps((v.get('provenance') or {}).get('run_cost'))[:300])" "$d" >> "$S" 2>&1
  done
  echo "ddp_shared took $(( $(date +%s) - T0 )) s" >> "$S"
fi

pack
cat "$S"
