"""Run the default run's timeline pass until its result is on disk, not until its process is gone.

Why: the torch.profiler launcher writes the whole trace and only then exits, and a CUDA program's exit
(interpreter shutdown, CUDA and CUPTI teardown) is long: ResNet-50 AMP on H100 took 1.6-1.9 s from
"trace written" to the process' end under the profiler (1.2 s in a plain run;
``benchmarks/probes/gpu_launcher_tail_probe.py``). The default run reads the trace, starts the replay and plans
meanwhile; the pass is finished (its exit code, its time) before the run ends.

A torch.profiler launcher says when its trace is complete (``nsighttc.runtime.launch.TRACE_WRITTEN``); nsys writes
its report as the process ends, and is waited for as before. A distributed job has one trace per rank: it is read
once every rank that started (each made its ``rank<N>`` directory as it started: ``runtime.rankexec --mkdir``) has
said its trace is written and its program's exit code, so the analysis overlaps the ranks' exits and torchrun's
(process groups destroyed, CUDA and CUPTI torn down, the agent's own end); a rank that never says so (it crashed,
recorded nothing, or still runs) makes the pass wait for the job's end as before. Its launchers' lines are read
either way: that nothing was recorded, what each rank recorded, and from the rank whose directory is ``rank_dir``,
when its recording began.
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Callable

from ..record_format import (DROPPED_BEFORE_WINDOW, EXIT_SAID, NOTHING_RECORDED, OPS_WRITTEN, SESSION_KEPT,
                             TRACE_WRITING, TRACE_WRITTEN, WRITE_FAILED)
from .passes import Pass
from .running import finish_pass, start_pass


LAUNCHER = "nsighttc.launch: "  # how every line of the launcher's starts (runtime.lines)
# A distributed job whose window stopped the program (``--window-end stop``): every rank stops at the step the ranks
# agreed on, and writes its trace within seconds of the others (the profiler's stop and the writing: 0.3-1.4 s a rank
# on two H200s, reports/distributed_windows). A rank still running this long after another rank's trace was written
# will not end on its own: it waits in a collective the stopped ranks never join (two H200s, FSDP2: ranks that
# extended their window apart, one hung until the harness' timeout). The job is then stopped, and the run says so.
RANKS_END_GRACE_S = 120.0
# A trace written by a forked copy of the launcher's process (``runtime.trace_writer``) may still be written after
# the process itself ended (its exit is not kept waiting for it). The pass waits for the copy's line (written, or
# could not write), or for the copy's end (the pass' stderr closed); the copy stops itself within its own limit
# (``trace_writer.limit_for``); this bounds the wait where something else keeps stderr open.
WRITERS_GRACE_S = 600.0
_RECORDED_FROM = re.compile(r"recorded from ([0-9.]+) s")  # the launcher's trace line, --record-from window
_PROGRAM_S = re.compile(r"\(program ([0-9.]+) s")  # the launcher's lines: seconds into the program
_STOP_S = re.compile(r"profiler stop ([0-9.]+) s")
_RANK_DIR = re.compile(r"[/\\]rank(\d+)[/\\][^/\\]+ \(")  # a distributed job's per-rank file in a launcher's line


def _written_path(line: str) -> str | None:
    """The path a launcher's line says is written, could not be written, or is being written (``TRACE_WRITING``)."""
    for prefix in (OPS_WRITTEN, TRACE_WRITTEN, WRITE_FAILED, TRACE_WRITING):
        if line.startswith(prefix):
            rest = line[len(prefix):]
            return rest.split(": ", 1)[0] if prefix == WRITE_FAILED else rest.split(" (", 1)[0]
    return None


class Writers:
    """The traces a launcher's forked copies write (``runtime.trace_writer``): said being written, not yet said
    written or failed. Either line may come first (two processes share the stream)."""

    def __init__(self):
        self._announced: set[str] = set()
        self._ended: set[str] = set()
        self._lock = threading.Lock()

    def line(self, line: str) -> None:
        path = _written_path(line)
        if path is None:
            return
        with self._lock:
            (self._announced if line.startswith(TRACE_WRITING) else self._ended).add(path)

    def pending(self) -> set[str]:
        with self._lock:
            return self._announced - self._ended


