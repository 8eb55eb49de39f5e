#!/usr/bin/env python3
"""What the timeline launcher's end costs after the program (issue 10): torch.profiler's stop, the kernel list
(``nsighttc.kernel_ops``, which walks every profiler event in memory) and the trace export, with the ordinary
stop and with ``trace_only`` (``nsighttc.launch.trace_only_config``: torch 2.13 has it). CPU only: N
iterations of small operators (``addmm``, ``mul``, ``relu``; 12 operator events each, sub-operators included)
recorded with ``record_shapes``, each mode in a fresh process, alternating.

    python benchmarks/probes/bench_profiler_stop.py [--iterations 40000] [--rounds 2]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import sys, time
from pathlib import Path
import torch
from nsighttc import kernel_ops
from nsighttc.runtime.launch import trace_only_config
mode, iters, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
x, w = torch.randn(64, 64), torch.randn(64, 64)
def work(n):
    y = x
    for _ in range(n):
        y = torch.relu(torch.addmm(x, y, w) * 0.5)
work(100)
cfg = trace_only_config() if mode == "trace_only" else None
if mode == "trace_only" and cfg is None:
    print("trace_only: not in this torch"); sys.exit(0)
prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                              **({"experimental_config": cfg} if cfg is not None else {}))
prof.__enter__()
work(iters)
t0 = time.perf_counter(); prof.__exit__(None, None, None); t1 = time.perf_counter()
if mode != "trace_only":
    kernel_ops.write(prof, out.with_suffix(".kernel_ops.json"))
t2 = time.perf_counter()
prof.export_chrome_trace(str(out)); t3 = time.perf_counter()
text = out.read_text()
print(f"{mode}: stop {t1 - t0:.2f} s, kernel list {t2 - t1:.2f} s, export {t3 - t2:.2f} s, trace complete "
      f"{t3 - t0:.2f} s after the program; {len(text) >> 20} MB, {text.count(chr(34) + 'cpu_op' + chr(34))} operator events, "
      f"{text.count(chr(34) + 'Input Strides')} with strides")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=40_000, help="loop iterations (12 operator events each)")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for mode in ("ordinary", "trace_only"):
                t = time.perf_counter()
                res = subprocess.run([sys.executable, "-c", CHILD, mode, str(a.iterations), str(Path(tmp) / f"{mode}.json")],
                                     capture_output=True, text=True, cwd=root)
                line = (res.stdout.strip().splitlines() or [res.stderr.strip()[-300:]])[-1]
                print(f"round {r + 1} {line} (process {time.perf_counter() - t:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
