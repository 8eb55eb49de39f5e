"""Steps the program ran with the recording off, timed as the window's steps are: what the recording itself costs each
step, measured in the run, not guessed from a plain run beside it whose own speed varies by a third.

Two stretches of a run are unrecorded:
- **After the last window** (``AfterWindow``): under torch.profiler the recording is stopped (its trace written only
  after these steps: ``runtime.trace_writing``) and the program runs on for ``UNRECORDED_STEPS`` steps (the first,
  just after the profiler's stop, not counted), or for ``UNRECORDED_MAX_S`` with at least ``UNRECORDED_MIN`` of them
  (one, past three times that), then it is stopped (``--full-run``: runs on). In a distributed job, as many steps on
  every rank: the count rank 0 decided at the window's start (``after_steps``, from its step time, about
  ``UNRECORDED_MAX_S`` of steps), so the ranks stop together; one rank timing more steps would wait alone in its next
  collective.
- **Before the first window** (``before_window``): a run that records from the window (``--record-from window``, a
  second run the evidence cache knows) ran its warm-up unrecorded; its last steady steps are the program's unrecorded
  speed, in a distributed job too, at no cost. Where any ran, the steps timed after the window are only as many as
  make ``BEFORE_WINDOW_MIN`` with them, ``UNRECORDED_MIN`` at least (``runtime.window``; a generation loop still times
  its decode calls after it), and the profile run takes both stretches' median. Two H200s, FSDP2 (40 steps) cached:
  one step per rank before the window, and the 12 steps timed after it took 0.9-1.0 s of a 15-17 s run whose plain
  job took 13-14 s (reports/profile_overhead/torchrun_cost/2026-11-27, call 8).

On an H100 a generate() loop's recorded model calls took 21-27 ms against 12-18 ms in plain runs whose own speed varied
by a third from run to run (reports/structural call_cost). 24 steps after the window, not 8: with --full-run, the
program's own TPOT over its requests against 8 decode calls timed after the window was 0.83-1.23x, the first calls
after the profiler's stop slower (34 -> 27 ms) on a host whose speed moved within the run (reports/host_frames
call_fullrun51); the time cap keeps the cost of long steps to about a second.
"""
from __future__ import annotations

# Steps timed on the host are the GPU's only where the host waits for it (a sync, or a launch queue that is full). A
# loop that replays one CUDA graph a step launches one thing per step: the host runs about a thousand steps ahead, and
# its step boundaries came 61.6 us apart while each replay took 1.13 ms on the GPU (H200, wrappers/graph_replay.py:
# "the recording's slowdown 13.72x", reports/steps_time graph). So the stretch after the window is timed between two
# device synchronisations (``synced``): its steps' host times are scaled to the synchronised span, once, at its end.
# Scaled, they are still launch times where the host ran ahead: only their sum is the GPU's (``host_share``, the host's
# times over the span, tells; ``profile.unrecorded_steps.unrecorded_steps`` then takes the span over the steps).
UNRECORDED_STEPS = 24
UNRECORDED_MIN = 2
UNRECORDED_MAX_S = 1.0
BEFORE_WINDOW_MAX = 8   # the warm-up's last unrecorded steps said at the window's start (the steadiest ones)
BEFORE_WINDOW_MIN = 3   # unrecorded warm-up steps enough for a median (the window's own steadiness rule: 3 agreeing)


def after_steps(median_s: float | None) -> int:
    """How many steps a distributed job's ranks time after the window (the skipped first included): about
    ``UNRECORDED_MAX_S`` of steps at ``median_s``, between ``UNRECORDED_MIN`` and ``UNRECORDED_STEPS`` counted."""
    import math
    n = UNRECORDED_STEPS if not median_s or median_s <= 0 else math.ceil(UNRECORDED_MAX_S / median_s)
    return 1 + max(UNRECORDED_MIN, min(UNRECORDED_STEPS, n))


