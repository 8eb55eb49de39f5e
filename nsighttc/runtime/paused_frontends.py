"""A program waiting at its gate pauses the profiler frontends above it (SIGSTOP) and lets them go on when it leaves.

Why: a first run starts the Nsight Compute pass and the replay beside the timeline run, each under an ``ncu``
frontend, each waiting at a gate until the timeline is recorded; and ``ncu``'s frontend spins a core while its program
waits. Put in the idle scheduling class (``collect.yield_cores``) it still slowed the program it was meant to spare:
on the lent H200 (a 16-vCPU virtual machine, one thread a core as the guest sees it; ``benchmarks/gpu/gpu_steps_time.sh
firstcost``, reports/steps_time) a transformers pipeline fed one photo a call ran at 56.2 images/s alone and 29.9
beside two idle-class busy loops; its first run, one frontend spinning at 0.6-0.7 of a core through its window, timed
27.1 ms a step recorded (21.2 unrecorded) where its cached run timed 12 ms (10.4), and used 10 cores in its window
against 8 (its OpenMP threads spin at barriers that a thread, slowed, reaches late); with nothing beside it
(``--overlap none``) 15.6 ms (9.4). The idle class orders the guest's threads, not the host's cores the vCPUs share.
A stopped process uses no CPU at all.

Who is paused: the processes between the program and the nsighttc process that owns the gate
(``NSIGHTTC_GATE_OWNER``), that is the frontends nsighttc started the program under (``ncu`` and any wrapper of it),
never the owner, and nothing when the owner is not an ancestor (the program was started otherwise, or its nsighttc
is gone). They are paused only while the program waits (it is then in no CUDA call and talks to none of them), and
the program lets them go on (SIGCONT) whatever ends its wait: 'go', 'stop', its owner gone, an interrupt (``finally``).
``NSIGHTTC_PAUSE_FRONTENDS=0`` turns it off. Standard library only: this runs inside the user's program.
"""
from __future__ import annotations

import os
import signal
import time

from ..record_format import FRONTENDS_PAUSED
from .lines import say

OFF_ENV = "NSIGHTTC_PAUSE_FRONTENDS"
MAX_DEPTH = 16   # frontends above a program: ncu's wrapper script, the frontend, its launcher (3 seen)


def parent(pid: int) -> int | None:
    """The parent of ``pid`` (from /proc: the field after the name, which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
        return int(raw[raw.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def frontends() -> list[int]:
    """The processes between this one and its gate's owner, nearest first; [] where the owner is not an ancestor."""
    owner = os.environ.get("NSIGHTTC_GATE_OWNER", "")
    if not owner.isdigit() or os.environ.get(OFF_ENV) == "0" or not hasattr(signal, "SIGSTOP"):
        return []
    chain: list[int] = []
    pid = os.getppid()
    for _ in range(MAX_DEPTH):
        if pid == int(owner):
            return chain
        if pid is None or pid <= 1:
            return []
        chain.append(pid)
        pid = parent(pid)
    return []


class Paused:
    """``with Paused():`` the frontends above this program are stopped for the block, and continued after it."""

    def __init__(self):
        self.pids: list[int] = []
        self._since = 0.0

    def __enter__(self) -> "Paused":
        for pid in frontends():
            try:
                os.kill(pid, signal.SIGSTOP)
                self.pids.append(pid)
            except OSError:
                continue
        self._since = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self.resume()

    def resume(self) -> None:
        """Continue what was stopped (farthest first: a frontend's wrapper before the frontend under it)."""
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                continue
        if self.pids:
            say(f"{FRONTENDS_PAUSED}{time.monotonic() - self._since:.2f} s ({len(self.pids)} processes)")
        self.pids = []
