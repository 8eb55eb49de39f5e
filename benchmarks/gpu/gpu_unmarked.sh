#!/usr/bin/env bash
# Issue 28 on the GPU machine: programs that mark nothing (reports/unmarked/, the fixtures tests/fixtures/unmarked/).
#   Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_unmarked.sh OUT PART
#   PART a: per program, a plain run (its own metric) then the default `nsighttc profile` (first run, empty evidence
#           cache): the Trainer fine-tune, the torch.compile loop, the Lightning module, the DataLoader loop.
#   PART b: small recordings for the fixtures (`--engine torch`, stripped, gzipped), then `nsighttc try` on the
#           Trainer fine-tune (tf32, bf16-autocast, workers=4) and plain runs with each change made by hand.
#   PART d: the same small programs recorded by Nsight Systems (`--engine nsys`: the hooks' marks as NVTX start/end
#           ranges), stripped and gzipped for the fixtures.
#   PART c (nvidia-h200-x2): the DDP job unmarked under torchrun, balanced and with rank 1 on a larger batch, plain
#           and under the default `nsighttc profile` (nsys timeline per rank); the per-rank recordings as fixtures.
# Writes OUT/summary.txt and one OUT/<part>.tgz of the run directories (raw recordings left out, report, verdict,
# run.json and logs kept); fixtures go to OUT/fixtures_<part>.tgz.
set -u
OUT=${1:?out dir}; PART=${2:?part}
source "$(dirname "$0")/gpu_lib.sh"

case "$PART" in
a)
  plain trainer python3 wrappers/trainer_finetune.py
  profile trainer 420 -- python3 wrappers/trainer_finetune.py
  plain compile python3 wrappers/compile_loop.py
  profile compile 420 --timeout 400 -- python3 wrappers/compile_loop.py
  plain lightning python3 wrappers/lightning_module.py
  profile lightning 300 -- python3 wrappers/lightning_module.py
  plain dataloader python3 wrappers/dataloader_bound.py --no-annotate
  profile dataloader 300 -- python3 wrappers/dataloader_bound.py --no-annotate
  ;;
b)
  for p in "trainer wrappers/trainer_finetune.py --steps 12" "compile wrappers/compile_loop.py --steps 12 --layers 4" \
           "lightning wrappers/lightning_module.py --steps 16" "dataloader wrappers/dataloader_bound.py --no-annotate --steps 12"; do
    set -- $p; name=$1; shift
    profile "fix_$name" 300 --engine torch -- python3 "$@"
    t=$(ls "$W/runs_fix_$name"/*/torch_trace.json 2>/dev/null | tail -1)
    [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/${name}_torch.json.gz" >> "$S" 2>&1
  done
  t0=$(date +%s.%N)
  timeout 500 python3 -m nsighttc try --out "$W/runs_try" --metric '([\d.]+) samples/s steady' \
    --variant tf32 --variant bf16-autocast --variant workers=4 wrappers/trainer_finetune.py --steps 40 > "$W/try.log" 2>&1
  echo "try trainer: rc=$? $(secs "$t0" "$(date +%s.%N)") s" >> "$S"
  grep -vE "^\s*\|" "$W/try.log" | tail -8 | sed 's/^/   /' >> "$S"
  plain trainer_tf32_by_hand python3 wrappers/trainer_finetune.py --steps 40 --tf32
  plain trainer_bf16_by_hand python3 wrappers/trainer_finetune.py --steps 40 --precision bf16
  plain trainer_workers4_by_hand python3 wrappers/trainer_finetune.py --steps 40 --workers 4
  plain trainer_baseline python3 wrappers/trainer_finetune.py --steps 40
  ;;
d)
  for p in "trainer wrappers/trainer_finetune.py --steps 12" "compile wrappers/compile_loop.py --steps 12 --layers 4" \
           "dataloader wrappers/dataloader_bound.py --no-annotate --steps 12"; do
    set -- $p; name=$1; shift
    profile "fixn_$name" 300 --engine nsys -- python3 "$@"
    t=$(ls "$W/runs_fixn_$name"/*/nsys.sqlite 2>/dev/null | tail -1)
    [ -n "$t" ] && python3 benchmarks/strip_fixture.py "$t" "$W/fix/${name}_nsys.sqlite.gz" >> "$S" 2>&1
  done
  ;;
c)
  TR=(python3 -m torch.distributed.run --nproc_per_node 2 --master_port 29533)
  # FAST=1: the timeline only (--fast; steps and the straggler are timeline questions), one plain run
  opt=(); [ -n "${FAST:-}" ] && opt=(--fast)
  [ -z "${FAST:-}" ] && plain ddp_balanced "${TR[@]}" wrappers/ddp_train.py --no-annotate --steps 20 --warmup 3
  plain ddp_uneven "${TR[@]}" wrappers/ddp_train.py --no-annotate --steps 20 --warmup 3 --uneven-rank 1 --uneven-batch 256
  profile ddp_balanced 300 "${opt[@]}" -- "${TR[@]}" wrappers/ddp_train.py --no-annotate --steps 20 --warmup 3
  profile ddp_uneven 300 "${opt[@]}" -- "${TR[@]}" wrappers/ddp_train.py --no-annotate --steps 20 --warmup 3 --uneven-rank 1 --uneven-batch 256
  for name in ddp_balanced ddp_uneven; do
    d=$(ls -d "$W/runs_$name"/*/ 2>/dev/null | tail -1)
    for r in "$d"/rank*/; do
      [ -f "$r/nsys.sqlite" ] && mkdir -p "$W/fix/$name/$(basename "$r")" && \
        python3 benchmarks/strip_fixture.py "$r/nsys.sqlite" "$W/fix/$name/$(basename "$r")/nsys.sqlite.gz" >> "$S" 2>&1
    done
  done
  ;;
esac
pack
