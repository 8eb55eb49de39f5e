#!/usr/bin/env python3
"""Issue 10: why the replay's first call is slow. On H100 (2026-11-23) ResNet-50 AMP's replay made its first
call (``aten::cudnn_convolution``, two cutlass profiles) in 0.82-1.24 s and each later one in 17-150 ms. Two
suspects, each paid once per process: Nsight Compute's set-up of its first profile, and the loading of the
library modules (cuDNN's engines) the first real convolution needs, which the tiny warm-up convolution does
not touch. This runs the replay of a recorded list (``replay_ops.json`` of a default run) under ncu as the
default run does (no gate: the calls follow the warm-up at once), with variants of the warm-up:

- ``base``: the replay's own warm-up (``nsighttc.replay.warm_up``);
- ``profiled``: plus one fp16 GEMM profiled inside an NVTX range of its own (``nsighttc-warm``, added to
  ncu's range filter): ncu's first profile is made before the calls;
- ``convs``: plus fp16 convolutions of ResNet-like sizes, forward and backward, outside any profiled range;
- ``both``.

    python3 benchmarks/probes/gpu_replay_first_call_probe.py OPS.json [--rounds 2] [--out DIR]

Prints, per run, the warm-up's length, the first call's length and the calls' total (from the replay's log).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("base", "profiled", "convs", "both")


def child(variant: str, ops: Path) -> int:
    import torch
    from nsighttc.runtime import replay as R
    t0 = time.monotonic()
    R.warm_up(torch)
    if variant in ("convs", "both"):
        for n, c, k, hw, ks in ((8, 64, 64, 56, 3), (8, 256, 64, 56, 1), (8, 1024, 256, 14, 1), (8, 3, 64, 224, 7)):
            x = torch.randn(n, c, hw, hw, device="cuda", dtype=torch.float16, requires_grad=True)
            w = torch.randn(k, c, ks, ks, device="cuda", dtype=torch.float16, requires_grad=True)
            torch.nn.functional.conv2d(x, w, padding=ks // 2).sum().backward()
        torch.cuda.synchronize()
    if variant in ("profiled", "both"):
        a = torch.ones(256, 256, device="cuda", dtype=torch.float16)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("nsighttc-warm")
        a @ a
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    warm = time.monotonic() - t0
    calls = list(R.read_calls(ops))
    t1 = time.monotonic()
    counts = R.replay(calls)
    print(json.dumps({"variant": variant, "warm_s": round(warm, 3), "calls_s": round(time.monotonic() - t1, 3),
                      **counts}), file=sys.stderr)
    R._exit_now(0)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ops", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/first_call_probe"))
    ap.add_argument("--child", choices=VARIANTS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.ops)
    from nsighttc import ncu_metrics
    from nsighttc.analysis.families import ncu_kernel_filter
    from nsighttc.collect import tools
    a.out.mkdir(parents=True, exist_ok=True)
    ncu = str(tools.find("ncu", None))
    results = []
    for r in range(a.rounds):
        for variant in VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS)):
            out = a.out / f"{variant}_{r + 1}"
            argv = [ncu, "--nvtx", "--clock-control", "none", "--cache-control", "none", "--target-processes", "all",
                    "--metrics", ",".join(ncu_metrics.one_pass_metrics_for_cc("9.0")), "-f", "-o", str(out),
                    "--nvtx-include", "nsighttc-replay/", "--nvtx-include", "nsighttc-warm/",
                    "--kernel-name", ncu_kernel_filter(),
                    sys.executable, str(Path(__file__).resolve()), str(a.ops), "--child", variant]
            t0 = time.monotonic()
            p = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
            wall = time.monotonic() - t0
            firsts = [float(m.group(1)) for m in re.finditer(r"nsighttc\.replay: \+0\.000s \S+ .*\((\d+\.\d+) s[;)]",
                                                               p.stderr)]
            summary = [json.loads(line) for line in p.stderr.splitlines() if line.startswith('{"variant"')]
            row = {"variant": variant, "round": r + 1, "rc": p.returncode, "wall_s": round(wall, 2),
                   "first_call_s": firsts[0] if firsts else None, **(summary[0] if summary else {}),
                   "profiles": p.stdout.count("==PROF== Profiling")}
            results.append(row)
            print(json.dumps(row), flush=True)
            (a.out / f"{variant}_{r + 1}.log").write_text(p.stdout + p.stderr)
    (a.out / "first_call_probe.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
