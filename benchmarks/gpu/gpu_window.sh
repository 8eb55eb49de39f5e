#!/usr/bin/env bash
# Issue 29 on the GPU machine: the default run records a window of steady steps (reports/window/, the fixtures
# tests/fixtures/window/).
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_window.sh OUT PART
#   PART a: the default `nsighttc profile` (first run, empty evidence cache) on the Trainer fine-tune, the
#           torch.compile loop and the multi-phase program, with the Trainer's plain run beside it; then, for the
#           fixtures, four programs recorded by the timeline alone (--fast) as a window and whole (--whole-program).
#   PART b: the torch.compile loop (60 steps: its window ends before the program) recorded the same two ways, for
#           the fixtures; ResNet-50 AMP (steps in a named `train` range: the window, then the grace) as a window.
#   The timings of issue 29's targets come from benchmarks/gpu/gpu_profile_overhead.py (reports/profile_overhead/).
# Writes OUT/summary.txt, OUT/a.tgz (reports, verdicts, run.json, logs) and OUT/fixtures_a.tgz.
set -u
OUT=${1:?out dir}; PART=${2:?part}
source "$(dirname "$0")/gpu_lib.sh"

case "$PART" in
a)
  plain trainer python3 wrappers/trainer_finetune.py
  profile trainer 300 -- python3 wrappers/trainer_finetune.py
  profile compile 300 -- python3 wrappers/compile_loop.py
  profile multi 300 -- python3 wrappers/multi_phase.py
  for p in "trainer wrappers/trainer_finetune.py --steps 40" "resnet wrappers/resnet_amp.py --steps 80" \
           "compile wrappers/compile_loop.py --steps 40 --layers 4" "multi wrappers/multi_phase.py --steps 40"; do
    set -- $p; name=$1; shift
    for how in window whole; do
      opt=(--fast); [ $how = whole ] && opt+=(--whole-program)
      profile "fix_${name}_$how" 300 "${opt[@]}" -- python3 "$@"
      t=$(ls "$W/runs_fix_${name}_$how"/*/torch_trace.json 2>/dev/null | tail -1)
      [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/${name}_${how}_torch.json.gz" >> "$S" 2>&1
    done
  done
  ;;
b)
  for p in "compile wrappers/compile_loop.py --layers 4" "resnet wrappers/resnet_amp.py --steps 80"; do
    set -- $p; name=$1; shift
    for how in window whole; do
      [ $name = resnet ] && [ $how = whole ] && continue
      opt=(--fast); [ $how = whole ] && opt+=(--whole-program)
      profile "fix_${name}_$how" 300 "${opt[@]}" -- python3 "$@"
      t=$(ls "$W/runs_fix_${name}_$how"/*/torch_trace.json 2>/dev/null | tail -1)
      [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/${name}_${how}_torch.json.gz" >> "$S" 2>&1
      grep -h "nsighttc.launch: w" "$W/runs_fix_${name}_$how"/*/torch.stderr.log | cut -c1-220 | sed 's/^/   /' >> "$S"
    done
  done
  ;;
esac
pack
