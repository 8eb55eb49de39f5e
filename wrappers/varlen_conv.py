#!/usr/bin/env python3
"""Image inference at many sizes, as users write it: a small ResNet-like convolutional network (fp16, channels-last)
with ``torch.backends.cudnn.benchmark = True``, batches of 32 images whose size changes from batch to batch (square,
128-320 pixels in steps of 8: 25 sizes; ``--size-step``). Under ``cudnn.benchmark`` cuDNN times its algorithms for every new input
shape, so the first batch at each size costs far more than the rest. ``--bucket`` pads every batch up to 192, 256 or
320 pixels: three shapes. ``--no-benchmark`` leaves cuDNN's heuristics on (no timing per shape).
No nsighttc marks. Prints images/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402

BUCKETS = (192, 256, 320)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size-step", type=int, default=8, help="the sizes: 128 to 320 pixels in steps of this many")
    ap.add_argument("--bucket", action="store_true", help="pad each batch to 192, 256 or 320 pixels")
    ap.add_argument("--no-benchmark", action="store_true", help="cudnn.benchmark off")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import random
    import torch
    import torch.nn as nn
    dev = pick_device(a.device)
    torch.backends.cudnn.benchmark = not a.no_benchmark
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(0)

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
    model = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                          block(64, 64, 1), block(64, 128, 2), block(128, 256, 2), block(256, 512, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))
    model = model.to(dev, dtype).to(memory_format=torch.channels_last).eval()
    rnd = random.Random(0)
    sizes = [rnd.randrange(128, 321, a.size_step) for _ in range(a.batches)]
    served = 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for n in sizes:
            side = next(b for b in BUCKETS if b >= n) if a.bucket else n
            x = torch.zeros(a.batch, 3, side, side, device=dev, dtype=dtype)
            x[:, :, :n, :n] = torch.randn(a.batch, 3, n, n, device=dev, dtype=dtype)
            x = x.contiguous(memory_format=torch.channels_last)
            top = model(x).argmax(1)
            top.cpu()  # the answers leave the GPU
            served += a.batch
    sync(dev)
    dt = time.perf_counter() - t0
    print(f"{served / dt:.1f} images/s over {served} images ({'buckets' if a.bucket else 'each batch its size'}, "
          f"{len(set(sizes))} sizes, cudnn.benchmark {'off' if a.no_benchmark else 'on'})", flush=True)


if __name__ == "__main__":
    main()
