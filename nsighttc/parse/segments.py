"""Recordings of one program made one after another, joined end to end: the time between them was not recorded.

PyTorch's profiler recipe, ``schedule(wait=1, warmup=1, active=3)`` with ``tensorboard_trace_handler(DIR)``, writes
one trace per cycle (``repeat`` left at 0: a cycle every five steps to the loop's end), each holding its active steps
only; the steps of each cycle's wait and warm-up, and the handler writing the last cycle's trace, run unrecorded
between them. Concatenated as they lie, the last step of each cycle reached across that stretch to the next cycle's
first: a transformer step of 16.3 ms plain (24.7 ms profiled) read "24 steady steps of 68.8 ms", the GPU busy 6%, the
cause "host busy outside any range"; a graph replay of 4.2 ms read 28.7 ms; two cycles eight steps apart, "1 slow step
... 0.35 s: host work outside any range" (H200, ``benchmarks/gpu/user_programs/sched_cycles.py``, gpu_steps_time.sh
users5; reports/steps_time). The joined timeline holds the recordings' own time only, in their order, so a step ends
where its recording does and no gap between recordings is anybody's idle time; the verdict says how many recordings
were joined and how long went unrecorded between them.

Joined only where the recordings do not overlap in time: the timelines of simultaneous processes (a job's ranks are
told apart before this, ``parse.ranks``) are left as they are. nsighttc's own runs record one timeline per process.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .parsed import Parsed
from .timeline import last_timestamp

# The columns that hold a moment on the recording's clock (everything else, ``duration_ns`` included, is kept).
TIME_COLUMNS = ("start_ns", "end_ns", "launch_ns")
# Recordings closer than this are one recording cut in two, not a stretch left unrecorded (a writer's flush).
MIN_GAP_NS = 1_000_000.0


def _extent(p: Parsed) -> tuple[float, float] | None:
    """The recording's first and last moment (its end as ``timeline.last_timestamp`` takes it: open ranges left out)."""
    tl = p.timeline
    lo = np.inf
    for df in (tl.gpu_ops, tl.api, tl.ranges):
        s = df["start_ns"].to_numpy(dtype="float64") if len(df) else np.zeros(0)
        s = s[np.isfinite(s)]
        if len(s):
            lo = min(lo, float(s.min()))
    hi = last_timestamp(tl.gpu_ops, tl.api, tl.ranges)
    return (lo, hi) if np.isfinite(lo) and hi >= lo else None


def _shifted(df: pd.DataFrame, by: float) -> pd.DataFrame:
    cols = [c for c in TIME_COLUMNS if c in df.columns]
    if not cols or not len(df):
        return df
    out = df.copy()
    for c in cols:  # (integer clocks stay integers: an nsys export's are)
        out[c] = out[c] - (int(round(by)) if out[c].dtype.kind in "iu" else by)
    return out


def join(parsed: list[Parsed]) -> tuple[list[Parsed], dict | None]:
    """``parsed`` with its timelines joined end to end where there are several and none overlaps another, and what was
    joined (``{"recordings", "unrecorded_ns", "gaps_ns"}``), else ``parsed`` as it is and None. Each later recording is
    moved back by the unrecorded time before it; its kernels with it."""
    tls = [p for p in parsed if p.timeline is not None]
    if len(tls) < 2 or any(getattr(p.timeline, "host_samples", None) is not None for p in tls):
        return parsed, None
    ext = [_extent(p) for p in tls]
    if any(e is None for e in ext):
        return parsed, None
    order = sorted(range(len(tls)), key=lambda i: ext[i][0])
    gaps, shift, shifts = [], 0.0, {}
    prev_end = None
    for i in order:
        lo, hi = ext[i]
        if prev_end is not None:
            gap = lo - prev_end
            if gap < 0:
                return parsed, None  # (recordings that overlap: simultaneous processes, not one after another)
            if gap >= MIN_GAP_NS:
                gaps.append(gap)
                shift += gap
        shifts[id(tls[i])] = shift
        prev_end = hi if prev_end is None else max(prev_end, hi)
    if not gaps:
        return parsed, None
    out = []
    for p in parsed:
        by = shifts.get(id(p), 0.0)
        if p.timeline is None or by == 0.0:
            out.append(p)
            continue
        tl = p.timeline
        tl2 = replace(tl, gpu_ops=_shifted(tl.gpu_ops, by), api=_shifted(tl.api, by),
                      ranges=_shifted(tl.ranges, by), marks=_shifted(tl.marks, by))
        out.append(replace(p, timeline=tl2, kernels=_shifted(p.kernels, by)))
    return out, {"recordings": len(tls), "unrecorded_ns": float(sum(gaps)), "gaps_ns": [float(g) for g in gaps]}


def note(info: dict) -> str:
    """The verdict's line on what was joined."""
    from ..durations import duration
    return (f"{info['recordings']} recordings made one after another (as a profiler's schedule writes one per cycle) "
            f"were joined end to end: the {duration(info['unrecorded_ns'])} between them "
            f"({len(info['gaps_ns'])} stretch{'es' if len(info['gaps_ns']) != 1 else ''}) was not recorded and is in "
            "no step, cause or share")
