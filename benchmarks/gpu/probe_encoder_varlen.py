#!/usr/bin/env python3
"""A probe written as a user outside this project writes it (no HF, no nsighttc marks): a text classifier built on
``torch.nn.TransformerEncoder`` (6 layers of 768, 12 heads), evaluated in bf16 autocast under
``torch.inference_mode`` on batches of 16 requests padded to the longest one (lengths 16-256, drawn at random), with
a padding mask. ``--bucket`` pads every batch to 64, 128 or 256 tokens instead (three shapes; with 16 requests of
16-256 tokens nearly every batch is 256). Prints requests/s over the whole loop (every batch counts: the per-shape cost
is the program's too), and after its first batch, whose time is the libraries' one-time start in both variants (the
loop without it is what a verdict's loop holds: its first step is a warm-up step).

Used by ``gpu_steps_time.sh OUT encoder`` to check that a variable-length loop of another build than the wrappers'
gets its per-shape cost (or its absence) right: whatever nsighttc says, bucketing measured plain is the truth.
"""
from __future__ import annotations

import argparse
import random
import time

import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, vocab: int = 30522, dim: int = 768, heads: int = 12, layers: int = 6, classes: int = 4):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(512, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.enc(self.emb(ids) + self.pos(pos), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=150)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--bucket", action="store_true", help="pad each batch to 64, 128 or 256 tokens")
    a = ap.parse_args()
    rng = random.Random(0)
    dev = torch.device("cuda")
    model = Classifier().to(dev).eval()
    batches = []
    for _ in range(a.batches):
        lens = [rng.randint(16, 256) for _ in range(a.batch)]
        width = max(lens)
        if a.bucket:
            width = next(b for b in (64, 128, 256) if b >= width)
        ids = torch.randint(1, 30522, (a.batch, width))
        pad = torch.arange(width)[None, :] >= torch.tensor(lens)[:, None]
        batches.append((ids, pad))
    done = 0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    t1 = None
    ends, seen, known = [t0], set(), []   # each batch's end (its answer read back: a sync); batches at a seen length
    with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16):
        for ids, pad in batches:
            out = model(ids.to(dev, non_blocking=True), pad.to(dev, non_blocking=True))
            done += int(out.argmax(-1).sum().item() >= 0) * ids.shape[0]
            t1 = t1 or time.perf_counter()  # the first batch: the libraries' one-time start (both variants pay it)
            ends.append(time.perf_counter())
            known.append(ids.shape[1] in seen)
            seen.add(ids.shape[1])
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    dt = t2 - t0
    took = [b - e for e, b in zip(ends, ends[1:])]
    at_known = sorted(x for x, k in zip(took, known) if k)
    print(f"requests/s {done / dt:.1f} over {a.batches} batches ({'bucketed' if a.bucket else 'padded to each batch'}, "
          f"{len({b[0].shape[1] for b in batches})} lengths), {1e3 * dt / a.batches:.2f} ms/batch; first batch "
          f"{1e3 * (t1 - t0):.0f} ms, then {1e3 * (t2 - t1) / (a.batches - 1):.2f} ms/batch "
          f"({(done - a.batch) / (t2 - t1):.1f} requests/s); batches at a length seen before: {len(at_known)}, median "
          f"{1e3 * at_known[len(at_known) // 2]:.2f} ms, mean {1e3 * sum(at_known) / max(len(at_known), 1):.2f} ms; "
          f"at new lengths after the first: {sum(1 for k in known[1:] if not k)}, "
          f"{1e3 * sum(x for x, k in zip(took[1:], known[1:]) if not k):.0f} ms")


if __name__ == "__main__":
    main()
