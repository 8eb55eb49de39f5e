#!/usr/bin/env python3
"""GPU probe (issue 29): what torch.profiler's recording of every operator costs a launch-heavy training step, and
what is left when only the ranges are recorded.

The timeline's analysis reads kernels, memory copies, the CUDA runtime/driver calls and the ``record_function``
ranges (``user_annotation``); operators (``cpu_op``) only feed the replay (with ``record_shapes``). Each mode runs
in a fresh process: ResNet-50 (torchvision, AMP fp16, batch 64, synthetic data) warms up unrecorded, runs
``--steps`` steps unrecorded (the plain step time), then the same number under the profiler, stops it and writes
the trace. Modes:

- ``ops``: CPU + CUDA activities, every operator (what the launcher recorded before);
- ``shapes``: ``ops`` with ``record_shapes`` (a first run with the replay);
- ``ranges``: CPU + CUDA activities, RecordFunction callbacks only for ``RecordScope.USER_SCOPE`` (the
  ``record_function`` ranges: the program's NVTX/annotate ranges, the DataLoader's and the optimizer's labels);
- ``cuda``: the CUDA activity alone (no ranges at all);
- ``two`` / ``two-noteardown``: a first session with operators and shapes over 5 steps, stopped and written, then a
  second with the ranges only over the measured steps (``TEARDOWN_CUPTI=0`` for the second form): whether torch
  2.11 records kernels in a session started right after another, and what each stop costs.

    python3 benchmarks/probes/gpu_record_scope_probe.py --out OUT [--rounds 2] [--steps 32] [--modes ...]

Writes OUT/record_scope.json (per run: plain and recorded step ms, stop s, trace write s, trace MB, events by
category) and prints one line per run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time, collections
import torch, torchvision
from torch._C import _profiler as P
import torch.autograd.profiler as ap
mode, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = torchvision.models.resnet50(weights=None).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
x = torch.randn(64, 3, 224, 224, device="cuda"); y = torch.randint(0, 1000, (64,), device="cuda")
def step():
    with torch.profiler.record_function("step"):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
def timed(n):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e3
timed(15)
plain_ms = timed(steps)
res = {"mode": mode, "plain_ms": round(plain_ms, 2)}
def start(p, ranges_only):
    orig = ap._enable_profiler
    if ranges_only:
        ap._enable_profiler = lambda config, activities, scopes=None: orig(config, activities, {P.RecordScope.USER_SCOPE})
    try:
        p.__enter__()
    finally:
        ap._enable_profiler = orig
if mode.startswith("two"):
    acts = [torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
    a = torch.profiler.profile(activities=acts, record_shapes=True); start(a, False)
    res["warmup_ms"] = round(timed(5), 2)
    t = time.perf_counter(); a.__exit__(None, None, None); res["stop_a_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter(); a.export_chrome_trace(out + ".a.json"); res["write_a_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter(); b = torch.profiler.profile(activities=acts); start(b, True); res["start_b_s"] = round(time.perf_counter() - t, 3)
    res["recorded_ms"] = round(timed(steps), 2)
    t = time.perf_counter(); b.__exit__(None, None, None); res["stop_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter(); b.export_chrome_trace(out); res["write_s"] = round(time.perf_counter() - t, 3)
    for name, f in (("a", out + ".a.json"), ("b", out)):
        cats = collections.Counter(e.get("cat", "") for e in json.load(open(f))["traceEvents"])
        res["events_" + name] = {k: cats.get(k, 0) for k in ("cpu_op", "kernel", "cuda_runtime", "user_annotation")}
elif mode != "plain":
    acts = [torch.profiler.ProfilerActivity.CUDA] + ([] if mode == "cuda" else [torch.profiler.ProfilerActivity.CPU])
    prof = torch.profiler.profile(activities=acts, record_shapes=mode == "shapes")
    orig = ap._enable_profiler
    if mode == "ranges":
        ap._enable_profiler = lambda config, activities, scopes=None: orig(config, activities, {P.RecordScope.USER_SCOPE})
    try:
        prof.__enter__()
    finally:
        ap._enable_profiler = orig
    res["recorded_ms"] = round(timed(steps), 2)
    t = time.perf_counter(); prof.__exit__(None, None, None); res["stop_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter(); prof.export_chrome_trace(out); res["write_s"] = round(time.perf_counter() - t, 3)
    import os
    res["trace_mb"] = round(os.path.getsize(out) / 1e6, 1)
    cats = collections.Counter(e.get("cat", "") for e in json.load(open(out))["traceEvents"])
    res["events"] = dict(cats.most_common(12))
print("RESULT " + json.dumps(res), flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--modes", default="ops,ranges,cuda,shapes")
    ns = ap.parse_args()
    ns.out.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ns.rounds):
            for mode in ns.modes.split(","):
                trace = str(Path(tmp) / f"{mode}.json")
                env = dict(os.environ, **({"TEARDOWN_CUPTI": "0"} if mode.endswith("-noteardown") else {}))
                proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(ns.steps), trace],
                                      capture_output=True, text=True, timeout=300, env=env)
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
                res = json.loads(line[7:]) if line else {"mode": mode, "error": proc.stderr[-800:]}
                res["round"] = r + 1
                runs.append(res)
                print(json.dumps(res), flush=True)
    (ns.out / "record_scope.json").write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
