#!/usr/bin/env python3
"""A CUDA-graphed training step fed by a DataLoader, as a user who read PyTorch's whole-network capture example writes
it: a small convolutional net (bf16 autocast, channels_last) whose forward, backward and SGD step are captured once,
then for every batch the loader's worker processes deliver: ``static_x.copy_(x, non_blocking=True)``, ``g.replay()``,
and the loss read every ``--log-every`` steps (``.item()``: the host waits for the GPU there).

What the program repeats is a batch: one fetch from the loader, two input copies, one replay. Where the workers
prepare batches (``--work``: CPU augmentation per image) more slowly than the GPU replays them, the replays wait on
data and a CUDA graph cannot help; with ``--workers`` enough, the replay is the step. ``--eager`` runs the same steps
without the graph; ``--on-device`` replays on batches already on the GPU (the GPU's own step: no loader). No nsighttc
marks. Prints images/s and ms/step.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


class Images:
    """Random 3x64x64 images with a label; ``work`` rounds of a cheap CPU augmentation each (flip, jitter, normalise),
    standing for decoding and augmenting an image."""

    def __init__(self, n: int, size: int, work: int):
        self.n, self.size, self.work = n, size, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, self.size, self.size, generator=g)
        for _ in range(self.work):
            x = torch.flip(x, dims=(2,)) * 0.9 + 0.05
            x = (x - x.mean(dim=(1, 2), keepdim=True)) / (x.std(dim=(1, 2), keepdim=True) + 1e-5)
        return x, int(i % 100)


def build(dev, channels: int):
    import torch
    c = channels
    blocks = []
    for cin, cout in ((3, c), (c, c), (c, 2 * c), (2 * c, 2 * c), (2 * c, 4 * c)):
        blocks += [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout),
                   torch.nn.ReLU(inplace=True)]
        if cout != cin:
            blocks.append(torch.nn.MaxPool2d(2))
    model = torch.nn.Sequential(*blocks, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4 * c, 100))
    return model.to(dev).to(memory_format=torch.channels_last)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=64, help="image side in pixels")
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", type=int, default=2, help="rounds of CPU augmentation per image")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eager", action="store_true", help="no graph: the same steps launched one kernel at a time")
    ap.add_argument("--on-device", action="store_true", help="batches already on the GPU: no loader")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import torch
    dev = pick_device(a.device)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    model = build(dev, a.channels)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    cuda = dev.type == "cuda"
    loader = torch.utils.data.DataLoader(Images(a.batch * (a.steps + 8), a.size, a.work), batch_size=a.batch,
                                         shuffle=True, num_workers=a.workers, pin_memory=cuda, drop_last=True,
                                         persistent_workers=a.workers > 0)
    static_x = torch.zeros(a.batch, 3, a.size, a.size, device=dev).to(memory_format=torch.channels_last)
    static_y = torch.zeros(a.batch, dtype=torch.long, device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda, cache_enabled=False):
            loss = loss_fn(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    it = iter(loader)
    graph = None
    if cuda and not a.eager:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step()
    else:
        for _ in range(3):
            static_loss = step()
    on_device = [(torch.rand_like(static_x), torch.randint_like(static_y, 100)) for _ in range(8)] \
        if a.on_device else None
    sync(dev)
    t0 = time.perf_counter()
    for i in range(a.steps):
        x, y = on_device[i % 8] if on_device else next(it)
        static_x.copy_(x, non_blocking=True)
        static_y.copy_(y, non_blocking=True)
        if graph is not None:
            graph.replay()
        else:
            static_loss = step()
        if (i + 1) % a.log_every == 0:
            print(f"step {i + 1}: loss {static_loss.item():.4f}", flush=True)
    sync(dev)
    dt = time.perf_counter() - t0
    kind = "eager" if graph is None else "graph replay"
    print(f"{a.steps * a.batch / dt:.1f} images/s, {1e3 * dt / a.steps:.3f} ms/step ({kind}, {a.workers} workers, "
          f"{'on device' if on_device else 'loader'})", flush=True)


if __name__ == "__main__":
    main()
