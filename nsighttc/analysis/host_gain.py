"""The gain of a host-side fix: the GPU idle time it removes, turned into a phase's speed-up (``analysis.gain``).

Split from ``analysis.gain`` by question: how much of a host cause's idle time a fix removes (half to all, a
DataLoader's share among its workers, what a batched call keeps), and why such a range is wide."""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import wide_gain

if TYPE_CHECKING:
    from .gain import Scope

HOST_LOW_FRACTION = 0.5     # the low end of a host fix: half of the idle time it causes goes away
ADVISED_WORKERS = 8  # what the data-loading finding's advice says (num_workers=8)


def host_fix(s: Scope, idle: float, fraction_low: float, idle_high: float | None = None) -> tuple[float, float]:
    """Speed-up of a phase whose GPU idle time ``idle`` (as profiled) goes: ``fraction_low`` of it (scaled to the plain
    run) at the low end, all of it (or ``idle_high``: what the fix can remove at most) at the high end (unscaled: the
    profiler's own host time may have been counted under another cause), never below the step's GPU work."""
    gap = s.T - s.B
    idle_high = idle if idle_high is None else idle_high
    if idle <= 0 or gap <= 0 or idle_high <= 0:
        return 1.0, 1.0
    low = s.T / max(s.T - min(fraction_low * min(idle * s.scale, gap), idle_high), s.B, 1.0)
    high = s.T / max(s.T - min(idle_high, gap), s.B, 1.0)
    return low, high


# torch.profiler's range of a DataLoader fetch names its iterator's class: this one's loader has worker processes
# (torch/utils/data/dataloader.py; `enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__`), how many it does
# not say
MULTIPROCESS_LOADER = "_MultiProcessingDataLoaderIter"


def data_fraction(f: dict, doc: dict, workers: int | None) -> tuple[float, str]:
    """(the share of a data-loading finding's idle time the low end removes, why). A loader without workers gains
    ``N`` of them (the variant's, else the advice's 8): ``1 - 1/N`` of the wait goes. One that has workers (the
    launcher's count, ``timeline.loader_workers``, or torch.profiler's name of its iterator) shares the fetch among
    ``N`` instead of its ``n`` at best (``1 - n/N``), and more worker processes contend for the host's cores: half, as
    other host fixes. Why: a graphed step fed by 2 workers (H200, wrappers/graph_loader.py) was put at 5.7-17.7x, as
    if 8 workers replaced none; 8 measured 2.7-3.9x in plain runs (57.9-58.4 ms a step against 15.0-21.9 ms), under
    the 3.34x that perfect sharing gives."""
    have = (doc.get("timeline") or {}).get("loader_workers")
    if have is None and MULTIPROCESS_LOADER in f"{f.get('title', '')} {f.get('evidence', '')}":
        return HOST_LOW_FRACTION, ("the loader already has worker processes, how many the recording does not say: "
                                   "half")
    if have:
        n = workers or max(ADVISED_WORKERS, 2 * int(have))
        best = max(1 - int(have) / n, 0.0)
        return min(HOST_LOW_FRACTION, best), (f"the fetch shared by {n} workers instead of {int(have)}: "
                                               f"{100 * best:.0f}% of the wait at best, half where they contend for "
                                               "the host's cores")
    n = workers or ADVISED_WORKERS
    if 1 - 1 / n > CONTENDED_FRACTION:
        return CONTENDED_FRACTION, f"the fetch shared by {n} workers, contending for the host's cores"
    return 1 - 1 / n, f"the fetch shared by {n} workers"


# The share of a loader's wait that workers added to a loader without them remove at the low end, however many: their
# processes contend with the main one for the host's cores. tb_plugin's public ResNet-50 samples on a V100
# (tests/fixtures/foreign, pytorch/kineto): 4 workers took 84-85% of a 35-59 ms wait off the step (152.5 -> 123.1 ms,
# 176.3 -> 126.3 ms), the rest of the step 12-18 ms slower, where "the fetch shared by 8" (88%) set the low end just
# above both pairs (1.25x and 1.398x against 1.24x and 1.396x)
CONTENDED_FRACTION = 0.75


def idle_width(idle: dict, by: dict, low: float, high: float) -> str:
    """What a range of a host-side finding wider than ``wide_gain.WIDTH`` comes from: a step whose GPU idles most of
    its time gains anything from a part of that idle time removed to all of it, and one recording cannot tell how much
    a fix removes (a serving engine's decode step, 98% idle while its host waited in one copy: 1.96x to 44x; AMD's
    TraceLens traces, tests/fixtures/foreign)."""
    n = max(idle, key=lambda k: idle[k][0] / max(by[k].T, 1.0))
    share = min(idle[n][0] / by[n].T, 1.0) if by[n].T else 0.0
    return (f"wider than {wide_gain.WIDTH:g}x: the GPU idle time it causes is {100 * share:.0f}% of the steps of "
            f"`{n}`, so the gain turns on how much of it the fix removes ({100 * idle[n][2]:.0f}% of it: {low:.3g}x; "
            f"all of it: {high:.3g}x), which one recording cannot tell")
