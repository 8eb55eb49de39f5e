#!/usr/bin/env python3
"""Fine-tuning on texts of many lengths, as users write it: a BERT-shaped classifier (random weights), AdamW, fp16
autocast, a DataLoader whose collate function pads each batch to its longest text (dynamic padding, as
``DataCollatorWithPadding`` does), the loss read back every step for logging.

Text lengths follow a skewed distribution (most short, a long tail up to 256 tokens), so batches come at dozens of
lengths and each new length is a new input shape for the forward and the backward pass: the attention backend plans
per shape, and a loop meets new lengths for a long while. ``--bucket`` pads every batch to the first of 64/128/256
that holds it (``pad_to_multiple_of``-style bucketing: three shapes). No nsighttc marks. Prints samples/s over the
whole loop and from the second batch (the first sets the process up).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402

BUCKETS = (64, 128, 256)


class Texts:
    """Synthetic token-id lists of skewed lengths (log-normal, 8 to ``longest`` tokens) and a label each."""

    def __init__(self, n: int, longest: int = 256, seed: int = 0):
        import random
        rnd = random.Random(seed)
        self.lengths = [min(longest, max(8, int(math.exp(rnd.gauss(4.2, 0.7))))) for _ in range(n)]

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return [101 + (i * 7 + j) % 20000 for j in range(self.lengths[i])], i % 2


def collate(bucket: bool):
    """Pads a batch to its longest text (or to its bucket) and builds the attention mask."""
    import torch

    def pad(batch):
        n = max(len(ids) for ids, _ in batch)
        if bucket:
            n = next((b for b in BUCKETS if b >= n), n)
        ids = torch.zeros(len(batch), n, dtype=torch.long)
        mask = torch.zeros(len(batch), n, dtype=torch.long)
        for i, (t, _) in enumerate(batch):
            ids[i, :len(t)] = torch.tensor(t)
            mask[i, :len(t)] = 1
        return ids, mask, torch.tensor([y for _, y in batch])
    return pad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--max-len", type=int, default=256, help="the longest text, in tokens")
    ap.add_argument("--bucket", action="store_true", help="pad each batch to 64, 128 or 256 tokens")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import torch
    from transformers import BertConfig, BertForSequenceClassification
    dev = pick_device(a.device)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(num_hidden_layers=a.layers, num_labels=2)).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scaler = torch.amp.GradScaler(dev.type, enabled=dev.type == "cuda")
    loader = torch.utils.data.DataLoader(Texts(a.steps * a.batch, a.max_len), batch_size=a.batch, shuffle=True,
                                         collate_fn=collate(a.bucket), generator=torch.Generator().manual_seed(0))
    shapes = set()
    t0 = time.perf_counter()
    t1 = None
    for k, (ids, mask, y) in enumerate(loader):
        if k == 1:
            sync(dev)
            t1 = time.perf_counter()
        ids, mask, y = ids.to(dev, non_blocking=True), mask.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        shapes.add(ids.shape[1])
        with torch.autocast(dev.type, dtype=torch.float16, enabled=dev.type == "cuda"):
            loss = model(input_ids=ids, attention_mask=mask, labels=y).loss
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        last = loss.item()  # logged every step, as most loops do
    sync(dev)
    dt = time.perf_counter() - t0
    n = a.steps * a.batch
    rest = (f"; {(n - a.batch) / (time.perf_counter() - t1):.1f} samples/s from the second batch" if t1 else "")
    print(f"{n / dt:.1f} samples/s over {a.steps} steps ({'buckets' if a.bucket else 'padded to each batch'}, "
          f"{len(shapes)} batch lengths), {1e3 * dt / a.steps:.2f} ms/step{rest}; loss {last:.3f}", flush=True)


if __name__ == "__main__":
    main()
