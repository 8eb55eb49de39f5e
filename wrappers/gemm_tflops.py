#!/usr/bin/env python3
"""GEMM TFLOP/s probe: a square F.linear loop in fp32, TF32, fp16 and bf16; ratio to fp32.

From the material (chainer-tensorcore-blog): a 4096^3 linear layer reached 40.0 TFLOP/s in fp16 vs 9.4 in
fp32 on an RTX 2080. Each precision runs inside its own range (`gemm_<precision>`) with one `step` per
call; TF32 is switched on only for its own range (torch.backends.cuda.matmul.allow_tf32 is global).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotate, pick_device, timed  # noqa: E402

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--n", type=int, default=4096, help="matrix size (n x n x n)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--precisions", default=",".join(PRECISIONS), help=f"comma list of {PRECISIONS}")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, n=64, 2 iters")
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    device = pick_device(a.device)
    if device.type == "cpu":
        a.n, a.iters = min(a.n, 64), min(a.iters, 2)
    precs = [p.strip() for p in a.precisions.split(",") if p.strip()]
    bad = [p for p in precs if p not in PRECISIONS]
    if bad:
        ap.error(f"unknown precision(s) {bad}; choose from {PRECISIONS}")
    flop = 2 * a.n ** 3
    results = {}
    for prec in precs:
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(prec, torch.float32)
        if device.type == "cpu" and prec == "fp16":
            dtype = torch.float32  # smoke mode: CPU half matmul is slow and not what is measured
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        x = torch.randn(a.n, a.n, device=device, dtype=dtype)
        w = torch.randn(a.n, a.n, device=device, dtype=dtype)
        F.linear(x, w)  # warm-up: cuBLAS picks its kernel
        t: dict[str, float] = {}
        with annotate.range(f"gemm_{prec}"), timed(device, t, prec):
            for _ in range(a.iters):
                with annotate.step():
                    F.linear(x, w)
        results[prec] = flop * a.iters / t[prec] / 1e12
    torch.backends.cuda.matmul.allow_tf32 = False
    base = results.get("fp32")
    for prec, tf in results.items():
        ratio = f", {tf / base:.2f}x fp32" if base else ""
        print(f"gemm {a.n}^3 {prec}: {tf:.1f} TFLOP/s{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
