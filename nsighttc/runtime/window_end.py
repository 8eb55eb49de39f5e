"""How a window ends and what runs after it: the program stopped at the step boundary that ends the last window, or
run on unrecorded, its steps after the window timed; a program whose end is known ending by itself.

- With ``--window-end stop`` (the default run's default) the program is stopped at the step boundary that ends the
  window (under torch.profiler: up to ``UNRECORDED_STEPS`` steps later, the recording stopped, so that the same run
  times its steps unrecorded too, and its trace written after them: the ``unrecorded`` event; a distributed job's
  ranks time the count rank 0 decided, ``runtime.unrecorded``), by raising ``WindowDone`` there (a ``BaseException``:
  the program's ``except Exception`` does not catch it, its ``finally`` blocks run, and the launcher exits 0 after
  writing what was recorded). ``--window-end continue`` (``profile --full-run``) ends the recording there instead and
  lets the program run on unrecorded.
- Steps inside a named phase range (``annotate.range("train")`` around ``annotate.step()``) may be followed by other
  phases, which cannot be known ahead: the recording goes on for ``PHASE_GRACE_S`` after the phase's window; a phase
  whose steps begin meanwhile is recorded the same way, and the program is stopped at the first step boundary after
  a grace in which none began.
- A program whose last run ended inside the hooks' window or during its unrecorded steps after it (the ``ended``
  event: after how many optimizer steps, kept by the evidence cache, ``--window-last-optimizer-step``) has a window
  of ``END_WINDOW_STEPS`` steps, and its steps after it are timed unrecorded until it ends by itself, as its last run
  did (``_end_known``); a window still open at that optimizer step ends with its step (``_at_last_step``): the
  profiler stops there as at the program's end, and what the program does after its last step runs unrecorded.
"""
from __future__ import annotations

import json
import threading

from ..record_format import HOOK_PHASE, WINDOW_EVENT as EVENT_PREFIX
from .unrecorded import BEFORE_WINDOW_MIN, UNRECORDED_MIN, AfterWindow, after_steps, before_window
from .window_recorders import _cuda_in_use, _synchronize
from .window_sizing import END_SLACK, MIN_STEPS, MIN_WARMUP, PHASE_GRACE_S, Phase


class WindowDone(BaseException):
    """The window is recorded: the program stops here (raised at a step boundary, caught by the launcher)."""


