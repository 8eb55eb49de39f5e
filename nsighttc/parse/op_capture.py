"""The operator calls a rank recorded by a dispatch mode (``runtime.op_capture``), matched to the kernels they launched.

Where a distributed first run's rank 0 could not change to the operators' session (a ``record_function`` of the
program's open across its steps), it recorded each aten call of a step in a list beside its trace, each call inside a
range ``nsighttc.op#<n>`` of its ranges-only recording. Those recordings link no launch to a range (their runtime
calls carry no ``External id``), so a kernel's call is the range around its launch on the launching thread: ranges
and runtime calls are timed by the same clock in the same trace, and a call's launches lie inside its range.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import textio
from ..record_format import CAPTURE_FILE, CAPTURED_OP

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def capture_file(trace: Path) -> Path:
    return Path(trace).parent / CAPTURE_FILE


def captured_calls(trace: Path, names) -> dict[str, dict]:
    """Kernel name -> the recorded call (``replay_ops.json``'s form) that made its first launch inside a recorded
    call's range, for the ``names`` asked for; {} where the rank recorded no list or the trace cannot be read."""
    side = capture_file(trace)
    wanted = set(names)
    if not wanted or not side.exists():
        return {}
    try:
        calls = json.loads(side.read_text())
        with textio.open_binary(Path(trace)) as fh:
            events = json.loads(fh.read()).get("traceEvents") or []
    except (OSError, ValueError):
        return {}
    spans: dict = {}  # thread -> [(start, end, call number)]
    launches: dict[int, tuple] = {}  # correlation -> (thread, time)
    kernels: list[tuple] = []  # (time, name, correlation)
    for e in events:
        cat, args = e.get("cat"), e.get("args") or {}
        if cat == "user_annotation" and str(e.get("name", "")).startswith(CAPTURED_OP):
            try:
                n = int(e["name"][len(CAPTURED_OP):])
            except ValueError:
                continue
            ts = float(e.get("ts", 0.0))
            spans.setdefault(e.get("tid"), []).append((ts, ts + float(e.get("dur", 0.0)), n))
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches[int(args["correlation"])] = (e.get("tid"), float(e.get("ts", 0.0)))
        elif cat == "kernel" and e.get("name") in wanted and "correlation" in args:
            kernels.append((float(e.get("ts", 0.0)), e["name"], int(args["correlation"])))
    if not spans:
        return {}
    by_thread = {}
    for tid, rows in spans.items():
        rows.sort()
        by_thread[tid] = (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), [r[2] for r in rows])
    out: dict[str, dict] = {}
    for _, name, corr in sorted(kernels):
        if name in out or corr not in launches:
            continue
        tid, t = launches[corr]
        if tid not in by_thread:
            continue
        starts, ends, numbers = by_thread[tid]
        i = int(np.searchsorted(starts, t, side="right")) - 1
        if i >= 0 and ends[i] >= t and 0 <= numbers[i] < len(calls) and calls[numbers[i]]:
            out[name] = calls[numbers[i]]
    return out
