"""What this run cost, said beside the verdict: its time to the verdict against a plain run of what the program ran.

Why: a user who pays 1.8-2.4x a plain run on a first run stops running the tool by default; the report says
what the run took and where the extra went, so that a costly run is seen, and why. A plain run of the program is
not made: it is estimated from this run's own measurements. The program ran ``program_s`` (to its trace, or its
end) under the recording; the steps recorded in the window were timed against steps the program ran unrecorded
(``steps.unrecorded``), so the window's part is counted at the unrecorded speed; what ran before the window (start-up,
warm-up) is counted as it ran, which for a first run (operators recorded with their arguments until the window) is
slower than plain: the estimate of the plain time is then high, and the ratio a lower bound (said so).
"""
from __future__ import annotations


def run_cost(timeline: dict | None, done: list, elapsed_s: float) -> dict | None:
    """``{elapsed_s, program_s, after_program_s, plain_estimate_s, ratio, lower_bound, how}`` (ratio None where no
    plain estimate can be made), or None without a timeline pass."""
    p = next((p for p in done if getattr(p, "mode", None) == "timeline"), None)
    if p is None:
        return None
    program_s = p.trace_written_s or p.seconds or 0.0
    if program_s <= 0:
        return None
    tl = timeline or {}
    steps = tl.get("steps") or {}
    u = steps.get("unrecorded") or {}
    window_ns = (tl.get("loop_time") or {}).get("total_ns") or tl.get("wall_ns") or 0.0
    slow = u.get("recording_slowdown")
    out = {"elapsed_s": round(elapsed_s, 2), "program_s": round(program_s, 2),
           "after_program_s": round(max(0.0, elapsed_s - program_s), 2), "plain_estimate_s": None, "ratio": None,
           "lower_bound": False, "how": None}
    if slow and window_ns:
        window_s = window_ns / 1e9
        plain = program_s - window_s * (1.0 - 1.0 / max(slow, 1.0))
        out["plain_estimate_s"] = round(plain, 2)
        out["ratio"] = round(elapsed_s / plain, 2) if plain > 0 else None
        first = getattr(p, "operators_until_s", None) is not None  # (operators recorded until the window)
        out["lower_bound"] = first
        out["how"] = (f"its window's steps at the speed of its unrecorded ones, {slow:.2f}x faster" if slow > 1 else
                      "its unrecorded steps were no faster than its recorded ones")
        if first:
            out["how"] += ("; its start-up and warm-up as they ran, recorded with the operators' arguments for the "
                           "replay, so the ratio is a lower bound")
    return out

