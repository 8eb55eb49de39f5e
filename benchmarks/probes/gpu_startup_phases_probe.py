#!/usr/bin/env python3
"""GPU probe (issue 50, cost): is a program's start-up (import torch, its device, torchvision, a ResNet-50 built on
the CPU and moved to the GPU) slower under nsighttc's launcher than alone?

On two H200s a DDP job's ranks built their ResNet-50 (``import torchvision`` and the constructor) in 4.4 s alone and
4.9-5.6 s under the launcher (reports/profile_overhead/torchrun_cost), with no profiler recording yet. This runs the
start-up alone, in one process, alternating:

  plain      python3 PROBE --child
  launcher   python3 -m nsighttc.runtime.launch --annotate script -- PROBE --child   (the step hooks, no profiler)
  bare       python3 -m nsighttc.runtime.launch --annotate none --step-marks off -- PROBE --child
  torch      the launcher with torch.profiler made, not started, as a cached run's is (--torch-trace --record-from
             window --window), and host samples

    python3 benchmarks/probes/gpu_startup_phases_probe.py --out OUT [--rounds 4]

First one run of each with ``PYTHONPROFILEIMPORTTIME=1`` (OUT/importtime_VARIANT.txt, not timed). Writes
OUT/startup_phases.txt (per variant the median of each phase, then every run) and OUT/startup_phases.json.

What it said (one H100, 5 rounds, reports/profile_overhead/torchrun_cost/2026-11-27/call3_*): no difference beyond
the spread between runs of one variant (plain 8.8-12.9 s). ``import torchvision`` took 3.8-6.3 s because it
imports torch._dynamo and with it sympy, which the lent image compiles from source in every process (no .pyc,
PYTHONDONTWRITEBYTECODE=1). The launcher imported 23-29 modules more than the program alone, for 0.01-0.02 s.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child() -> int:
    t = [time.perf_counter()]
    import torch
    t.append(time.perf_counter())
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    t.append(time.perf_counter())
    import torchvision
    t.append(time.perf_counter())
    m = torchvision.models.resnet50(weights=None)
    t.append(time.perf_counter())
    m = m.cuda().to(memory_format=torch.channels_last)
    torch.cuda.synchronize()
    t.append(time.perf_counter())
    names = ("torch", "device", "torchvision", "built", "moved")
    print("PHASES " + json.dumps({n: round(b - a, 3) for n, a, b in zip(names, t, t[1:])}), flush=True)
    return 0


def main() -> int:
    if "--child" in sys.argv:
        return child()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="startup-phases-"))
    me = str(Path(__file__).resolve())
    launch = [sys.executable, "-m", "nsighttc.runtime.launch"]
    variants = {
        "plain": [sys.executable, me, "--child"],
        "launcher": launch + ["--annotate", "script", "--", me, "--child"],
        "bare": launch + ["--annotate", "none", "--step-marks", "off", "--", me, "--child"],
        "torch": launch + ["--annotate", "script", "--window", "--window-end", "stop", "--record-from", "window",
                           "--torch-trace", str(work / "t.json"), "--no-operators",
                           "--host-samples", str(work / "hs.json"), "--", me, "--child"],
    }
    runs = []
    import os
    for name in ("plain", "bare", "launcher", "torch"):  # where the imports' time goes (stderr: -X importtime's lines)
        p = subprocess.run(variants[name], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"))
        (a.out / f"importtime_{name}.txt").write_text(p.stderr)
    for rnd in range(a.rounds):
        for name, argv in variants.items():
            t0 = time.perf_counter()
            p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            total = time.perf_counter() - t0
            line = next((x for x in p.stdout.splitlines() if x.startswith("PHASES ")), None)
            runs.append({"variant": name, "round": rnd, "rc": p.returncode, "total_s": round(total, 3),
                         "phases": json.loads(line[7:]) if line else None,
                         "stderr_tail": p.stderr[-400:] if p.returncode else ""})
            print(name, rnd, runs[-1]["total_s"], runs[-1]["phases"], flush=True)
    (a.out / "startup_phases.json").write_text(json.dumps(runs, indent=1))
    with (a.out / "startup_phases.txt").open("w") as fh:
        for name in variants:
            mine = [r for r in runs if r["variant"] == name and r["phases"]]
            if not mine:
                continue
            keys = list(mine[0]["phases"])
            fh.write(f"{name}: total {statistics.median(r['total_s'] for r in mine):.2f} s, " + ", ".join(
                f"{k} {statistics.median(r['phases'][k] for r in mine):.3f}" for k in keys) + "\n")
        for r in runs:
            fh.write(f"{r['variant']} {r['round']} rc {r['rc']} {r['total_s']} {r['phases']} {r['stderr_tail']}\n")
    print((a.out / "startup_phases.txt").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
