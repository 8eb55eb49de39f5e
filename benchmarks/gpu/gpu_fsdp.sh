#!/usr/bin/env bash
# Issue 46 on two GPUs (kind nvidia-h100-x2): the FSDP2 wrapper under torchrun (reports/fsdp/).
#   Usage (after `source .device-mid/setup.sh`): bash benchmarks/gpu/gpu_fsdp.sh OUT PART
#   PART even:  plain, then three default `nsighttc profile` runs of the even job (first, cached, cached): no
#               straggler should be named, or a named lag must hold in most steps with its spread shown.
#   PART extra: rank 1 does 30 ms of host work per step: plain, first and cached default runs; rank 1 named, kind
#               host, with its host frames against rank 0's.
#   PART fsdp1: the same job under FSDP1 (--fsdp 1): plain and one default run, even work (the sharded collectives
#               split per forward and backward as FSDP2's).
#   PART cost:  alternating plain / first / cached rounds of both wrappers (DDP and FSDP2) with
#               benchmarks/gpu/gpu_profile_overhead.py (summary.json rows `ddp`, `fsdp2`).
# The per-rank recordings of one run of each part come back as fixtures (stripped, gzipped, with host samples).
set -u
OUT=${1:?out dir}; PART=${2:?part}
source "$(dirname "$0")/gpu_lib.sh"
TR=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29541)
FSDP=(wrappers/fsdp2_train.py --steps 40)

keep_ranks() {  # name: every rank's trace and samples of the latest run
  local d; d=$(ls -d "$W/runs_$1"/*/ 2>/dev/null | tail -1)
  for r in "$d"/rank*/; do
    [ -d "$r" ] || continue
    mkdir -p "$W/fix/$1/$(basename "$r")"
    for t in "$r"/torch_trace.json "$r"/nsys.sqlite; do
      [ -f "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/$1/$(basename "$r")/$(basename "$t").gz" >> "$S" 2>&1
    done
    [ -f "$r/host_samples.json" ] && gzip -c "$r/host_samples.json" > "$W/fix/$1/$(basename "$r")/host_samples.json.gz"
  done
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); x=d['distributed']; print(sys.argv[2], 'straggler', json.dumps(x.get('straggler') and {k: x['straggler'][k] for k in ('rank','kind','cause','lag_by_step')}), 'unsure', json.dumps(x.get('no_consistent_straggler')), 'same_work', x.get('same_work'), 'incomplete', x.get('incomplete_ranks'))" "$d/verdict.json" "$1" >> "$S" 2>&1
}

case "$PART" in
even)
  plain fsdp_even "${TR[@]}" "${FSDP[@]}"
  for i in 1 2 3; do profile "fsdp_even_$i" 400 -- "${TR[@]}" "${FSDP[@]}"; keep_ranks "fsdp_even_$i"; done
  ;;
extra)
  plain fsdp_extra "${TR[@]}" "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30
  for i in 1 2; do
    profile "fsdp_extra_$i" 400 -- "${TR[@]}" "${FSDP[@]}" --extra-host-rank 1 --extra-host-ms 30; keep_ranks "fsdp_extra_$i"
  done
  ;;
fsdp1)
  plain fsdp1_even "${TR[@]}" "${FSDP[@]}" --fsdp 1
  profile fsdp1_even 400 -- "${TR[@]}" "${FSDP[@]}" --fsdp 1; keep_ranks fsdp1_even
  ;;
cost)
  python3 benchmarks/gpu/gpu_profile_overhead.py --out "$W/ov" --rounds 3 ddp fsdp2 > "$W/ov.log" 2>&1
  echo "overhead: rc=$?" >> "$S"; cp "$W/ov/summary.json" "$W/summary_overhead.json" 2>/dev/null
  ;;
esac
pack
