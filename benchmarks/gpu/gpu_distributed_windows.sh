#!/usr/bin/env bash
# Issue 50 on two GPUs (kind nvidia-h100-x2): every rank's window kept, work compared by launches, a straggler named
# with its frame. One call (the session's device time was 8 minutes).
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_distributed_windows.sh OUT PART
#   PART rounds72 (the shared torchrun programs as alternating rounds, each round's ranks said),
#   capture72 (one GPU: a first run whose rank 0 records its operators by a dispatch mode), verify50 (the call of reports/distributed_windows), fsdp50 (FSDP2 after its fixes: even first and cached,
#   extra host work on rank 1; fixtures kept), final50 (the done-when runs after the gain bound and the rest: FSDP2
#   even / extra, the DDP straggler ending inside its window, with the plain runs their gains are checked against),
#   cost50 (alternating plain / first / cached rounds of DDP and FSDP2; ROUNDS=3 for three), cost50e (DDP alone,
#   ROUNDS=5 by default, and a cached run with TEARDOWN_CUPTI=1), cost50f (FSDP2 alone, ROUNDS=3 by default),
#   drop50 (a first run's other ranks drop their recording before the window: the DDP straggler first and cached,
#   FSDP2 with extra host work on rank 1, then the costs byte-compiled: DDP_ROUNDS (4) of DDP, FSDP_ROUNDS (3) of
#   FSDP2), hold50 (the cached runs' changes of the ninth session: the same verdicts, first and cached, then ROUNDS
#   (4) byte-compiled rounds of DDP and FSDP2), last50 (the tenth session's: the window ending at the program's
#   known last optimizer step, the launcher in rankexec's process; the verdicts, then ROUNDS (10) rounds of DDP),
#   quiet50 (the same after the eleventh session's quiet runtime calls; each rank's CUPTI line counted), end50 (the
#   same after the twelfth session's window of a program whose end is known; a second cached DDP run).
#   COMPILED=1: the overhead rounds run in a byte-compiled environment (gpu_profile_overhead.py --compiled).
#   - DDP straggler (rank 1 sleeps 30 ms a step), 20 steps: the program ends inside its window. A plain run, the
#     default first run (empty evidence cache) and the cached run: both ranks' windows whole, rank 1 named.
#   - FSDP2, even ranks, first run: same_work true, any straggler's gain within its own excess.
#   - FSDP2, rank 1 with 30 ms of host work a step, first run: rank 1 named, with its frame.
# Per run: the job's distributed verdict, and each rank's window steps and GPU events in its window (summary.txt).
set -u
OUT=${1:?out dir}; PART=${2:-verify50}
source "$(dirname "$0")/gpu_lib.sh"
TR=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29543)
DDP=(wrappers/ddp_train.py --steps 20 --warmup 2 --straggler-rank 1 --delay-ms 30)
FSDP=(wrappers/fsdp2_train.py --steps 30)