class WindowEnd:
    """The part of ``window.Window`` that ends windows and times what runs after them (the module docstring): a mixin,
    its state (``phases``, ``recorder``, ``ranks``, ``stop``, ...) the window's."""

    @staticmethod
    def _at_last_step(ph: Phase) -> bool:
        """Whether the window ends at a hook step that ended with the optimizer step the program's last run ended
        after, inside its window (``hook_boundary(last=True)``: the step hooks count them,
        ``--window-last-optimizer-step``, the ``ended`` event's ``optimizer_steps`` kept by the evidence cache): so
        that what the program does after its last step runs unrecorded. Why: a cached DDP run's rank recorded its
        program's end (``gc.collect``, ``destroy_process_group``: 0.44 s against 0.25 s plain, two H200s,
        reports/profile_overhead/torchrun_cost call 17) and stopped the profiler after it. Only once the window
        holds as many steps as a window needs (``MIN_STEPS``, or the fewer it was sized for): a program that runs
        longer this time keeps its window."""
        return ph.n - ph.warmup >= min(ph.steps, MIN_STEPS)  # (``last`` comes from the hooks' steps alone)

    def _after_count(self, ph: Phase) -> int:
        """How many steps to time unrecorded after the window, the first (which holds the profiler's stop) included:
        about ``UNRECORDED_MAX_S`` of them (``unrecorded.after_steps``); where the warm-up's last steps ran unrecorded
        (a run recording from the window), only as many as make ``BEFORE_WINDOW_MIN`` with them, at least
        ``UNRECORDED_MIN`` (``runtime.unrecorded`` says why). A program whose end is known (``_end_known``) times every
        step it has left after the window, ``END_SLACK`` more: it ends by itself, as its last run did, unrecorded."""
        before = self._unrecorded_before(ph)
        count = 1 + max(UNRECORDED_MIN, BEFORE_WINDOW_MIN - before) if before else after_steps(self._sizing_median(ph))
        left = self._end_known(ph)
        if left is not None:  # (asked at the window's start, or at its end: ``_stop``)
            after = left - (self._window_steps(ph) if ph.state == "warmup" else 0)
            count = max(count, 1 + after + END_SLACK)
        return count

    def _unrecorded_before(self, ph: Phase) -> int:
        """The warm-up's last steps that ran unrecorded and count for the program's unrecorded speed (``before_window``);
        none for a generation loop, whose decode calls are timed after the window (the steps before it are not told
        apart by kind)."""
        if self.generation and ph.key == HOOK_PHASE:
            return 0
        return len(before_window(ph.durations, ph.recorded, ph.compiled, MIN_WARMUP))

    def _end_known(self, ph: Phase) -> int | None:
        """The optimizer steps left before the one the program's last run ended after, inside or just after its
        window (``steps_left``, from the step hooks: --window-last-optimizer-step), or None where not known, or where
        an explicit --window-steps or --window-warmup is obeyed as given. Such a program's window holds
        ``END_WINDOW_STEPS`` steps from where its warm-up is steady, and its steps after it are timed unrecorded until
        it ends by itself (``_after_count``), where it used to record every step from there to its last. Why: a
        window's cost grows with the steps it holds: CUPTI's record of every launch slowed a DDP rank's steps from
        28-34 to 40-57 ms, and torch.profiler's stop grows with the records (two H200s, DDP ResNet-50 AMP, 16 steps
        recorded of 22: reports/profile_overhead/torchrun_cost, calls 26-29); a verdict needs ``MIN_STEPS``. The
        window is not moved to the program's end: a run shorter than its last would end before it started."""
        if self.steps_left is None or self.steps is not None or self.warmup is not None or ph.key != HOOK_PHASE:
            return None  # (the optimizer steps counted are the hooks': a phase of the program's own steps is not told)
        return self.steps_left()

    def _stop(self, ph: Phase, grace: bool = False, program_end: bool = False) -> None:
        """The last window is recorded: stop the program (``WindowDone``), or with ``--window-end continue`` end the
        recording and let the program run on. ``program_end``: the window ended at the step where the program's last
        run ended: where no steps are to be timed after it, the program is not stopped there (what it does after its
        last step, saving a model say, still runs), its trace written as it ends."""
        if grace:
            self._event("stop" if self.stop else "finish", ph.key, ph, grace_s=PHASE_GRACE_S)
        self.stop_at = None
        # A distributed job's ranks stop together: each times the steps rank 0's decision said (``after_steps``), in a
        # window they agreed on; one rank timing more steps than another would wait alone in its next collective.
        count = None if self.ranks is None else ((ph.after_steps or 0) if ph.agreed else 0)
        # (a single process: its own count; a job's ranks take rank 0's, said at the window's start)
        if count is None and (self._unrecorded_before(ph) or self._end_known(ph) is not None):
            count = self._after_count(ph)
        timed = not grace and self.unrecorded and self.recorder.name == "torch" and count != 0
        if program_end:  # its trace is written as the program ends, which says its exit code then (the launcher)
            self.recorder.follow = True
        if not self.stop:
            self.recorder.finish()
            if timed:  # --full-run: the program runs on unrecorded; its first steps are timed all the same
                self._after = AfterWindow(ph.key, self.clock(), self.next_step, then="continue", count=count,
                                          sync=_device_sync(), clock=self.clock)
            else:
                self.enabled = False
            return
        if timed:
            self.recorder.follow = True  # the profiler stops now, its trace is written after the unrecorded steps
            self.recorder.finish()
            self._after = AfterWindow(ph.key, self.clock(), self.next_step, then="stop", count=count,
                                      sync=_device_sync(), clock=self.clock)
            return
        if program_end:
            self.recorder.finish()
            self.enabled = False
            return
        self._raise_done(ph)

    def _raise_done(self, ph) -> None:
        self.stopped = True
        if threading.current_thread() is threading.main_thread():
            raise WindowDone(f"window of {ph.steps} steady steps recorded")
        import _thread
        _thread.interrupt_main()  # a step boundary seen on another thread: stop the main one

    def _after_boundary(self, key: tuple, took: float | None, data: float = 0.0) -> None:
        """A step ended after the last window, the recording stopped: time it; after enough, say what they took
        (the ``unrecorded`` event) and stop the program (``--full-run``: let it run on)."""
        a = self._after
        if key != a.key:
            return
        self._ended_at = None  # (the program ran on past the step its last run ended at)
        if a.step(self.clock(), took, self.next_step, data if took is None else 0.0):
            self.close()
            if a.then == "stop":
                self._raise_done(self.phases[key])
            else:
                self.enabled = False

    def close(self, ended: bool = False, optimizer_steps: int | None = None) -> None:
        """The program ends (or is stopped): say what the unrecorded steps after the window took, if any ran.
        ``ended``: the program ended by itself (not stopped, interrupted or failed): where it ended inside the hook
        steps' window, or at the step where its last run did (``_at_last_step``), the ``ended`` event says after how
        many ``optimizer_steps`` (the step hooks' count), for the evidence cache to give its next run."""
        a, self._after = self._after, None
        doc = a.event(self.recorder.name) if a is not None else None
        if doc is not None:
            self.events.append(doc)
            self.emit(EVENT_PREFIX + json.dumps(doc))
        ph = self.phases.get(HOOK_PHASE)
        # (or during its unrecorded steps after the window: what a program whose end is known does, ``_end_known``)
        if ended and optimizer_steps and ph is not None and not self.explicit and (
                ph.state == "window" or (ph.state == "done" and (self._ended_at == ph.n or a is not None))):
            self._event("ended", ph.key, ph, optimizer_steps=int(optimizer_steps))
        self.recorder.flush()  # the trace, written once they are over


def _device_sync():
    """The device's synchronisation for timing the steps after a window (``unrecorded.AfterWindow``), where the
    program uses CUDA; None elsewhere (a CPU program's host times are its steps' own)."""
    return _synchronize if _cuda_in_use() else None
