"""Training a small transformer profiled as PyTorch's profiler recipe shows: ``torch.profiler.profile`` with
``schedule(wait=1, warmup=1, active=3)`` (``repeat`` left at its default, 0: the cycle repeats to the loop's end),
``on_trace_ready=tensorboard_trace_handler(LOG)`` (one trace file per cycle) and ``prof.step()`` after each step.
Nothing here was written for nsighttc. A log folder of such a program holds one recording per cycle of one process,
with the steps of each cycle's wait and warm-up between them unrecorded.

    python sched_cycles.py [--steps 40] [--log DIR | --no-profile] [--graph] [--repeat N] [--wait N]

``--graph``: the step (forward, backward, AdamW) captured once as a CUDA graph after a side-stream warm-up and
replayed (``torch.cuda.graph``); ``--no-profile``: the same loop without the profiler (the truth: ms/step).
"""
import argparse
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--log", default="./log/sched_cycles")
ap.add_argument("--no-profile", action="store_true")
ap.add_argument("--graph", action="store_true")
ap.add_argument("--repeat", type=int, default=0)
ap.add_argument("--wait", type=int, default=1)
a = ap.parse_args()
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
model = nn.Sequential(nn.TransformerEncoder(layer, 6), nn.Flatten(1), nn.Linear(512 * 128, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=a.graph)
host = [(torch.randn(32, 128, 512).pin_memory(), torch.randint(0, 10, (32,)).pin_memory()) for _ in range(4)]
sx, sy = torch.empty(32, 128, 512, device="cuda"), torch.empty(32, dtype=torch.long, device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        loss = nn.functional.cross_entropy(model(sx), sy)
    loss.backward()
    opt.step()
    return loss


sx.copy_(host[0][0]); sy.copy_(host[0][1])
if a.graph:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = step()
else:
    for _ in range(3):  # warm-up, as the graph's
        opt.zero_grad(set_to_none=True)
        step()
torch.cuda.synchronize()


def train(prof=None):
    t0 = time.perf_counter()
    for i in range(a.steps):
        x, y = host[i % len(host)]
        sx.copy_(x, non_blocking=True)
        sy.copy_(y, non_blocking=True)
        if a.graph:
            g.replay()
            loss = static_loss
        else:
            opt.zero_grad(set_to_none=True)
            loss = step()
        if i % 10 == 9:
            print(f"step {i + 1} loss {loss.item():.3f}")
        if prof is not None:
            prof.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


if a.no_profile:
    dt = train()
else:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=a.wait, warmup=1, active=3, repeat=a.repeat),
                 on_trace_ready=tensorboard_trace_handler(a.log)) as prof:
        dt = train(prof)
print(f"sched_cycles: {a.steps} steps, {1e3 * dt / a.steps:.3f} ms/step ({'graph' if a.graph else 'eager'}, "
      f"{'no profiler' if a.no_profile else 'profiled, cycles in ' + a.log})")
