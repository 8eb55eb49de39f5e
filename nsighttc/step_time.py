"""Which steady step a reader is shown, and the recording's cost is judged on: the host's or the GPU's.

A step family's iteration runs from one step's start on the host to the next one's (``analysis.timeline.steps``). Where
the host waits for the GPU each step (a sync, a launch queue that is full) that is the step's time. Where it does not,
the host runs ahead: a loop that replays one CUDA graph a step launched one every 386 us while the GPU finished one
every 1.11 ms (H200, ``wrappers/graph_replay.py``; plain 1.12 ms a step; reports/steps_time/graph_sync), and the
recording's cost read "0.41x". Then the step as the GPU finished it (``median_effective_ns``: from one step's work done
on the GPU to the next's) is the step.
"""
from __future__ import annotations

HOST_AHEAD = 1.2  # the GPU finished the steps at least this much slower than the host started them
# ... or less, where the work the host had queued grew through the steps: the GPU finished this share of the
# difference times the steps or more after the host's last step (``host_ahead_ns``). A graph-replaying loop's host
# started a replay every 1.08-1.13 ms while the GPU finished one every 1.20 ms (under 1.2x): the report showed the
# host's step, "the recording's slowdown 1.01x" and "no faster (0.95x)", where on the GPU's clock the recording cost
# 1.06-1.07x (H200, wrappers/graph_replay.py, reports/steps_time); the GPU was still 10 ms behind at the end.
QUEUE_GREW = 0.5
MIN_AHEAD = 1.02  # ... and the GPU's step at least this much longer (two medians of a loop that syncs every step)


def typical_step(steps: dict) -> tuple[float | None, bool]:
    """(the steady step in ns, whether it is the GPU's because the host ran ahead of it) of a step family's dict."""
    it, eff = steps.get("median_iteration_ns"), steps.get("median_effective_ns")
    if it and eff and (eff > HOST_AHEAD * it or (eff > MIN_AHEAD * it and _queue_grew(steps, float(eff), float(it)))):
        return float(eff), True
    return (float(it) if it else None), False


def _queue_grew(steps: dict, eff: float, it: float) -> bool:
    """The GPU was behind the host at the steady steps' end by about what the steps' difference (GPU step ``eff``,
    host step ``it``) adds up to: the host ran ahead all along, not one slow step's work left over (which never
    exceeds one step)."""
    n = int(steps.get("count") or 0) - int(steps.get("warmup_steps") or 0)
    ahead = float(steps.get("host_ahead_ns") or 0.0)
    return n >= 3 and ahead > eff and ahead >= QUEUE_GREW * (eff - it) * n
