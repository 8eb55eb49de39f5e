"""Wall time per stage of one analysis, for the benchmarks' per-stage split (``benchmarks/bench_nsys_sqlite.py``).

Why a module of its own: a speed regression is found by asking which stage grew, and a profiler's view of a run
that reads on one thread and judges on two does not add up to the wall time. Stages are named where they run
(``with stages.stage("parse.read")``); off unless a caller asked (``record()``), a stage costs one global lookup.
Stages on other threads are recorded too (their names say which side they are: ``tc.*`` is the Tensor Core side
that runs beside the timeline).
"""
from __future__ import annotations

import contextlib
import threading
import time

_times: dict[str, float] | None = None
_lock = threading.Lock()


@contextlib.contextmanager
def stage(name: str):
    """Time the block under ``name`` when recording (nested stages are timed on their own too)."""
    if _times is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        with _lock:
            if _times is not None:
                _times[name] = _times.get(name, 0.0) + dt


@contextlib.contextmanager
def record():
    """Inside: every stage's wall time is added up into the dict this yields (seconds by stage name)."""
    global _times
    mine: dict[str, float] = {}
    with _lock:
        before, _times = _times, mine
    try:
        yield mine
    finally:
        with _lock:
            _times = before
