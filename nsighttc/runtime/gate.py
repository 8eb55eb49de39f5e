"""The gate a program waits at before its GPU work (the default run's Nsight Compute pass, started beside the timeline
run, and the replay's process): who opens it (``NSIGHTTC_GATE_OWNER``), what it says besides go or stop (settings
the window takes: ``window-warmup=N``, ``window=off``), and the wait at PyTorch's first CUDA use."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

GATE_POLL_S = 0.01


def owner_alive() -> bool:
    """The nsighttc process that opens the gate (``NSIGHTTC_GATE_OWNER``) still exists: a waiting program
    must not outlive an nsighttc that was killed (seen when a run was SIGKILLed: gated programs waited on)."""
    owner = os.environ.get("NSIGHTTC_GATE_OWNER")
    if not owner:
        return True
    try:
        os.kill(int(owner), 0)
        return True
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True


# What the gate said besides 'go' (``key=value`` words after it): the Nsight Compute pass learns there how many
# warm-up steps the timeline run saw (``window-warmup=N``), or that the program has no steps (``window=off``).
GATE_SETTINGS: dict[str, str] = {}
WINDOW: list = [None]  # the window of steady steps, once made (the gate's settings apply to it)


def wait_at_gate(gate: Path) -> bool:
    """Block until ``gate`` holds 'go' (True) or 'stop' (False); 'stop' too when its owner is gone. The profiler
    frontends above the program are paused meanwhile (``paused_frontends``: ncu's spins a core while it waits)."""
    from .paused_frontends import Paused
    with Paused():
        return _wait(gate)


def _wait(gate: Path) -> bool:
    checks = 0
    while True:
        checks += 1
        if checks % 50 == 0 and not owner_alive():
            return False
        words = _words(gate)
        if words and words[0] in ("go", "stop"):
            GATE_SETTINGS.update(w.split("=", 1) for w in words[1:] if "=" in w)
            if words[0] == "go" and WINDOW[0] is not None:
                apply_settings(WINDOW[0])
            return words[0] == "go"
        time.sleep(GATE_POLL_S)


def said(gate: Path) -> bool:
    """``gate`` already holds 'go' or 'stop' (a look, no wait): whoever waits there need not prepare any longer."""
    words = _words(gate)
    return bool(words) and words[0] in ("go", "stop")


def write_gate(gate: Path, words: str) -> None:
    """Say ``words`` at ``gate`` in one step: written beside it, then renamed over it, so a reader polling the
    gate never reads it half written (a test read an empty gate between its creation and its write; a reader
    could take 'go' without the settings after it)."""
    part = gate.with_name(f"{gate.name}.{os.getpid()}.{threading.get_ident()}.part")  # (one per writing thread)
    try:
        part.write_text(words)
        os.replace(part, gate)
    except OSError:
        part.unlink(missing_ok=True)


def _words(gate: Path) -> list[str]:
    """What ``gate`` says so far (nothing while it does not exist)."""
    try:
        return gate.read_text().split()
    except OSError:
        return []


def apply_settings(window) -> None:
    if GATE_SETTINGS.get("window") == "off":
        window.disable()
    elif GATE_SETTINGS.get("window-warmup", "").isdigit():
        window.warmup = int(GATE_SETTINGS["window-warmup"])


def at_first_cuda_use(gate: Path, after_init: bool = False) -> bool:
    """Run the program until PyTorch first initialises CUDA, and wait at the gate there (``after_init``: once
    the CUDA context exists, still before any GPU work of the program). False when torch is missing (then
    the gate is at the start)."""
    try:
        import torch
        import torch.cuda
    except Exception:
        return False
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    original = torch.cuda._lazy_init
    state = {"passed": False}

    def gated_lazy_init(*args, **kwargs):
        if not state["passed"]:
            state["passed"] = True
            torch.cuda._lazy_init = original
            result = failure = None
            if after_init:
                try:
                    result = original(*args, **kwargs)
                except BaseException as exc:  # no usable GPU: the program meets the error after the gate
                    failure = exc
            if not wait_at_gate(gate):
                os._exit(0)  # nothing to measure: leave without running any GPU work
            torch.set_num_threads(threads)
            if failure is not None:
                raise failure
            if after_init:
                return result
        return original(*args, **kwargs)

    torch.cuda._lazy_init = gated_lazy_init
    return True
