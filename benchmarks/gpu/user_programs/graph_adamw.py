"""Training a small transformer whose whole step is replayed as one CUDA graph, as PyTorch's CUDA graphs docs show for
whole-network capture: warm-up on a side stream, ``AdamW(capturable=True)``, bf16 autocast inside the capture, then
each batch copied from pinned host memory into the static input and ``g.replay()``; the loss read every 50 steps.
Nothing here was written for nsighttc. --eager runs the same steps without the graph (what the graph is worth).
    python graph_adamw.py [--steps 1500] [--eager]
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1500)
ap.add_argument("--eager", action="store_true")
a = ap.parse_args()
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
model = nn.Sequential(nn.TransformerEncoder(layer, 4), nn.Flatten(1), nn.Linear(256 * 64, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True)
host = [(torch.randn(32, 64, 256).pin_memory(), torch.randint(0, 10, (32,)).pin_memory()) for _ in range(8)]
sx, sy = torch.empty(32, 64, 256, device="cuda"), torch.empty(32, dtype=torch.long, device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        loss = nn.functional.cross_entropy(model(sx), sy)
    loss.backward()
    opt.step()
    return loss


sx.copy_(host[0][0]); sy.copy_(host[0][1])
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        step()
torch.cuda.current_stream().wait_stream(s)
if not a.eager:
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(a.steps):
    x, y = host[i % len(host)]
    sx.copy_(x, non_blocking=True)
    sy.copy_(y, non_blocking=True)
    if a.eager:
        opt.zero_grad(set_to_none=False)
        loss = step()
    else:
        g.replay()
        loss = static_loss
    if i % 50 == 49:
        print(f"step {i + 1} loss {loss.item():.3f}")
torch.cuda.synchronize()
print(f"{1000 * (time.perf_counter() - t0) / a.steps:.3f} ms/step ({'eager' if a.eager else 'one graph a step'})")
