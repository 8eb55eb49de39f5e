"""Training an MLP compiled with ``torch.compile(model, mode="reduce-overhead")`` (CUDA graphs through the compiler),
the loss and the optimizer left eager, as PyTorch's tutorials show for small models. Nothing here was written for
nsighttc. --mode default compiles without CUDA graphs.
    python compiled_graphs.py [--mode reduce-overhead|default] [--steps 400]
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="reduce-overhead")
ap.add_argument("--steps", type=int, default=400)
a = ap.parse_args()
layers = []
for _ in range(8):
    layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
model = torch.compile(torch.nn.Sequential(*layers).cuda(), mode=a.mode)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 1024, device="cuda"), torch.randn(64, 1024, device="cuda")
for i in range(a.steps):
    if i == 50:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
    torch.compiler.cudagraph_mark_step_begin()  # (a training loop under reduce-overhead says where a step begins)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"{1000 * (time.perf_counter() - t0) / (a.steps - 50):.3f} ms/step ({a.mode})")
