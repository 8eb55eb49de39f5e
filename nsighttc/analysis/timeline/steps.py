"""Steps and phases: every family of step ranges (``train/step``, ``eval/step``, ``ProfilerStep``) is
judged on its own, so one loop cannot speak for a program of several phases.

An iteration of a family runs from one step's start to the next step's start (the host work between
steps, such as data loading, belongs to it). Medians, not means: the first steps of a loop pay one-time
CUDA/cuBLAS/autograd initialisation (H200 fixture: 185 ms and 17 ms against a 0.76 ms steady state), so
leading iterations longer than ``warmup_factor`` x the median are named warm-up and left out.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import labels
from .. import intervals
from .base import Thresholds, classify, is_step_leaf


def step_paths(ranges: pd.DataFrame, step_range: str | None) -> list[str]:
    """Range paths whose leaf marks a step and which repeat (a family needs two instances or more)."""
    if ranges.empty:
        return []
    counts = ranges["path"].value_counts()
    found = sorted(str(p) for p, n in counts.items() if n >= 2 and is_step_leaf(str(p).rsplit("/", 1)[-1], step_range))
    # a step range inside another family's step (a/step/step, ProfilerStep#/train_step) is part of that iteration
    return [p for p in found if not any(p.startswith(q + "/") for q in found)]


def families(ranges: pd.DataFrame, u: intervals.Union, launch_start: np.ndarray, work_end: np.ndarray,
             th: Thresholds, step_range: str | None) -> list[dict]:
    """One dict per step family, the one whose steady state holds the most wall time first.

    ``launch_start``/``work_end``: when each kernel (or whole-graph execution) was launched and when it
    finished on the GPU. A loop whose host runs ahead of the GPU (CUDA-graph replays, async launches)
    has host iterations much shorter than its GPU work: the family's span then runs until the GPU has
    finished the work its steps launched, so the verdict is judged on the time the loop really took.
    Private keys (``_steady``) carry the steady iterations' intervals for the cause analysis."""
    paths = step_paths(ranges, step_range)
    if not paths:
        return []
    ok = ~np.isnan(launch_start)
    if not ok.all():
        launch_start, work_end = launch_start[ok], work_end[ok]
    k_order = np.argsort(launch_start, kind="stable")
    k_start = launch_start[k_order]
    k_end_max = work_end[k_order]  # a copy: the running maximum is taken in place
    del k_order
    np.maximum.accumulate(k_end_max, out=k_end_max)
    out = []
    cand = ranges[labels.per_category(ranges["path"], lambda p: p in paths, dtype=bool)]
    for path, grp in cand.groupby(labels.strings(cand["path"])):
        grp = grp.sort_values("start_ns")
        s, e = grp["start_ns"].to_numpy(), grp["end_ns"].to_numpy()
        it_end = np.concatenate([s[1:], e[-1:]])
        it_end = np.maximum(it_end, e)  # overlapping/odd ranges: an iteration at least covers its step
        it_wall = it_end - s
        it_busy = intervals.busy_within(u, s, it_end)
        share = np.where(it_wall > 0, it_busy / it_wall, 0.0)
        med_wall = float(np.median(it_wall))
        warm = 0
        while warm < len(it_wall) - 1 and it_wall[warm] > th.warmup_factor * med_wall:
            warm += 1
        steady = slice(warm, None)
        k_in = (np.searchsorted(k_start, it_end) - np.searchsorted(k_start, s)) if len(k_start) else np.zeros(len(s))
        med_share = float(np.median(share[steady]))
        med_it = float(np.median(it_wall[steady]))
        # the GPU's end of the work launched during the steady iterations (host ran ahead: later than it_end)
        n_before = np.searchsorted(k_start, it_end[-1], side="right") if len(k_start) else 0
        n_first = np.searchsorted(k_start, s[warm], side="left") if len(k_start) else 0
        gpu_end = float(k_end_max[n_before - 1]) if n_before > n_first else float(it_end[-1])
        span_end = max(float(it_end[-1]), gpu_end)
        span = span_end - float(s[warm])
        span_busy = float(intervals.busy_within(u, np.array([s[warm]]), np.array([span_end]))[0])
        # When each iteration's GPU work was done: a host that runs ahead of the GPU (async launches, no
        # sync per step) has short host iterations and one long one where it finally waits; per step, the
        # time between the GPU finishing one iteration's work and the next's is what the loop really costs.
        n_done = np.searchsorted(k_start, it_end, side="right") if len(k_start) else np.zeros(len(s), dtype=int)
        gpu_done = np.where(n_done > 0, k_end_max[np.clip(n_done - 1, 0, None)] if len(k_start) else 0.0, np.nan)
        gpu_done = np.fmax(gpu_done, it_end)  # a step whose work finished earlier still ends with its host
        completion = np.diff(np.concatenate([s[:1], gpu_done]))
        effective = np.fmax(it_wall, completion)  # fmax: NaN (no GPU work yet) never wins
        fam = {"name": path, "phase": path.rsplit("/", 1)[0] if "/" in path else None,
               "count": int(len(s)), "median_ns": float(np.median((e - s)[steady])),
               "median_iteration_ns": med_it, "median_gpu_busy_share": med_share,
               "median_effective_ns": float(np.median(effective[steady])),
               "wall_ns": float(it_wall.sum()), "steady_wall_ns": span, "steady_busy_ns": span_busy,
               "steady_gpu_busy_share": span_busy / span if span > 0 else 0.0,
               "host_ahead_ns": max(gpu_end - float(it_end[-1]), 0.0),
               "gpu_busy_shares": [float(x) for x in share], "iteration_ns": [float(x) for x in it_wall],
               "median_kernels": float(np.median(k_in[steady])) if len(k_in) else 0.0,
               "warmup_steps": int(warm), "warmup_ns": [float(x) for x in it_wall[:warm]],
               "steady_window_ns": [float(s[warm]), span_end],
               "_steady": _disjoint(np.append(s[steady], it_end[-1]), np.append(it_end[steady], span_end)),
               "_warm": (s[:warm].astype("float64"), it_end[:warm].astype("float64"))}
        fam["verdict"] = classify(med_share, span, int(np.sum(k_in[steady])), th)
        out.append(fam)
    total = sum(f["steady_wall_ns"] for f in out) or 1.0
    for f in out:
        f["wall_share_of_steps"] = f["steady_wall_ns"] / total
    return sorted(out, key=lambda f: -f["steady_wall_ns"])


def _disjoint(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, non-overlapping intervals (iterations of odd, overlapping step ranges are merged)."""
    u = intervals.union(s, e)
    return u.starts, u.ends


def public(fam: dict) -> dict:
    return {k: v for k, v in fam.items() if not k.startswith("_")}
