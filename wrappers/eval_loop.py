#!/usr/bin/env python3
"""An image-model evaluation loop: a ResNet-50 (torchvision's, random weights; a compact built-in ResNet where
torchvision is missing) under ``torch.inference_mode`` and bf16 autocast, fed by a DataLoader with worker processes
that decode and normalise synthetic images on the host. No optimizer, no backward: what an evaluation or a batch
inference job runs. Prints one JSON line ``{"wrapper": "eval_loop", ...}`` with images/s and the accuracy-like
metric the loop computes (so the program really reads its outputs, as evaluations do).

    python wrappers/eval_loop.py                 # 4 workers, batch 128, bf16 autocast
    python wrappers/eval_loop.py --device cpu    # smoke mode
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402
from llm_generate import user_trace  # noqa: E402
from resnet_amp import build_resnet  # noqa: E402


class Images:
    """Synthetic labelled images with a host-side decode + normalise step per sample (numpy)."""

    def __init__(self, n: int, size: int, work: int):
        self.n, self.size, self.work = n, size, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np
        rng = np.random.default_rng(i)
        img = rng.integers(0, 255, (self.size, self.size, 3), dtype=np.uint8).astype(np.float32) / 255.0
        for _ in range(self.work):
            img = (img - img.mean(axis=(0, 1))) / (img.std(axis=(0, 1)) + 1e-3)
        return np.ascontiguousarray(img.transpose(2, 0, 1)), i % 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--batches", type=int, default=60, help="batches evaluated")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=160, help="image side")
    ap.add_argument("--work", type=int, default=1, help="normalisation passes per sample on the host")
    ap.add_argument("--workers", type=int, default=4, help="DataLoader num_workers")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16", help="bf16 autocast or fp32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (tiny net, 3 batches)")
    ap.add_argument("--trace", metavar="FILE", help="record the batches after the first 5 with torch.profiler into "
                                                   "FILE (no nsighttc involved)")
    a = ap.parse_args(argv)
    import torch
    from torch.utils.data import DataLoader
    device = pick_device(a.device)
    cpu = device.type == "cpu"
    if cpu:
        a.batches, a.batch, a.size, a.workers = min(a.batches, 3), min(a.batch, 4), 32, min(a.workers, 0)
    model = build_resnet(width_div=8 if cpu else 1).to(device).eval()
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    data = DataLoader(Images(a.batches * a.batch, a.size, a.work), batch_size=a.batch, num_workers=a.workers,
                      pin_memory=not cpu, persistent_workers=a.workers > 0)
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if a.precision == "bf16" and not cpu
           else contextlib.nullcontext())
    correct = seen = 0
    t0 = prof = None
    with torch.inference_mode(), amp:
        for i, (x, y) in enumerate(data):
            if i == min(5, a.batches - 1):
                sync(device)
                t0, seen0 = time.perf_counter(), seen
                prof = user_trace(a.trace, device)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if a.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            pred = model(x).argmax(dim=1)
            correct += int((pred == y).sum())  # reads the result each batch, as an evaluation does
            seen += len(y)
    sync(device)
    wall = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.trace)
    res = {"wrapper": "eval_loop", "device": str(device), "batches": a.batches, "batch": a.batch,
           "workers": a.workers, "precision": a.precision, "images_per_s": round((seen - seen0) / wall, 1),
           "accuracy": round(correct / max(seen, 1), 4)}
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
