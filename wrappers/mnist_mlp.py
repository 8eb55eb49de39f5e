#!/usr/bin/env python3
"""MNIST-shaped MLP training on synthetic data: fp32, fp16 or AMP; time per epoch and accuracy.

From the material (chainer-tensorcore-blog): the small net 784-1000-1000-10 at batch 100 gained 1.01x from
fp16 (the host was the bottleneck), the large net 784-4096x5-10 at batch 4096 gained 3.08x. Ranges: one
`epoch` per epoch and one `step` per SGD step. Synthetic data: 10 Gaussian class centres in 784-d, so the
net can learn and the accuracy means something without downloading MNIST.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotate, fp16_autocast, pick_device, timed  # noqa: E402

NETS = {"small": ([1000, 1000], 100), "large": ([4096] * 5, 4096)}


def build(hidden: list[int], n_in: int = 784, n_out: int = 10):
    import torch.nn as nn
    layers, c = [], n_in
    for h in hidden:
        layers += [nn.Linear(c, h), nn.ReLU()]
        c = h
    layers.append(nn.Linear(c, n_out))
    return nn.Sequential(*layers)



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--net", choices=list(NETS), default="small")
    ap.add_argument("--dtype", choices=["fp32", "fp16", "amp"], default="fp32",
                    help="fp16: model and data in half (as the material did); amp: autocast + GradScaler")
    ap.add_argument("--batch", type=int, help="default: 100 (small) / 4096 (large)")
    ap.add_argument("--samples", type=int, default=60000, help="training samples per epoch")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, tiny data")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 for fp32 matmuls and convolutions (the change `nsighttc try --variant tf32` makes)")
    a = ap.parse_args(argv)
    if a.tf32:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
    import torch
    device = pick_device(a.device)
    hidden, batch = NETS[a.net]
    batch = a.batch or batch
    if device.type == "cpu":
        hidden, batch, a.samples, a.epochs = [h // 16 for h in hidden], min(batch, 32), 256, 1
        a.dtype = "fp32" if a.dtype == "fp16" else a.dtype
    torch.manual_seed(0)
    centres = torch.randn(10, 784, device=device) * 0.5
    labels = torch.randint(0, 10, (a.samples,), device=device)
    data = centres[labels] + torch.randn(a.samples, 784, device=device)
    model = build(hidden).to(device)
    half = a.dtype == "fp16"
    if half:
        model, data = model.half(), data.half()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    use_amp = a.dtype == "amp" and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    t: dict[str, float] = {}
    n_steps = a.samples // batch
    for epoch in range(a.epochs):
        perm = torch.randperm(a.samples, device=device)
        with annotate.range("epoch"), timed(device, t, f"epoch{epoch}"):
            for i in range(n_steps):
                with annotate.step():
                    idx = perm[i * batch:(i + 1) * batch]
                    with fp16_autocast(device, use_amp):
                        loss = loss_fn(model(data[idx]), labels[idx])
                    opt.zero_grad(set_to_none=True)
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
    with torch.no_grad(), annotate.range("evaluate"):
        pred = model(data[:10000]).argmax(1)
        acc = (pred == labels[:10000]).float().mean().item()
    times = [t[f"epoch{e}"] for e in range(a.epochs)]
    steady = min(times[1:]) if len(times) > 1 else times[0]
    print(f"mlp {a.net} {a.dtype} batch={batch} device={device.type}: {steady:.3f} s/epoch (best after the first; "
          f"epochs {', '.join(f'{x:.3f}' for x in times)}), {n_steps} steps/epoch, accuracy {acc:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
