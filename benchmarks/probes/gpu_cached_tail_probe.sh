#!/usr/bin/env bash
# Issue 29: where a second (cached) default run's time beyond the plain run goes, for short programs whose whole
# run is close to the window (VGG16, multi_phase: 1.10-1.14x in call21). For each program: a plain run, a first run
# that fills a fresh evidence cache, then ROUNDS second runs alternating with plain runs, one of them under cProfile
# (the profile process' main thread: analysis, report, waits). Keeps run.json (phase_seconds with marks), the
# launcher's log, verdict.json's provenance and the cProfile text. Run on the GPU machine:
#
#     bash benchmarks/probes/gpu_cached_tail_probe.sh OUT [ROUNDS] [PROGRAM.py ...]
set -u
out=${1:?usage: gpu_cached_tail_probe.sh OUT [ROUNDS] [PROGRAM.py ...]}
rounds=${2:-2}
shift $(( $# > 1 ? 2 : 1 ))
progs=("$@")
[ ${#progs[@]} -eq 0 ] && progs=(wrappers/vgg16.py wrappers/multi_phase.py)
mkdir -p "$out"
py=python3
now() { date +%s.%N; }
for prog in "${progs[@]}"; do
  name=$(basename "$prog" .py)
  cache=$(mktemp -d /tmp/nsighttc-tail-XXXX)
  runs="$out/runs_$name"
  t0=$(now); $py "$prog" >"$out/${name}_plain0.log" 2>&1; t1=$(now)
  echo "$name plain0 $(python3 -c "print(round($t1-$t0,2))")" | tee -a "$out/times.txt"
  t0=$(now); NSIGHTTC_CACHE_DIR=$cache $py -m nsighttc profile --out "$runs" "$prog" >"$out/${name}_first.log" 2>&1; t1=$(now)
  echo "$name first $(python3 -c "print(round($t1-$t0,2))")" | tee -a "$out/times.txt"
  for r in $(seq 1 "$rounds"); do
    t0=$(now); $py "$prog" >"$out/${name}_plain$r.log" 2>&1; t1=$(now)
    echo "$name plain$r $(python3 -c "print(round($t1-$t0,2))")" | tee -a "$out/times.txt"
    t0=$(now); NSIGHTTC_CACHE_DIR=$cache $py -m nsighttc profile --out "$runs" "$prog" >"$out/${name}_cached$r.log" 2>&1; t1=$(now)
    echo "$name cached$r $(python3 -c "print(round($t1-$t0,2))")" | tee -a "$out/times.txt"
  done
  # the console command ends with os._exit, before `python -m cProfile` writes anything: main() is profiled instead
  t0=$(now)
  NSIGHTTC_CACHE_DIR=$cache $py -c 'import cProfile, sys
from nsighttc.cli import main
out = sys.argv[1]
sys.argv = ["nsighttc", *sys.argv[2:]]
prof = cProfile.Profile()
prof.enable()
try:
    main()
finally:
    prof.disable()
    prof.dump_stats(out)' "$out/${name}_cached.prof" profile --out "$runs" "$prog" >"$out/${name}_cprofile.log" 2>&1
  t1=$(now)
  echo "$name cached-cprofile $(python3 -c "print(round($t1-$t0,2))")" | tee -a "$out/times.txt"
  $py - "$out/${name}_cached.prof" >"$out/${name}_cprofile.txt" <<'EOF'
import pstats, sys
st = pstats.Stats(sys.argv[1])
st.sort_stats("cumulative").print_stats(70)
st.sort_stats("tottime").print_stats(30)
EOF
  rm -f "$out/${name}_cached.prof"
  for d in "$runs"/*/; do
    $py - "$d" >>"$out/${name}_phases.txt" <<'EOF'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
run = json.loads((d / "run.json").read_text())
prov = {}
if (d / "verdict.json").exists():
    prov = json.loads((d / "verdict.json").read_text()).get("provenance", {})
print(d.name, json.dumps(run.get("phase_seconds")), json.dumps((prov.get("evidence") or {}).get("trace_parse")),
      json.dumps([{k: p.get(k) for k in ("engine", "mode", "seconds", "trace_written_s")} for p in prov.get("passes", [])]))
EOF
    grep -h "nsighttc.launch: wrote\|window {" "$d/torch.stderr.log" >>"$out/${name}_phases.txt" 2>/dev/null
  done
  find "$runs" \( -name '*trace.json' -o -name '*.ncu-rep' -o -name '*.png' -o -name 'kernels.md' \) -delete
  rm -rf "$cache"
done
