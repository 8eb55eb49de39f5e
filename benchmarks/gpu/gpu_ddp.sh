#!/usr/bin/env bash
# DDP on the lent 2-GPU machine (nvidia-h200-x2): plain runs and nsighttc runs of wrappers/ddp_train.py,
# balanced and with a straggler, per-rank recordings kept as fixtures. Writes under $OUT (or $1):
#   plain_<case>.log, <case>_<engine>_<i>.tar.gz (nsighttc run directories, raw recordings gzipped), summary.txt.
#   Usage: [STEPS=10 WARMUP=3 NO_PLAIN=1] benchmarks/gpu/gpu_ddp.sh OUT [CASE:ENGINE ...]
#   CASE: balanced | straggler; ENGINE: nsys | torch | fast | auto (default: balanced:nsys straggler:nsys)
# NVLink multicast stays off, as the machine's notes ask.
set -u
OUT=${1:-${OUT:-/tmp/ddp-out}}; shift || true
JOBS=${*:-balanced:nsys straggler:nsys}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ARGS=(--steps ${STEPS:-10} --warmup ${WARMUP:-3})
TR=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29531)
declare -A CASE=([balanced]="" [straggler]="--straggler-rank 1 --delay-ms 30")
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
  nsys --version 2>/dev/null | head -1; ncu --version | tail -1
} > "$OUT/summary.txt" 2>&1
if [ -z "${NO_PLAIN:-}" ]; then
  for c in balanced straggler; do
    # shellcheck disable=SC2086
    ( time "${TR[@]}" wrappers/ddp_train.py "${ARGS[@]}" ${CASE[$c]} ) > "$OUT/plain_$c.log" 2>&1
    grep -h "ms/step" "$OUT/plain_$c.log" | sed "s/^/plain $c: /" >> "$OUT/summary.txt"
  done
fi
i=0
for job in $JOBS; do   # CASE:ENGINE, e.g. straggler:nsys
  c=${job%%:*}; e=${job#*:}; i=$((i + 1))
  case $e in
    fast) opt=(--fast) ;;
    nsys) opt=(--engine nsys) ;;
    torch) opt=(--engine torch) ;;
    auto) opt=(--no-cache) ;;
  esac
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 300 python3 -m nsighttc profile "${opt[@]}" --out "$OUT/runs" -- "${TR[@]}" wrappers/ddp_train.py \
    "${ARGS[@]}" ${CASE[$c]} > "$OUT/profile.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "profile $e $c #$i: rc=$rc $(python3 -c "print(round($end-$start,1))") s" >> "$OUT/summary.txt"
  d=$(ls -d "$OUT/runs"/*-ddp_train* 2>/dev/null | tail -1)
  [ -n "$d" ] || { tail -3 "$OUT/profile.log" >> "$OUT/summary.txt"; continue; }
  n="${c}_${e}_$i"; mv "$d" "$OUT/$n"; rmdir "$OUT/runs" 2>/dev/null; mv "$OUT/profile.log" "$OUT/$n/"
  # keep what tests need: per-rank SQLite and traces gzipped, no .nsys-rep / .ncu-rep (large); the ncu
  # report's raw page is kept as CSV so the verdict can be recomputed with its hardware evidence
  for rep in "$OUT/$n"/rank*/ncu.ncu-rep; do
    [ -f "$rep" ] && ncu -i "$rep" --csv --page raw --print-units base > "${rep%.ncu-rep}_raw.csv" 2>/dev/null
  done
  find "$OUT/$n" \( -name '*.nsys-rep' -o -name '*.qdstrm' -o -name '*.ncu-rep' \) -delete
  find "$OUT/$n" \( -name '*.sqlite' -o -name 'torch_trace.json' -o -name 'ncu_raw.csv' \) -exec gzip -f {} \;
  grep -h "ms/step" "$OUT/$n"/*.log | sed "s/^/  under $e: /" >> "$OUT/summary.txt"
  python3 - "$OUT/$n" >> "$OUT/summary.txt" <<'EOF2'
import json, sys
d = sys.argv[1]
try:
    v = json.load(open(d + "/verdict.json"))
except Exception as exc:
    print(d, "no verdict:", exc); sys.exit()
dist = v.get("distributed") or {}
print(d.split("/")[-1], "| straggler:", (dist.get("straggler") or {}).get("rank"), "| exposed:",
      dist.get("exposed_comm_share"), "| nccl:", dist.get("nccl_time_share"), "| tc:", v["tensor_cores"]["verdict"],
      v["tensor_cores"]["evidence"], round(v["tensor_cores"]["tc_time_share"], 3))
for r in v.get("ranks") or []:
    print("  rank", r["rank"], r["verdict"], "busy", r["gpu_busy_share"], "compute", r["compute_busy_share"],
          "step", r["median_step_ns"], "own", r["own_step_ns"], "|", r["headline_cause"])
EOF2
  tar czf "$OUT/$n.tar.gz" -C "$OUT" "$n" && rm -rf "${OUT:?}/$n"
done
ls -la "$OUT" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
