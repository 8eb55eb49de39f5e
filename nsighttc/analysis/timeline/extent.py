"""Where a recording's time begins and ends, and whose: the threads that launched its CUDA work and their calls
as one union, the step families' steady (or warm-up) intervals merged, the recording's first and last moments
(start-up is counted from the first, the loop's time accounting ends at the last)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import intervals


def launching_threads(api: pd.DataFrame) -> set[int]:
    """The host threads that made the recording's CUDA calls (at least a tenth of them each): whose stacks count."""
    if api.empty or "tid" not in api:
        return set()
    counts = pd.to_numeric(api["tid"], errors="coerce").dropna().astype("int64").value_counts()
    return {int(t) for t, n in counts.items() if n >= 0.1 * counts.sum()}


def api_union(api: pd.DataFrame) -> intervals.Union | None:
    """The launching threads' CUDA calls as one union of intervals (None without calls or their threads)."""
    threads = launching_threads(api)
    if not threads or "end_ns" not in api:
        return None
    tid = pd.to_numeric(api["tid"], errors="coerce").to_numpy()
    mine = np.isin(tid, np.array(sorted(threads), dtype="float64"))
    return intervals.union(api["start_ns"].to_numpy(dtype="float64")[mine], api["end_ns"].to_numpy(dtype="float64")[mine])


def union_of(fams: list[dict], key: str) -> intervals.Union:
    """The families' ``_steady`` (or ``_warm``) intervals, merged."""
    return intervals.union(np.concatenate([f[key][0] for f in fams] or [np.array([])]),
                           np.concatenate([f[key][1] for f in fams] or [np.array([])]))


def first_time(ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame, lo: float) -> float:
    """The earliest moment the recording holds: where start-up is counted from (the launcher's range opens
    before the program's first line; a recording made elsewhere starts where its profiler started)."""
    firsts = [float(t["start_ns"].min()) for t in (ops, api, ranges) if len(t)]
    firsts = [f for f in firsts if np.isfinite(f)]
    return min(firsts + [lo]) if firsts else lo


def last_time(ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame, hi: float) -> float:
    """The last moment the recording holds (its GPU's last work or its host's last call): where the loop's time
    accounting ends."""
    lasts = [float(t["end_ns"].max()) for t in (ops, api, ranges) if len(t)]
    lasts = [x for x in lasts if np.isfinite(x)]
    return max(lasts + [hi])
