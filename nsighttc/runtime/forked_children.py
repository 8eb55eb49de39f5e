"""A process forked from the recorded program (a DataLoader worker, a ``multiprocessing`` child started by fork)
records nothing: its thread's operators are not handed to torch.profiler's callbacks.

Why: fork copies the forking thread, and with it the thread's RecordFunction callbacks of the torch.profiler session
then open. A DataLoader worker forked while a first run records every operator with its arguments (the launcher's
first session, ``recording.OperatorsUntilWindow``) then records every operator of its own (each flip, normalise and
collate of every sample, with their shapes) into a copy of the session that nobody ever stops or writes: the
worker runs slower for its whole life, and with ``persistent_workers`` that is the whole run, the window and the steps
timed unrecorded after it included. Seen on this repository's CPU machine (torch 2.13): a worker's batch of small
operators took 64 ms of its thread's CPU instead of 24-34 ms; on the H200 (``wrappers/graph_loader.py``, 2 workers, a
step waiting for its batch) a first run's steps took 103 ms, its unrecorded ones 102 ms, against 73 ms plain and in
its cached run (which starts recording at the window, after the workers were forked), so the first run's verdict
and its "recording's slowdown 1.01x" were of a slower program (reports/steps_time, 2026-11-30).

What it turns off: RecordFunction in the child's thread (``torch._C._autograd._enable_record_function(False)``), only
where a Kineto session (torch.profiler's) is enabled at the fork; a child made under emit_nvtx / ITT ranges keeps them
(they go straight to Nsight Systems, which records the children). A child that starts its own profiler later records
no operators either. ``NSIGHTTC_RECORD_FORKED=1`` in the program's environment leaves the children as torch leaves
them (an experiment's switch: ``benchmarks/gpu/gpu_steps_time.sh`` part ``forked`` runs both).
"""
from __future__ import annotations

import os
import sys

KEEP_ENV = "NSIGHTTC_RECORD_FORKED"
_INSTALLED: list[bool] = []


def quiet_in_child() -> None:
    """The fork handler (runs in the child, before the child's own code): must never raise."""
    torch = sys.modules.get("torch")
    try:
        autograd = torch._C._autograd
        if autograd._profiler_enabled() and autograd._profiler_type() == torch._C._profiler.ActiveProfilerType.KINETO:
            autograd._enable_record_function(False)
    except Exception:  # (a torch without these bindings: the child records as before)
        pass


def install() -> bool:
    """Register the fork handler once a process (the launcher calls it as it starts each torch.profiler session);
    returns whether it is registered."""
    if _INSTALLED:
        return _INSTALLED[0]
    ok = hasattr(os, "register_at_fork") and os.environ.get(KEEP_ENV) != "1"
    if ok:
        os.register_at_fork(after_in_child=quiet_in_child)
    _INSTALLED.append(ok)
    return ok
