#!/usr/bin/env bash
# GPU check (issue 10): the default run with the replay pass (nsighttc/runtime/replay.py). Per program: one plain run
# and one first run (empty evidence cache), both timed whole-process; keeps each run's run.json, logs, the
# replay's operator list, its ncu raw page (CSV) and the record_shapes torch trace (gzip), for fixtures.
#   bash benchmarks/probes/gpu_replay_probe.sh OUT [PROGRAM...]     -> OUT/replay_probe.txt, OUT/runs.tgz
set -u
OUT=${1:?out dir}; shift; PROGS=${*:-wrappers/multi_phase.py wrappers/resnet_amp.py wrappers/vgg16.py}
mkdir -p "$OUT/runs"
for prog in $PROGS; do
  name=$(basename "$prog" .py)
  t0=$(date +%s.%N); python3 "$prog" > "$OUT/runs/${name}_plain.log" 2>&1; t1=$(date +%s.%N)
  runs="$OUT/runs/$name"
  NSIGHTTC_CACHE_DIR=$(mktemp -d) python3 -m nsighttc profile -v --out "$runs" "$prog" > "$OUT/runs/${name}_profile.log" 2>&1
  rc=$?; t2=$(date +%s.%N)
  d=$(ls -td "$runs"/*/ | head -1)
  python3 - "$d" "$name" "$(python3 -c "print(round($t1-$t0,2), round($t2-$t1,2))")" "$rc" <<'PY' | tee -a "$OUT/replay_probe.txt"
import json, sys
d, name, (plain, prof), rc = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4]
run = json.load(open(d + "run.json")); v = json.load(open(d + "verdict.json"))
ev = run.get("evidence", {}); tc = v.get("tensor_cores") or v.get("summary") or {}
print(f"{name}: plain {plain} s, first run {prof} s (ratio {float(prof)/float(plain):.2f}), rc {rc}")
print(f"  passes: {[(p['engine'], p['mode'], p['seconds']) for p in run.get('passes', [])]}")
print(f"  phase_seconds: {run.get('phase_seconds')}")
print(f"  evidence: {json.dumps(ev)}")
print(f"  tensor cores: {json.dumps({k: tc.get(k) for k in ('verdict', 'evidence', 'time_share', 'by_dtype', 'evidence_sources')})}")
PY
  if [ -f "$d/ncu_replay.ncu-rep" ]; then
    ncu --import "$d/ncu_replay.ncu-rep" --page raw --csv 2>/dev/null | gzip > "$d/ncu_replay_raw.csv.gz"
    rm -f "$d/ncu_replay.ncu-rep"
  fi
  rm -f "$d"/ncu.ncu-rep
  [ -f "$d/torch_trace.json" ] && gzip "$d/torch_trace.json"
done
tar -czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
ls -la "$OUT"
