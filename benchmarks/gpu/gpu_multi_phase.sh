#!/usr/bin/env bash
# Issue 9 on the GPU machine: record wrappers/multi_phase.py (five phases: GPU-bound training, CUDA-graph
# replay, per-step .item(), host preprocessing, tiny kernels) as
#   - nsys SQLite with CUDA graphs traced whole      (--cuda-graph-trace=graph, nsys's default)
#   - nsys SQLite with CUDA graphs traced node by node (--cuda-graph-trace=node, what the nsys engine uses)
#   - a torch.profiler trace (the torch engine's launcher)
# and time plain / graph / node runs alternately (whole process) for the cost of node tracing.
# Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_multi_phase.sh OUTDIR [ROUNDS]
set -u
OUT=${1:?outdir}; ROUNDS=${2:-2}
W=/tmp/multi_phase; rm -rf "$W"; mkdir -p "$W" "$OUT"
P=wrappers/multi_phase.py
NSYS=(nsys profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --force-overwrite true)
LAUNCH=(python3 -m nsighttc.runtime.launch --)
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader > "$OUT/gpu.txt"
{ nsys --version; python3 -c "import torch; print('torch', torch.__version__)"; } >> "$OUT/gpu.txt" 2>&1
secs() { local t0=$(date +%s%N); "$@" > "$W/last.log" 2>&1; local rc=$?; local t1=$(date +%s%N);
         echo "$(( (t1 - t0) / 1000000 )) rc=$rc"; }
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r plain_ms $(secs python3 $P)" | tee -a "$OUT/timings.txt"
  cp "$W/last.log" "$OUT/plain_stdout.txt"
  echo "round $r nsys_graph_ms $(secs "${NSYS[@]}" --cuda-graph-trace=graph -o "$W/graph_$r" "${LAUNCH[@]}" $P)" | tee -a "$OUT/timings.txt"
  echo "round $r nsys_node_ms $(secs "${NSYS[@]}" --cuda-graph-trace=node -o "$W/node_$r" "${LAUNCH[@]}" $P)" | tee -a "$OUT/timings.txt"
done
echo "torch_profiler_ms $(secs python3 -m nsighttc.runtime.launch --torch-trace "$W/torch_trace.json" -- $P)" | tee -a "$OUT/timings.txt"
for m in graph node; do
  nsys export --type sqlite --force-overwrite true -o "$W/$m.sqlite" "$W/${m}_1.nsys-rep" > /dev/null
  gzip -9 -c "$W/$m.sqlite" > "$OUT/multi_phase_nsys_$m.sqlite.gz"
done
gzip -9 -c "$W/torch_trace.json" > "$OUT/multi_phase_torch.json.gz"
echo "commands:" >> "$OUT/timings.txt"
echo "  plain: python3 $P" >> "$OUT/timings.txt"
echo "  nsys: ${NSYS[*]} --cuda-graph-trace=graph|node -o R ${LAUNCH[*]} $P; nsys export --type sqlite R.nsys-rep" >> "$OUT/timings.txt"
echo "  torch: python3 -m nsighttc.runtime.launch --torch-trace T.json -- $P" >> "$OUT/timings.txt"
ls -la "$OUT"
# end to end: the nsys engine of `nsighttc profile` (graph nodes traced one by one) on the same program
python3 -m nsighttc profile --engine nsys --out "$W/runs" $P > "$W/profile_stdout.txt" 2>&1
echo "profile rc=$?" | tee -a "$OUT/timings.txt"
tar -czf "$OUT/profile_nsys_run.tgz" --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.qdstrm' -C "$W" runs profile_stdout.txt
