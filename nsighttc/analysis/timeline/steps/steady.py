"""Which steps are warm-up? The verdict is judged on the steady steps only; the rule is stated in the report.

Leading steps are warm-up while each of them (the prefix ends at the first that is not):
- compiled (torch.compile: ``nsighttc.compile`` marks, torch.compile's own spans, ``parse.marks``); or
- is longer than ``warmup_factor`` (3) times the median step (cuDNN autotuning, one-time CUDA/cuBLAS/autograd
  initialisation: H200 fixture, first steps 185 ms and 17 ms against 0.76 ms); or
- is longer than ``warmup_explained`` (1.2) times the median *and* has a one-time cause: it is the first step of
  its phase (three steps or more), or it grew the allocator (the CUDA caching allocator asked the driver for
  memory: ``cudaMalloc``, or ``cuMemCreate``/``cuMemMap`` with expandable segments).
A cause alone is not enough: a recording that starts in the middle of a run (the DDP fixtures record steps 3-7)
has a "first step" as fast as the others, and an allocation that costs nothing slows nothing.
Where the launcher chose a window of steady steps (its ``nsighttc.window`` mark, ``runtime.steps.WINDOW``), every
step of the family before the window's start is warm-up too, whatever it took: the window was chosen from the
step times inside the program, and a recording that began earlier holds steps that no rule on times can judge
(a rank of a DDP job waited 1.36 s in one step, between fast ones, while rank 0 changed its profiler's sessions:
two H100s, reports/window/call46). At least one step stays steady.
"""
from __future__ import annotations

import numpy as np

from ... import intervals
from ..base import with_hip

# Host calls by which the CUDA caching allocator grows (torch 2.11 on H100: cudaMalloc; expandable segments
# map memory with the driver's virtual memory API instead). Names as the parsers spell them (no _v2 suffix).
ALLOCATOR_GROWTH = with_hip({"cudaMalloc", "cudaMallocAsync", "cuMemAlloc", "cuMemAllocAsync", "cuMemCreate",
                             "cuMemMap"})
RULE = ("warm-up steps: the leading steps that compile (torch.compile), last longer than 3x the median step, or "
        "last longer than 1.2x it and are the first of their phase or grow the CUDA allocator, and every step before "
        "the window of steady steps nsighttc chose, where it chose one; they are left out of every steady-state "
        "number")
BEFORE_WINDOW = "before the window"  # a warm-up step's reason (``warmup``)


def malloc_times(api) -> np.ndarray:
    """Start times of the allocator's growth calls, sorted."""
    if api is None or api.empty:
        return np.array([])
    hit = api["name"].isin(ALLOCATOR_GROWTH).to_numpy()  # categorical: per name, not per row
    return np.sort(api["start_ns"].to_numpy(dtype="float64")[hit])


def window_start(windows: np.ndarray, starts: np.ndarray) -> float:
    """When the window of a family whose steps start at ``starts`` began: the first of the sorted window marks'
    starts ``windows`` that lies after its first step's start and not after its last's (a recording that begins
    with its window has the mark before its first step: no step is before it). -inf where none does."""
    if len(windows) == 0 or len(starts) == 0:
        return -np.inf
    i = int(np.searchsorted(windows, starts[0], side="right"))
    return float(windows[i]) if i < len(windows) and windows[i] <= starts[-1] else -np.inf


# A window whose mark started again (``runtime.window``: its steps fell to a new rate inside it) starts there only where
# its steps before ran this many times slower than after, at least PLATEAU_MIN_STEPS each side: a plateau (a
# pipeline's first run on an H200, users6b: 48-56 ms, then 10-14 ms as unrecorded), not a noisy host (its cached run:
# 20-55 ms throughout, three steps of 14-18 ms extended its window: 25.5 against 18.4 ms medians, kept whole)
PLATEAU_FACTOR = 1.5
PLATEAU_MIN_STEPS = 3


def restarted(start: float, restarts: np.ndarray | None, starts: np.ndarray, it_wall: np.ndarray) -> float:
    """The window's start moved to the last of its restarts after which its steps ran ``PLATEAU_FACTOR`` times faster
    than between its start and there; ``start`` where none did."""
    if restarts is None or not len(restarts):
        return start
    for r in sorted((float(x) for x in restarts if start < x <= starts[-1]), reverse=True):
        before, after = it_wall[(starts >= start) & (starts < r)], it_wall[starts >= r]
        if len(before) >= PLATEAU_MIN_STEPS and len(after) >= PLATEAU_MIN_STEPS and \
                np.median(before) >= PLATEAU_FACTOR * np.median(after):
            return r
    return start


def warmup(starts: np.ndarray, it_end: np.ndarray, it_wall: np.ndarray, factor: float, explained: float,
           compiles: intervals.Union, mallocs: np.ndarray, windows: np.ndarray | None = None,
           restarts: np.ndarray | None = None) -> tuple[int, list[list[str]]]:
    """(number of leading warm-up steps, the reasons of each). ``windows``: the sorted starts of the recording's
    window marks; ``restarts``: where a window's mark started again (``restarted``)."""
    n = len(starts)
    if n == 0:
        return 0, []
    w0 = window_start(windows if windows is not None else np.array([]), starts)
    before = starts < restarted(w0, restarts, starts, it_wall)
    med = float(np.median(it_wall))
    first = np.zeros(n, dtype=bool)
    first[0] = n >= 3
    compiling = intervals.busy_within(compiles, starts, np.maximum(it_end, starts)) > 0 if len(compiles.starts) \
        else np.zeros(n, dtype=bool)
    growing = (np.searchsorted(mallocs, it_end) > np.searchsorted(mallocs, starts)) if len(mallocs) \
        else np.zeros(n, dtype=bool)
    long = it_wall > factor * med
    slower = it_wall > explained * med
    reasons: list[list[str]] = []
    while len(reasons) < n - 1:  # the leading prefix only: a loop of many steps costs no more
        i = len(reasons)
        one_time = [r for r, hit in (("first step", first[i]), ("allocator growth", growing[i])) if hit]
        why = (["torch.compile"] if compiling[i] else []) + ([f"{it_wall[i] / med:.1f}x the median step"]
                                                             if long[i] or (slower[i] and one_time) else [])
        if before[i]:
            why.append(BEFORE_WINDOW)
        if not why:
            break
        reasons.append(why + (one_time if any(w.endswith("median step") for w in why) else []))
    return len(reasons), reasons
