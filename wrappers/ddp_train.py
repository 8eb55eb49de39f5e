#!/usr/bin/env python3
"""DistributedDataParallel ResNet-50 training with AMP on synthetic data, with an optional straggler.

Run under torchrun (one process per GPU):

    torchrun --nproc_per_node 2 wrappers/ddp_train.py
    torchrun --nproc_per_node 2 wrappers/ddp_train.py --straggler-rank 1 --delay-ms 30

``--straggler-rank R --delay-ms D`` makes rank R sleep D ms on its host before each step (a slow data
loader, a host sync, a busy CPU): every other rank then waits for it in the gradient all-reduce.
``--uneven-rank R --uneven-batch B`` gives rank R a larger batch: more GPU work per step, nothing on the host,
no range (an uneven data shard, a rank that does extra work). ``--no-annotate`` marks nothing (nsighttc's
hooks find the steps). ResNet-50
has 25.6 M parameters: DDP all-reduces ~100 MB of fp32 gradients per step in 25 MB buckets, overlapped
with the backward pass. ``--device cpu`` is the smoke mode: gloo backend, a small MLP, a few steps (CI).
Without torchrun (no RANK in the environment) it runs as a single process of world size 1.
``--share-gpu`` puts every rank on GPU 0 with the gloo backend (NCCL refuses two ranks on one device): a torchrun
job's processes, per-rank profilers and all-reduces on a machine with one GPU (the lent H100), not a multi-GPU
job's speed.

Ranges: ``warmup``, ``train`` with one ``step`` per iteration; each rank prints its step time, and what came before
the steps (importing torch, the process group, the model, the warm-up): most of a short job's time, and where two
runs of it differ (issue 50's cost rounds).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import amp_step, annotations, free_port, sync  # noqa: E402


def _model(name: str):
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    from resnet_amp import build_resnet
    return build_resnet()



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: gloo smoke mode with a small MLP")
    ap.add_argument("--share-gpu", action="store_true",
                    help="every rank on GPU 0, gloo backend (a torchrun job on a one-GPU machine)")
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch")
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--precision", choices=["amp", "fp32"], default="amp")
    ap.add_argument("--straggler-rank", type=int, default=None, help="this rank sleeps on its host before each step")
    ap.add_argument("--delay-ms", type=float, default=30.0, help="the straggler's sleep per step")
    ap.add_argument("--uneven-rank", type=int, default=None,
                    help="this rank trains on a larger batch (--uneven-batch): more GPU work, no sleep, no range")
    ap.add_argument("--uneven-batch", type=int, default=96, help="the uneven rank's per-rank batch")
    ap.add_argument("--no-annotate", action="store_true",
                    help="mark no ranges or steps (a DDP job as most are written: nsighttc finds the steps)")
    a = ap.parse_args(argv)
    t_main = time.perf_counter()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    annotate = annotations(not a.no_annotate)

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", free_port() if world == 1 else "29511")
    cpu = a.device == "cpu"
    if cpu:
        device = torch.device("cpu")
        a.batch, a.steps, a.warmup = min(a.batch, 8), min(a.steps, 4), min(a.warmup, 1)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
        device = torch.device("cuda", 0 if a.share_gpu else local)
        torch.cuda.set_device(device)
    gloo = cpu or a.share_gpu
    t_import = time.perf_counter()
    dist.init_process_group("gloo" if gloo else "nccl", rank=rank, world_size=world,
                            **({} if gloo else {"device_id": device}))
    t_group = time.perf_counter()
    model = _model("mlp" if cpu else "resnet50")
    t_built = time.perf_counter()
    model = model.to(device)
    if not cpu:
        model = model.to(memory_format=torch.channels_last)
    t_moved = time.perf_counter()
    ddp = DDP(model, device_ids=None if cpu else [device.index], gradient_as_bucket_view=True)
    t_ddp = time.perf_counter()
    if a.uneven_rank == rank:  # DDP averages gradients over ranks whatever their batch: this rank just works more
        a.batch = a.uneven_batch if not cpu else a.batch * 2
    if cpu:
        x = torch.randn(a.batch, 256)
        y = torch.randint(0, 10, (a.batch,))
    else:
        x = torch.randn(a.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (a.batch,), device=device)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    amp = a.precision == "amp" and not cpu
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    delay = a.delay_ms / 1e3 if a.straggler_rank == rank else 0.0

    def step():
        if delay:
            time.sleep(delay)  # host-side work of the straggler (not annotated: found from the timeline)
        return amp_step(ddp, x, y, loss_fn, opt, scaler, device, amp)

    t_model = time.perf_counter()
    with annotate.range("warmup"):
        for _ in range(a.warmup):
            step()
    sync(device)
    dist.barrier()
    t0 = time.perf_counter()
    with annotate.range("train"):
        for _ in range(a.steps):
            with annotate.step():
                loss = step()
    sync(device)
    dt = time.perf_counter() - t0
    print(f"ddp_train rank {rank}/{world} {'cpu-gloo' if cpu else a.precision + (' shared-gpu-gloo' if a.share_gpu else '')} batch={a.batch}"
          f"{f' straggler={a.straggler_rank} delay={a.delay_ms:g}ms' if a.straggler_rank is not None else ''}"
          f"{f' uneven={a.uneven_rank}' if a.uneven_rank is not None else ''}: "
          f"{dt / a.steps * 1e3:.1f} ms/step, {a.batch * world * a.steps / dt:.1f} images/s total, "
          f"loss {float(loss.detach()):.3f}; before the steps: torch and its device {t_import - t_main:.2f} s, "
          f"process group {t_group - t_import:.2f} s, model {t_model - t_group:.2f} s (built {t_built - t_group:.2f} s, moved "
          f"{t_moved - t_built:.2f} s, DDP {t_ddp - t_moved:.2f} s), warm-up {t0 - t_model:.2f} s", flush=True)
    # Free DDP (its reducer holds the process group) before destroying the group: freed after it, a gloo
    # reducer hung at exit in ~half of the CPU smoke runs on a 2-core machine (torch 2.13).
    ddp = opt = model = None  # noqa: F841  (the step closure's references go too)
    import gc
    gc.collect()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
