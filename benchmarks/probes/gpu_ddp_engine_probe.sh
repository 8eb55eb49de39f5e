#!/usr/bin/env bash
# Issue 29: which timeline engine a torchrun job's default run should use now that torch.profiler records the ranges
# only (no operators) where no replay reads them. On a one-GPU machine, two DDP ranks share GPU 0 (gloo,
# wrappers/ddp_train.py --share-gpu) and rank 1 sleeps 30 ms on its host before each step (the straggler). Per
# engine: the job under `nsighttc profile --fast --timeline-engine E` (timeline only), its wall time, the ranks'
# step times and the straggler verdict; and a plain run. Usage (GPU machine, after setup.sh):
#     bash benchmarks/probes/gpu_ddp_engine_probe.sh OUT [ROUNDS]
set -u
out=${1:?usage: gpu_ddp_engine_probe.sh OUT [ROUNDS]}; rounds=${2:-1}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
job=(python3 -m torch.distributed.run --nproc-per-node 2 wrappers/ddp_train.py --share-gpu --no-annotate
     --straggler-rank 1 --delay-ms 30 --steps 60)
now() { python3 -c 'import time; print(time.time())'; }
for r in $(seq 1 "$rounds"); do
  t0=$(now); "${job[@]}" >"$out/plain_$r.log" 2>&1; t1=$(now)
  echo "round $r plain $(python3 -c "print(round($t1-$t0,2))") s: $(grep -h 'ms/step' "$out/plain_$r.log" | sed 's/.*: //' | tr '\n' ' ')" | tee -a "$out/engines.txt"
  for engine in nsys torch; do
    t0=$(now)
    python3 -m nsighttc profile --fast --timeline-engine "$engine" --out "$out/runs_$engine" -- "${job[@]}" \
      >"$out/${engine}_$r.log" 2>&1
    rc=$?; t1=$(now)
    echo "round $r $engine $(python3 -c "print(round($t1-$t0,2))") s (rc $rc): $(grep -h 'ms/step' "$out/${engine}_$r.log" | sed 's/.*: //' | tr '\n' ' ')" | tee -a "$out/engines.txt"
    grep -E "^nsighttc: (Ranks|GPU busy|Start-up)" "$out/${engine}_$r.log" | sed 's/^/    /' | tee -a "$out/engines.txt"
  done
done
find "$out" \( -name "*trace.json" -o -name "*.png" -o -name "*.nsys-rep" -o -name "*.sqlite" -o -name "*.qdstrm" \) -delete
