# Shared by the GPU scripts (gpu_unmarked.sh, gpu_window.sh): sourced after OUT and PART are set. Sets W (the work
# folder), S (OUT/summary.txt, with the machine and versions at its top) and the environment, and defines
#   plain NAME CMD...                    time a plain run; its metric lines go to the summary
#   profile NAME TIMEOUT OPTIONS -- CMD  time `nsighttc profile` (runs in W/runs_NAME); its headlines to the summary
#   pack                                 OUT/PART.tgz (reports, verdicts, run.json, logs) and OUT/fixtures_PART.tgz
W=${W:-/tmp/gpu-work}; mkdir -p "$W/fix"  # outside OUT: only what `pack` writes comes back (8 files at most)
export NSIGHTTC_CACHE_DIR=$W/cache TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
{
  echo "== part $PART $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, transformers, lightning; print('torch', torch.__version__, 'transformers', transformers.__version__, 'lightning', lightning.__version__)"
  ncu --version | tail -1; nsys --version 2>/dev/null | head -1
} >> "$S" 2>&1
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 2))" "$1" "$2"; }

plain() {  # name cmd...
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@" > "$W/$name.plain.log" 2>&1
  local rc=$?
  echo "plain $name: rc=$rc $(secs "$t0" "$(date +%s.%N)") s | $(grep -E 'samples/s|requests/s|ms/step|images/s|it/s|steps/s|tokens/s|texts/s|per optimizer step|"wrapper"' "$W/$name.plain.log" | tail -5 | tr '\n' ' ')" >> "$S"
}

profile() {  # name timeout profile-options... -- cmd...
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s.%N)
  timeout "$limit" python3 -m nsighttc profile --out "$W/runs_$name" "$@" > "$W/$name.profile.log" 2>&1
  local rc=$?
  local d; d=$(ls -d "$W/runs_$name"/*/ 2>/dev/null | tail -1)
  echo "profile $name: rc=$rc $(secs "$t0" "$(date +%s.%N)") s dir=$d" >> "$S"
  grep -E "window|^nsighttc: (Tensor Cores|GPU busy|Start-up|Where|First fix|Ranks|Evidence)|Traceback|Error" "$W/$name.profile.log" | head -20 | sed 's/^/   /' >> "$S"
  [ -n "$d" ] && cp "$W/$name.profile.log" "$d/profile.log"
}

pack() {  # what comes back: reports and metadata (raw recordings stay: .ncu-rep, .nsys-rep, .sqlite, traces)
  (cd "$W" && tar czf "$OUT/$PART.tgz" --exclude='*.ncu-rep' --exclude='*.nsys-rep' --exclude='*.sqlite' \
     --exclude='*.qdstrm' --exclude='*trace.json' --exclude='cache' --exclude='fix' --exclude='*.tmp' \
     runs_* ./*.log 2>/dev/null)
  (cd "$W" && tar czf "$OUT/fixtures_$PART.tgz" fix)
  ls -la "$OUT" >> "$S"
}