def rank_recording(line: str, into: dict, at_s: float | None = None) -> None:
    """What one rank's launcher says it recorded (its operators' trace, its trace), into ``into[rank]``: run.json's
    account of each rank's recording (only rank 0 records operators with their arguments, until a step
    before the window; a rank whose recording differs from the others' in the steps compared would be judged on the
    profiler's load, not its own)."""
    kind = "operators" if line.startswith(OPS_WRITTEN) else "trace" if line.startswith(TRACE_WRITTEN) else \
        "dropped" if line.startswith(DROPPED_BEFORE_WINDOW) else "kept" if line.startswith(SESSION_KEPT) else None
    m = _RANK_DIR.search(line) if kind else None
    if m is None:
        return
    r = into.setdefault(m.group(1), {})
    prog, stop = _PROGRAM_S.search(line), _STOP_S.search(line)
    if kind == "operators":
        r["operators_with_arguments_until_s"] = float(prog.group(1)) if prog else None
        r["operators_stop_s"] = float(stop.group(1)) if stop else None
        return
    if kind == "kept":  # its change of sessions was given up at the window: one session holds it to the end
        r["session_kept_s"] = float(prog.group(1)) if prog else None
        r["operators_for_replay"] = "no operators were recorded" not in line
        return
    if kind == "dropped":  # the ranges until the step before the window, dropped as rank 0 changed sessions there
        r["dropped_until_s"] = float(prog.group(1)) if prog else None
        r["dropped_stop_s"] = float(stop.group(1)) if stop else None
        return
    frm = _RECORDED_FROM.search(line)
    r["window_recorded"] = "ranges only" if "ranges only" in line else "operators"
    r["recorded_from_s"] = float(frm.group(1)) if frm else 0.0
    r["program_s"] = float(prog.group(1)) if prog else None
    r["profiler_stop_s"] = float(stop.group(1)) if stop else None
    if at_s is not None:  # when the line came, in the pass' seconds: the job's end after it is its ranks' exits
        r["trace_written_at_s"] = at_s


