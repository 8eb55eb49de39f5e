#!/usr/bin/env bash
# Issue 29: what the profile command and the timeline launcher cost before the program's first line, against a
# plain interpreter start (the second runs' fixed cost left 0.36-0.59 s between the launcher's start and the
# program's, reports/window call13-16). Usage (GPU machine, after setup.sh): bash benchmarks/probes/startup_probe.sh OUT
set -u
OUT=${1:?out dir}; mkdir -p "$OUT"; E=$(mktemp --suffix=.py); echo 'pass' > "$E"
t() { python3 -c 'import subprocess, sys, time; t = time.perf_counter(); subprocess.run(sys.argv[1:], capture_output=True); print(f"{time.perf_counter() - t:.3f}")' "$@"; }
{
for i in 1 2 3 4 5; do
  echo "round $i: python -c pass $(t python3 -c pass) | python empty.py $(t python3 "$E") |" \
       "launcher empty.py $(t python3 -m nsighttc.runtime.launch --annotate script -- "$E") |" \
       "launcher+torch import $(t python3 -c 'import torch') | nsighttc --help $(t python3 -m nsighttc --help) |" \
       "nsighttc profile --help $(t python3 -m nsighttc profile --help)"
done
echo "--- importtime: the launcher (top 12 cumulative)"
python3 -X importtime -m nsighttc.runtime.launch --annotate script -- "$E" 2>&1 | sort -t'|' -k2 -n | tail -12
echo "--- importtime: nsighttc profile --help (top 15 cumulative)"
python3 -X importtime -m nsighttc profile --help 2>&1 | grep 'import time' | sort -t'|' -k2 -n | tail -15
echo "--- site: .pth files"
python3 -c 'import site,glob,os; [print(p, len(glob.glob(os.path.join(p,"*.pth")))) for p in site.getsitepackages()]'
} > "$OUT/startup_probe.txt" 2>&1
cat "$OUT/startup_probe.txt"
