#!/usr/bin/env python3
"""FSDP2 (``fully_shard``) or FSDP1 training of a GPT-shaped decoder in bf16 mixed precision on synthetic tokens,
with an option that gives one rank more host work.

Run under torchrun (one process per GPU):

    torchrun --nproc_per_node 2 wrappers/fsdp2_train.py
    torchrun --nproc_per_node 2 wrappers/fsdp2_train.py --extra-host-rank 1 --extra-host-ms 30

Each decoder block and then the whole model are sharded with ``torch.distributed.fsdp.fully_shard`` (FSDP2): the
forward all-gathers each block's parameters before it runs, the backward all-gathers them again and reduce-scatters
the gradients. ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``: the matmuls run in bf16, the
gradients are reduced in fp32. ``--reshard-after-forward off`` keeps the gathered parameters until the backward (more
memory, no second all-gather). ``--fsdp 1``: the same model wrapped by FSDP1 (``FullyShardedDataParallel``, one unit
per block, ``FULL_SHARD`` or with ``--reshard-after-forward off`` ``SHARD_GRAD_OP``, backward prefetch, the same
mixed precision). ``--extra-host-rank R --extra-host-ms D`` makes rank R busy on its host for D ms before
each step (a slow data pipeline on one node): the other ranks then wait in their collectives. The program marks
nothing (nsighttc's hooks find the steps from the optimizer), unless ``--annotate``.
``--device cpu`` is the smoke mode: gloo, fp32, a tiny model, a few steps (CI). Without torchrun (no RANK in the
environment) it runs as a single process of world size 1.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotations, free_port, sync  # noqa: E402


def build(vocab: int, dim: int, layers: int, heads: int, seq: int):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
            self.up, self.down = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, dim)
            x = x + self.proj(a)
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return GPT()


def _fsdp1(model, device, cpu: bool, reshard: bool):
    """The model under FSDP1: one FSDP unit per decoder block and one around the rest, as ``fully_shard`` does."""
    import torch
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    dtype = torch.float32 if cpu else torch.bfloat16
    return FullyShardedDataParallel(
        model, auto_wrap_policy=ModuleWrapPolicy({type(model.blocks[0])}),
        mixed_precision=MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32, buffer_dtype=dtype),
        sharding_strategy=ShardingStrategy.FULL_SHARD if reshard else ShardingStrategy.SHARD_GRAD_OP,
        backward_prefetch=BackwardPrefetch.BACKWARD_PRE, device_id=device, use_orig_params=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: gloo smoke mode, a tiny model")
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--fsdp", choices=["2", "1"], default="2",
                    help="2: fully_shard (FSDP2); 1: FullyShardedDataParallel")
    ap.add_argument("--reshard-after-forward", choices=["on", "off"], default="on")
    ap.add_argument("--extra-host-rank", type=int, default=None, help="this rank does host work before each step")
    ap.add_argument("--extra-host-ms", type=float, default=30.0, help="that host work per step, in milliseconds")
    ap.add_argument("--annotate", action="store_true", help="mark a `step` range per iteration (default: nothing)")
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", free_port() if world == 1 else "29513")
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    cpu = a.device == "cpu"
    if cpu:
        device = torch.device("cpu")
        a.steps, a.batch, a.seq, a.dim, a.layers, a.heads, a.vocab = min(a.steps, 5), 2, 32, 64, 2, 4, 256
    else:
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=world,
                            **({} if cpu else {"device_id": device}))
    mesh = init_device_mesh(device.type, (world,))
    torch.manual_seed(0)
    model = build(a.vocab, a.dim, a.layers, a.heads, a.seq).to(device)
    policy = MixedPrecisionPolicy(param_dtype=torch.float32 if cpu else torch.bfloat16, reduce_dtype=torch.float32)
    reshard = a.reshard_after_forward == "on"
    if a.fsdp == "1":
        model = _fsdp1(model, device, cpu, reshard)
    else:
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=not cpu)
    gen = torch.Generator(device="cpu").manual_seed(rank)
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=gen).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    extra = a.extra_host_ms / 1e3 if a.extra_host_rank == rank else 0.0
    annotate = annotations(a.annotate)
    loss_fn = torch.nn.functional.cross_entropy

    def step():
        if extra:
            time.sleep(extra)  # host work of this rank alone (not annotated: found from its host stacks)
        logits = model(x)
        loss = loss_fn(logits.reshape(-1, a.vocab).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(min(3, a.steps)):  # warm-up: allocator, cuBLAS, NCCL communicators
        step()
    sync(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        with annotate.step():
            loss = step()
    sync(device)
    dt = time.perf_counter() - t0
    tok_s = a.batch * a.seq * world * a.steps / dt
    print(f"fsdp2_train rank {rank}/{world} fsdp{a.fsdp} {'cpu-gloo fp32' if cpu else 'bf16 mixed'} layers={a.layers} "
          f"dim={a.dim} seq={a.seq} batch={a.batch} reshard_after_forward={a.reshard_after_forward}"
          f"{f' extra_host={a.extra_host_rank}:{a.extra_host_ms:g}ms' if a.extra_host_rank is not None else ''}: "
          f"{dt / a.steps * 1e3:.1f} ms/step, {tok_s:,.0f} tokens/s total, loss {float(loss.detach()):.3f}", flush=True)
    model = opt = None  # noqa: F841
    import gc
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
