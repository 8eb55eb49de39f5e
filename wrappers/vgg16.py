#!/usr/bin/env python3
"""VGG16 inference, fp32 or fp16, eager or TorchScript: seconds per image.

The experiment of the material (torchscript-fp16-nsight-article): VGG16 with random weights, batch 1,
fp32 vs fp16, with and without torch.jit.trace, timed with torch.cuda.synchronize(). On a T4 fp16 was
1.4x faster (0.0127 vs 0.0091 s/img) and TorchScript made no difference. Ranges: build, warmup, infer
(one `step` per batch). `--device cpu` is a seconds-long smoke run with a narrow network and tiny images.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotate, pick_device, timed  # noqa: E402

VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def build_vgg16(width_div: int = 1, num_classes: int = 1000):
    """torchvision's vgg16 (random weights, no download) when available; else the same layers here."""
    import torch.nn as nn
    if width_div == 1:
        try:
            import torchvision
            return torchvision.models.vgg16(weights=None)
        except ImportError:
            pass
    layers, c_in = [], 3
    for v in VGG16_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            c = v // width_div
            layers += [nn.Conv2d(c_in, c, 3, padding=1), nn.ReLU(inplace=True)]
            c_in = c
    hidden = 4096 // width_div
    model = nn.Sequential()
    model.add_module("features", nn.Sequential(*layers))
    model.add_module("avgpool", nn.AdaptiveAvgPool2d((7, 7)))
    model.add_module("flatten", nn.Flatten())
    model.add_module("classifier", nn.Sequential(
        nn.Linear(c_in * 49, hidden), nn.ReLU(True), nn.Dropout(), nn.Linear(hidden, hidden), nn.ReLU(True),
        nn.Dropout(), nn.Linear(hidden, num_classes)))
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=100, help="timed batches")
    ap.add_argument("--warmup", type=int, default=10, help="untimed batches first (cuDNN picks algorithms)")
    ap.add_argument("--torchscript", action="store_true", help="run torch.jit.trace(model) instead of eager")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: smoke mode with a 1/16-wide network and 32x32 images (for CI)")
    args = ap.parse_args(argv)

    import torch
    device = pick_device(args.device)
    smoke = device.type == "cpu"
    if smoke:
        args.iters, args.warmup = min(args.iters, 2), min(args.warmup, 1)
    dtype = torch.float16 if args.dtype == "fp16" and not smoke else torch.float32
    size = 32 if smoke else 224
    t: dict[str, float] = {}
    with annotate.range("build"):
        model = build_vgg16(width_div=16 if smoke else 1).to(device=device, dtype=dtype).eval()
        x = torch.randn(args.batch, 3, size, size, device=device, dtype=dtype)
        if args.torchscript:
            with torch.no_grad():
                model = torch.jit.trace(model, x)
    with torch.no_grad():
        with annotate.range("warmup"):
            for _ in range(args.warmup):
                model(x)
        with annotate.range("infer"), timed(device, t, "infer"):
            for _ in range(args.iters):
                with annotate.step():
                    y = model(x)
    per_image = t["infer"] / (args.iters * args.batch)
    mode = "torchscript" if args.torchscript else "eager"
    print(f"vgg16 {args.dtype if not smoke else 'fp32(smoke)'} {mode} batch={args.batch} device={device.type}: "
          f"{per_image:.6f} s/image ({1 / per_image:.1f} images/s) output={tuple(y.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
