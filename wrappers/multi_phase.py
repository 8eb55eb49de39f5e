#!/usr/bin/env python3
"""A program of several phases, each with its own reason to be fast or slow: the timeline's test bench.

Real programs are not one loop. This one runs five phases, each an NVTX range with `step` ranges inside,
so a profiler verdict can be checked phase by phase against what the phase was built to do:

- `train_bf16`: an MLP trained under bf16 autocast, large matmuls back to back: GPU-bound;
- `graph_replay`: an fp16 MLP forward captured once in a CUDA graph and replayed every step (one
  `cudaGraphLaunch` per step): GPU-bound, and invisible to a reader that ignores graph executions;
- `item_sync`: an fp32 training step followed by `loss.item()` and host-side bookkeeping of the value
  that takes less time than the step's GPU work: without the sync it would overlap the next step, with
  it the GPU idles through it every step: sync-bound;
- `host_preprocess`: every batch is prepared with numpy on the host inside a `preprocess` range before a
  small GPU step: the GPU waits for `preprocess`;
- `tiny_kernels`: 200 elementwise ops on a small tensor per step: the host cannot launch as fast as the
  GPU runs them: launch-bound.

Prints one `phase <name>: <steps/s>` line per phase. `--device cpu` is a smoke mode (tiny sizes, no graph).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import annotate, pick_device, sync  # noqa: E402

PHASES = ("train_bf16", "graph_replay", "item_sync", "host_preprocess", "tiny_kernels")


def mlp(torch, width: int, depth: int, out: int = 10):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, out))


def train_bf16(torch, dev, steps: int, width: int, batch: int) -> None:
    model = mlp(torch, width, 4).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    for _ in range(steps):
        with annotate.step():
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def graph_replay(torch, dev, steps: int, width: int, batch: int) -> None:
    model = mlp(torch, width, 3).to(dev).half().eval()
    static_x = torch.randn(batch, width, device=dev, dtype=torch.half)
    if dev.type != "cuda":  # smoke mode: no CUDA graphs on the CPU
        with torch.no_grad():
            for _ in range(steps):
                with annotate.step():
                    model(static_x)
        return
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graphs asks
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)
        for _ in range(steps):
            with annotate.step():
                graph.replay()
        del static_y


def item_sync(torch, dev, steps: int, width: int, batch: int, host_ms: float) -> list[float]:
    model = mlp(torch, width, 2).to(dev)  # fp32 matmuls (TF32 off, PyTorch's default): a few ms of GPU work
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    history: list[float] = []
    for _ in range(steps):
        with annotate.step():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            value = loss.item()  # a device-to-host copy and a stream synchronisation, every step
            # host-side bookkeeping of the value (smoothing, logging to a tracker) for a fixed time: shorter
            # than the step's GPU work, so it would hide behind the next step if .item() had not emptied
            # the GPU's queue first
            t0 = time.perf_counter()
            acc = 0.0
            while time.perf_counter() - t0 < host_ms / 1e3:
                acc += (value - acc) * 1e-3
            history.append(acc)
    return history


def host_preprocess(torch, dev, steps: int, side: int, batch: int, passes: int) -> None:
    import numpy as np
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        with annotate.range("preprocess"):
            img = rng.random((batch, 3, side, side), dtype=np.float32)
            for _ in range(passes):  # normalise / augment on the host
                img = (img - img.mean()) / (img.std() + 1e-3)
                img = np.flip(img, axis=3) * 0.5 + 0.25
            img = np.ascontiguousarray(img)
        with annotate.step():
            xb = torch.from_numpy(img).to(dev)
            yb = torch.zeros(batch, dtype=torch.long, device=dev)
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def tiny_kernels(torch, dev, steps: int, n: int, ops: int) -> None:
    x = torch.ones(n, device=dev)
    for _ in range(steps):
        with annotate.step():
            for _ in range(ops):
                x = x * 1.0001 + 0.0001


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--phases", default=",".join(PHASES), help="comma-separated phases to run, in this order")
    ap.add_argument("--steps", type=int, default=30, help="steps per phase (graph_replay runs twice as many)")
    ap.add_argument("--host-ms", type=float, default=2.2, help="host bookkeeping after each .item() (ms)")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode, tiny sizes")
    ap.add_argument("--tf32", action="store_true",
                    help="allow TF32 for fp32 matmuls and convolutions (the change `nsighttc try --variant tf32` makes)")
    a = ap.parse_args(argv)
    if a.tf32:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
    import torch
    dev = pick_device(a.device)
    small = dev.type == "cpu"
    chosen = [p.strip() for p in a.phases.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(PHASES))
    if unknown:
        ap.error(f"unknown phase(s) {', '.join(unknown)}; choose from {', '.join(PHASES)}")
    steps = 3 if small else a.steps
    for phase in chosen:
        sync(dev)
        t0 = time.perf_counter()
        n = steps * 2 if phase == "graph_replay" else steps
        with annotate.range(phase):
            if phase == "train_bf16":
                train_bf16(torch, dev, n, 64 if small else 4096, 32 if small else 8192)
            elif phase == "graph_replay":
                graph_replay(torch, dev, n, 64 if small else 4096, 32 if small else 4096)
            elif phase == "item_sync":
                item_sync(torch, dev, n, 32 if small else 2048, 16 if small else 2048, 0.1 if small else a.host_ms)
            elif phase == "host_preprocess":
                host_preprocess(torch, dev, n, 8 if small else 64, 4 if small else 64, 1 if small else 4)
            elif phase == "tiny_kernels":
                tiny_kernels(torch, dev, n, 64 if small else 4096, 5 if small else 200)
            sync(dev)
        dt = time.perf_counter() - t0
        print(f"phase {phase}: {n / dt:.1f} steps/s ({n} steps, {dt:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
