#!/usr/bin/env python3
"""ResNet-50 training on synthetic data (the NGC benchmark mode): fp32 or AMP, optional channels_last.

From the material (nvidia-amp-article): ResNet-50 in TensorFlow went from 212 to 545 img/s with AMP.
torchvision's resnet50 (random weights) when available, else a compact built-in ResNet of the same
block structure. Ranges: `warmup`, `train` with one `step` per iteration; prints images/s after warm-up.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import amp_step, annotate, pick_device, sync  # noqa: E402


def build_resnet(width_div: int = 1):
    if width_div == 1:
        try:
            import torchvision
            return torchvision.models.resnet50(weights=None)
        except ImportError:
            pass
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, c_in, c_mid, stride):
            super().__init__()
            c_out = c_mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(c_in, c_mid, 1, bias=False), nn.BatchNorm2d(c_mid), nn.ReLU(inplace=True),
                nn.Conv2d(c_mid, c_mid, 3, stride, 1, bias=False), nn.BatchNorm2d(c_mid), nn.ReLU(inplace=True),
                nn.Conv2d(c_mid, c_out, 1, bias=False), nn.BatchNorm2d(c_out))
            self.skip = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.skip(x))

    w = 64 // width_div
    layers = [nn.Conv2d(3, w, 7, 2, 3, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    c = w
    for i, (blocks, stride) in enumerate(zip([3, 4, 6, 3], [1, 2, 2, 2])):
        mid = w * 2 ** i
        for b in range(blocks):
            layers.append(Bottleneck(c, mid, stride if b == 0 else 1))
            c = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)]
    return nn.Sequential(*layers)



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--precision", choices=["fp32", "amp", "bf16"], default="amp",
                    help="amp: fp16 autocast + GradScaler; bf16: bf16 autocast around the forward, no scaler (what "
                         "`nsighttc try --variant bf16-autocast` does to the fp32 program, made by hand)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 for fp32 matmuls and convolutions (the change `nsighttc try --variant tf32` makes)")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True, as image-model training scripts set it: cuDNN times "
                         "its algorithms per shape and keeps the fastest (nsighttc's replay must then do the same)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, tiny net and images")
    ap.add_argument("--minutes", type=float, default=None,
                    help="a long-running job: train for this long instead of --steps (a real run lasts hours)")
    a = ap.parse_args(argv)
    if a.tf32:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
    import torch
    if a.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    device = pick_device(a.device)
    smoke = device.type == "cpu"
    if smoke:
        a.batch, a.steps, a.warmup = 2, 2, 1
    model = build_resnet(width_div=16 if smoke else 1).to(device)
    size = 32 if smoke else 224
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    x = torch.randn(a.batch, 3, size, size, device=device).to(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    amp = a.precision == "amp" and not smoke
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        if a.precision == "bf16" and not smoke:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return
        amp_step(model, x, y, loss_fn, opt, scaler, device, amp)

    with annotate.range("warmup"):
        for _ in range(a.warmup):
            step()
    sync(device)
    t0 = time.perf_counter()
    with annotate.range("train"):
        done, until = 0, None if a.minutes is None else t0 + a.minutes * 60
        while (done < a.steps) if until is None else (time.perf_counter() < until):
            with annotate.step():
                step()
            done += 1
    a.steps = done
    sync(device)
    dt = time.perf_counter() - t0
    print(f"resnet50 {a.precision}{' channels_last' if a.channels_last else ''} batch={a.batch} device={device.type}: "
          f"{a.batch * a.steps / dt:.1f} images/s ({dt / a.steps * 1e3:.1f} ms/step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
