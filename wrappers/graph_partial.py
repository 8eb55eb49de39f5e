#!/usr/bin/env python3
"""A training loop with its model captured as CUDA graphs by ``torch.cuda.make_graphed_callables`` (PyTorch's
"partial-network capture"): the forward and the backward each replay a graph, while the loss's own kernels, the data
copies and the optimizer (Adam, foreach) run eagerly between them. So each step launches two graphs and a few dozen
kernels: the unit the program repeats is the pair with what runs between, not one replay.

``--eager``: the same steps without graphs (what the capture is worth). No nsighttc marks. Prints ms/step.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import sync  # noqa: E402
from graph_replay import build, parser  # noqa: E402  (the same model and batches)


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(steps=1500)
    ap.add_argument("--eager", action="store_true", help="no graphs: the same steps launched one kernel at a time")
    a = ap.parse_args()
    import torch
    dev, model, data = build(a)
    loss_fn = torch.nn.CrossEntropyLoss()
    if dev.type == "cuda" and not a.eager:
        # make_graphed_callables warms the callable up itself (3 iterations on a side stream) before capturing
        model = torch.cuda.make_graphed_callables(model, (torch.randn(a.batch, a.width, device=dev,
                                                                      requires_grad=False),))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sync(dev)
    t0 = time.perf_counter()
    for i in range(a.steps):
        x, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    sync(dev)
    dt = time.perf_counter() - t0
    print(f"loss {float(loss.detach()):.4f}; {a.steps / dt:.1f} steps/s, {1e3 * dt / a.steps:.3f} ms/step "
          f"({'eager' if a.eager or dev.type != 'cuda' else 'graphed forward and backward'})", flush=True)


if __name__ == "__main__":
    main()
