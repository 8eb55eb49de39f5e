"""A thread of nsighttc's own, beside the recorded program, put in the idle scheduling class (Linux ``SCHED_IDLE``):
it then runs only on cores no thread of the program wants. Used on both sides: the launcher's forked trace writer
(``trace_writer``) and nsighttc's readers of the trace (``collect.yield_cores``), which says why. Standard library
only."""
from __future__ import annotations

import os


def enter(tid: int = 0) -> bool:
    """Thread ``tid`` (0: the calling thread) to the idle class; False where this system has no such class or
    refuses."""
    if not hasattr(os, "SCHED_IDLE") or not hasattr(os, "sched_setscheduler"):
        return False
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        return True
    except OSError:
        return False
