#!/usr/bin/env python3
"""Serving with hand-captured CUDA graphs, as users write it: a small transformer encoder (fp16) captured once per
bucket length (64, 128, 256 tokens), then for every batch of requests: pad to the bucket, copy into that graph's
static input, ``replay()``, read the answer back (``.item()``: the host waits for it).

What the program repeats is a batch: one input copy, one replay of one of three graphs, one copy back. Unlike
``graph_replay.py`` (one graph of a training step) the replays alternate between graphs of different sizes and every
step ends on a synchronising read, as a server answering requests does. ``--eager`` runs the same batches without the
graphs (what they are worth). No nsighttc marks. Prints requests/s and ms/batch.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402

BUCKETS = (64, 128, 256)


def build(width: int, layers: int, heads: int, dev, dtype):
    """An encoder of pre-norm blocks: attention through ``scaled_dot_product_attention`` (fused kernels, capturable),
    an MLP of 4x width."""
    import torch
    import torch.nn.functional as F

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
            self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
            self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, n, 3, heads, width // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, width)
            x = x + self.proj(a)
            return x + self.down(F.gelu(self.up(self.n2(x))))

    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block() for _ in range(layers)], torch.nn.LayerNorm(width)).to(dev, dtype).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--eager", action="store_true", help="no graphs: the same batches launched kernel by kernel")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import random

    import torch
    dev = pick_device(a.device)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    model = build(a.width, a.layers, a.heads, dev, dtype)
    rnd = random.Random(0)
    lengths = [max(rnd.randint(8, 256) for _ in range(a.batch)) for _ in range(a.batches)]
    # the requests' embeddings, made once per bucket (their values do not matter here, only the shapes)
    pool = {n: [torch.randn(a.batch, n, a.width, device=dev, dtype=dtype) for _ in range(4)] for n in BUCKETS}
    static_in = {n: pool[n][0].clone() for n in BUCKETS}
    static_out, graphs = {}, {}
    with torch.inference_mode():
        if dev.type == "cuda" and not a.eager:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for n in BUCKETS:
                    for _ in range(3):
                        model(static_in[n])
            torch.cuda.current_stream().wait_stream(s)
            for n in BUCKETS:
                graphs[n] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[n]):
                    static_out[n] = model(static_in[n])
        sync(dev)
        t0 = time.perf_counter()
        total = 0.0
        for i, length in enumerate(lengths):
            n = next(b for b in BUCKETS if b >= length)
            x = pool[n][i % 4]
            if graphs:
                static_in[n].copy_(x)
                graphs[n].replay()
                out = static_out[n]
            else:
                out = model(x)
            total += out[:, 0].float().sum().item()  # the batch's answer leaves the GPU
        dt = time.perf_counter() - t0
    print(f"{a.batches * a.batch / dt:.1f} requests/s, {1e3 * dt / a.batches:.3f} ms/batch over {a.batches} batches "
          f"({'eager' if not graphs else 'graph replay, 3 graphs'}); last {total:.3f}", flush=True)


if __name__ == "__main__":
    main()
