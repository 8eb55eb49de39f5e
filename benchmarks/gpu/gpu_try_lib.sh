# Shared by gpu_try.sh, gpu_try_calibration.sh, gpu_try_next.sh and gpu_fix.sh (sourced with OUT and S, the
# summary file, set; CMD=fix for `nsighttc fix`; KEEP=DIR: each run's folder also tarred there at once):
#   run_try NAME ARGS...   `nsighttc $CMD --out OUT/runs ARGS...` moved to OUT/NAME (torch traces deleted), its log
#                          beside it, its table, auto's choices, the predictions and the patches appended to S
run_try() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  python3 -m nsighttc "${CMD:-try}" --out "$OUT/runs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local d; d=$(ls -d "$OUT/runs"/*-try-* 2>/dev/null | tail -1)
  echo "## $name (rc=$rc, $(( $(date +%s) - t0 )) s): nsighttc ${CMD:-try} $*" >> "$S"
  if [ -n "$d" ]; then
    mv "$d" "$OUT/$name"; rmdir "$OUT/runs" 2>/dev/null
    mv "$OUT/$name.log" "$OUT/$name/try.log"
    find "$OUT/$name" -name 'torch_trace.json' -delete
    sed -n '/^| variant/,/^$/p' "$OUT/$name/try.md" >> "$S"
    grep -A9 "^Chosen by" "$OUT/$name/try.md" >> "$S"
    grep -E "^The baseline's findings|^Predictions|^\*\*Next|^- stopped|not clear" "$OUT/$name/try.md" >> "$S"
    sed -n '/^## Patches/,/^## Notes/p' "$OUT/$name/try.md" | grep -E "^### |^- " >> "$S"
    [ -n "${KEEP:-}" ] && tar czf "$KEEP/$name.tgz" --exclude=patched -C "$OUT" "$name"  # back at once
  else
    tail -5 "$OUT/$name.log" >> "$S"
  fi
}
