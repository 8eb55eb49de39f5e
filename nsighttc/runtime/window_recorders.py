"""What a window of steady steps switches in the recording (``runtime.window``): nothing (nsys), torch.profiler's
sessions and its start (``TorchRecorder``), or Nsight Compute's profiling range (``CudaProfilerRecorder``). Kept apart
from the window's state machine: these are the only parts that touch the profilers, and ``runtime.window``'s
docstring says what each does and why."""
from __future__ import annotations

import sys
import time

from .lines import say


class Recorder:
    """What a window switches: nothing (nsys records the whole run up to the stop). ``at_program_end``: the window
    ended at the step where the program's last run ended (``Window._at_last_step``): what ends the recording there
    does as at the program's end."""
    name = "none"
    at_program_end = False

    def wants_prepare(self) -> bool:
        """Whether this recorder has work to do one step before a window starts (``prepare``)."""
        return False

    def prepare(self) -> None:
        """The step before a window's (``wants_prepare``): the window starts at the next step boundary."""

    def ready(self) -> bool:
        """What ``prepare`` started is done: the window may start (``runtime.window`` waits a few steps for it)."""
        return True

    def settled(self) -> None:
        """The warm-up is steady, but the window waits for its first step (a generation loop's next request), and
        the recording ends with that window."""

    def recording(self) -> bool:
        """Whether the program's steps are being recorded now (nsys: from the program's start to its stop)."""
        return True

    def flush(self) -> None:
        """The steps timed unrecorded after the last window are over: write what was held back for them."""

    def window_start(self, last: bool = False) -> None:
        """A window starts; ``last``: the recording ends with it (the program stops or runs on unrecorded after)."""

    def window_end(self) -> None:
        pass

    def step_in_window(self) -> None:
        """A step boundary inside a window (its first step ended, or a later one)."""

    def finish(self) -> None:
        """Nothing more will be recorded: the recording may end now (the program runs on)."""


def _cuda_in_use() -> bool:
    """Whether the program has initialised CUDA (nothing here initialises it)."""
    torch = sys.modules.get("torch")
    try:
        return torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    except Exception:
        return False


def _synchronize() -> None:
    if _cuda_in_use():
        try:
            sys.modules["torch"].cuda.synchronize()
        except Exception:
            pass


