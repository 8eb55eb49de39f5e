#!/usr/bin/env bash
# Issue 29: a torchrun job's default first run (rank 0's operators recorded until the window for the replay, every
# window with the ranges only) must still name the right straggler, whichever rank it is, rank 0 included. On a
# one-GPU machine two DDP ranks share GPU 0 (gloo, wrappers/ddp_train.py --share-gpu); rank R sleeps 30 ms on its host
# before each step. Per R: `nsighttc profile` (default run, empty evidence cache) of the job, its wall time, the
# verdict's Ranks line and what the replay measured; then rank 1's job again (a second run, the window only).
# With two GPUs or more the ranks get one GPU each (NCCL) instead. Usage (GPU machine, after setup.sh):
#     bash benchmarks/probes/gpu_ddp_straggler_default.sh OUT
set -u
out=${1:?usage: gpu_ddp_straggler_default.sh OUT}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
now() { python3 -c 'import time; print(time.time())'; }
share=(--share-gpu)
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then share=(); fi
echo "GPUs: $(nvidia-smi -L 2>/dev/null | wc -l); ranks: ${share[*]:-one GPU each}" | tee "$out/straggler.txt"
profiled() {  # profiled R TAG: the default run of the job whose rank R straggles, into runs_TAG (cache per R)
  local r=$1 tag=$2
  local job=(python3 -m torch.distributed.run --nproc-per-node 2 wrappers/ddp_train.py "${share[@]}" --no-annotate
             --straggler-rank "$r" --delay-ms 30 --steps 60)
  local t0 t1 rc
  t0=$(now)
  NSIGHTTC_CACHE_DIR="$out/cache_$r" python3 -m nsighttc profile --out "$out/runs_$tag" -- "${job[@]}" \
    >"$out/$tag.log" 2>&1
  rc=$?; t1=$(now)
  echo "$tag (straggler rank $r): $(python3 -c "print(round($t1-$t0,2))") s (rc $rc)" | tee -a "$out/straggler.txt"
  grep -E "^nsighttc: (Ranks|GPU busy|Tensor Cores|Evidence)" "$out/$tag.log" | sed 's/^/    /' | tee -a "$out/straggler.txt"
  python3 - "$out/runs_$tag" <<'PY' | tee -a "$out/straggler.txt"
import json, sys, pathlib
run = sorted(pathlib.Path(sys.argv[1]).glob("*/run.json"))[-1]
d = json.loads(run.read_text())
ev = d.get("evidence") or {}
print("    evidence:", json.dumps({k: ev.get(k) for k in ("hardware_pass", "to_measure", "replay")})[:400])
print("    window:", json.dumps(d["passes"][0].get("window"))[:400])
PY
}
# first runs (empty cache) with rank 1 then rank 0 late; then rank 1's job again: a second run, from the window
profiled 1 straggler1
profiled 0 straggler0
profiled 1 straggler1_second
# each rank's window (ranges only, small) is kept, gzipped: a test's fixture of the default first run
find "$out" -path "*/rank[0-9]*/torch_trace.json" -exec gzip -9 {} \;
find "$out" \( -name "*trace.json" -o -name "*.png" -o -name "*.ncu-rep" -o -name "*.nsys-rep" -o -name "*.sqlite" \
  -o -name "*.qdstrm" -o -name verdict.json -o -name kernels.md -o -name replay_ops.json \) -delete
