#!/usr/bin/env bash
# `nsighttc fix` on programs it had not seen, on the GPU machine: each patch applied to a copy, run in rounds beside
# the launcher's variant of the same fix (source .device-carry/setup.sh first; P: ../shared/programs' copy).
#   bash benchmarks/gpu/gpu_fix.sh OUT [a|b]
# a: hf_bert.py (num_workers, TF32), lit_cifar.py (persistent_workers); b: llm_generate.py (static cache),
#    wrappers/grad_accum.py (TF32 set back by the program, workers through its --workers option)
set -u
OUT=${1:?usage: gpu_fix.sh OUT [a|b]}; PART=${2:-a}
P=${P:-.device-carry/programs}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_lib.sh"
KEEP=$OUT; OUT=$W/fix; mkdir -p "$OUT"
run_fix() {  # name args...: like run_try, with `nsighttc fix`
  local name=$1; shift
  local t0; t0=$(date +%s)
  python3 -m nsighttc fix --out "$OUT/runs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local d; d=$(ls -d "$OUT/runs"/*-try-* 2>/dev/null | tail -1)
  echo "## $name (rc=$rc, $(( $(date +%s) - t0 )) s): nsighttc fix $*" >> "$S"
  if [ -n "$d" ]; then
    mv "$d" "$OUT/$name"; find "$OUT/$name" -name 'torch_trace.json' -delete
    sed -n '/^| variant/,/^$/p' "$OUT/$name/try.md" >> "$S"
    sed -n '/^## Patches/,/^## Notes/p' "$OUT/$name/try.md" | grep -E "^### |^- " >> "$S"
    tar czf "$KEEP/$name.tgz" --exclude=patched -C "$OUT" "$name"
  else
    tail -5 "$OUT/$name.log" >> "$S"
  fi
}
case $PART in
  a) run_fix hf_bert --budget 240 --variant workers=8 --variant tf32 "$P/hf_bert.py"
     run_fix lit_cifar --budget 240 --variant persistent-workers "$P/lit_cifar.py";;
  b) run_fix llm_generate --budget 240 --variant static-cache "$P/llm_generate.py"
     run_fix grad_accum --budget 240 --variant tf32 --variant workers=8 --variant bf16-autocast wrappers/grad_accum.py;;
esac
