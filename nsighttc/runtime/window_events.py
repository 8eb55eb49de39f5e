"""What the window says: the fields its ``end`` and ``start`` events carry beyond the phase's counts (the window's
steps and data waits as this process timed them, the warm-up's steps at new input shapes), and how the profile run
reads the events back from a launcher's output (``EVENT_PREFIX`` + JSON a line: ``runtime.window`` prints them,
``profile.running`` and ``profile.window`` read them). Kept apart from the window's decisions (``runtime.window``),
which the profile run never needs."""
from __future__ import annotations

import json

from ..record_format import WINDOW_EVENT as EVENT_PREFIX
from .window_sizing import Phase, shapes_changed

WARMUP_SAID_MAX = 200  # warm-up step times said at the window's start (the last ones)


def window_data(ph: Phase) -> dict:
    """The window's steps as this process timed them: their median time and their median wait in DataLoader
    fetches (``window_step_ms``, ``window_data_ms``), where its steps waited for data at all; the profile run holds
    the unrecorded steps' waits against them (``profile.data_waits``)."""
    if ph.window_from is None or not any(ph.data):
        return {}
    import statistics
    steps, data = ph.durations[ph.window_from:], ph.data[ph.window_from:]
    if not steps:
        return {}
    return {"window_step_ms": round(statistics.median(steps) * 1e3, 4),
            "window_data_ms": round(statistics.median(data) * 1e3, 4)}


def warmup_shapes(ph: Phase) -> dict:
    """A warm-up whose steps met new input shapes after the first: every warm-up step's time (``warmup_ms``, the last
    ``WARMUP_SAID_MAX``) and which met a new shape (``warmup_new``, 0/1), for the profile run to count what the new
    shapes cost before the window (``profile.churn.churn_before_window``); else nothing."""
    if not shapes_changed(ph):
        return {}
    return {"warmup_ms": [round(d * 1e3, 4) for d in ph.durations[-WARMUP_SAID_MAX:]],
            "warmup_new": [int(x) for x in ph.new_shape[-WARMUP_SAID_MAX:]]}


def read_events(lines) -> list[dict]:
    """The window's events from a launcher's output lines (``EVENT_PREFIX`` + JSON each)."""
    out = []
    for line in lines:
        i = line.find(EVENT_PREFIX)
        if i < 0:
            continue
        try:
            doc = json.loads(line[i + len(EVENT_PREFIX):])
        except ValueError:
            continue
        if isinstance(doc, dict) and "event" in doc:
            out.append(doc)
    return out
