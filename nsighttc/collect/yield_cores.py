"""nsighttc's own work beside a recorded program runs in the idle scheduling class: the program keeps every core.

Why: a program whose host work runs in OpenMP parallel regions on every core (torch's CPU ops: a DataLoader's collate
without workers) waits at each region's barrier for the thread that lost its core, so one busy core of someone
else's slows it several times over. Seen on the H200 (16 cores, ncu 2025.3.1,
``benchmarks/probes/gpu_ncu_neighbour_probe.sh``):
Nsight Compute's frontend (the ``ncu`` binary, which forks the program and talks to it) spins one core at 100% while
its program sleeps, and ``wrappers/grad_accum.py`` took **2,303 ms an optimizer step beside one waiting ncu** against
310-401 ms alone, 315 ms beside a process waiting with a CUDA context and no ncu, and 307 ms beside the ncu with
``OMP_NUM_THREADS=8``. A first run starts two frontends beside the timeline (the program's ncu pass and the replay, each
waiting at a gate), so its timeline read the loop as "CPU-bound: host busy in collate_tensor_fn" (10% GPU busy) where
the cached run, which starts no ncu, read 94% GPU-bound; and the program under ncu, beside its own spinning frontend,
ran at the same 2.3 s a step. With the frontends idle (restored once the trace was written), the first run's
window read 229 ms steps, but its ncu pass still took 16-26 s after the timeline, its program again beside its
spinning frontend, and 3 of the window's 10 steps were slow (272-348 ms) with nsighttc's reader parsing the
operators' trace beside it (as it does by design); with both lowered for good: the pass 10.5-11.3 s, the first
run 1.53x plain instead of 1.84x (reports/profile_overhead/first_run_2026-11-29).

``SCHED_IDLE`` (Linux): a thread of that class runs only on a core no other thread wants, so it still has every idle
core, and nothing of nsighttc competes with the program for a busy one. Lowered: the ncu frontends (``IdleFrontend``:
their processes, once the program under them exists, for their whole life: a process forked afterwards would inherit
the class, and the program under ncu must keep its own) and the threads that read the trace while the program runs
(``idle_thread``). Not restored: leaving the idle class needs the privilege to raise a priority (``CAP_SYS_NICE``),
and the frontend's spinning slows its own program as well. The cost: on a machine whose every core is kept busy by
other work, these get only what is left.

Not enough on a virtual machine (the class orders the guest's threads, not the host cores its vCPUs share): on the lent
H200, two idle-class busy loops took a transformers pipeline from 56.2 to 29.9 images/s. A program waiting at its gate
therefore also pauses the frontends above it (``runtime.paused_frontends``); the idle class still covers their start-up
and what runs past the gate.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..runtime import idle_class
from ..runtime.paused_frontends import parent

# How long the lowering waits for the program to appear under the frontend (ncu starts it within a second or two)
FIND_PROGRAM_S = 60.0
POLL_S = 0.05


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux /proc; none where it cannot be read). Read from each thread's
    ``children`` file; a kernel built without it (``CONFIG_PROC_CHILDREN``) has every process's parent read instead."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    listed = False
    for tid in tasks:
        try:
            kids += [int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            listed = True
        except (OSError, ValueError):
            continue
    return kids if listed else children_by_parent(pid)


def children_by_parent(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from each process's ``stat`` (its 4th field, after the name in
    parentheses, which may hold spaces and parentheses itself)."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and parent(int(e)) == pid]


def is_python(pid: int) -> bool:
    """The process runs a Python interpreter (the program's launcher), not a profiler's frontend or a shell."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python")
    except OSError:
        return False


def frontends_above_program(root: int) -> list[int] | None:
    """The processes between ``root`` (the one nsighttc started) and the first Python process under it (the
    program), ``root`` included; None while no Python process has appeared yet. ``root`` itself being Python
    (no profiler in front): []."""
    if is_python(root):
        return []
    chain: dict[int, int | None] = {root: None}
    todo = [root]
    while todo:
        pid = todo.pop(0)
        for kid in children(pid):
            if kid in chain:
                continue
            chain[kid] = pid
            if is_python(kid):
                above, up = [], chain[kid]
                while up is not None:
                    above.append(up)
                    up = chain[up]
                return above
            todo.append(kid)
    return None


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


class IdleFrontend:
    """Lower the frontend processes of the pass started as ``root`` to ``SCHED_IDLE`` (see the module docstring),
    from a daemon thread, once its program has started. ``record()``: what was done (for run.json)."""

    def __init__(self, root: int, name: str):
        self.root, self.name = root, name
        self.lowered: list[int] = []   # the frontend processes put in the idle class
        self.error: str | None = None
        self._lock = threading.Lock()
        self._done = False
        self.supported = hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_setscheduler") and Path("/proc").is_dir()
        if self.supported:
            threading.Thread(target=self._lower_when_started, daemon=True, name=f"nsighttc-idle-{name}").start()

    def _lower_when_started(self) -> None:
        idle_thread()  # (the looking, too, is beside the program)
        deadline = time.monotonic() + FIND_PROGRAM_S
        while time.monotonic() < deadline:
            with self._lock:
                if self._done:
                    return
                above = frontends_above_program(self.root)
                if above is not None:
                    self._set(above, os.SCHED_IDLE)
                    self.lowered = above
                    return
            if not os.path.exists(f"/proc/{self.root}"):
                return
            time.sleep(POLL_S)

    def _set(self, pids: list[int], policy: int) -> None:
        for pid in pids:
            for tid in _threads(pid):
                try:
                    os.sched_setscheduler(tid, policy, os.sched_param(0))
                except ProcessLookupError:
                    continue
                except OSError as exc:  # (a frontend of another user's: left as it is, said in run.json)
                    self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> None:
        """Stop looking for the program (the pass ended or was stood down before its program appeared)."""
        with self._lock:
            self._done = True

    def record(self) -> dict:
        return {"pass": self.name, "supported": self.supported, "lowered_processes": len(self.lowered),
                **({"error": self.error} if self.error else {})}


def idle_thread() -> bool:
    """Put the calling thread in the idle class (a thread of nsighttc's that reads or plans while the program runs);
    False where this system has no such class or refuses (``runtime.idle_class``, which the launcher's trace writer
    uses too)."""
    return idle_class.enter()
