"""The ranks of a distributed job agree on their windows: rank 0 decides, every other rank does what it decided.

Why: each rank's window (``runtime.window``) is chosen from that rank's own step times, and the ranks' times differ
a little. Left alone, two ranks of a DDP job chose windows of 33 and 34 steps (this repository's CPU machine, torch
2.13, gloo, ~60 ms steps: ``tests/runtime/test_window_ranks.py``); the first stopped after its window, and the other
died in its next all-reduce ("Connection closed by peer"; with NCCL it would have waited for its watchdog). A
program that is stopped must be stopped at the same step on every rank.

How: once the program's default process group exists, every step boundary the window sees gets a number (the
same on every rank: the ranks run the same steps). Rank 0 writes what its window does at boundary N into the
group's own key-value store (``nsighttc.window/N``: nothing, start a window of so many steps, end it, stop); the
other ranks wait for that key at their boundary N and do the same. The ranks of a job that all-reduces every step
are within a step of each other, so the wait is one store round trip (~0.1 ms on one host) while the window is
undecided (in the warm-up: a late rank 0 holds the others there), none inside the window (its steps are counted
alike on every rank: a wait there would show rank 0's lateness as the other ranks' host time), and nothing once the
windows are done (the state machine is then ``enabled = False``; a named phase's grace is agreed on again). Before the group exists, no
collective couples the ranks and each decides alone (a window started then is counted by each rank alone).
A rank that waits ``FOLLOW_TIMEOUT_S`` for rank 0 (a rank that runs steps the others do not) stops following: it
says so, decides alone from then on, and where its window ends it ends its recording and lets the program run on
(as ``--full-run`` does) instead of stopping a rank the others may still wait for.
"""
from __future__ import annotations

import json
import sys

from .lines import say

KEY_PREFIX = "nsighttc.window/"
FOLLOW_TIMEOUT_S = 1800.0  # as long as gloo's own default collective timeout: rank 0 may be busy alone (a checkpoint)


class RankAgreement:
    """One rank's side of the agreement. ``group``: a callable giving ``(store, rank)`` once the default process
    group exists, else None (tests give their own store)."""

    def __init__(self, group=None, timeout_s: float = FOLLOW_TIMEOUT_S, emit=None):
        self._group = group or default_group
        self.timeout_s = timeout_s
        self.emit = emit or say
        self.store = None
        self.rank: int | None = None
        self.seq = 0              # boundaries since the group exists
        self.following = True     # False: gave up waiting for rank 0

    def agree(self, action):
        """This rank's ``action`` for the current boundary (``runtime.window``'s decision): rank 0's stands."""
        if not self.following:
            return action
        if self.store is None:
            got = self._group()
            if got is None:
                return action  # no process group yet: nothing couples the ranks
            self.store, self.rank = got
        key = f"{KEY_PREFIX}{self.seq}"
        self.seq += 1
        if self.rank == 0:
            self.store.set(key, json.dumps(action))
            return action
        from datetime import timedelta
        try:
            self.store.wait([key], timedelta(seconds=self.timeout_s))
            return json.loads(self.store.get(key))
        except Exception as exc:  # noqa: BLE001 - rank 0 never got here (or is gone): decide alone from now on
            self.following = False
            self.emit(f"nsighttc.launch: window: rank {self.rank} stopped following rank 0's window at step "
                      f"boundary {self.seq - 1} ({type(exc).__name__}: {exc}); this rank decides alone and is not stopped")
            return None


def default_group():
    """``(store, rank)`` of the program's default process group, or None while it does not exist."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        from torch.distributed import distributed_c10d
        return distributed_c10d._get_default_store(), dist.get_rank()
    except Exception:  # noqa: BLE001 - a torch without the store API: the ranks decide alone
        return None
