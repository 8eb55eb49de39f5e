"""Whether a stretch of steps the program ran unrecorded measures the recording's slowdown: only where its steps waited
for their data about as long as the window's did.

Why: a DataLoader's workers fill their prefetch queue while the program starts (model, optimizer, first compiles), so
the first steps after it take batches that are ready, and a loader slower than the loop only shows once that queue is
spent. The window, sized on those fast steps, then records the loop's real pace. Two H200s, the shared
``ddp_plain.py --slow-rank 1`` (a rank whose items cost more), three cached runs: "12 steady steps of 66.4 ms recorded,
36.9 ms unrecorded (the recording's slowdown 1.80x ...)", and 1.72x, 1.53x, while plain runs took 62.2 ms a step, and
the straggler's fix was judged at that speed (up to 2.43x). Timed (two later cached runs): the window's steps on the
rank with the slow loader waited 12.3 ms each for data, the warm-up's unrecorded ones 0.2 ms (before the queue ran dry)
and the steps after the window 0.1 ms (the queue filled again during the profiler's stop). The launcher says what each
step waited in DataLoader fetches (``runtime.window.Window.add_data``): the warm-up's unrecorded steps
(``unrecorded_before_data_ms`` on the window's start), the steps after the window (``data_ms`` on the ``unrecorded``
event) and the window's own (``window_data_ms`` and ``window_step_ms`` on its end).
A job's ranks each say their own; the rank that waited most is the one the others wait for, so each side takes it.
"""
from __future__ import annotations

import statistics

# A stretch whose steps' median wait for data is under the window's by more than this share of the window's step is no
# measure of the recording's cost (the ddp_plain runs above: 12.3 ms of 68-78 ms steps against 0.1-0.2 ms). One-sided:
# a stretch that waited more than the window ran slower for it, which understates the recording's cost, never invents
# one (a CPU test's two steps after its window waited 10.2 and 7.4 ms against the window's 7.0 ms of 11 ms steps).
DATA_SHIFT = 0.1


def window_waits(events: list[dict], phase) -> tuple[float, float] | None:
    """(data wait, step) medians of the window's steps of ``phase`` in milliseconds, the most-waiting rank's; None
    where no rank's steps waited for data or the window's end was not said."""
    ends = [e for e in events if e.get("event") in ("end", "ended") and e.get("phase") == phase
            and e.get("window_step_ms")]
    if not ends:
        return None
    return max(float(e.get("window_data_ms") or 0.0) for e in ends), max(float(e["window_step_ms"]) for e in ends)


def before_waits(starts: list[dict]) -> float:
    """The warm-up's unrecorded steps' median wait for data (ms), the most-waiting rank's, from the window's starts
    that said those steps (a rank that said no wait had its batches ready in every one)."""
    return max((statistics.median(e.get("unrecorded_before_data_ms") or [0.0]) for e in starts), default=0.0)


def after_waits(unrecorded: list[dict]) -> float:
    """The steps after the window: their median wait for data (ms), the most-waiting rank's."""
    return max((statistics.median(e.get("data_ms") or [0.0]) for e in unrecorded), default=0.0)


def shifted(window: tuple[float, float] | None, waited_ms: float) -> bool:
    """Whether a stretch whose steps waited ``waited_ms`` each for data measures no recording's cost: its wait short
    of the window's (``window_waits``) by more than ``DATA_SHIFT`` of the window's step (False where no wait was
    said)."""
    return window is not None and window[0] - waited_ms > DATA_SHIFT * window[1]


def words(window: tuple[float, float], left: list[tuple[str, float]]) -> str:
    """Why the stretches ``left`` ((what, its steps' wait in ms)) were left out against the ``window``'s waits, in
    one clause: "the warm-up's unrecorded steps waited 0.2 ms each for the DataLoader's batches, the window's steps
    12.3 ms of 77.6 ms: the loader's pace, not only the recording, set them apart" (several: "... and the steps timed
    after ... 0.1 ms")."""
    data, step = window
    (what, ms), rest = left[0], left[1:]
    said = f"{what} waited {ms:.1f} ms each for the DataLoader's batches" + "".join(
        f" and {w} {m:.1f} ms" for w, m in rest)
    return (f"{said}, the window's steps {data:.1f} ms of {step:.1f} ms: the loader's pace, not only the recording, "
            "set them apart")


def loader_workers(verdict, done) -> bool:
    """The worker processes of the DataLoader the window's steps fetched from, as the launcher saw them (``loader_workers``
    on the window's end events; a job's ranks: the most), into ``timeline.loader_workers``: more workers share a fetch
    only among more than it has (``analysis.gain``). True where it set it (the gains are then estimated again). Why: a
    graphed step fed by 2 workers (H200, wrappers/graph_loader.py) was put at 5.7-17.7x by "the fetch shared by 8
    workers", read as 8 against none; 8 workers measured 3.9x in plain runs, what 8 against 2 gives."""
    tl = getattr(verdict, "timeline", None)
    seen = [int(e["loader_workers"]) for p in done for e in getattr(p, "window_events", None) or ()
            if e.get("event") in ("end", "ended") and isinstance(e.get("loader_workers"), int)]
    if tl is None or not seen:
        return False
    tl["loader_workers"] = max(seen)
    return True
