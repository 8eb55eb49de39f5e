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


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGINT the child's process group, then SIGTERM, then SIGKILL: profilers finalise on SIGINT."""
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(argv: Sequence[str], *, stdout_path: Path | None = None, stderr_path: Path | None = None,
        timeout: float | None = None, env: dict[str, str] | None = None, cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None) -> ProcessResult:
    """Run ``argv`` (a list, never a shell string) in a new session; see the module docstring."""
    argv = [str(a) for a in argv]
    out_fh = open(stdout_path, "w", encoding="utf-8", errors="replace") if stdout_path else None
    err_fh = open(stderr_path, "w", encoding="utf-8", errors="replace") if stderr_path else None
    start = time.monotonic()
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
    timed_out = interrupted = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
    except KeyboardInterrupt:
        interrupted = True
        kill_group(proc)
    finally:
        for t in threads:
            t.join(timeout=5)
        for fh in (out_fh, err_fh):
            if fh:
                fh.close()
    rc = None if (timed_out or interrupted) else proc.returncode
    return ProcessResult(argv, rc, timed_out, interrupted, time.monotonic() - start, stdout_path, stderr_path)


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
