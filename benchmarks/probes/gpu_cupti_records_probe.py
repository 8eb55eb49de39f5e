#!/usr/bin/env python3
"""GPU probe (issue 50, cost): does CUPTI's record of runtime calls that launch nothing cost a launch-bound step and
torch.profiler's stop?

A cached distributed run's rank records the ranges only (``runtime.recording``), yet its steps ran 40-50 ms against
29-33 ms plain and its stop took 0.25-0.4 s: CUPTI records every kernel, copy and runtime call, ~3,000 records a
rank a step for DDP ResNet-50, ~2,000 of them runtime calls that launch, copy or wait for nothing
(``cudaGetErrorString`` ~430 a step, ``cudaFuncGetAttributes``, ``cudaPeekAtLastError``, ...: the fixture
``tests/fixtures/ddp/default_first_run_lead``). CUPTI 12+ can stop recording single runtime APIs
(``cuptiActivityEnableRuntimeApi``); their ids come from the ``cupti_runtime_cbid.h`` shipped with the CUPTI
torch loads. Each mode runs in a fresh process: ResNet-50 (torchvision, AMP fp16, batch ``--batch``, channels-last,
synthetic data: launch-bound at a small batch) warms up, times ``--steps`` steps plain, then the same steps under
torch.profiler (CPU + CUDA activities, the ranges only, as a cached run records), stops it and counts what it kept:

- ``ranges``: as the launcher recorded a cached run's window before ``runtime.cupti_quiet`` (the child runs with
  ``NSIGHTTC_QUIET_RUNTIME=off``: ``runtime.recording.start`` quiets them since);
- ``filtered``: the same, with the runtime APIs in ``runtime.cupti_quiet.QUIET`` not recorded, as
  ``runtime.recording.start`` leaves them out now (its ids are checked against the ``cupti_runtime_cbid.h`` beside
  the loaded CUPTI: ``ids_unlike_header``);
- ``no:KIND[+KIND...]`` (eleventh session): ``filtered``, and whole CUPTI activity kinds turned off after the start
  (``cuptiActivityDisable``; the kinds' values read from the ``cupti_activity.h`` beside the loaded CUPTI), e.g.
  ``no:DRIVER``, ``no:SYNCHRONIZATION``, ``no:OVERHEAD``, ``no:RUNTIME``, ``no:CONCURRENT_KERNEL``: what each kind
  torch.profiler enables costs a recorded step (a cached DDP rank's steps ran 38 against 24 ms, calls 26-29), before
  anything the analysis reads is given up.

    python3 benchmarks/probes/gpu_cupti_records_probe.py --out OUT [--rounds 2] [--steps 30] [--batch 16] \
        [--modes ranges filtered no:DRIVER no:SYNCHRONIZATION no:OVERHEAD no:RUNTIME no:CONCURRENT_KERNEL]

Writes OUT/cupti_records.json (per run: plain and recorded step ms, the stop's seconds, the events by category and
the most frequent runtime calls kept) and prints one line per run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import collections, ctypes, glob, json, os, re, sys, time
import torch, torchvision
mode, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.backends.cudnn.benchmark = True
model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (batch,), device="cuda")
def step():
    with torch.profiler.record_function("step"):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
def timed(n):
    out = []
    for _ in range(n):
        torch.cuda.synchronize(); t = time.perf_counter(); step(); torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return sorted(out)[len(out) // 2]
timed(20)
res = {"mode": mode, "plain_ms": round(timed(steps), 3)}
from nsighttc.runtime import recording
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
prof = torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False)
t = time.perf_counter(); recording.start(prof, operators=False); res["start_s"] = round(time.perf_counter() - t, 3)
def header(libs, head):
    heads = [h for lib in libs for h in glob.glob(os.path.join(os.path.dirname(os.path.dirname(lib)), "include", head))]
    site = os.path.join(os.path.dirname(torch.__file__), "..", "nvidia")
    heads += glob.glob(os.path.join(site, "*", "include", head))
    heads += glob.glob(os.path.join(site, "*", "*", "include", head))
    return heads[:1]
if mode == "filtered" or mode.startswith("no:"):
    from nsighttc.runtime import cupti_quiet
    libs = [p for p in [cupti_quiet.loaded_cupti()] if p]  # (the CUPTI this process loaded, as the launcher finds it)
    res["libcupti"] = libs
    res["quiet"] = cupti_quiet.quiet()  # (recording.start did it: the same calls again, for what it says)
    heads = header(libs, "cupti_runtime_cbid.h")
    res["header"] = heads
    ids = {}
    if heads:
        for name, cbid in re.findall(r"CUPTI_RUNTIME_TRACE_CBID_(\w+?)_v\d+\w*\s*=\s*(\d+)", open(heads[0]).read()):
            if name in cupti_quiet.QUIET:
                ids.setdefault(name, []).append(int(cbid))
        res["ids_unlike_header"] = {n: [v, ids.get(n)] for n, v in cupti_quiet.QUIET.items()
                                    if sorted(v) != sorted(ids.get(n, []))}
    if mode.startswith("no:") and libs:
        kinds_h = header(libs, "cupti_activity.h")
        values = dict(re.findall(r"CUPTI_ACTIVITY_KIND_(\w+)\s*=\s*(\d+)", open(kinds_h[0]).read())) if kinds_h else {}
        off = ctypes.CDLL(libs[0]).cuptiActivityDisable
        off.argtypes, off.restype = [ctypes.c_int], ctypes.c_int
        res["disabled"] = {k: (off(int(values[k])) if k in values else "no such kind")
                           for k in mode[3:].split("+")}
timed(3)
res["recorded_ms"] = round(timed(steps), 3)
torch.cuda.synchronize()
t = time.perf_counter(); prof.__exit__(None, None, None); res["stop_s"] = round(time.perf_counter() - t, 3)
path = f"/tmp/cupti_probe_{mode}_{os.getpid()}.json"
t = time.perf_counter(); prof.export_chrome_trace(path); res["write_s"] = round(time.perf_counter() - t, 3)
ev = json.load(open(path))["traceEvents"]; os.unlink(path)
res["events"] = dict(collections.Counter(e.get("cat") for e in ev).most_common(12))
res["runtime_top"] = collections.Counter(e["name"] for e in ev if e.get("cat") == "cuda_runtime").most_common(12)
print("RESULT " + json.dumps(res), flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--modes", nargs="+", default=["ranges", "filtered"])
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for rnd in range(a.rounds):
        for mode in a.modes:
            r = subprocess.run([sys.executable, "-c", CHILD, mode, str(a.steps), str(a.batch)], capture_output=True,
                               text=True, timeout=300,
                               env=dict(env, NSIGHTTC_QUIET_RUNTIME="off") if mode == "ranges" else env)
            line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
            doc = json.loads(line[7:]) if line else {"mode": mode, "rc": r.returncode, "stderr": r.stderr[-2000:]}
            doc["round"] = rnd
            runs.append(doc)
            print(json.dumps({k: doc.get(k) for k in ("mode", "round", "plain_ms", "recorded_ms", "stop_s", "write_s",
                                                       "events", "quiet", "disabled", "rc")}), flush=True)
    (a.out / "cupti_records.json").write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
