#!/usr/bin/env python3
"""A GAN training loop, as users write one: two models (a DCGAN-shaped generator and discriminator), two Adam
optimizers, bf16 autocast, a discriminator step then a generator step on every batch. No nsighttc marks.

Why it is here: its step is launch-heavy (two small convolutional models, two backward passes, two optimizer steps,
~10 ms a step on an H200), so whatever a profiler adds per launched operator shows in its time; and it has two
optimizers, so the step is the pair of optimizer steps, not one of them (issue 73: its first `nsighttc profile` run
cost 1.79x a plain run). Synthetic images (no DataLoader). Prints steps/s and ms/step.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


def generator(torch, z: int, width: int):
    nn = torch.nn
    return nn.Sequential(  # z x 1 x 1 -> 3 x 64 x 64
        nn.ConvTranspose2d(z, width * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(width * 8), nn.ReLU(True),
        nn.ConvTranspose2d(width * 8, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4), nn.ReLU(True),
        nn.ConvTranspose2d(width * 4, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.ReLU(True),
        nn.ConvTranspose2d(width * 2, width, 4, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
        nn.ConvTranspose2d(width, 3, 4, 2, 1, bias=False), nn.Tanh())


def discriminator(torch, width: int):
    nn = torch.nn
    return nn.Sequential(  # 3 x 64 x 64 -> 1
        nn.Conv2d(3, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width * 2, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width * 4, width * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 8), nn.LeakyReLU(0.2, True),
        nn.Conv2d(width * 8, 1, 4, 1, 0, bias=False), nn.Flatten())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--z", type=int, default=100)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import torch
    dev = pick_device(a.device)
    torch.manual_seed(0)
    g, d = generator(torch, a.z, a.width).to(dev), discriminator(torch, a.width).to(dev)
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.BCEWithLogitsLoss()
    real_images = [torch.rand(a.batch, 3, 64, 64, device=dev) * 2 - 1 for _ in range(8)]
    ones = torch.ones(a.batch, 1, device=dev)
    zeros = torch.zeros(a.batch, 1, device=dev)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    for i in range(a.steps):
        real = real_images[i % len(real_images)]
        noise = torch.randn(a.batch, a.z, 1, 1, device=dev)
        # the discriminator: real images against the generator's (detached) fakes
        opt_d.zero_grad(set_to_none=True)
        with amp:
            fake = g(noise)
            loss_d = bce(d(real), ones) + bce(d(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        # the generator: fool the discriminator
        opt_g.zero_grad(set_to_none=True)
        with amp:
            loss_g = bce(d(fake), ones)
        loss_g.backward()
        opt_g.step()
    sync(dev)
    dt = time.perf_counter() - t0
    print(f"loss_d {float(loss_d.detach()):.3f} loss_g {float(loss_g.detach()):.3f}; {a.steps / dt:.1f} steps/s, "
          f"{1e3 * dt / a.steps:.2f} ms/step", flush=True)


if __name__ == "__main__":
    main()
