"""A torch.profiler trace written by a forked copy of the process, so that the program goes on (or exits) at once.

Why: torch.profiler's stop leaves the recording in memory, and writing it (kineto's ``save``, C++ holding the GIL)
is the program's time: a rank of a DDP ResNet-50 job wrote its window's trace in 0.23-0.36 s at its program's end,
and a first run's rank 0 wrote its operators' trace in 0.30-0.36 s in the middle of the program, every other rank
waiting in its next collective (two H200s, torch 2.11, reports/profile_overhead/torchrun_cost call 9). A forked
child holds a copy of the recording and writes it while the parent runs on, or begins its exit (interpreter
shutdown, NCCL's and CUDA's teardown: 1.5-2 s for that job), which the profile run overlaps with its analysis.

What the child may do: the kineto result's ``save`` is C++ on the copy of memory, with no CUDA call (a forked child
cannot use CUDA, which a CUDA program's DataLoader workers, forked the same way, never do either); then one line,
and ``os._exit`` (no atexit handler, no interpreter shutdown, no destructor of the program's objects runs twice).
``signal.alarm`` ends a child that would hang (``limit_s``): a lock held by another thread at the fork stays held.
The parent flushes its streams first (else what they buffered is written twice) and reaps the child from a daemon
thread. Where there is no ``fork`` (Windows), it fails, or ``NSIGHTTC_WRITE_INLINE=1`` is set, the trace is written
in the process itself, as before.

The lines: the parent says ``TRACE_WRITING`` + the path before it forks; the child says what the caller's ``write``
returns (the usual ``wrote ...`` line), or ``WRITE_FAILED`` + the path and why. The profile run waits for one of them
(or for the child's end: its stderr closed) before it takes a trace as complete (``profile.timeline_run``).
Standard library only: this runs inside the user's program.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Callable

from ..record_format import TRACE_WRITING, WRITE_FAILED
from .lines import say

INLINE_ENV = "NSIGHTTC_WRITE_INLINE"
# A child still writing after this long is stopped (its trace then stays partial, and says so by its missing line):
# the write scales with the stop that made the recording (a generate() loop's 288 model calls: stop 4.5-5.9 s,
# write 3.6-4.9 s on H100, runtime.window's GEN_REQUESTS comment).
LIMIT_MIN_S = 120.0
LIMIT_PER_STOP_S = 20.0


def limit_for(stop_s: float) -> int:
    """How long a child may write a recording whose stop took ``stop_s`` seconds."""
    return int(LIMIT_MIN_S + LIMIT_PER_STOP_S * max(0.0, stop_s))


class Writing:
    """A trace written apart (``pid`` the child) or in this process (``pid`` None: already done). ``wait`` returns
    whether it was written."""

    def __init__(self, pid: int | None, ok: bool | None = None):
        self.pid, self._ok = pid, ok
        self._done = threading.Event()
        if pid is None:
            self._done.set()
        else:
            threading.Thread(target=self._reap, daemon=True, name="nsighttc-trace-writer").start()

    def _reap(self) -> None:
        try:
            _, status = os.waitpid(self.pid, 0)
            self._ok = os.waitstatus_to_exitcode(status) == 0
        except ChildProcessError:  # reaped elsewhere (a program's own SIGCHLD handler): its line says how it went
            self._ok = None
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool | None:
        """Whether the trace was written (None: not known, or not yet at ``timeout``)."""
        self._done.wait(timeout)
        return self._ok


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _say_raw(text: str) -> None:
    """The child's line, written to file descriptor 2 itself: ``sys.stderr``'s lock may be held by a thread of the
    program that was writing as the process forked (the copy has no such thread to release it), and what the
    parent's stream buffered since its flush is the parent's to write, not the copy's."""
    try:
        os.write(2, f"{text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def _yield_cores() -> None:
    """The child to the idle scheduling class (Linux ``SCHED_IDLE``; elsewhere the lowest ``nice``): it then runs only
    on cores no thread of the program wants. Why: a program whose host work runs OpenMP regions on every core (torch's
    collate, a DataLoader without workers) waits in each region for its slowest thread, and one busy process beside
    it slowed such a loop 7x (H200: 2,303 ms a step against 310-401, reports/profile_overhead/first_run_2026-11-29);
    a first run's operators' trace is written while the window it times runs."""
    from .idle_class import enter
    if not enter():
        try:
            os.nice(19)
        except (AttributeError, OSError):
            pass


def apart(path, write: Callable[[], str], limit_s: int, beside_program: bool = False) -> Writing:
    """Write ``path`` by ``write()`` (which returns the line to say once it is written) in a forked child where this
    platform allows, else here. An error here propagates as ``write``'s own would; in the child it becomes the
    ``WRITE_FAILED`` line and exit code 1. ``beside_program``: the program goes on into steps that are recorded or
    timed meanwhile: the child takes no core from them (``_yield_cores``)."""
    fork = getattr(os, "fork", None)
    if fork is None or os.environ.get(INLINE_ENV) == "1":
        say(write())
        return Writing(None, True)
    say(f"{TRACE_WRITING}{path} (in a forked process)")
    _flush_streams()
    try:
        import warnings
        with warnings.catch_warnings():  # (Python 3.12 warns of fork() in a process with threads: see the docstring)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = fork()
    except OSError as exc:  # (out of processes or memory: written here instead; the usual line then says it is)
        say(f"nsighttc.launch: no forked copy to write {path} ({exc}): the program's process writes it")
        say(write())
        return Writing(None, True)
    if pid == 0:  # the child: write, say so, leave without running anything of the program's
        code = 1
        try:
            import signal
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, int(limit_s)))
            if beside_program:
                _yield_cores()
            line = write()
            _say_raw(line)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the child leaves here
            _say_raw(f"{WRITE_FAILED}{path}: {type(exc).__name__}: {exc}")
        finally:
            os._exit(code)
    return Writing(pid)