class AfterWindow:
    """The steps of phase ``key`` after the last window, while they run: their durations and kinds (a generation
    loop's "prefill"/"decode"); ``then``: "stop" (the program is stopped after them) or "continue"; ``count``: exactly
    so many steps (a distributed job's ranks, the first included), else as many as the time allows."""

    def __init__(self, key: tuple, now: float, kind: str | None, then: str, count: int | None = None,
                 sync=None, clock=None):
        self.key, self.last, self.kind, self.then, self.count = key, now, kind, then, count
        self.durations: list[float] = []
        self.kinds: list[str | None] = []
        self.data: list[float] = []  # each step's wait in DataLoader fetches (``Window.add_data``)
        self.first_at: float | None = None
        self.sync, self.clock = sync, clock  # the device's synchronisation and the clock (``synced``)
        self.synced_from: float | None = None
        self.host_share: float | None = None  # the counted steps' host times over the synchronised span, once scaled

    def step(self, now: float, took: float | None, next_kind: str | None, data: float = 0.0) -> bool:
        """A step of the phase ended at ``now`` (``took``: its own time where known; ``data``: its wait in DataLoader
        fetches): True once enough are timed."""
        self.durations.append(took if took is not None else now - self.last)
        self.data.append(data)
        self.kinds.append(self.kind)
        self.last, self.kind = now, next_kind
        if len(self.durations) == 1 and self.sync is not None and took is None:
            # the skipped first step ends: the GPU drains here, so the counted steps start with an empty queue
            self.sync()
            self.synced_from = self.last = self.clock()
        if len(self.durations) == 2:
            self.first_at = now - self.durations[-1]
        if self.count is not None:
            done = len(self.durations) >= self.count
        else:
            counted = len(self.durations) - 1  # (the first held the profiler's stop)
            spent = now - self.first_at if self.first_at is not None else 0.0
            done = counted >= UNRECORDED_STEPS or (counted >= UNRECORDED_MIN and spent >= UNRECORDED_MAX_S) or \
                (counted >= 1 and spent >= 3 * UNRECORDED_MAX_S)  # (steps of seconds: one is enough)
        if done:
            self._synchronised()
        return done

    def _synchronised(self) -> None:
        """The counted steps' host times scaled to the span between the two synchronisations (the GPU's time for
        them), where the stretch began with one."""
        if self.synced_from is None or len(self.durations) < 2 or self.sync is None:
            return
        self.sync()
        span = self.clock() - self.synced_from
        host = sum(self.durations[1:])
        if host > 0 and span > 0:
            self.durations[1:] = [d * span / host for d in self.durations[1:]]
            self.host_share = host / span

    def event(self, recorder: str) -> dict | None:
        """The ``unrecorded`` event (what the profile run reads: ``profile.unrecorded_steps.unrecorded_steps``), None
        before two steps ran."""
        if len(self.durations) < 2:
            return None
        doc = {"event": "unrecorded", "phase": "/".join(self.key), "recorder": recorder,
               "steps": len(self.durations) - 1, "durations_ms": [round(d * 1e3, 4) for d in self.durations[1:]],
               "skipped_ms": round(self.durations[0] * 1e3, 3)}
        if self.host_share is not None:  # (synchronised: the steps' times scaled to the span)
            doc["synced"] = True
            doc["host_share"] = round(self.host_share, 4)  # (under 1: the host ran ahead, ``profile.window``)
        if any(self.kinds[1:]):
            doc["kinds"] = self.kinds[1:]
        if any(self.data[1:]):  # (the waits unscaled: a synchronised stretch scales the host's step times only)
            doc["data_ms"] = [round(d * 1e3, 4) for d in self.data[1:]]
        return doc


def before_window(durations: list[float], recorded: list[bool], compiled: list[bool], first: int) -> list[float]:
    """The warm-up's last steps that ran unrecorded and compiled nothing, from step index ``first`` on (the
    steps never steady, ``runtime.window.MIN_WARMUP``, left out): at most ``BEFORE_WINDOW_MAX``, in seconds."""
    out = [d for d, r, c in zip(durations[first:], recorded[first:], compiled[first:]) if not r and not c]
    return out[-BEFORE_WINDOW_MAX:]