class TimelineRun:
    """A started timeline pass. ``until_written`` returns once its output can be read; ``finish`` waits for
    the process (its exit code, time, timeout and Ctrl-C handling are the usual ``finish_pass``'s)."""

    def __init__(self, p: Pass, *, early: bool, say: Callable[[str], None], rank_dir: Path | None = None):
        """``early``: return from ``until_written`` once the trace is said written. ``rank_dir`` (a distributed job):
        the directory of the rank whose launcher's lines about its trace and operators' trace are read."""
        self.p = p
        self._written = threading.Event()
        self._started = time.monotonic()
        self.pending = False  # the trace is read while the process still exits
        self.early = early and p.torch_trace is not None
        self.said_code: int | None = None  # the exit code the launcher said it will return (EXIT_SAID)
        self.nothing_recorded = False      # --record-from window, and no window started: no trace was written
        self._first_rank_written: float | None = None  # a distributed job's window stopped it: first rank's trace
        self._said_end: tuple | None = None  # (code, timed out, interrupted) as ``provisional`` took them
        # a distributed job (``rank_dir``): the ranks whose trace is written, and how many said their exit code
        self._job_dir = rank_dir.parent if rank_dir is not None and p.torch_trace is not None else None
        self._ranks_written: set[str] = set()
        self._codes_said = 0
        # A first run's operators until the window (``--ops-trace``) are on disk; the program's GPU work is over (it
        # said its exit code, or wrote its trace, or ended; a job: every rank that started said its exit code, or the
        # job ended): a replay may use the GPU from then on.
        self.ops_written = threading.Event()
        self.program_done = threading.Event()
        self.writers = Writers()
        if p.torch_trace is not None:
            def said(path: Path) -> Path:
                return path if rank_dir is None else rank_dir / path.name
            marker = f"{TRACE_WRITTEN}{said(p.torch_trace)}"
            ops_marker = f"{OPS_WRITTEN}{said(p.ops_trace)}" if p.ops_trace is not None else None

            def on_line(line: str) -> None:
                i = line.find(LAUNCHER)  # after text the program left without a newline (a progress bar's \r ...)
                line = line[i:] if i > 0 else line
                self.writers.line(line)
                if rank_dir is not None:
                    rank_recording(line, p.ranks_recorded, round(time.monotonic() - self._started, 3))
                    if line.startswith(TRACE_WRITTEN) and not line.startswith(OPS_WRITTEN):
                        m = _RANK_DIR.search(line)
                        if m:
                            self._ranks_written.add(m.group(1))
                    # (the window's events were read from earlier lines: ``running.start_pass``)
                    if line.startswith(TRACE_WRITTEN) and not line.startswith(OPS_WRITTEN) and \
                            p.stopped_after_window and self._first_rank_written is None:
                        self._first_rank_written = time.monotonic()
                if line.startswith(marker):
                    m = _RECORDED_FROM.search(line)
                    if m:
                        p.recorded_from_s = float(m.group(1))
                    self._written.set()
                    if self._job_dir is None:  # (a job's: once every rank said its exit code, below)
                        self.program_done.set()
                elif ops_marker is not None and line.startswith(f"{WRITE_FAILED}{said(p.ops_trace)}"):
                    self.ops_written.set()  # (it will not grow: the replay is planned from the trace instead)
                elif ops_marker is not None and line.startswith(ops_marker):
                    m = _PROGRAM_S.search(line)
                    p.operators_until_s = float(m.group(1)) if m else 0.0
                    self.ops_written.set()
                elif line.startswith(NOTHING_RECORDED):
                    self.nothing_recorded = True
                    if self._job_dir is None:
                        self.program_done.set()
                elif line.startswith(EXIT_SAID):
                    try:
                        code = int(line[len(EXIT_SAID):].split()[0])
                        # a job's code: the first rank's that failed, else 0 (as torchrun's, which fails with a rank)
                        self.said_code = code if not self.said_code else self.said_code
                        self._codes_said += 1
                    except (ValueError, IndexError):
                        pass
                    if self._job_dir is None or self._codes_said >= len(self._ranks_started()):
                        self.program_done.set()  # a job's GPU work is over once every rank that started said so
            p.on_line = on_line
        self.run = start_pass(p, say=say)
        self._ended: float | None = None  # when the process ended (finish may come much later)
        if self.early or self._job_dir is not None:
            threading.Thread(target=self._note_end, daemon=True, name="nsighttc-timeline-end").start()

    def _note_end(self) -> None:
        self.run.proc.wait()
        self._ended = time.monotonic()
        self.program_done.set()

    def ops_done(self) -> bool:
        """The operators' trace will not grow any more: the launcher said it is written (or could not be), or its
        process ended and no forked copy of it still writes."""
        return self.ops_written.is_set() or self._ended_writing()

    def trace_done(self) -> bool:
        """The trace will not grow any more: the launcher said it is written, or its process ended and no forked copy
        of it still writes."""
        return self._written.is_set() or self._ended_writing()

    def _ended_writing(self) -> bool:
        return self.run.proc.poll() is not None and not self.writing()

    def writing(self) -> bool:
        """A forked copy of the launcher's process said it writes a trace, has not said it ended, and is still there
        (the pass' stderr, which it shares, is open)."""
        return bool(self.writers.pending()) and self.run.output_open()

    def _wait_for_writers(self, deadline: float | None) -> None:
        """The process ended: wait while a forked copy of it still writes a trace (``WRITERS_GRACE_S`` at most)."""
        limit = time.monotonic() + WRITERS_GRACE_S
        while self.writing() and time.monotonic() < limit and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.02)

    @property
    def said_written(self) -> bool:
        """The launcher said its trace is complete (a process that died while writing never says it)."""
        return self._written.is_set()

    def until_written(self, timeout: float | None) -> Pass:
        """Wait until the trace is written (the process may still be exiting: ``pending``) or the process
        ended; on timeout or Ctrl-C the pass is stopped like ``finish_pass`` stops it."""
        deadline = None if timeout is None else self._started + timeout
        try:
            while self.run.proc.poll() is None:
                if self._job_dir is not None and self._job_written():
                    if self.run.proc.poll() is None:  # every rank's trace is on disk: read while the job exits
                        self.pending = True
                        self.p.seconds = time.monotonic() - self._started
                        return self.p
                    break
                if not self.early:
                    time.sleep(0.02)  # (one rank's trace said written is not the job's end)
                    if self._first_rank_written is not None and \
                            time.monotonic() - self._first_rank_written > RANKS_END_GRACE_S:
                        self._stop_ranks_left_running()
                elif self._written.wait(0.02):
                    if self.run.proc.poll() is None:
                        self.pending = True
                        self.p.seconds = time.monotonic() - self._started
                        return self.p
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
        except KeyboardInterrupt:  # as finish_pass: the whole group is stopped, the pass says interrupted
            self.run.kill(grace_s=2.0)
            finish_pass(self.p, self.run, None)
            self.p.interrupted = True
            return self.p
        self._wait_for_writers(deadline)
        left = None if deadline is None else max(deadline - time.monotonic(), 0.01)
        return finish_pass(self.p, self.run, left)

    def _job_written(self) -> bool:
        """Every rank that started has written its trace and said its exit code (``rank<N>`` directories: each rank
        makes its own as it starts, long before any rank's window ends)."""
        written = set(self._ranks_written)  # (a copy: the line reader's thread adds to it)
        if not written or self._codes_said < len(written):
            return False
        started = self._ranks_started()
        return started <= written and self._codes_said >= len(started)

    def _ranks_started(self) -> set[str]:
        return {d.name[4:] for d in self._job_dir.glob("rank*") if d.name[4:].isdigit() and d.is_dir()}

    def _stop_ranks_left_running(self) -> None:
        """A rank ran on long after another's window stopped its program: stop the job (its launchers, interrupted,
        write what they recorded where they can) and say so in the pass (``ranks_left_running_s``)."""
        self._first_rank_written = None
        self.p.ranks_left_running_s = RANKS_END_GRACE_S
        self.run.kill(grace_s=5.0)

    def provisional(self) -> bool:
        """While the process still exits after its trace: take the exit code the launcher said it returns as the
        pass' own (its time: until the trace was complete), so the verdict and report are made during the exit
        (0.8-2.5 s on H100 after the trace, against 0.5-0.9 s of analysis and report: reports/window). False
        (nothing set) when the pass has ended or the launcher said no code; ``finish`` later records the real end,
        and whether it differs (``changed``)."""
        if not self.pending or self.said_code is None:
            return False
        self.p.returncode = self.said_code
        self.p.trace_written_s = round(self.p.seconds, 3)
        self._said_end = self._end()
        return True

    def changed(self) -> bool:
        """After ``finish``: the pass ended otherwise than the verdict made on ``provisional`` said."""
        return self._end() != self._said_end

    def _end(self) -> tuple:
        return self.p.returncode, self.p.timed_out, self.p.interrupted

    def finish(self, timeout: float | None) -> Pass:
        """The pass' end when the trace was read before it (a no-op otherwise)."""
        if self.pending:
            self.pending = False
            written_after = self.p.seconds
            finish_pass(self.p, self.run, timeout)
            self.p.trace_written_s = round(written_after, 3)
            if self._ended is not None and self.p.returncode is not None:  # the process' own end, not ours
                self.p.seconds = self._ended - self._started
        return self.p

    def stop(self) -> None:
        """Something failed after the trace was read: do not leave the exiting process behind."""
        if self.pending:
            self.pending = False
            self.run.kill(grace_s=2.0)
            self.run.wait(5.0)