look() {  # name: the verdict's distributed part and each rank's window (steps, GPU events inside it)
  local d; d=$(ls -d "$W/runs_$1"/*/ 2>/dev/null | tail -1)
  [ -n "$d" ] || { echo "$1: no run directory" >> "$S"; return; }
  python3 - "$d" "$1" >> "$S" 2>&1 <<'PY'
import glob, json, sys
d, name = sys.argv[1], sys.argv[2]
try:
    v = json.load(open(d + "/verdict.json"))
except Exception as exc:
    print(name, "no verdict:", exc); sys.exit()
x = v.get("distributed") or {}
s = x.get("straggler") or {}
st = (v.get("timeline") or {}).get("steps") or {}
print(name, "| straggler", s.get("rank"), s.get("kind"), s.get("cause"), "| excess", s.get("excess_ns"),
      "| own excess", s.get("own_excess_ns"), s.get("own_excess_basis"),
      "| unrecorded", json.dumps(st.get("unrecorded")), "| step", st.get("median_iteration_ns"),
      "| own wait", s.get("own_wait_per_step_ns"), "| same_work", x.get("same_work"),
      "| incomplete", json.dumps(x.get("incomplete_ranks")), "| launch_imbalance", bool(x.get("launch_imbalance")))
print("  gains", [(f["id"], (f.get("gain") or {}).get("low"), (f.get("gain") or {}).get("high"))
                 for f in v.get("findings") or []][:6])
fix = next((f for f in v.get("findings") or [] if f["id"] == "straggler-rank"), None)
if fix:
    print("  straggler fix:", (fix.get("gain") or {}).get("basis"))
print("  slowest step", x.get("slowest_rank_step_ns"), "| frames", json.dumps((s.get("host_frames_excess") or [])[:2]))
for t in sorted(glob.glob(d + "/rank*/torch_trace.json")):
    ev = json.load(open(t))["traceEvents"]
    w = [e["ts"] for e in ev if e.get("name") == "nsighttc.window"]
    start = min(w) if w else None
    steps = sum(1 for e in ev if e.get("name") == "nsighttc.step" and (start is None or e["ts"] >= start))
    gpu = sum(1 for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    gpu_in = sum(1 for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                 and (start is None or e["ts"] >= start))
    print(" ", t.split("/")[-2], "window mark", bool(w), "steps in window", steps, "gpu events", gpu, "in window", gpu_in)
try:
    r = json.load(open(d + "/run.json"))
    w = r["passes"][0].get("window") or {}
    print("  window", json.dumps({k: w.get(k) for k in ("phases", "recorded_from", "recorded_from_s", "ranks")}))
    print("  passes", [(p.get("engine"), p.get("mode"), p.get("seconds")) for p in r["passes"]])
except Exception as exc:
    print("  run.json:", exc)
PY
}

keep() {  # name: every rank's trace of the latest run, stripped and gzipped (fixtures for CPU tests)
  local d r t; d=$(ls -d "$W/runs_$1"/*/ 2>/dev/null | tail -1)
  for r in "$d"/rank*/; do
    [ -d "$r" ] || continue
    mkdir -p "$W/fix/$1/$(basename "$r")"
    for t in "$r"/torch_trace.json; do
      [ -f "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/$1/$(basename "$r")/torch_trace.json.gz" >> "$S" 2>&1
    done
  done
}

overhead() {  # name rounds programs...: alternating plain / first / cached rounds (gpu_profile_overhead.py); the
              # summary, and each run's log, run.json and verdict (no traces or samples): where a run's time went
  local name=$1 rounds=$2; shift 2
  local how=(); [ -n "${COMPILED:-}" ] && how=(--compiled "$W/pyc" --tag _compiled)
  local log; log="$W/ov_$(echo "$@" | tr ' ' '_').log"
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" --rounds "$rounds" "${how[@]}" "$@" > "$log" 2>&1
  echo "overhead: rc=$?" >> "$S"; cp "$W/ov/summary.json" "$OUT/summary_overhead.json" 2>/dev/null
  cat "$log" >> "$S"
  tar czf "$OUT/${name}_runs.tgz" -C "$W" --exclude='*trace.json' --exclude='*.sqlite' --exclude='*.ncu-rep' \
    --exclude='*.nsys-rep' --exclude='host_samples.json' --exclude='*.collapsed' --exclude='*.png' ov 2>/dev/null
}

case "$PART" in
rounds72)   # the shared torchrun programs (../shared/programs, carried in .device-carry/programs) as alternating
            # rounds of plain / first run (empty evidence cache) / cached run, the machine's environment as
            # run_on_gpu.sh has it; each round's ranks (straggler, cause, incomplete ranks) and first fix in
            # summary.json's ranks_said. DDP_ROUNDS (3) of ddp_w.py --straggler 1 and ddp_plain.py --slow-rank 1,
            # FSDP_ROUNDS (2, 0: none) of fsdp_train.py; LIMIT_S (560) for them all, DDP_SHARE (70) percent of it for
            # the DDP rounds; DDP_PROGRAMS: other programs of gpu_profile_overhead.py for the DDP rounds (e.g.
            # "shared_ddp_plain shared_ddp_w ddp", ddp: this repository's wrappers/ddp_train.py)
  LIMIT_S=${LIMIT_S:-560}; t0=$(date +%s)
  timeout $((LIMIT_S * ${DDP_SHARE:-70} / 100)) python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" \
    --rounds "${DDP_ROUNDS:-3}" ${DDP_PROGRAMS:-shared_ddp_w shared_ddp_plain} > "$W/rounds72.log" 2>&1
  left=$((LIMIT_S - ($(date +%s) - t0)))
  [ "$left" -gt 150 ] && [ "${FSDP_ROUNDS:-2}" -gt 0 ] && timeout "$left" python3 benchmarks/gpu/gpu_profile_overhead.py \
    --out "$W/ov" --rounds "${FSDP_ROUNDS:-2}" shared_fsdp_train >> "$W/rounds72.log" 2>&1
  cp "$W/ov/summary.json" "$OUT/summary_overhead.json" 2>/dev/null; cat "$W/rounds72.log" >> "$S"
  tar czf "$OUT/rounds72_runs.tgz" -C "$W" --exclude='*trace.json' --exclude='*.sqlite' --exclude='*.ncu-rep' \
    --exclude='*.nsys-rep' --exclude='host_samples.json' --exclude='*.collapsed' --exclude='*.png' ov 2>/dev/null
  python3 - "$W/ov/summary.json" >> "$S" 2>&1 <<'PY'
import json, sys
for e in json.load(open(sys.argv[1])):
    print(e["program"], "plain", e["plain_s"], "first", e["default_s"], e["ratio"], "cached", e["warm_s"], e["ratio_warm"],
          "pairs", e["pair_ratios"])
    for label in ("cold", "warm"):
        for r in (e.get("ranks_said") or {}).get(label) or []:
            print("  ", label, json.dumps(r)[:400])
PY
  ;;
capture72)  # one GPU: two gloo DDP ranks with `train` open around the loop (benchmarks/gpu/ddp_one_gpu_ranges.py):
            # plain, first run (rank 0's operators by a dispatch mode, the replay measuring their kernels), cached,
            # plain; each run's launcher lines on the operators and its evidence line, rank 0's list kept
  J=(python3 -m torch.distributed.run --standalone --nproc_per_node 2 benchmarks/gpu/ddp_one_gpu_ranges.py)
  plain one_gpu_1 "${J[@]}"
  profile one_gpu_first 240 -- "${J[@]}"; look one_gpu_first; keep one_gpu_first
  profile one_gpu_cached 200 -- "${J[@]}"; look one_gpu_cached
  plain one_gpu_2 "${J[@]}"
  for n in one_gpu_first one_gpu_cached; do
    d=$(ls -d "$W/runs_$n"/*/ 2>/dev/null | tail -1)
    { echo "== $n"; grep -hE "dispatch mode|kept the window|\[2/2|replay|This run took" "$W/$n.profile.log" "$d"/torch.stderr.log \
        2>/dev/null | cut -c1-400 | head -20
      python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['evidence']; print('evidence:', json.dumps({k: e.get(k) for k in ('hardware_pass', 'replay', 'kernels_needing_hardware', 'to_measure', 'measured')}))" "$d/run.json"
    } >> "$S" 2>&1
    [ -n "$d" ] && mkdir -p "$W/fix/$n" && cp "$d"/verdict.json "$d"/run.json "$W/fix/$n/" 2>/dev/null && \
      cp "$d"/rank0/torch_ops_capture.json "$W/fix/$n/" 2>/dev/null
  done
  ;;
fsdp50)   # after the agreed-window fix: FSDP2 even (first, cached), rank 1 with 30 ms of host work (first)
  plain fsdp_even "${TR[@]}" "${FSDP[@]}"
  profile fsdp_even_first 200 -- "${TR[@]}" "${FSDP[@]}"; look fsdp_even_first; keep fsdp_even_first
  profile fsdp_even_cached 200 -- "${TR[@]}" "${FSDP[@]}"; look fsdp_even_cached
  profile fsdp_extra_first 200 -- python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29544 \
    "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30; look fsdp_extra_first; keep fsdp_extra_first
  ;;
final50)  # after the gain bound, the unrecorded warm-up, the window's length bound and the rank workers: FSDP2 even
          # (first, cached), extra host work on rank 1 (first), the DDP straggler ending inside its window (first,
          # cached); the per-rank traces and host samples of FSDP2 even cached kept
  plain fsdp_even "${TR[@]}" "${FSDP[@]}"
  profile fsdp_even_first 200 -- "${TR[@]}" "${FSDP[@]}"; look fsdp_even_first
  profile fsdp_even_cached 200 -- "${TR[@]}" "${FSDP[@]}"; look fsdp_even_cached; keep fsdp_even_cached
  for r in "$W"/runs_fsdp_even_cached/*/rank*/; do
    [ -f "$r/host_samples.json" ] && gzip -c "$r/host_samples.json" > "$W/fix/fsdp_even_cached/$(basename "$r")/host_samples.json.gz"
  done
  profile fsdp_extra_first 200 -- python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29544 \
    "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30; look fsdp_extra_first
  plain fsdp_extra python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29545 "${FSDP[@]}" \
    --extra-host-rank 1 --extra-host-ms 30
  plain ddp_straggler20 "${TR[@]}" "${DDP[@]}"
  profile ddp_straggler20_first 150 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_first
  profile ddp_straggler20_cached 120 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_cached
  plain ddp_balanced20 "${TR[@]}" wrappers/ddp_train.py --steps 20 --warmup 2
  ;;
cost50)   # the torchrun costs as alternating rounds (rows ddp, fsdp2 in summary.json); first, the DDP straggler ending
          # inside its window, first and cached (its unrecorded steps after the window, and the fix's gain at them)
  profile ddp_straggler20_first 150 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_first
  profile ddp_straggler20_cached 120 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_cached
  overhead cost50 "${ROUNDS:-2}" ddp fsdp2
  ;;
cost50e)  # the DDP wrapper's costs alone, ROUNDS (default 5) alternating rounds: plain runs of one call varied by 15%
          # (18.65-21.71 s), more than the margin measured; then a cached run with TEARDOWN_CUPTI=1 in the job's
          # environment (it hung in its exit before runtime.trace_writing.keep_cupti_at_the_end)
  overhead cost50e "${ROUNDS:-5}" ddp
  python3 benchmarks/probes/gpu_torchrun_cost_probe.py --out "$W/teardown" --rounds 1 --variants teardown \
    --timeout 90 -- "${TR[@]}" wrappers/ddp_train.py --no-annotate >> "$S" 2>&1
  echo "teardown probe: rc=$?" >> "$S"; cp "$W/teardown/torchrun_cost.txt" "$OUT/teardown_probe.txt" 2>/dev/null
  ;;
cost50f)  # the FSDP2 wrapper's costs alone, ROUNDS (default 3) alternating rounds
  overhead cost50f "${ROUNDS:-3}" fsdp2
  ;;
