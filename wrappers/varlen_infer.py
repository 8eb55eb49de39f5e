#!/usr/bin/env python3
"""Inference on requests of many lengths, as users write it: BERT-base shape (random weights, fp16), batches of 16
requests padded to the longest request of each batch (lengths 16-256), one model call per batch.

Each new sequence length is a new input shape: the attention backend builds its plan per shape (cuDNN's SDPA on
Hopper), so the first batches at each length cost far more than the rest, and with lengths drawn at random most
batches are new for a long while. ``--bucket`` pads every batch to the first of 64/128/256 that holds it: three shapes.
``--attention efficient`` keeps every length but runs attention on PyTorch's memory-efficient kernels (no plan per
shape); ``math``: PyTorch's unfused attention. ``--compile reduce-overhead`` runs the model under
``torch.compile(mode="reduce-overhead")``: the second length recompiles it with a dynamic length, and every new length
after it records a CUDA graph of its own (CUDA graph trees), the per-shape cost a compiled loop pays; the rate after
that recompile (from the batch after the second length's first, bucketed or not) is printed too. ``--compile static``:
``torch.compile(dynamic=False)``, which compiles the model again at every new length (up to dynamo's recompile limit,
after which new lengths run eagerly). ``--model gpt2``: a GPT-2-small decoder (causal attention with a padding mask)
in BERT's place. ``--vary batch``: a server's dynamic batching instead, every request 128 tokens long and each batch
1-64 requests (a new batch size is a new shape too); ``--bucket`` then pads the batch to 16, 32 or 64 requests, the
padding rows filler requests of the batch's length (``--pad-rows empty``: rows of no tokens instead; their all-zero
mask rows make HF build an attention mask where an unpadded batch has none, so the bucketed loop runs another
attention kernel than the loop it replaces, and a fresh machine's first such run JIT-compiles it). No nsighttc marks.
Prints requests/s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device  # noqa: E402

BUCKETS = (64, 128, 256)
BATCH_BUCKETS = (16, 32, 64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=120)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--bucket", action="store_true", help="pad each batch to 64, 128 or 256 tokens")
    ap.add_argument("--attention", choices=["default", "efficient", "math"], default="default",
                    help="the attention backend (default: PyTorch's choice, cuDNN's on Hopper)")
    ap.add_argument("--compile", choices=["none", "default", "reduce-overhead", "static"], default="none",
                    help="run the model under torch.compile in this mode (static: dynamic=False, one compile a length)")
    ap.add_argument("--model", choices=["bert", "gpt2"], default="bert", help="BERT-base or GPT-2-small (random weights)")
    ap.add_argument("--vary", choices=["length", "batch"], default="length",
                    help="what changes from batch to batch: the longest request's length, or the number of requests")
    ap.add_argument("--pad-rows", choices=["full", "empty"], default="full",
                    help="--vary batch --bucket: the padding rows as filler requests of the batch's length (default), "
                         "or as rows of no tokens (an attention mask where the unpadded batch has none)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    a = ap.parse_args()
    import random

    import torch
    dev = pick_device(a.device)
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    torch.manual_seed(0)
    if a.model == "gpt2":
        from transformers import GPT2Config, GPT2Model
        model = GPT2Model(GPT2Config(n_layer=a.layers)).to(dev, dtype).eval()  # GPT-2 small: 768 wide, 12 heads
    else:
        from transformers import BertConfig, BertModel
        model = BertModel(BertConfig(num_hidden_layers=a.layers)).to(dev, dtype).eval()  # BERT-base: 768, 12 heads
    if a.compile == "static":
        model = torch.compile(model, dynamic=False)
    elif a.compile != "none":
        model = torch.compile(model, mode=None if a.compile == "default" else a.compile)
    rnd = random.Random(0)
    # each request a list of token ids (their values do not matter here: only the lengths shape the work)
    if a.vary == "batch":
        batches = [[[101] * 128 for _ in range(rnd.randint(1, 64))] for _ in range(a.batches)]
    else:
        batches = [[[101] * rnd.randint(a.min_len, a.max_len) for _ in range(a.batch)] for _ in range(a.batches)]
    served = 0
    import contextlib
    backend = contextlib.nullcontext()
    if a.attention != "default":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        chosen = {"efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[a.attention]
        backend = sdpa_kernel([chosen] + ([SDPBackend.MATH] if dev.type == "cpu" else []))  # (no fused CPU kernel)
    # the batch after the second length's first: a compiled model has recompiled by then (a dynamic length); the same
    # batch bucketed, so that both rates cover the same requests
    longest = [len(max(b, key=len)) if a.vary == "length" else len(b) for b in batches]
    second = next((i + 1 for i, n in enumerate(longest) if n != longest[0]), len(batches))
    t0 = time.perf_counter()
    t_second = None
    with torch.inference_mode(), backend:
        for k, batch in enumerate(batches):
            if k == second:
                t_second = time.perf_counter()
            n = max(len(r) for r in batch)  # padded to the batch's longest request
            rows = len(batch)
            if a.bucket and a.vary == "length":
                n = next(b for b in BUCKETS if b >= n)
            elif a.bucket:  # (padding rows: filler requests, their answers dropped)
                rows = next(b for b in BATCH_BUCKETS if b >= rows)
            ids = torch.randint(1000, 20000, (rows, n), device=dev)
            mask = torch.zeros(rows, n, dtype=torch.long, device=dev)
            for i, r in enumerate(batch):
                mask[i, :len(r)] = 1
            if a.vary == "batch" and a.pad_rows == "full":
                mask[len(batch):] = 1  # filler requests of the batch's length
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state
            pooled = out[:, 0].float().sum().item()  # the request's answer leaves the GPU
            served += len(batch)
    t_end = time.perf_counter()
    dt = t_end - t0
    after = (f"; {(len(batches) - second) * a.batch / (t_end - t_second):.1f} requests/s from batch {second + 1} "
             "(after the second length unbucketed)") if t_second is not None and a.compile != "none" else ""
    print(f"{served / dt:.1f} requests/s over {served} requests ({'buckets' if a.bucket else 'padded to each batch'}, "
          f"{len(set(longest))} batch {'lengths' if a.vary == 'length' else 'sizes'}, {a.model}, attention {a.attention}"
          f"{', compiled ' + a.compile if a.compile != 'none' else ''}){after}; last {pooled:.3f}", flush=True)


if __name__ == "__main__":
    main()