class TorchRecorder(Recorder):
    """torch.profiler, recording from the program's start; ``finish`` (``--window-end continue``, once no phase is
    left to record) stops it and writes the trace while the program runs on unrecorded.

    ``start`` (``--record-from window``): the profiler starts at the first window's start, so the start-up and
    warm-up cost neither recording nor the stop's processing. Used where the evidence cache knows the program had
    a window on its last run (the default run's second run); ``started_at`` (the recorder's clock) says when, for
    the report's start-up.

    ``sessions`` (a first run, ``runtime.recording.OperatorsUntilWindow``): at the start of a window that ends the
    recording, the profiler recording operators with their arguments gives way to one recording the ranges only;
    where the warm-up settles before the window can start (``settled``), the change comes there."""
    name = "torch"

    def __init__(self, finish, start=None, clock=time.perf_counter, sessions=None):
        self._finish, self._start, self._clock, self.sessions = finish, start, clock, sessions
        self.finished = False
        self.follow = False  # the program runs on unrecorded after ``finish`` (the window's unrecorded steps)
        self.deferred = None  # the trace's writing, held back until those steps are over (``flush``)
        self.started_at: float | None = None if start is not None else 0.0
        self.start_seconds: float | None = None  # how long the profiler's start held the program (CUPTI's set-up)

    def recording(self) -> bool:
        return self.started_at is not None and not self.finished

    def flush(self) -> None:
        write, self.deferred = self.deferred, None
        if write is not None:
            write()

    def _begin(self) -> None:
        """``--record-from window``: the profiler starts (once)."""
        if self.started_at is None and not self.finished:
            self.started_at = self._clock()
            self._start()
            self.start_seconds = self._clock() - self.started_at
            from . import annotate
            annotate.label_open_ranges()  # the phase's range (and the launcher's) around the window's steps

    def window_start(self, last: bool = False) -> None:
        self._begin()  # (where no step before the window started it: ``prepare``, ``settled``)
        if self.sessions is not None and self.sessions.ops_trace is None:
            self.sessions.keep()  # a rank that drops its first session does so before a window only, never inside
        elif self.sessions is not None and self.sessions.state == "pending":
            # a change asked for before the window still waits (a record_function of the program's is open): it is
            # given up, so no session that records a window is ever stopped or replaced (``hold_window``)
            self.sessions.hold_window()
        elif self.sessions is not None and (last or self.sessions.any_window) and not self.finished:
            self.sessions.request()  # a first run: the operators until here, the window with the ranges only

    def step_in_window(self) -> None:
        """A change asked for at the window's start may run until its first step ends (a boundary inside
        ``Optimizer.step#...`` runs it when that range closes, at once); one still waiting then (a range of the
        program's open across the steps) is given up: it would otherwise run when that range closes, inside or
        after the window, stopping the session that records it (``OperatorsUntilWindow.hold_window``)."""
        if self.sessions is not None and self.sessions.state == "pending":
            self.sessions.hold_window()

    def settled(self) -> None:
        self._begin()  # --record-from window: the recording runs before the request that starts the window
        if self.sessions is not None and self.sessions.state in ("operators", "lead") and not self.finished:
            self.sessions.request()  # a first run: the operators of the steady warm-up are enough

    def wants_prepare(self) -> bool:
        """The recording a window needs is started one step before the window, never at its start:

        - ``--record-from window``: the profiler itself. A session's first moments are not the steady state: its
          start holds the program (CUPTI's set-up), and torch's profiler loses or misplaces GPU records at the
          start of a session (pytorch/pytorch#192021: kernel records at a session's head with timestamps off
          CUPTI's clock; #175790: a later session's GPU work shifted in time). On two H100s a torchrun job whose rank 0
          started its window's recording (a second session) 0.5 s before the program ended kept no GPU work there.
        - A rank of a distributed job that records operators (``sessions.any_window``) changes sessions: the change
          (profiler stop and writing the operators' trace: 1.4 s for DDP ResNet-50 on H100) holds this rank, and the
          other ranks wait for it in their next collective. At the window's start that wait fell inside every
          other rank's window: two H100s, call45, rank 1 waited 45-79 ms "in communication" per window step of a
          72-88 ms step, and a 30 ms straggler went unnamed. Where that rank records the ranges only until a few steps
          before the window (``recording.OperatorsUntilWindow``'s ``lead``), it changes twice: to the operators, and
          ``recording.OPERATOR_STEPS`` steps later to the window's ranges (``runtime.window`` asks again)."""
        if self.finished:
            return False
        if self.started_at is None:
            return True
        return self.sessions is not None and self.sessions.any_window and \
            self.sessions.state in ("operators", "lead", "capturing")

    def prepare(self) -> None:
        if self.started_at is None:
            self._begin()
        elif self.wants_prepare():
            self.sessions.request()

    def ready(self) -> bool:
        """Not while a change of sessions waits for a ``record_function`` to close (``OperatorsUntilWindow``): its
        profiler stop would come inside the window. The lead's change to the operators still waiting a step after it
        was asked for (the program's range open across its steps) gives way to recording them in the session that
        runs (``capture_instead``), and the window goes on as after that change."""
        if self.sessions is not None and self.sessions.state == "pending":
            return self.sessions.capture_instead()
        return True

    def window_end(self) -> None:
        if self.sessions is not None:
            self.sessions.cancel()  # not changed yet (a record_function stayed open): one session to the end

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            if self.sessions is not None:
                self.sessions.cancel()
            self._finish()


class CudaProfilerRecorder(Recorder):
    """cudaProfilerStart/Stop around each window (Nsight Compute with ``--profile-from-start off``). With no window
    (``always``), profiling starts at once: the program has no steps to choose from."""
    name = "cuda"

    def __init__(self, always: bool = False):
        self.on = False
        if always:
            self.window_start()

    def window_start(self, last: bool = False) -> None:
        try:
            import torch.cuda.profiler as cp
            cp.start()
            self.on = True
        except Exception as exc:  # noqa: BLE001 - no CUDA: there is nothing for ncu to profile anyway
            say(f"nsighttc.launch: window: cudaProfilerStart failed ({type(exc).__name__}: {exc})")

    def window_end(self) -> None:
        if not self.on:
            return
        _synchronize()
        try:
            import torch.cuda.profiler as cp
            cp.stop()
        except Exception:
            pass
        self.on = False
