#!/usr/bin/env bash
# Issue 45 on the GPU machine: where the host time went (the launcher's host stack samples, reports/host_frames/).
#   Usage (after `source .device-mid/setup.sh`): bash benchmarks/gpu/gpu_host_frames.sh OUT PART
#   PART frames: the Trainer fine-tune's default run, first (empty evidence cache) and cached, and with nsys as the
#                timeline (--fast); the Lightning module and the DataLoader loop's default runs; py-spy recording each
#                program separately (raw collapsed stacks, 200 Hz) for benchmarks/host_frames_check.py pyspy; the runs'
#                traces stripped, with their host_samples.json, as fixtures.
#   PART mini:   what a few minutes allow (BUDGET seconds, default 280): the Trainer's first and cached default runs
#                (the same verdict and first cause), the DataLoader loop's default run and py-spy on it, the checks.
#   PART repro51: issue 51's reproduction: the Trainer with items built in Python, plain (and with 2 workers), its
#                first and cached default runs, Lightning's
#                default run, py-spy on the Trainer; each run's launcher lines (window, recording) to the summary.
#   PART verify51: issue 51's done-when: a plain Trainer run; its first and cached default runs each with py-spy
#                attached to the same run (`py-spy record --subprocesses`), compared on the top frame; Lightning's
#                default run; the sampler's cost (the `cost` part's measure, 2 rounds, the Trainer only).
#   PART final51: the generate loop's unrecorded time per output token against plain runs, alternating (plain, first
#                run with an empty evidence cache, cached run; two rounds); the Trainer's first and cached runs.
#   PART gen51:  the same as final51's generate rounds, ROUNDS of them (default 3), the generate loop only, with the
#                medians of plain TPOT and unrecorded time per output token (benchmarks/gpu/generate_speed_check.py).
#   PART fullrun51: `nsighttc profile --full-run` on the generate loop (first and cached run, twice): the program's own
#                TPOT over its requests against nsighttc's unrecorded decode calls in the same process.
#   PART cost:   the sampler's cost: `nsighttc profile --fast` with and without host samples (--no-host-samples),
#                alternating, 3 rounds each, on the Trainer and the DataLoader loop; the steady step medians and the
#                sampler's own CPU time go to the summary (benchmarks/host_frames_check.py cost reads the verdicts).
set -u
OUT=${1:?out dir}; PART=${2:?part}
source "$(dirname "$0")/gpu_lib.sh"
export PATH=/tmp/site/bin:$PATH
TRAINER=(wrappers/trainer_finetune.py --steps 40)
LIGHTNING=(wrappers/lightning_module.py --steps 100)
LOADER=(wrappers/dataloader_bound.py --no-annotate --steps 40)

