#!/usr/bin/env python3
"""A ``torch.compile`` training loop that marks nothing: a GPT-style decoder (``nn.TransformerEncoderLayer``
blocks with a causal mask) trained on random tokens from a DataLoader, ``torch.compile(model)`` at its defaults.

Compilation happens inside the first steps (dynamo traces the first forward, AOT autograd compiles the backward
at the first ``backward``): a profile of the whole process is dominated by it, the steady state is not.

    python wrappers/compile_loop.py                              # bf16 autocast, torch.compile(model)
    python wrappers/compile_loop.py --mode max-autotune-no-cudagraphs
    python wrappers/compile_loop.py --no-compile                 # the same loop eager
    python wrappers/compile_loop.py --device cpu                 # smoke mode (CI): tiny model, aot_eager backend
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SteadyClock, sync  # noqa: E402


def build(vocab: int, dim: int, layers: int, heads: int, seq: int):
    import torch
    from torch import nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(torch.zeros(seq, dim))
            block = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True,
                                               activation="gelu")
            self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, ids):
            x = self.embed(ids) + self.pos[: ids.shape[1]]
            x = self.blocks(x, mask=self.mask[: ids.shape[1], : ids.shape[1]], is_causal=True)
            return self.head(self.norm(x))

    return Decoder()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (tiny model, aot_eager)")
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--mode", default="default", help="torch.compile mode (default, reduce-overhead, "
                                                      "max-autotune-no-cudagraphs, ...)")
    ap.add_argument("--no-compile", action="store_true", help="run the same loop eager")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16", help="bf16 autocast or fp32")
    a = ap.parse_args(argv)

    import torch

    cpu = a.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
    if cpu:
        a.steps, a.batch, a.seq, a.dim, a.layers = min(a.steps, 6), 4, 32, 32, 2
    device = torch.device(a.device)
    vocab = 8192 if not cpu else 256
    torch.manual_seed(0)
    model = build(vocab, a.dim, a.layers, max(a.dim // 64, 2), a.seq).to(device)
    tokens = torch.randint(0, vocab, (a.steps * a.batch, a.seq + 1))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=a.batch, shuffle=True,
                                         pin_memory=not cpu)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=not cpu)
    compiled = model if a.no_compile else torch.compile(model, mode=None if a.mode == "default" else a.mode,
                                                        **({"backend": "aot_eager"} if cpu else {}))
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")
    clock = SteadyClock(a.steps, device)
    t_start = time.perf_counter()
    first = None
    for (batch,) in loader:
        batch = batch.to(device, non_blocking=True)
        with autocast:
            logits = compiled(batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if first is None:  # the first step holds the compilation: how long the program took to reach it
            sync(device)
            first = time.perf_counter() - t_start
        clock.step()
    steady = 1.0 / clock.per_second(1.0)
    print(f"compile_loop {'eager' if a.no_compile else a.mode} {a.precision} batch={a.batch} seq={a.seq} "
          f"layers={a.layers}: first step after {first:.1f} s, steady {steady * 1e3:.1f} ms/step, "
          f"{a.batch * a.seq / steady:.0f} tokens/s, loss {float(loss.detach()):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
