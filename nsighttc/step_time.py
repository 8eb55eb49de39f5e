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


def typical_step(steps: dict) -> tuple[float | None, bool]:
    """(the steady step in ns, whether it is the GPU's because the host ran ahead of it) of a step family's dict."""
    it, eff = steps.get("median_iteration_ns"), steps.get("median_effective_ns")
    if it and eff and eff > HOST_AHEAD * it:
        return float(eff), True
    return (float(it) if it else None), False
