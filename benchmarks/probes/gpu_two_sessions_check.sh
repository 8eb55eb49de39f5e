#!/usr/bin/env bash
# GPU check (issue 29): the replay fix probe, then one first run of ResNet-50 AMP, the Trainer and Lightning with the
# operators recorded until the window and the window with the ranges only. Run from the repository root with OUT set.
source .device-carry/setup.sh >/dev/null 2>&1; pip install -q -e . --no-deps >/dev/null 2>&1
bash benchmarks/probes/gpu_replay_fix_probe.sh $OUT
export NSIGHTTC_CACHE_DIR=$OUT/cache TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
for p in resnet_amp trainer_finetune lightning_module; do
  t0=$(date +%s.%N); timeout 200 python3 -m nsighttc profile --out $OUT/runs_$p wrappers/$p.py > $OUT/$p.log 2>&1; echo "$p rc=$? $(python3 -c "import time;print(round(time.time()-$t0,2))") s" >> $OUT/check.txt
done
cd $OUT && for d in runs_*/*/; do rm -f $d/*trace.json $d/*.ncu-rep $d/*.png $d/verdict.json; done; tar czf check.tgz runs_* *.log check.txt replay_fix; rm -rf runs_* cache
