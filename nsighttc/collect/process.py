"""Run a child process the way a profiler must be run: argument lists only, its own process group,
and the whole group killed on Ctrl-C or timeout (ncu and nsys fork the workload; killing only the
direct child would leave the workload running on the GPU).

Output goes to files (the run directory keeps them as logs); an optional callback sees each line as it
arrives, which is how the CLI shows progress while ncu works through kernels.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


@dataclass
class ProcessResult:
    argv: list[str]
    returncode: int | None  # None when we killed it
    timed_out: bool
    interrupted: bool
    seconds: float
    stdout_path: Path | None
    stderr_path: Path | None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def clear_group(pgid: int, grace_s: float = 2.0) -> None:
    """Stop what is left in a process group whose leader has exited: a grandchild that ignored SIGINT, a
    daemon the workload forked. SIGTERM, then SIGKILL after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            return
        try:
            os.killpg(pgid, sig)
            os.killpg(pgid, signal.SIGCONT)  # (a stopped process acts on SIGTERM only once continued)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.05)


# How long a stopped child gets after SIGINT, then after SIGTERM, to finish on its own: profilers finalise their report
# on SIGINT (ncu and nsys wrote theirs within a second or two on the GPU machine).
KILL_GRACE_S = 5.0


def kill_group(proc: subprocess.Popen, grace_s: float | None = None) -> None:
    """SIGINT the child's process group, then SIGTERM, then SIGKILL: profilers finalise on SIGINT. The
    leader exiting is not enough: whatever else is in the group (a grandchild ignoring the signals) is
    stopped too. ``grace_s``: the wait after each of the first two (default ``KILL_GRACE_S``)."""
    grace_s = KILL_GRACE_S if grace_s is None else grace_s
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
            os.killpg(proc.pid, signal.SIGCONT)  # a frontend paused at a gate (runtime.paused_frontends) acts on it now
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    clear_group(proc.pid)


class Running:
    """A started child (see ``start``): ``wait`` it like ``run`` would, or ``kill`` its whole group."""

    def __init__(self, argv: list[str], proc: subprocess.Popen, threads: list[threading.Thread], files: list,
                 start: float, stdout_path: Path | None, stderr_path: Path | None):
        self.argv, self.proc, self._threads, self._files = argv, proc, threads, files
        self._start, self.stdout_path, self.stderr_path = start, stdout_path, stderr_path
        self.killed = False
        self.frontend = None  # a profiler's frontend put in the idle class (collect.yield_cores), where one is

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output_open(self) -> bool:
        """Something still holds the child's stdout or stderr open (the child, or a process it started that
        inherited them): their readers have not reached the end."""
        return any(t.is_alive() for t in self._threads)

    def kill(self, grace_s: float | None = None) -> None:
        self.killed = True
        kill_group(self.proc, grace_s)

    def wait(self, timeout: float | None = None) -> ProcessResult:
        """Wait for the child; on timeout or Ctrl-C its whole process group is stopped."""
        timed_out = interrupted = False
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(self.proc)
        except KeyboardInterrupt:
            interrupted = True
            kill_group(self.proc)
        finally:
            for t in self._threads:
                t.join(timeout=5)
            for fh in self._files:
                if fh:
                    fh.close()
        if not (timed_out or interrupted):
            clear_group(self.proc.pid)  # the run is over: nothing it started stays behind
        rc = None if (timed_out or interrupted or self.killed) else self.proc.returncode
        return ProcessResult(self.argv, rc, timed_out, interrupted, time.monotonic() - self._start,
                             self.stdout_path, self.stderr_path)


def start(argv: Sequence[str], *, stdout_path: Path | None = None, stderr_path: Path | None = None,
          env: dict[str, str] | None = None, cwd: Path | None = None,
          on_line: Callable[[str], None] | None = None) -> Running:
    """Start ``argv`` (a list, never a shell string) in a new session; see the module docstring."""
    argv = [str(a) for a in argv]
    out_fh = open(stdout_path, "w", encoding="utf-8", errors="replace") if stdout_path else None
    err_fh = open(stderr_path, "w", encoding="utf-8", errors="replace") if stderr_path else None
    begin = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True, text=True, errors="replace", bufsize=1)

    def pump(stream, fh):
        for line in stream:
            if fh:
                fh.write(line)
                fh.flush()
            if on_line:
                on_line(line.rstrip("\n"))

    threads = [threading.Thread(target=pump, args=(proc.stdout, out_fh), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err_fh), daemon=True)]
    for t in threads:
        t.start()
    return Running(argv, proc, threads, [out_fh, err_fh], begin, stdout_path, stderr_path)


def run(argv: Sequence[str], *, stdout_path: Path | None = None, stderr_path: Path | None = None,
        timeout: float | None = None, env: dict[str, str] | None = None, cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None) -> ProcessResult:
    """Run ``argv`` to the end (or the timeout / Ctrl-C, which stop its whole process group)."""
    return start(argv, stdout_path=stdout_path, stderr_path=stderr_path, env=env, cwd=cwd,
                 on_line=on_line).wait(timeout)


def capture(argv: Sequence[str], timeout: float = 60.0) -> tuple[int | None, str, str]:
    """Short helper for version queries and exports: (returncode, stdout, stderr); group-killed on timeout."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True, errors="replace")
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        kill_group(proc, grace_s=2.0)
        out, err = proc.communicate()
        return None, out, err
