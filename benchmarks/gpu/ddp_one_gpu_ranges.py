#!/usr/bin/env python3
"""Two DDP ranks on one GPU (gloo: NCCL refuses two ranks on one device), the program's own ranges as
``../shared/programs/ddp_w.py`` has them: ``train`` open around the whole loop, ``data`` and ``step`` inside it, rank 1
sleeping in ``data``. What a distributed first run does where rank 0's change of sessions cannot run, on a machine with
one GPU (``gpu_steps_time.sh OUT capture``): the operators recorded by a dispatch mode instead
(``nsighttc.runtime.op_capture``), the replay measuring their kernels, no second launch of the job under ncu.

    python -m torch.distributed.run --standalone --nproc_per_node 2 benchmarks/gpu/ddp_one_gpu_ranges.py
Prints ms/step (rank 0).
"""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--sleep-ms", type=float, default=20.0, help="rank 1's extra time in `data` a step")
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).to(dev)
    ddp = DDP(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    t0 = None
    with torch.profiler.record_function("train"):
        for i in range(a.steps):
            if i == 5:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            with torch.profiler.record_function("data"):
                x = torch.randn(256, 1024, device=dev)
                if rank == 1:
                    time.sleep(a.sleep_ms / 1e3)
            with torch.profiler.record_function("step"):
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = ddp(x).float().pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    if rank == 0:
        print(f"ddp_one_gpu_ranges: {(time.perf_counter() - t0) / (a.steps - 5) * 1e3:.1f} ms/step", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
