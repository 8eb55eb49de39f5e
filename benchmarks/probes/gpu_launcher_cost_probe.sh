#!/usr/bin/env bash
# GPU probe (issue 29, cached runs): what the launcher costs a program before any profiler records, against the plain
# run, in alternating rounds (whole process wall time, seconds):
#   plain       python3 PROGRAM
#   bare        the launcher, no annotate range, no step hooks
#   hooks       the launcher with its top range and the step hooks (what every default run has), no window
#   window      ... and the window of steady steps (--window-end continue: the program runs to its end)
#   recorded    ... and torch.profiler from the window's start, ranges only (a second run's recording, to the end)
#   bash benchmarks/probes/gpu_launcher_cost_probe.sh OUT [ROUNDS] [PROGRAM...]  -> OUT/launcher_cost.txt
set -u
OUT=${1:?out dir}; ROUNDS=${2:-3}; shift 2 2>/dev/null; PROGS=${*:-wrappers/vgg16.py wrappers/multi_phase.py}
mkdir -p "$OUT/lc"; R=$OUT/launcher_cost.txt
L="python3 -m nsighttc.runtime.launch"
now() { python3 -c "import time; print(time.time())"; }
for prog in $PROGS; do
  n=$(basename "$prog" .py)
  for r in $(seq "$ROUNDS"); do
    for v in plain bare hooks window recorded; do
      case $v in
        plain) cmd=(python3 "$prog");;
        bare) cmd=($L --annotate none --step-marks off -- "$prog");;
        hooks) cmd=($L -- "$prog");;
        window) cmd=($L --window --window-end continue -- "$prog");;
        recorded) cmd=($L --window --window-end continue --record-from window --no-operators
                       --torch-trace "$OUT/lc/$n.json" -- "$prog");;
      esac
      t0=$(now); "${cmd[@]}" > "$OUT/lc/${n}_${v}_$r.log" 2>&1; rc=$?; t1=$(now)
      echo "$n round $r $v rc=$rc $(python3 -c "print(round($t1-$t0, 2))") s | $(grep -h "wrote\|program exit" "$OUT/lc/${n}_${v}_$r.log" | tr '\n' ' ' | cut -c1-200)" | tee -a "$R"
      rm -f "$OUT/lc/$n.json"
    done
  done
done
