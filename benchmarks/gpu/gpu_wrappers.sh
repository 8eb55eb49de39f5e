#!/usr/bin/env bash
# Issue 6 on the GPU machine: every wrapper variant, plain (its own metric, unperturbed) and under
# `nsighttc profile --timeline` (ncu pass for hardware Tensor Core truth + nsys timeline pass).
# Usage (after `source .device-carry/setup.sh`): bash benchmarks/gpu/gpu_wrappers.sh OUTDIR GROUP
#   GROUP: a (vgg16, gemm_tflops, reduced_precision) | b (mnist_mlp, dataloader_bound) | c (resnet_amp)
# Writes OUTDIR/<group>.tgz: per variant plain.txt + the run directory without raw .ncu-rep/.nsys-rep/.sqlite.
set -u
OUT=${1:?outdir}; GROUP=${2:?group}
W=$OUT/work; mkdir -p "$W"
variant() {  # name wrapper args...
  local name=$1; shift
  local d="$W/$name"; mkdir -p "$d"
  echo "== $name: python3 $*" | tee -a "$W/summary.txt"
  local t0=$(date +%s%N)
  python3 "$@" > "$d/plain.txt" 2>&1
  local t1=$(date +%s%N)
  echo "plain_seconds=$(( (t1 - t0) / 1000000 ))ms $(tail -n 3 "$d/plain.txt" | tr '\n' ' ')" | tee -a "$W/summary.txt"
  echo "command: python3 -m nsighttc profile --timeline $*" > "$d/command.txt"
  t0=$(date +%s%N)
  python3 -m nsighttc profile --timeline --out "$d/runs" --format json "$@" > "$d/profile_stdout.json" 2> "$d/profile_stderr.txt"
  local rc=$?
  t1=$(date +%s%N)
  echo "profile rc=$rc seconds=$(( (t1 - t0) / 1000000 ))ms" | tee -a "$W/summary.txt"
  # keep what re-analysis needs, compressed: the nsys export and the ncu raw page
  for r in "$d"/runs/*/; do
    [ -f "$r/nsys.sqlite" ] && gzip -c "$r/nsys.sqlite" > "$r/nsys.sqlite.gz"
    [ -f "$r/ncu.ncu-rep" ] && ncu --import "$r/ncu.ncu-rep" --csv --page raw --print-units base | gzip > "$r/ncu_raw.csv.gz"
  done
}
case "$GROUP" in
a)
  variant vgg16_fp32 wrappers/vgg16.py --dtype fp32
  variant vgg16_fp16 wrappers/vgg16.py --dtype fp16
  variant vgg16_fp16_torchscript wrappers/vgg16.py --dtype fp16 --torchscript
  variant gemm_tflops wrappers/gemm_tflops.py
  variant reduced_precision wrappers/reduced_precision.py
  ;;
b)
  variant mnist_small_fp32 wrappers/mnist_mlp.py --net small --dtype fp32
  variant mnist_small_fp16 wrappers/mnist_mlp.py --net small --dtype fp16
  variant mnist_large_fp32 wrappers/mnist_mlp.py --net large --dtype fp32
  variant mnist_large_fp16 wrappers/mnist_mlp.py --net large --dtype fp16
  variant dataloader_w0_fp16pre wrappers/dataloader_bound.py --workers 0 --fp16-preprocess --amp
  variant dataloader_w8_pinned wrappers/dataloader_bound.py --workers 8 --pin-memory --amp
  ;;
c)
  variant resnet50_fp32 wrappers/resnet_amp.py --precision fp32
  variant resnet50_amp wrappers/resnet_amp.py --precision amp
  variant resnet50_amp_channels_last wrappers/resnet_amp.py --precision amp --channels-last
  ;;
esac
tar -czf "$OUT/$GROUP.tgz" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.sqlite' --exclude='*.qdstrm' \
    --exclude='torch_trace.json' -C "$W" .
ls -la "$OUT"
