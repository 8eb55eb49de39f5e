#!/usr/bin/env bash
# One nsys report for a whole torchrun job (what users get from `nsys profile torchrun ...`): both ranks'
# processes in one SQLite. Recorded for the analysis of single-file multi-process recordings (issue 11).
# Usage (nvidia-h200-x2): benchmarks/gpu/gpu_ddp_one_report.sh OUT
set -u
OUT=${1:-/tmp/ddp-one}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nsys profile -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=node -o "$OUT/job" \
  python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29533 \
  wrappers/ddp_train.py --steps 5 --warmup 2 --straggler-rank 1 --delay-ms 30 > "$OUT/job.log" 2>&1
nsys export --type sqlite --output "$OUT/job.sqlite" "$OUT/job.nsys-rep" >> "$OUT/job.log" 2>&1
python3 benchmarks/strip_fixture.py "$OUT/job.sqlite" "$OUT/job_whole.sqlite.gz"
python3 -m nsighttc analyze "$OUT/job.sqlite" --format json -o "$OUT/verdict.json" >> "$OUT/job.log" 2>&1
rm -f "$OUT/job.nsys-rep" "$OUT/job.sqlite"
grep -h "ms/step\|error" "$OUT/job.log" | tail -5
ls -la "$OUT"
