#!/usr/bin/env python3
"""Gradient accumulation, as users write it: fp32, 4 micro-batches per optimizer step, a DataLoader with host-side
preprocessing and no workers (num_workers=0), the loss divided by the micro-batches and stepped every 4th batch.

The unit the program repeats is the optimizer step (4 micro-batches and their data), not one model call. No nsighttc
marks. ``--tf32`` and ``--workers N`` are the two fixes (TF32 Tensor Cores, loader workers). Prints samples/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


class Images:
    """Synthetic 3xSIZExSIZE images with numpy preprocessing per sample (normalise passes)."""

    def __init__(self, n: int, work: int, size: int = 128):
        self.n, self.work, self.size = n, work, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import numpy as np
        img = np.random.default_rng(i).random((3, self.size, self.size), dtype=np.float32)
        for _ in range(self.work):
            img = (img - img.mean()) / (img.std() + 1e-3)
        return img, i % 100


def convnet(torch):
    """A plain convolutional classifier (VGG-like stages of 3x3 convolutions, batch norm, ReLU), 100 classes."""
    nn = torch.nn
    layers, c = [], 3
    for width, blocks in ((64, 2), (128, 2), (256, 3), (512, 3)):
        for _ in range(blocks):
            layers += [nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
            c = width
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 100))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps")
    ap.add_argument("--accum", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--work", type=int, default=2)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--size", type=int, default=128, help="image side in pixels (a CPU smoke run: 32)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import torch
    dev = pick_device(a.device)
    if a.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    else:  # fp32 as written: cuDNN's TF32 default off too
        torch.backends.cudnn.allow_tf32 = False
    model = convnet(torch).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = torch.utils.data.DataLoader(Images(a.steps * a.accum * a.batch, a.work, a.size), batch_size=a.batch,
                                         num_workers=a.workers, shuffle=False)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    t0 = time.perf_counter()
    seen = 0
    for i, (x, y) in enumerate(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = loss_fn(model(x), y) / a.accum
        loss.backward()
        seen += len(x)
        if (i + 1) % a.accum == 0:
            opt.step()
            opt.zero_grad(set_to_none=True)
    sync(dev)
    dt = time.perf_counter() - t0
    print(f"{seen / dt:.1f} samples/s, {1e3 * dt / a.steps:.1f} ms per optimizer step ({a.accum} micro-batches); "
          f"loss {float(loss.detach()) * a.accum:.3f}", flush=True)


if __name__ == "__main__":
    main()
