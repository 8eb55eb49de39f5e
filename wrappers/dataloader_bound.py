#!/usr/bin/env python3
"""A training loop fed by a DataLoader with slow host-side preprocessing: the GPU starves, then recovers.

From the material (gtc-japan-2018-chainer-talk, chainer blog): once fp16 made the GPU fast, data loading
and fp16 numpy preprocessing became the bottleneck; parallel loading took a model from 7.7 to 10.7 it/s.
Each sample is "decoded" on the host with numpy (optionally in float16, which CPUs emulate slowly).
Ranges: `dataloader` around fetching each batch, `step` around the GPU work. Prints it/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotations, fp16_autocast, pick_device, sync  # noqa: E402


class SlowDataset:
    """Synthetic images with a deliberately heavy numpy preprocessing step per sample."""

    def __init__(self, n: int, size: int, fp16: bool, work: int):
        self.n, self.size, self.fp16, self.work = n, size, fp16, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np
        rng = np.random.default_rng(i)
        img = rng.random((3, self.size, self.size), dtype=np.float32)
        if self.fp16:
            img = img.astype(np.float16)  # numpy half arithmetic is emulated on CPUs: slow
        for _ in range(self.work):  # normalise/augment passes
            img = (img - img.mean()) / (img.std() + 1e-3)
            img = img * 0.5 + 0.25
        return img.astype(np.float32), i % 10



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--fp16-preprocess", action="store_true", help="do the numpy preprocessing in float16")
    ap.add_argument("--amp", action="store_true", help="train the model with autocast fp16")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--size", type=int, default=96, help="image side")
    ap.add_argument("--work", type=int, default=3, help="preprocessing passes per sample")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, a few tiny batches")
    ap.add_argument("--no-annotate", action="store_true",
                    help="mark no ranges or steps (a loop as most programs are written: nsighttc finds the steps)")
    a = ap.parse_args(argv)
    import torch
    from torch.utils.data import DataLoader
    annotate = annotations(not a.no_annotate)
    device = pick_device(a.device)
    if device.type == "cpu":
        a.batch, a.steps, a.size, a.workers = 4, 3, 16, 0
    ds = SlowDataset(a.batch * a.steps, a.size, a.fp16_preprocess, a.work)
    loader = DataLoader(ds, batch_size=a.batch, num_workers=a.workers, pin_memory=a.pin_memory and device.type == "cuda",
                        persistent_workers=a.workers > 0)
    c = 64
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    amp = a.amp and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    it = iter(loader)
    sync(device)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        with annotate.range("dataloader"):
            x, y = next(it)
            x, y = x.to(device, non_blocking=a.pin_memory), y.to(device, non_blocking=a.pin_memory)
        with annotate.step():
            with fp16_autocast(device, amp):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    sync(device)
    dt = time.perf_counter() - t0
    print(f"dataloader_bound workers={a.workers} pin_memory={a.pin_memory} fp16_preprocess={a.fp16_preprocess} "
          f"amp={a.amp} device={device.type}: {a.steps / dt:.2f} it/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
