"""A GPU-bound training loop recorded by hand over a few of its steps, the recording begun while the GPU still had
steps queued: the host runs ahead of the GPU (no sync but a logged loss every --log-every steps), so when
``profiler.start()`` is called at step --window-at, the kernels of the steps launched before it are still to run, and
the recording holds none of them. Its first recorded kernels start only once they are done, and the first ``.item()``
waits for them too: the GPU looks idle in the recording while the host waits in a copy.

    python3 async_window.py                     # plain: ms/step
    python3 async_window.py --trace T.json      # steps --window-at .. +--window recorded by torch.profiler

An MLP of 4 Linear(8192, 8192) layers in bf16 with SGD, batch 4096: about 10 ms a step on an H200, GPU-bound.
"""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--log-every", type=int, default=60)
    ap.add_argument("--window-at", type=int, default=170)
    ap.add_argument("--window", type=int, default=40)
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--trace", default=None)
    a = ap.parse_args()

    import torch
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(a.batch, a.width, device=dev, dtype=torch.bfloat16)
    prof = None
    t0 = time.perf_counter()
    for step in range(a.steps):
        if a.trace and step == 5:  # the profiler's first start sets CUPTI up (a second or so): not in the window
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                    torch.profiler.ProfilerActivity.CUDA]):
                torch.zeros(1, device=dev).add_(1)
        if a.trace and step == a.window_at:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.start()
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.log_every == a.log_every - 1:
            print(f"step {step + 1}: loss {loss.item():.4f}", flush=True)
        if prof is not None and step == a.window_at + a.window - 1:
            prof.stop()
            prof.export_chrome_trace(a.trace)
            prof = None
        if step == 19:
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
    if dev == "cuda":
        torch.cuda.synchronize()
    n = a.steps - 20
    print(f"{1e3 * (time.perf_counter() - t0) / n:.2f} ms/step over {n} steps", flush=True)


if __name__ == "__main__":
    main()
