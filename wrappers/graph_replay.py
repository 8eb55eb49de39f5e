#!/usr/bin/env python3
"""A training loop that replays its own CUDA graph, as users write one: a whole step (forward, backward, SGD) captured
once with ``torch.cuda.graph`` after a few eager warm-up steps on a side stream, then ``g.replay()`` for every batch.

What the program repeats is the replay: after capture the host only copies the next batch into the static input and
launches one graph. Written as PyTorch's CUDA graph documentation shows (whole-network capture); no nsighttc marks.
``--eager`` runs the same steps without the graph (what the graph is worth); ``--two-graphs`` captures the forward
and backward in one graph and the optimizer's step in another, and replays both each step (an iteration of two
replays); ``--accum K``: gradient accumulation, the forward and backward graph replayed for K micro-batches, then the
optimizer's graph once (an iteration of K+1 replays). Prints steps/s and ms/step (a step: one optimizer step).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


def parser(doc: str) -> argparse.ArgumentParser:
    """The options this program and ``graph_partial.py`` share (the same model, data and steps)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda where there is one")
    return ap


def build(a):
    """(device, model, 16 batches on the device): ``--layers`` blocks of Linear, LayerNorm, GELU, then a 10-way head."""
    import torch
    dev = pick_device(a.device)
    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.LayerNorm(a.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 10)).to(dev)
    data = [(torch.randn(a.batch, a.width, device=dev), torch.randint(0, 10, (a.batch,), device=dev))
            for _ in range(16)]
    return dev, model, data


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--eager", action="store_true", help="no graph: the same steps launched one kernel at a time")
    ap.add_argument("--two-graphs", action="store_true",
                    help="the forward and backward in one graph, the optimizer's step in another: two replays a step")
    ap.add_argument("--accum", type=int, default=1, metavar="K",
                    help="K micro-batches a step: the forward and backward graph replayed K times, then the optimizer's "
                         "(implies --two-graphs where K > 1)")
    a = ap.parse_args()
    a.two_graphs = a.two_graphs or a.accum > 1
    import torch
    dev, model, data = build(a)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    static_x, static_y = data[0][0].clone(), data[0][1].clone()

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    graph = None
    if dev.type == "cuda" and not a.eager:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(a.warmup):
                step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        if a.two_graphs:
            def forward_backward(x, y):
                if a.accum == 1:
                    opt.zero_grad(set_to_none=False)
                loss = loss_fn(model(x), y) / a.accum
                loss.backward()  # (accumulates into the gradients' storage where K > 1)
                return loss
            with torch.cuda.graph(graph):
                static_loss = forward_backward(static_x, static_y)
            second = torch.cuda.CUDAGraph()
            with torch.cuda.graph(second):
                opt.step()
                if a.accum > 1:
                    opt.zero_grad(set_to_none=False)
        else:
            with torch.cuda.graph(graph):
                static_loss = step(static_x, static_y)
    else:
        for _ in range(a.warmup):
            step(static_x, static_y)
    sync(dev)
    t0 = time.perf_counter()
    for i in range(a.steps):
        x, y = data[i % len(data)]
        if graph is not None:
            for k in range(a.accum):
                xk, yk = data[(i * a.accum + k) % len(data)] if a.accum > 1 else (x, y)
                static_x.copy_(xk)
                static_y.copy_(yk)
                graph.replay()
            if a.two_graphs:
                second.replay()
        elif a.accum > 1:  # (eager: the same K micro-batches and one optimizer step, kernel by kernel)
            opt.zero_grad(set_to_none=False)
            for k in range(a.accum):
                xk, yk = data[(i * a.accum + k) % len(data)]
                static_loss = loss_fn(model(xk), yk) / a.accum
                static_loss.backward()
            opt.step()
        else:
            static_loss = step(x, y)
    sync(dev)
    dt = time.perf_counter() - t0
    kind = (("eager" + (f", {a.accum} micro-batches a step" if a.accum > 1 else "")) if graph is None else
            f"{a.accum} micro-batch replays and the optimizer's" if a.accum > 1
            else "two graph replays" if a.two_graphs else "graph replay")
    print(f"loss {float(static_loss.detach()):.4f}; {a.steps / dt:.1f} steps/s, {1e3 * dt / a.steps:.3f} ms/step "
          f"({kind})", flush=True)


if __name__ == "__main__":
    main()
