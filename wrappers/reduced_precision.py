#!/usr/bin/env python3
"""fp16 matmul with and without reduced-precision reductions: speed and error against float64.

From the material (pytorch-reduced-precision-flag-article): torch.backends.cuda.matmul.
allow_fp16_reduced_precision_reduction lets cuBLAS reduce in fp16 inside split-K GEMMs; faster on some
shapes, less accurate. Runs both settings (ranges `reduced_on`, `reduced_off`) on a split-K-prone shape
(small M and N, large K) and prints time and max relative error against a float64 reference.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotate, pick_device, timed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=65536)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, small shape")
    a = ap.parse_args(argv)
    import torch
    device = pick_device(a.device)
    if device.type == "cpu":
        a.m, a.n, a.k, a.iters = 16, 16, 256, 2
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    x = torch.randn(a.m, a.k, device=device)
    w = torch.randn(a.k, a.n, device=device)
    ref = (x.double() @ w.double())
    xh, wh = x.to(dtype), w.to(dtype)
    for setting in (True, False):
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = setting
        name = "reduced_on" if setting else "reduced_off"
        out = xh @ wh  # warm-up and the value checked
        t: dict[str, float] = {}
        with annotate.range(name), timed(device, t, name):
            for _ in range(a.iters):
                with annotate.step():
                    xh @ wh
        err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        print(f"reduced_precision_reduction={setting}: {t[name] / a.iters * 1e6:.1f} us per matmul "
              f"({a.m}x{a.k} @ {a.k}x{a.n}), max relative error {err:.2e}")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
