#!/usr/bin/env python3
"""A training loop whose slow steps are not at new shapes: it saves a checkpoint every ``--save-every`` steps
(``torch.save`` of the model's and the optimizer's state, as users write it), and its storage stalls every
``--stall-every`` batches (a read that takes ``--stall-ms``; a DataLoader without workers). The typical step is
fast; the checkpoints and the stalls hold much of the loop's time, and a profiler's median step hides them.

The program times each step with a sync (so the slow ones can be told apart) and prints the typical (median) step,
the time its checkpoint steps and its stalled steps took beyond it, and the loop's wall time: what a report's account
of the loop's time must add up to. No nsighttc marks.

    python wrappers/checkpoint_loop.py                 # 60 steps, a checkpoint every 15, a stall every 10 batches
    python wrappers/checkpoint_loop.py --save-every 30 # the fix "save less often", half as often
    python wrappers/checkpoint_loop.py --save-mode thread   # the fix "off the loop": pinned copies, a writer thread
    python wrappers/checkpoint_loop.py --save-mode copy     # no checkpoint: the weights averaged on the host
    python wrappers/checkpoint_loop.py --device cpu    # smoke mode (tiny model, a few steps)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


class Slow:
    """Synthetic samples; every ``every``-th batch's first sample takes ``ms`` to read (slow storage)."""

    def __init__(self, n: int, dim: int, batch: int, every: int, ms: float):
        self.n, self.dim, self.batch, self.every, self.ms = n, dim, batch, every, ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        if self.every and i % (self.batch * self.every) == 0 and i:
            time.sleep(self.ms / 1e3)
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % 10


class Writer:
    """``--save-mode thread``: a checkpoint off the loop's critical path, as nsighttc's `checkpoint-in-loop` advice
    says for a loop that writes its own: the state's tensors copied into pinned host buffers (allocated at the first
    checkpoint, reused) with ``non_blocking=True``, and ``torch.save`` on a thread once the copies are done. The next
    checkpoint waits for the last one's write."""

    def __init__(self):
        self.bufs, self.thread = None, None

    def save(self, state, path) -> None:
        import threading
        import torch
        from torch.utils._pytree import tree_flatten, tree_unflatten
        leaves, spec = tree_flatten(state)
        if self.thread is not None:
            self.thread.join()
        if self.bufs is None:
            self.bufs = [torch.empty(x.shape, dtype=x.dtype, pin_memory=x.is_cuda) if torch.is_tensor(x) else None
                         for x in leaves]
        staged = tree_unflatten([b.copy_(x, non_blocking=True) if b is not None else x
                                 for x, b in zip(leaves, self.bufs)], spec)
        done = torch.cuda.Event() if torch.cuda.is_available() else None
        if done is not None:
            done.record()

        def write():
            if done is not None:
                done.synchronize()
            torch.save(staged, path)
        self.thread = threading.Thread(target=write, name="checkpoint-writer")
        self.thread.start()

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (tiny model)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--dim", type=int, default=4096, help="width of the MLP (its state grows with the square)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--save-every", type=int, default=15, help="steps between checkpoints (0: none)")
    ap.add_argument("--stall-every", type=int, default=10, help="batches between slow reads (0: none)")
    ap.add_argument("--stall-ms", type=float, default=150.0, help="how long a slow read takes")
    ap.add_argument("--save-mode", choices=["sync", "thread", "copy"], default="sync",
                    help="sync: torch.save in the loop, as users write it; thread: pinned copies and a writer thread; "
                         "copy: no checkpoint, the model's weights copied to the host and averaged there (an EMA kept "
                         "on the CPU): as many bytes to the host as a save of the model, and no torch.save")
    a = ap.parse_args()
    import torch
    device = pick_device(a.device)
    if device.type == "cpu":
        a.steps, a.batch, a.dim, a.layers, a.save_every = min(a.steps, 8), min(a.batch, 8), min(a.dim, 64), 2, \
            min(a.save_every, 4) if a.save_every else 0
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(*[m for _ in range(a.layers) for m in (nn.Linear(a.dim, a.dim), nn.ReLU())],
                          nn.Linear(a.dim, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(Slow(a.steps * a.batch, a.dim, a.batch, a.stall_every, a.stall_ms),
                                       batch_size=a.batch, num_workers=0)
    times, kinds = [], []
    writer = Writer() if a.save_mode == "thread" else None
    ema = None  # --save-mode copy: the weights' moving average, on the host
    with tempfile.TemporaryDirectory() as d:
        t_loop = t0 = time.perf_counter()
        for step, (x, y) in enumerate(data, 1):  # (each iteration timed from the last one's end: its fetch included)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            saved = bool(a.save_every and step % a.save_every == 0)
            if saved and a.save_mode == "copy":
                host = {k: v.detach().cpu() for k, v in model.state_dict().items()}
                if ema is None:
                    ema = host
                else:
                    for k, v in host.items():
                        ema[k].mul_(0.9).add_(v, alpha=0.1)
            elif saved:
                state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
                if writer is not None:
                    writer.save(state, Path(d) / "checkpoint.pt")
                else:
                    torch.save(state, Path(d) / "checkpoint.pt")
            sync(device)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            kinds.append("checkpoint" if saved else "stall" if a.stall_every and step > 1 and
                         (step - 1) % a.stall_every == 0 else "")
        sync(device)
        if writer is not None:
            writer.close()
        loop = time.perf_counter() - t_loop
    plain = [t for t, k in zip(times[1:], kinds[1:]) if not k]
    typical = statistics.median(plain or times[1:] or times)  # (every step saving: the median of them all)
    beyond = {k: sum(t - typical for t, kk in zip(times, kinds) if kk == k) for k in ("checkpoint", "stall")}
    n = {k: kinds.count(k) for k in ("checkpoint", "stall")}
    print(f"checkpoint_loop {a.layers}x{a.dim} batch={a.batch} steps={len(times)} save={a.save_mode}/"
          f"{a.save_every}: typical step {1e3 * typical:.2f} ms; "
          f"{n['checkpoint']} {'host copies' if a.save_mode == 'copy' else 'checkpoints'} "
          f"{beyond['checkpoint']:.3f} s beyond it; {n['stall']} stalled reads "
          f"{beyond['stall']:.3f} s beyond it; "
          f"loop {loop:.3f} s, {1e3 * loop / len(times):.2f} ms/step; loss {float(loss.detach()):.4f}")


if __name__ == "__main__":
    main()