keep() {  # name: the latest run's trace (stripped) and host samples as a fixture folder
  local name=$1 d t
  d=$(ls -d "$W/runs_$name"/*/ 2>/dev/null | tail -1)
  [ -z "$d" ] && return
  mkdir -p "$W/fix/$name"
  t=$(ls "$d"/torch_trace.json "$d"/nsys.sqlite 2>/dev/null | head -1)
  [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/$name/$(basename "$t").gz" >> "$S" 2>&1
  [ -f "$d/host_samples.json" ] && gzip -c "$d/host_samples.json" > "$W/fix/$name/host_samples.json.gz"
  python3 - "$d/verdict.json" "$name" >> "$S" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); tl = d["timeline"]; hf = tl.get("host_frames") or {}
print(sys.argv[2], "|", tl["verdict"], round(tl["gpu_busy_share"], 3), "|", tl.get("headline_cause"))
print("   samples", hf.get("samples"), "idle", hf.get("idle_samples"), "cost", hf.get("sampler_cost_share"), hf.get("notes"))
for r in (hf.get("rows") or [])[:5]:
    print("   ", round(r["share"], 3), r["frame"], f"{r['file']}:{r['line']}", "->", r.get("calls"), "|", r.get("topic"), "|", r.get("program_line"))
print("   findings:", [f["id"] for f in d["findings"]][:6])
EOF
}

case "$PART" in
frames)
  profile trainer_first 300 -- python3 "${TRAINER[@]}"; keep trainer_first
  profile trainer_cached 300 -- python3 "${TRAINER[@]}"; keep trainer_cached
  profile trainer_nsys 300 --fast --timeline-engine nsys -- python3 "${TRAINER[@]}"; keep trainer_nsys
  profile lightning 300 -- python3 "${LIGHTNING[@]}"; keep lightning
  profile loader 300 -- python3 "${LOADER[@]}"; keep loader
  for p in "trainer ${TRAINER[*]}" "lightning ${LIGHTNING[*]}" "loader ${LOADER[*]}"; do
    set -- $p; name=$1; shift
    timeout 200 py-spy record -r 200 -f raw -o "$W/fix/pyspy_$name.txt" -- python3 "$@" > "$W/pyspy_$name.log" 2>&1
    echo "py-spy $name: rc=$? $(wc -l < "$W/fix/pyspy_$name.txt" 2>/dev/null) stacks" >> "$S"
    tail -3 "$W/pyspy_$name.log" >> "$S"
  done
  for p in "trainer trainer_first" "trainer trainer_cached" "lightning lightning" "loader loader"; do
    set -- $p
    d=$(ls -d "$W/runs_$2"/*/ 2>/dev/null | tail -1)
    [ -n "$d" ] && python3 benchmarks/host_frames_check.py pyspy "$d" "$W/fix/pyspy_$1.txt" >> "$S" 2>&1
  done
  ;;
mini)
  START=$(date +%s)
  left() { echo $(( ${BUDGET:-280} - ($(date +%s) - START) )); }
  profile trainer_first "$(left)" -- python3 "${TRAINER[@]}"; keep trainer_first
  [ "$(left)" -gt 40 ] && { profile trainer_cached "$(left)" -- python3 "${TRAINER[@]}"; keep trainer_cached; }
  [ "$(left)" -gt 40 ] && { profile loader "$(left)" -- python3 "${LOADER[@]}"; keep loader; }
  if [ "$(left)" -gt 30 ]; then
    timeout "$(left)" py-spy record -r 200 -f raw -o "$W/fix/pyspy_loader.txt" -- python3 "${LOADER[@]}" \
      > "$W/pyspy_loader.log" 2>&1
    echo "py-spy loader: rc=$? $(wc -l < "$W/fix/pyspy_loader.txt" 2>/dev/null) stacks" >> "$S"
  fi
  for p in "trainer trainer_first" "trainer trainer_cached" "loader loader"; do
    set -- $p
    d=$(ls -d "$W/runs_$2"/*/ 2>/dev/null | tail -1)
    [ -n "$d" ] && [ -f "$W/fix/pyspy_$1.txt" ] && python3 benchmarks/host_frames_check.py pyspy "$d" "$W/fix/pyspy_$1.txt" >> "$S" 2>&1
  done
  ;;
repro51)
  TRAINER=(wrappers/trainer_finetune.py --steps 60 --python-items)
  plain trainer python3 "${TRAINER[@]}"
  plain trainer_workers python3 "${TRAINER[@]}" --workers 2
  profile trainer_first 240 -- python3 "${TRAINER[@]}"; keep trainer_first
  profile trainer_cached 240 -- python3 "${TRAINER[@]}"; keep trainer_cached
  profile lightning 240 -- python3 "${LIGHTNING[@]}"; keep lightning
  timeout 150 py-spy record -r 200 -f raw -o "$W/fix/pyspy_trainer.txt" -- python3 "${TRAINER[@]}" > "$W/pyspy_trainer.log" 2>&1
  echo "py-spy trainer: rc=$? $(wc -l < "$W/fix/pyspy_trainer.txt" 2>/dev/null) stacks" >> "$S"
  for p in trainer_first trainer_cached lightning; do
    d=$(ls -d "$W/runs_$p"/*/ 2>/dev/null | tail -1); [ -z "$d" ] && continue
    echo "-- $p" >> "$S"; grep -hE "nsighttc\.(launch|window)" "$d"/*.log 2>/dev/null | cut -c1-300 | head -12 >> "$S"
    case $p in trainer*) python3 benchmarks/host_frames_check.py pyspy "$d" "$W/fix/pyspy_trainer.txt" >> "$S" 2>&1;; esac
  done
  ;;
verify51)
  TRAINER=(wrappers/trainer_finetune.py --steps 60 --python-items)
  plain trainer python3 "${TRAINER[@]}"
  for run in trainer_first trainer_cached; do
    t0=$(date +%s.%N)
    timeout 200 py-spy record -r 200 -f raw --subprocesses -o "$W/fix/pyspy_$run.txt" -- \
      python3 -m nsighttc profile --out "$W/runs_$run" -- python3 "${TRAINER[@]}" > "$W/$run.profile.log" 2>&1
    echo "profile $run under py-spy: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
    grep -E "^nsighttc: (GPU busy|Start-up)" "$W/$run.profile.log" | sed 's/^/   /' >> "$S"
    keep "$run"
    d=$(ls -d "$W/runs_$run"/*/ 2>/dev/null | tail -1)
    [ -n "$d" ] && python3 benchmarks/host_frames_check.py pyspy "$d" "$W/fix/pyspy_$run.txt" >> "$S" 2>&1
    gzip -f "$W/fix/pyspy_$run.txt"
  done
  profile lightning 240 -- python3 "${LIGHTNING[@]}"; keep lightning
  for round in 1 2; do
    profile "cost_trainer_on_$round" 300 --fast -- python3 "${TRAINER[@]}"
    profile "cost_trainer_off_$round" 300 --fast --no-host-samples -- python3 "${TRAINER[@]}"
  done
  python3 benchmarks/host_frames_check.py cost "$W" >> "$S" 2>&1
  # the generate loop's time per output token: plain, and unrecorded in its first and cached default runs
  LLM=(wrappers/llm_generate.py --requests 8 --new-tokens 96)
  export NSIGHTTC_CACHE_DIR=$W/cache_llm
  plain llm python3 "${LLM[@]}"
  profile llm_first 240 -- python3 "${LLM[@]}"
  profile llm_cached 240 -- python3 "${LLM[@]}"
  plain llm_again python3 "${LLM[@]}"
  for v in "$W"/runs_llm_first/*/verdict.json "$W"/runs_llm_cached/*/verdict.json; do
    python3 benchmarks/gpu/verdict_speed.py "$v" >> "$S" 2>&1
  done
  grep -h "unrecorded" "$W"/runs_llm_*/*/torch.stderr.log | cut -c1-400 >> "$S"
  ;;
final51)
  LLM=(wrappers/llm_generate.py --requests 8 --new-tokens 96)
  for round in 1 2; do
    plain "llm_$round" python3 "${LLM[@]}"
    export NSIGHTTC_CACHE_DIR=$W/cache_llm_$round; rm -rf "$NSIGHTTC_CACHE_DIR"
    profile "llm_first_$round" 240 -- python3 "${LLM[@]}"
    profile "llm_cached_$round" 240 -- python3 "${LLM[@]}"
    for v in "$W"/runs_llm_first_$round/*/verdict.json "$W"/runs_llm_cached_$round/*/verdict.json; do
      python3 benchmarks/gpu/verdict_speed.py "$v" >> "$S" 2>&1
    done
  done
  TRAINER=(wrappers/trainer_finetune.py --steps 60 --python-items)
  export NSIGHTTC_CACHE_DIR=$W/cache_trainer; rm -rf "$NSIGHTTC_CACHE_DIR"
  profile trainer_first 240 -- python3 "${TRAINER[@]}"; keep trainer_first
  profile trainer_cached 240 -- python3 "${TRAINER[@]}"; keep trainer_cached
  ;;
gen51)    # the generate loop's unrecorded time per output token against plain runs: ROUNDS (3) alternating rounds of
          # plain, first run (empty evidence cache) and cached run; medians by benchmarks/gpu/generate_speed_check.py
  LLM=(wrappers/llm_generate.py --requests 8 --new-tokens 96)
  for round in $(seq 1 "${ROUNDS:-3}"); do
    plain "llm_$round" python3 "${LLM[@]}"
    export NSIGHTTC_CACHE_DIR=$W/cache_llm_$round; rm -rf "$NSIGHTTC_CACHE_DIR"
    profile "llm_first_$round" 240 -- python3 "${LLM[@]}"
    profile "llm_cached_$round" 240 -- python3 "${LLM[@]}"
  done
  python3 benchmarks/gpu/generate_speed_check.py "$W" >> "$S" 2>&1
  ;;
fullrun51)
  LLM=(wrappers/llm_generate.py --requests 8 --new-tokens 96)
  for round in 1 2; do
    export NSIGHTTC_CACHE_DIR=$W/cache_full_$round; rm -rf "$NSIGHTTC_CACHE_DIR"
    for run in first cached; do
      profile "full_${run}_$round" 300 --full-run -- python3 "${LLM[@]}"
      d=$(ls -d "$W/runs_full_${run}_$round"/*/ 2>/dev/null | tail -1)
      [ -n "$d" ] && { grep -h '"wrapper"' "$d"/torch.log | cut -c1-300 >> "$S";
                       python3 benchmarks/gpu/verdict_speed.py "$d/verdict.json" >> "$S" 2>&1;
                       grep -h '"unrecorded"' "$d"/torch.stderr.log | cut -c1-300 >> "$S"; }
    done
  done
  ;;
cost)
  for round in 1 2 3; do
    for prog in trainer loader; do
      if [ $prog = trainer ]; then cmd=("${TRAINER[@]}"); else cmd=("${LOADER[@]}"); fi
      profile "cost_${prog}_on_$round" 300 --fast -- python3 "${cmd[@]}"
      profile "cost_${prog}_off_$round" 300 --fast --no-host-samples -- python3 "${cmd[@]}"
    done
  done
  python3 benchmarks/host_frames_check.py cost "$W" >> "$S" 2>&1
  ;;
esac
pack
