"""Helpers shared by the wrappers: device choice, timing with CUDA synchronisation, and the annotate API
(imported from nsighttc when installed, else no-op stand-ins so a wrapper also runs on its own)."""
from __future__ import annotations

import contextlib
import time

class _NoAnnotate:
    """Ranges that mark nothing: a program as most are written (``--no-annotate``)."""

    @staticmethod
    def range(name):
        return contextlib.nullcontext()

    @staticmethod
    def step(name="step"):
        return contextlib.nullcontext()


try:
    from nsighttc import annotate
except ImportError:  # pragma: no cover - wrappers copied elsewhere
    annotate = _NoAnnotate()  # type: ignore


def annotations(on: bool):
    """The annotate API, or stand-ins that mark nothing (a wrapper run with ``--no-annotate``)."""
    return annotate if on else _NoAnnotate()


def free_port() -> str:
    """A free TCP port on loopback: a single-process run's rendezvous (two such runs side by side, as the tests run
    them under pytest-xdist, collided on a fixed port: EADDRINUSE). torchrun sets MASTER_PORT itself."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def pick_device(name: str | None):
    """The device asked for (``--device``); ``None``: CUDA where there is one, else the CPU."""
    import torch
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
    return torch.device(name)


def sync(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def timed(device, out: dict, key: str):
    sync(device)
    t0 = time.perf_counter()
    yield
    sync(device)
    out[key] = time.perf_counter() - t0


def fp16_autocast(device, on: bool):
    """fp16 autocast when asked, else no autocast context at all: not ``enabled=False``, which would switch
    off an autocast applied from outside (``nsighttc try --variant bf16-autocast``), as a plain fp32 program
    would not."""
    import torch
    return torch.autocast(device.type, dtype=torch.float16) if on else contextlib.nullcontext()


def amp_step(model, x, y, loss_fn, opt, scaler, device, amp: bool):
    """One training step: forward (fp16 autocast when ``amp``), backward through the GradScaler, update."""
    with fp16_autocast(device, amp):
        loss = loss_fn(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss


class SteadyClock:
    """The steady rate of a loop without a sync per step (which would change what is measured: a program does not
    wait for its GPU every step). The GPU is waited for only at the half-way step and at the last one; the rate is
    over the steps between them."""

    def __init__(self, steps: int, device):
        self.steps, self.device, self.n, self.t = steps, device, 0, {}

    def step(self) -> None:
        self.n += 1
        if self.n in (max(self.steps // 2, 1), self.steps):
            sync(self.device)
            self.t[self.n] = time.perf_counter()

    def per_second(self, items_per_step: float) -> float:
        a, b = max(self.steps // 2, 1), self.steps
        if a == b or a not in self.t or b not in self.t:
            return float("nan")
        return (b - a) * items_per_step / (self.t[b] - self.t[a])