drop50|fork50)  # the other ranks of a first run drop their recording before the window (runtime.recording): verdicts,
          # then the costs in an installed (byte-compiled) environment, DDP and FSDP2 apart (each in its summary entry);
          # fork50: the same, after the traces were written by forked copies (runtime.trace_writer) and rank 0 recorded
          # the operators for OPERATOR_STEPS steps only
  profile ddp_straggler20_first 150 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_first; keep ddp_straggler20_first
  profile ddp_straggler20_cached 120 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_cached
  profile fsdp_extra_first 200 -- python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29544 \
    "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30; look fsdp_extra_first
  COMPILED=1 overhead drop50 "${DDP_ROUNDS:-4}" ddp
  COMPILED=1 overhead drop50 "${FSDP_ROUNDS:-3}" fsdp2
  ;;
hold50)   # the cached run's sampler held until the window and NCCL ranks let go as plain runs are (ninth session):
          # the DDP straggler ending inside its window (first, cached), FSDP2 with extra host work on rank 1 (first,
          # cached: its frame from the window's samples alone), then the costs byte-compiled, DDP and FSDP2 together
  profile ddp_straggler20_first 150 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_first
  profile ddp_straggler20_cached 120 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_cached
  FX=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29544 "${FSDP[@]}" --extra-host-rank 1
      --extra-host-ms 30)
  profile fsdp_extra_first 200 -- "${FX[@]}"; look fsdp_extra_first
  profile fsdp_extra_cached 150 -- "${FX[@]}"; look fsdp_extra_cached; keep fsdp_extra_cached
  for r in "$W"/runs_fsdp_extra_cached/*/rank*/; do
    [ -f "$r/host_samples.json" ] && gzip -c "$r/host_samples.json" > "$W/fix/fsdp_extra_cached/$(basename "$r")/host_samples.json.gz"
  done
  grep -h "process groups" "$W"/runs_*/*/torch*.log 2>/dev/null | sed 's/^.*nsighttc.launch/nsighttc.launch/' | sort | uniq -c >> "$S"
  echo "host samples held until the window: $(grep -l 'sampled_from' "$W"/runs_*/*/rank*/host_samples.json 2>/dev/null | wc -l) of $(ls "$W"/runs_*/*/rank*/host_samples.json 2>/dev/null | wc -l) files" >> "$S"
  COMPILED=1 overhead hold50 "${ROUNDS:-4}" ddp fsdp2
  ;;
