"""The typical step of a loop whose steps take turns: the median of their means over a cycle of k steps.

A loop fed by k DataLoader workers that deliver their batches together waits for the first batch of each round and
takes the others at once: its steps alternate, 146 ms then 1 ms (H200, ``wrappers/graph_loader.py`` with 2 workers;
plain 57.9-72.2 ms a step). The median of such steps is either mode, or between them, by how many of each the window
held: one run of that program said "11 steady steps of 7.47 ms", the next "13 of 65.4 ms". Where means over ``k``
consecutive steps are steady, the steps alone are not and steps ``k`` apart are alike, those means are the loop's step
(what a plain run's ms/step says); ``k`` is the smallest such, up to ``MAX_CYCLE``. ResNet-50 evaluation fed by 4
workers (H100, ``wrappers/eval_loop.py``, tests/fixtures/inference): steps of 12-360 ms recurring every 4, median
25.8 ms, against 117 ms a batch in plain runs; over cycles of 4, about 100 ms. Shared by the analysis (``analysis.timeline.steps``)
and the profile run's unrecorded steps (``profile.window``), which must agree.
"""
from __future__ import annotations

import numpy as np

MAX_CYCLE = 8      # steps a cycle holds at most (DataLoader workers delivering together)
UNSTEADY = 0.5     # the steps alone: interquartile range over the median at least this (two modes, not jitter)
STEADY = 0.3       # the cycle means: at most this ...
GAIN = 0.35        # ... and at most this share of the steps' own spread (noise alone shrinks by 1/sqrt(k) only)
RECUR = 0.5        # ... and the steps k apart alike: their autocorrelation at lag k at least this (a pattern that
#                    recurs; shapes that change at random do not: BERT at new lengths, lags 1-8 under 0.45)
MIN_CYCLES = 3     # cycles the steps must hold


def _finite(durations) -> np.ndarray:
    x = np.asarray(durations, dtype="float64")
    return x[np.isfinite(x)]


def _spread(x: np.ndarray) -> float:
    q25, med, q75 = np.percentile(x, [25, 50, 75])
    return float((q75 - q25) / med) if med > 0 else np.inf


def _means(x: np.ndarray, k: int) -> np.ndarray:
    c = np.concatenate([[0.0], np.cumsum(x)])
    return (c[k:] - c[:-k]) / k


def _recurs(x: np.ndarray, k: int) -> float:
    d = x - x.mean()
    v = float((d * d).sum())
    return float((d[:-k] * d[k:]).sum()) / v if v > 0 else 0.0


def cycle(durations) -> int:
    """How many consecutive steps make one cycle of the loop (1: the steps themselves are its unit)."""
    x = _finite(durations)
    if len(x) < 2 * MIN_CYCLES:
        return 1
    own = _spread(x)
    if not own >= UNSTEADY:
        return 1
    for k in range(2, min(MAX_CYCLE, len(x) // MIN_CYCLES) + 1):
        if _recurs(x, k) < RECUR:
            continue
        s = _spread(_means(x, k))
        if s <= STEADY and s <= GAIN * own:
            return k
    return 1


def typical(durations, k: int | None = None) -> float:
    """The loop's typical step: the median of the steps, or of their means over a cycle (``cycle``) where they take
    turns."""
    x = _finite(durations)
    if not len(x):
        return float("nan")
    k = cycle(x) if k is None else k
    return float(np.median(_means(x, k) if 1 < k <= len(x) else x))


def slow_against(durations, typical_step: float, k: int | None = None) -> float:
    """What a step is slow against: the typical step, or where the steps take turns the longest step of a typical
    cycle (the median over cycles of each one's longest), so a cycle's long step, its wait for the round of batches,
    is not called slow beside the steps of the same round that took their batch at once. ``k``: the steps' cycle
    where the caller has it (``cycle``)."""
    x = _finite(durations)
    k = cycle(x) if k is None else k
    if k <= 1 or len(x) < k:
        return typical_step
    n = len(x) // k * k
    return max(float(np.median(x[:n].reshape(-1, k).max(axis=1))), typical_step)
