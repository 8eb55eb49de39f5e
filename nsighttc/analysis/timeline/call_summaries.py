"""The run's synchronising calls, pageable copies and launch-bound gaps, summed over the whole recording by name and by
innermost range (the report's sync / copies / launch sections), from the idle pieces (``idle.Idle``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..grouping import aggregate
from . import idle


def _by_range(paths: np.ndarray, pc: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, dict]:
    names = np.where(pc >= 0, paths[np.clip(pc, 0, None)] if len(paths) else "", "(no range)")
    frame = pd.DataFrame({"range": names, **values})
    g = aggregate(frame.groupby("range"), **{k: (k, "sum") for k in values}, n=("range", "size"))
    return {str(r): {"calls": int(row.n), **{k: float(getattr(row, k)) for k in values}} for r, row in g.iterrows()}


def sync_summary(p: idle.Idle) -> dict:
    """Synchronising calls and device-to-host copies over the whole run, by name and by innermost range."""
    s, d = p.calls.sync, p.calls.dtoh
    by_name = aggregate(s.groupby("name"), calls=("ns", "size"), ns=("ns", "sum"))
    by_range = {r: {"calls": v["calls"], "ns": v["ns"]} for r, v in
                _by_range(p.paths, s["pc"].to_numpy(), {"ns": s["ns"].to_numpy()}).items()} if len(s) else {}
    dtoh = {r: v["calls"] for r, v in _by_range(p.paths, d["pc"].to_numpy(), {}).items()} if len(d) else {}
    return {"calls": int(len(s)), "host_blocked_ns": float(s["ns"].sum()),
            "by_name": {str(n): {"calls": int(r.calls), "ns": float(r.ns)} for n, r in by_name.iterrows()},
            "by_range": by_range, "dtoh_copies": int(len(d)), "dtoh_by_range": dtoh}


def pageable_summary(p: idle.Idle) -> dict:
    g = p.calls.pageable
    by_range = {r: {"copies": v["calls"], "bytes": v["bytes"], "ns": v["ns"]} for r, v in
                _by_range(p.paths, g["pc"].to_numpy(), {"bytes": g["bytes"].to_numpy(), "ns": g["ns"].to_numpy()}).items()} \
        if len(g) else {}
    return {"copies": int(len(g)), "bytes": float(g["bytes"].sum()), "ns": float(g["ns"].sum()), "by_range": by_range}


def launch_summary(p: idle.Idle, launches: pd.DataFrame) -> dict:
    """Launch overhead over the window: idle gaps the host caused by launching too slowly."""
    m = p.kind == idle.LAUNCH
    dur = launches["duration_ns"] if "duration_ns" in launches else pd.Series(dtype=float)
    return {"kernels": int(len(launches)), "launch_bound_gaps": int(p.first[m].sum()),
            "short_gaps_ns": float((p.end[m] - p.start[m]).sum()),
            "median_kernel_ns": float(dur.median()) if len(dur.dropna()) else None}