last50|quiet50|end50)  # tenth session: a cached run's window ends with the optimizer step its program's last run ended
          # after, and torch-engine ranks run the launcher in rankexec's process: the un-annotated DDP straggler ending
          # inside its window (first, cached: the cached run's window ends at that step), FSDP2 with extra host work on
          # rank 1 (first, cached), then ROUNDS (10) byte-compiled rounds of DDP (the hooks' steps: where the change
          # applies). quiet50 (eleventh session, the same runs): runtime calls doing no GPU work left out of CUPTI's
          # records (runtime/cupti_quiet.py); each rank's "CUPTI:" line, counted, goes to the summary too. end50 (twelfth
          # session): a cached run of a program whose end is known records END_WINDOW_STEPS steps and runs its steps
          # after them unrecorded to its end (runtime.window: Window._end_known); a second cached run, which must
          # know the end again
  profile ddp_hooks_straggler_first 150 -- "${TR[@]}" "${DDP[@]}" --no-annotate; look ddp_hooks_straggler_first
  profile ddp_hooks_straggler_cached 120 -- "${TR[@]}" "${DDP[@]}" --no-annotate; look ddp_hooks_straggler_cached
  if [ "$PART" = end50 ]; then
    profile ddp_hooks_straggler_cached2 120 -- "${TR[@]}" "${DDP[@]}" --no-annotate; look ddp_hooks_straggler_cached2
    grep -h '"event": "start"\|"event": "end"\|"unrecorded"\|wrote .*torch_trace' \
      "$W"/runs_ddp_hooks_*/*/torch.stderr.log 2>/dev/null | sed 's/^.*nsighttc.launch/nsighttc.launch/' | cut -c1-300 >> "$S"
  fi
  keep ddp_hooks_straggler_cached
  grep -h '"program_end"\|"ended"' "$W"/runs_ddp_hooks_*/*/torch.stderr.log 2>/dev/null | sed 's/^.*nsighttc.launch/nsighttc.launch/' >> "$S"
  grep -h 'CUPTI:' "$W"/runs_*/*/torch.stderr.log 2>/dev/null | sed 's/^.*nsighttc.launch/nsighttc.launch/' | sort | uniq -c \
    >> "$S"
  FX=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29544 "${FSDP[@]}" --extra-host-rank 1
      --extra-host-ms 30)
  profile fsdp_extra_first 200 -- "${FX[@]}"; look fsdp_extra_first
  profile fsdp_extra_cached 150 -- "${FX[@]}"; look fsdp_extra_cached
  COMPILED=1 overhead "$PART" "${ROUNDS:-10}" ddp
  grep -h 'CUPTI:' "$W"/ov/runs_*/*/torch.stderr.log 2>/dev/null | sed 's/^.*nsighttc.launch/nsighttc.launch/' | sort | \
    uniq -c >> "$S"
  ;;
verify50)
  plain ddp_straggler20 "${TR[@]}" "${DDP[@]}"
  profile ddp_straggler20_first 150 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_first
  profile ddp_straggler20_cached 120 -- "${TR[@]}" "${DDP[@]}"; look ddp_straggler20_cached
  profile fsdp_even 150 -- "${TR[@]}" "${FSDP[@]}"; look fsdp_even
  profile fsdp_extra 150 -- "${TR[@]}" "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30; look fsdp_extra
  ;;
esac
pack
