"""A window of steady steps, chosen inside the program while it runs: what the default ``nsighttc profile`` run
records in detail, so that a training run of hours gives its verdict in seconds and the rest of it runs at full
speed, or not at all.

The launcher (``nsighttc.runtime.launch --window-*``) tells the window about every step boundary it sees: the step
hooks' ``nsighttc.step`` (``runtime.steps``) and the program's own ``annotate.step()`` ranges (which win, as in the
analysis). Per phase (the path of ``annotate`` ranges a step family sits in; the hook steps are one phase):

1. **Warm-up**: ``--window-warmup N`` steps, or ``auto``: until the last ``STEADY_RUN`` steps each lie within
   ``STEADY_TOLERANCE`` of their median and none of them compiled (torch.compile's callbacks, counted by the
   hooks), and never fewer than ``MIN_WARMUP`` steps; a phase that never settles starts its window after
   ``MAX_WARMUP_STEPS`` steps or ``MAX_WARMUP_S`` seconds anyway, and a program the evidence cache knows after as
   many steps as its last run's warm-up at the latest (``--window-warmup-max``: the same stretch of the program
   recorded run after run, and a program that ends inside its window keeps its window's steps). The step times are the host's (step end to
   step end): in a steady loop the host waits for the GPU (a full launch queue, ``.item()``, a sync) and its
   step time is the GPU's.
2. **The window**: ``--window-steps N`` steps, or enough for ``TARGET_WINDOW_S`` seconds at the median step
   of the warm-up's last steps, between ``MIN_STEPS`` and ``MAX_STEPS``. A generation loop's window (the hooks
   saw prefill and decode calls) holds whole requests instead: it starts at a prefill and ends at one, after
   ``GEN_REQUESTS`` requests, or at the first request boundary past ``GEN_WINDOW_S`` seconds. Where the steps fall
   inside the window (the warm-up's agreeing steps were a plateau of slow early ones), the window runs on for a
   window's worth of steps at the new rate, within the bounds its length had (not in a window the ranks of a
   distributed job agreed on: its length is the one they agreed on, or one rank stops while another still runs).
3. **Then**: with ``--window-end stop`` (the default run's default) the program is stopped at the step boundary
   that ends the window (under torch.profiler: up to ``UNRECORDED_STEPS`` steps later, the recording stopped, so
   that the same run times its steps unrecorded too, and its trace written after them: the ``unrecorded`` event,
   issue 51; a distributed job's ranks time the count rank 0 decided, ``runtime.unrecorded``), by raising ``WindowDone`` there (a ``BaseException``: the program's ``except Exception``
   does not catch it, its ``finally`` blocks run, and the launcher exits 0 after writing what was recorded).
   Steps inside a named phase range (``annotate.range("train")`` around ``annotate.step()``) may be followed by
   other phases, which cannot be known ahead: the recording goes on for ``PHASE_GRACE_S`` after the phase's window;
   a phase whose steps begin meanwhile is recorded the same way (warm-up, window), and the program is stopped at
   the first step boundary after a grace in which none began (a program with one training phase pays the grace
   once; the phases of a program that runs several in a row are each recorded, and what lies between them).
   ``--window-end continue`` (``profile --full-run``) ends the recording there instead and lets the program run
   on unrecorded. A program whose last run ended inside the hooks' window or during its unrecorded steps after it
   (the ``ended`` event: after how many optimizer steps, kept by the evidence cache,
   ``--window-last-optimizer-step``) has a window of ``END_WINDOW_STEPS`` steps, and its steps after it are timed
   unrecorded until it ends by itself, as its last run did (``_end_known``); a window still open at that optimizer
   step ends with its step (``_at_last_step``): the profiler stops there as at the program's end, and what the
   program does after its last step runs unrecorded, not stopped.

What is switched is a ``Recorder``:
- ``TorchRecorder`` (the torch engine): torch.profiler runs from the program's start, so start-up, warm-up and
  a program too short for a window are recorded as before. It is never paused: torch 2.11's
  ``toggle_collection_dynamic`` dropped every GPU event of the trace, those recorded before the pause included
  (H100, ``benchmarks/gpu/gpu_window.sh``, ResNet-50 AMP: "the trace holds no GPU events"); ``--window-end continue``
  stops it and writes the trace at the window's end instead. With ``--record-from window`` (a second run the
  evidence cache knows) it starts at the first window's start instead, and the annotate ranges open then are
  labelled from there (``annotate.label_open_ranges``).
- ``CudaProfilerRecorder`` (the Nsight Compute pass on the program, run with ``--profile-from-start off``):
  ``cudaProfilerStart`` at the window's start, ``cudaProfilerStop`` at its end, so ncu profiles only steady
  steps (one per phase is enough) and the warm-up runs without kernel replays.
- ``Recorder`` itself (nsys): nothing to switch; nsys records the program until the window stops it (with
  ``--window-end continue``, to its end).

A recorder with work to do before a window (``Recorder.wants_prepare``: a distributed first run's rank 0, which
changes profiler sessions) gets a ``prepare`` decision one step before the window's ``start``. Each window is also
a ``nsighttc.window`` mark in the recording (``runtime.steps.WINDOW``, set by the launcher: ``mark_windows``), from
which the analysis leaves every earlier step out of the steady state.

Each event is printed as one line (``EVENT_PREFIX`` + JSON) for the profile run to read (``profile.window``).
"""
from __future__ import annotations

import json
import math
import threading
import time

from .lines import say
from .unrecorded import BEFORE_WINDOW_MIN, AfterWindow, after_steps, before_window
from .unrecorded import UNRECORDED_MAX_S, UNRECORDED_MIN, UNRECORDED_STEPS  # noqa: F401 - (the docstring's, tests')
from .recording import OPERATOR_STEPS
from .window_recorders import CudaProfilerRecorder, Recorder

from ..record_format import HOOK_PHASE, WINDOW_EVENT as EVENT_PREFIX  # noqa: F401 - (what the tool reads)

STEADY_RUN = 3              # steps whose times must agree for the warm-up to be over
STEADY_TOLERANCE = 0.20     # each within 20% of their median
MIN_WARMUP = 2              # the first steps are never steady (allocator growth, cuDNN/cuBLAS heuristics)
MAX_WARMUP_STEPS = 50       # a phase that never settles: its window starts anyway
MAX_WARMUP_S = 30.0
TARGET_WINDOW_S = 2.0       # the window's length at the steady step time
MIN_STEPS = 10              # enough steps for the analysis' median and its warm-up rule
END_WINDOW_STEPS = MIN_STEPS + 2  # the window of a program whose end is known (``Window._end_known``)
END_SLACK = 2               # ... times this many steps more than its last run had before stopping it (an AMP loop's
                            # scaler skips a different count of optimizer steps from run to run)
MAX_STEPS = 100
PREPARE_WAIT_STEPS = 4      # a recorder not ready this many steps after its preparation: the window starts anyway
PHASE_GRACE_S = 3.0         # after a named phase's window: how long another phase may take to begin
# After the last window, in a single process, the program runs on unrecorded for a few steps, timed (issue 51); a
# run recording from the window times its warm-up's last steps unrecorded: ``runtime.unrecorded``.
# Generation loops (the hooks saw prefill and decode calls, ``runtime.steps``): the window starts where a request
# starts (its prefill) and ends where one starts, after ``GEN_REQUESTS`` whole requests, or at the first request
# boundary after ``GEN_WINDOW_S`` seconds (at least one whole request): time to first token needs the prefills, time
# per output token whole requests (issue 44). Bounded by time as any window is, because a window's cost grows with what
# it holds: a Llama-shaped decoder's 288 model calls (3 requests of 96 tokens, ~690 kernels a call) took torch.profiler
# 4.5-5.9 s to stop and 3.6-4.9 s to write, the first and cached runs 1.24x and 1.11x plain (H100, torch 2.11,
# reports/structural call_cost).
GEN_REQUESTS = 3
GEN_WINDOW_S = TARGET_WINDOW_S


class WindowDone(BaseException):
    """The window is recorded: the program stops here (raised at a step boundary, caught by the launcher)."""


def parse_count(text) -> int | None:
    """A number of steps (0 or more), or ``auto``: None. ValueError says what is wrong (the launcher's and the CLI's
    ``--warmup``/``--steps`` both read them here)."""
    if text is None or text == "auto":
        return None
    try:
        n = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of steps or 'auto', got {text!r}") from None
    if n < 0:
        raise ValueError(f"expected a number of steps >= 0, got {n}")
    return n


def window_steps(median_s: float | None, steps: int | None = None) -> int:
    """How many steps the window records: ``steps`` if given, else ``TARGET_WINDOW_S`` worth of steps."""
    if steps is not None:
        return max(1, int(steps))
    if not median_s or median_s <= 0:
        return MIN_STEPS
    return int(min(MAX_STEPS, max(MIN_STEPS, math.ceil(round(TARGET_WINDOW_S / median_s, 6)))))


def is_steady(durations: list[float], compiled: list[bool], n_steps: int) -> bool:
    """The auto warm-up rule (see the module docstring)."""
    if n_steps < max(MIN_WARMUP, STEADY_RUN) or len(durations) < STEADY_RUN:
        return False
    last, comp = durations[-STEADY_RUN:], compiled[-STEADY_RUN:]
    if any(comp):
        return False
    med = sorted(last)[len(last) // 2]
    return med > 0 and all(abs(d - med) <= STEADY_TOLERANCE * med for d in last)


class _Phase:
    __slots__ = ("key", "n", "durations", "compiled", "state", "left", "first_at", "last_at", "begun_at",
                 "compiles_at", "warmup", "steps", "median_s", "prepared", "agreed", "requests", "settled",
                 "prepared_n", "recorded", "after_steps", "sized_s")

    def __init__(self, key: tuple, now: float, compiles: int):
        self.key = key
        self.n = 0                     # steps ended
        self.durations: list[float] = []
        self.compiled: list[bool] = []
        self.recorded: list[bool] = []  # whether the recorder recorded each step (``Recorder.recording``)
        self.after_steps: int | None = None  # unrecorded steps timed after the window, as the ranks agreed
        self.state = "warmup"          # warmup -> window -> done
        self.left = 0
        self.first_at = now
        self.last_at: float | None = None
        self.begun_at: float | None = None
        self.compiles_at = compiles
        self.warmup = 0
        self.steps = 0
        self.median_s: float | None = None
        self.prepared = False          # the recorder's step before the window was taken (``Recorder.prepare``)
        self.prepared_n = 0            # ... at the end of which step
        self.sized_s: float | None = None  # the warm-up's step time before the recorder's first change (``prepare``)
        self.agreed = False            # the window was started by the ranks' agreement (``runtime.window_ranks``)
        self.requests = 0              # a generation loop's requests completed inside the window
        self.settled = False           # the recorder was told the warm-up is steady before the window could start


class Window:
    """The window's state machine (see the module docstring). ``compiles``: a callable giving how many
    compilations the program has started so far (the step hooks count them)."""

    def __init__(self, *, warmup: int | None = None, steps: int | None = None, stop: bool = True,
                 recorder: Recorder | None = None, compiles=lambda: 0, clock=time.perf_counter,
                 emit=None, ranks=None, warmup_max: int | None = None, steps_max: int | None = None):
        self.warmup, self.steps, self.stop = warmup, steps, stop
        self.warmup_max = warmup_max  # an auto warm-up ends here at the latest (the program's last run's warm-up)
        self.steps_max = steps_max    # an auto window holds at most this many steps (the program's last run's window)
        self._ended_at: int | None = None  # a window ended at the program's last step (``_at_last_step``): its step,
                                           # until the program runs past it
        self.recorder = recorder or Recorder()
        self.compiles, self.clock = compiles, clock
        self.emit = emit or say
        self.phases: dict[tuple, _Phase] = {}
        self.explicit = False      # the program marks its own steps: the hooks' steps are not counted
        self.base_depth = 0        # annotate ranges open around the program itself (the launcher's top range)
        self.stopped = False       # WindowDone was raised (the launcher exits 0)
        self.enabled = True
        self.stop_at: float | None = None  # after a named phase's window: stop at the first boundary past this
        self.events: list[dict] = []
        self.ranks = ranks  # a distributed job's ranks agreeing on every decision (runtime.window_ranks)
        self.mark_windows = False  # the launcher's: each window is a ``nsighttc.window`` mark in the recording
        self._mark = None
        self.generation = False    # the hooks saw prefill and decode calls (``runtime.steps``): a generation loop
        self.unrecorded = True     # after the last window, time a few steps with the recording stopped (torch only)
        self._after: AfterWindow | None = None  # those steps, while they run
        self.next_step: str | None = None  # what the step starting at this boundary is: "prefill", "decode" or None
        # optimizer steps left until the one the program's last run ended after, inside or just after its window (the
        # step hooks' ``StepMarks.optimizer_steps_left``, given --window-last-optimizer-step); None: not known
        self.steps_left = None

    def disable(self) -> None:
        """No window (the program has no steps to choose from, as the timeline run found): every step is
        recorded, and a Nsight Compute pass profiles from the start."""
        if not self.enabled:
            return
        self.enabled = False
        if isinstance(self.recorder, CudaProfilerRecorder) and not self.recorder.on:
            self.recorder.window_start()
        self._event("off", (), None)

    # -- what the launcher's hooks call --------------------------------------------------------------
    def hook_boundary(self, last: bool = False) -> None:
        """A hook step ended (``runtime.steps``); ignored once the program marks its own steps. ``last``: it ended with
        the optimizer step the program's last run ended after (``_at_last_step``)."""
        if self.enabled and not self.explicit:
            self._boundary(HOOK_PHASE, named=False, last=last)

    def explicit_begin(self, open_ranges: list) -> None:
        """An ``annotate.step()`` range is entering; ``open_ranges``: the annotate ranges open around it."""
        if not self.enabled:
            return
        if not self.explicit:  # the program marks its own steps: the hooks' steps so far were its warm-up loop
            self.explicit = True
            hook = self.phases.pop(HOOK_PHASE, None)
            if hook is not None and hook.state == "window":
                self._close_mark()
                self.recorder.window_end()
            if hook is not None and hook.state != "warmup":
                self._event("dropped", HOOK_PHASE, hook)
        key = self._key(open_ranges)
        ph = self.phases.get(key)
        if ph is not None and ph.state == "done":
            return
        if ph is None:
            ph = self.phases[key] = _Phase(key, self.clock(), self.compiles())
            self.stop_at = None  # a new phase began within the grace: it is recorded before any stop
        ph.begun_at = self.clock()

    def explicit_end(self, open_ranges: list) -> None:
        if not self.enabled:
            return
        key = self._key(open_ranges)
        ph = self.phases.get(key)
        took = None if ph is None or ph.begun_at is None else self.clock() - ph.begun_at
        self._boundary(key, named=len(open_ranges) > self.base_depth, took=took)

    def _key(self, open_ranges: list) -> tuple:
        return tuple(r.name for r in open_ranges)

    # -- the state machine ----------------------------------------------------------------------------
    def _boundary(self, key: tuple, *, named: bool, took: float | None = None, last: bool = False) -> None:
        """A step of phase ``key`` ended: count it, decide what the window does here (``_decide``), let the ranks of
        a distributed job agree on it (``ranks``: rank 0's decision stands on every rank), then do it."""
        if self._after is not None:
            self._after_boundary(key, took)
            return
        now = self.clock()
        compiles = self.compiles()
        ph = self.phases.get(key)
        first = ph is None
        if first:
            ph = self.phases[key] = _Phase(key, now, compiles)
        if first and took is None:  # a hook step: the first one ended here; times are known from the next one on
            ph.last_at, ph.n = now, 1
        elif ph.state != "done":
            duration = took if took is not None else (now - ph.last_at if ph.last_at is not None else None)
            ph.last_at = now
            ph.n += 1
            if duration is not None:
                ph.durations.append(duration)
                ph.compiled.append(compiles > ph.compiles_at)
                ph.recorded.append(self.recorder.recording())
            ph.compiles_at = compiles
        # Inside a window the ranks agreed to start, they do not agree: its end is counted alike on every rank (they
        # started it at the same boundary with the same length), and waiting there for rank 0 would put rank 0's
        # lateness into every other rank's host time: two H100s, call47, rank 0 sleeping 30 ms a step made rank 1
        # "host busy" 67 ms a step, and no straggler was named. (A window a rank started alone, before the process
        # group existed, is not skipped: the ranks' boundaries would no longer be numbered alike.)
        in_agreed_window = ph.state == "window" and ph.agreed
        action = None if first and took is None else self._decide(ph, now, last)
        agreed = False
        if self.ranks is not None and not in_agreed_window:
            action = self.ranks.agree(action)
            agreed = self.ranks.store is not None and self.ranks.following
            if not self.ranks.following:  # on its own from here: end the recording, never stop this rank alone
                self.stop = False
        if action is not None:
            self._apply(action, ph, named, now)
            if action[0] == "start" and ph.state == "window":
                ph.agreed = agreed

    def _decide(self, ph: _Phase, now: float, last: bool = False) -> list | None:
        """What the window does at this step boundary, from this process' own step times: ``["prepare"]`` (the
        recorder's step before the window, where it has one: ``Recorder.wants_prepare``), ``["start", steps]``,
        ``["end"]``, ``["stop"]`` (after a named phase's grace) or None. Changes nothing but the window's count,
        and tells the recorder once when a generation loop's warm-up is steady before its window can start
        (``settled``)."""
        if ph.state == "done":
            if self.stop_at is not None and now >= self.stop_at and \
                    not any(p.state != "done" for p in self.phases.values()):
                return ["stop"]
            return None
        at_request = self.generation and ph.key == HOOK_PHASE and self.steps is None
        if ph.state == "warmup":
            if ph.prepared:  # the step after the recorder's preparation: the window starts whatever it took, once
                # the recording it prepared runs (a change of sessions still waiting for a record_function to close
                # would otherwise come inside the window: one rank slowed there, the others waiting for it)
                if not self.recorder.ready() and ph.n - ph.prepared_n < PREPARE_WAIT_STEPS:
                    return None
                if self.recorder.wants_prepare():  # a second change before the window: a rank 0 that records the
                    # operators for a few steps (``recording.OPERATOR_STEPS``) after the ranges only
                    return ["prepare"] if ph.n - ph.prepared_n >= OPERATOR_STEPS else None
                return ["start", self._window_steps(ph), self._after_count(ph)]
            ready = (ph.n >= self.warmup) if self.warmup is not None else (
                is_steady(ph.durations, ph.compiled, ph.n) or ph.n >= MAX_WARMUP_STEPS
                or (now - ph.first_at >= MAX_WARMUP_S and ph.n >= MIN_WARMUP)
                or self._past_last_warmup(ph))
            if not ready:
                return None
            if at_request and self.next_step != "prefill":  # (a generation loop's window starts with a request)
                if not ph.settled:
                    ph.settled, ph.prepared_n = True, ph.n
                    self.recorder.settled()  # (this rank's own recording only: nothing the ranks agree on)
                elif self.recorder.wants_prepare() and ph.n - ph.prepared_n >= OPERATOR_STEPS:
                    ph.prepared_n = ph.n  # (a rank 0 recording the operators after the ranges: its second change)
                    self.recorder.settled()
                return None
            if self.recorder.wants_prepare() and not at_request:  # (a request's window starts at its prefill: the
                return ["prepare"]                                  # recorder was told ``settled`` before it)
            return ["start", self._window_steps(ph), self._after_count(ph)]
        ph.left -= 1
        # (not in a window the ranks of a job agreed on: each rank would extend it at its own step, from its own
        # times, and one rank stopped while the other waited in its next collective: two H200s, FSDP2, issue 50)
        if self.steps is None and not ph.agreed and ph.median_s and len(ph.durations) >= STEADY_RUN and \
                all(d < (1 - STEADY_TOLERANCE) * ph.median_s for d in ph.durations[-STEADY_RUN:]):
            # the steps fell inside the window: the warm-up's agreeing steps were a plateau, not the rate (issue 44);
            # the window runs on for a window's worth of steps at the new rate
            ph.median_s = self._recent_median(ph)
            ph.left = max(ph.left, self._window_steps(ph, ph.median_s))
            self._event("extend", ph.key, ph)
        if at_request and ph.begun_at is not None:  # whole requests: the window ends where one starts
            if self.next_step == "prefill":
                ph.requests += 1
                if ph.requests >= GEN_REQUESTS or now - ph.begun_at >= GEN_WINDOW_S:
                    return ["end"]
            return None
        if last and self._at_last_step(ph):
            return ["end", "program_end"]
        return None if ph.left > 0 else ["end"]

    @staticmethod
    def _at_last_step(ph: _Phase) -> bool:
        """Whether the window ends at a hook step that ended with the optimizer step the program's last run ended
        after, inside its window (``hook_boundary(last=True)``: the step hooks count them,
        ``--window-last-optimizer-step``, the ``ended`` event's ``optimizer_steps`` kept by the evidence cache): so
        that what the program does after its last step runs unrecorded. Why: a cached DDP run's rank recorded its
        program's end (``gc.collect``, ``destroy_process_group``: 0.44 s against 0.25 s plain, two H200s,
        reports/profile_overhead/torchrun_cost call 17) and stopped the profiler after it. Only once the window
        holds as many steps as a window needs (``MIN_STEPS``, or the fewer it was sized for): a program that runs
        longer this time keeps its window."""
        return ph.n - ph.warmup >= min(ph.steps, MIN_STEPS)  # (``last`` comes from the hooks' steps alone)

    def _after_count(self, ph: _Phase) -> int:
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

    def _unrecorded_before(self, ph: _Phase) -> int:
        """The warm-up's last steps that ran unrecorded and count for the program's unrecorded speed (``before_window``);
        none for a generation loop, whose decode calls are timed after the window (the steps before it are not told
        apart by kind)."""
        if self.generation and ph.key == HOOK_PHASE:
            return 0
        return len(before_window(ph.durations, ph.recorded, ph.compiled, MIN_WARMUP))

    def _past_last_warmup(self, ph: _Phase) -> bool:
        """The warm-up is as long as the program's last run's (``warmup_max``; its step before the window included,
        where the recorder takes one), and its last steps compiled nothing."""
        if self.warmup_max is None:
            return False
        bound = self.warmup_max - (1 if self.recorder.wants_prepare() else 0)
        return ph.n >= max(bound, MIN_WARMUP) and not any(ph.compiled[-STEADY_RUN:])

    def _window_steps(self, ph: _Phase, median_s: float | None = None) -> int:
        """The window's length (``_sized_steps``); ``END_WINDOW_STEPS`` for a program whose end is known
        (``_end_known``). ``median_s``: sized on this step time instead (a window extended at its steps' new rate,
        which keeps the same bounds: a cached run's extension once recorded a 12-step window's program to its end,
        55 steps, on a loaded 2-core CI host)."""
        n = self._sized_steps(ph, median_s)
        return min(n, END_WINDOW_STEPS) if self._end_known(ph) is not None else n

    def _sized_steps(self, ph: _Phase, median_s: float | None = None) -> int:
        """``TARGET_WINDOW_S`` of the warm-up's last steps, at most the program's last run's window (``steps_max``).
        Why a bound: a run recording from the window (a cached run) sized it on unrecorded steps, faster than the
        recorded ones a first run sized it on: two H200s, FSDP2, 39 steps of 51.6 ms against 24 of 80 ms, and the
        cached run, recording 65 ms steps to the program's end instead of stopping it, cost more than the first
        (1.50x against 1.41x plain, issue 50) for a longer window than the first run's verdict had."""
        n = window_steps(median_s or self._sizing_median(ph), self.steps)
        return min(n, max(int(self.steps_max), MIN_STEPS)) if self.steps is None and self.steps_max else n

    def _end_known(self, ph: _Phase) -> int | None:
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

    @classmethod
    def _sizing_median(cls, ph: _Phase) -> float | None:
        """The warm-up's step time the window is sized on: its last steps' median, taken before the recorder's first
        change of sessions where it made one (the steps that held a change are the recorder's, not the program's:
        with two, a CPU test's rank 0 sized its window on two 1 s stops, 10 steps instead of 100)."""
        return ph.sized_s if ph.sized_s is not None else cls._recent_median(ph)

    @staticmethod
    def _recent_median(ph: _Phase) -> float | None:
        recent = sorted(ph.durations[-STEADY_RUN:])
        return recent[len(recent) // 2] if recent else None

    def _apply(self, action: list, ph: _Phase, named: bool, now: float) -> None:
        what = action[0]
        if what == "prepare" and ph.state == "warmup":
            if not ph.prepared:
                ph.sized_s = self._recent_median(ph)
            ph.prepared, ph.prepared_n = True, ph.n  # (every rank follows: the window starts on all of them)
            self.recorder.prepare()
        elif what == "start" and ph.state == "warmup":
            ph.median_s = self._sizing_median(ph)
            ph.steps = ph.left = int(action[1])
            ph.after_steps = int(action[2]) if len(action) > 2 else None
            ph.warmup, ph.state = ph.n, "window"
            if self.generation and ph.key == HOOK_PHASE:
                ph.begun_at, ph.requests = now, 0  # (``_decide``: the window counts whole requests)
            before = before_window(ph.durations, ph.recorded, ph.compiled, MIN_WARMUP)
            self.recorder.window_start(last=not named)
            _sampler_budget(True)
            self._open_mark()
            # (the window a program whose end is known holds: the steps it would have held are what the evidence cache
            # keeps, ``profile.window.window_steps_seen``, for a run whose end is not known)
            sized = self._sized_steps(ph) if self._end_known(ph) is not None else ph.steps
            self._event("start", ph.key, ph, **({"sized_steps": sized} if sized != ph.steps else {}),
                        **({"unrecorded_before_ms": [round(d * 1e3, 4) for d in before]} if before else {}))
        elif what == "end" and ph.state == "window":
            ph.state = "done"
            program_end = action[1:2] == ["program_end"]
            # as many steps as it held: its whole requests, its steps to that step, or an extended window's
            ph.steps = ph.n - ph.warmup
            self._close_mark()
            self.recorder.window_end()
            _sampler_budget(False)
            if program_end:  # (the profiler's stop there is one at the program's end: CUPTI stays attached)
                self.recorder.at_program_end, self._ended_at = True, ph.n
                self._event("end", ph.key, ph, stop=self.stop, program_end=True)
                self._stop(ph, program_end=True)
                return
            if named:  # another phase may follow: record on for the grace, then stop (or finish) unless one began
                self.stop_at = now + PHASE_GRACE_S
                self._event("end", ph.key, ph, stop=False, grace_s=PHASE_GRACE_S)
                return
            self._event("end", ph.key, ph, stop=self.stop)
            self._stop(ph)
        elif what == "stop":
            self._stop(ph, grace=True)

    def _open_mark(self) -> None:
        """The window's ``nsighttc.window`` mark (``runtime.steps.WINDOW``), opened after the recorder's start so that
        a recording that starts with the window holds it; a recording stopped while it is open closes it."""
        if self.mark_windows:
            from .steps import WINDOW, OpenMark
            self._close_mark()
            self._mark = OpenMark(WINDOW)

    def _close_mark(self) -> None:
        if self._mark is not None:
            self._mark.close()
            self._mark = None

    def _stop(self, ph: _Phase, grace: bool = False, program_end: bool = False) -> None:
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
                self._after = AfterWindow(ph.key, self.clock(), self.next_step, then="continue", count=count)
            else:
                self.enabled = False
            return
        if timed:
            self.recorder.follow = True  # the profiler stops now, its trace is written after the unrecorded steps
            self.recorder.finish()
            self._after = AfterWindow(ph.key, self.clock(), self.next_step, then="stop", count=count)
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

    def _after_boundary(self, key: tuple, took: float | None) -> None:
        """A step ended after the last window, the recording stopped: time it; after enough, say what they took
        (the ``unrecorded`` event) and stop the program (``--full-run``: let it run on)."""
        a = self._after
        if key != a.key:
            return
        self._ended_at = None  # (the program ran on past the step its last run ended at)
        if a.step(self.clock(), took, self.next_step):
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

    def _event(self, event: str, key: tuple, ph: _Phase | None, **extra) -> None:
        doc = {"event": event, "phase": "/".join(key), "recorder": self.recorder.name}
        if ph is not None:
            doc.update({"step": ph.n, "warmup": ph.warmup, "steps": ph.steps,
                        "median_ms": None if ph.median_s is None else round(ph.median_s * 1e3, 3),
                        "auto_warmup": self.warmup is None})
        doc.update(extra)
        self.events.append(doc)
        self.emit(EVENT_PREFIX + json.dumps(doc))


def _sampler_budget(on: bool) -> None:
    """The host sampler, where one runs, samples more often inside a window (``runtime.host_samples.in_window``)."""
    import sys
    mod = sys.modules.get(__package__ + ".host_samples")
    if mod is not None:
        mod.in_window(on)


def read_events(lines) -> list[dict]:
    """The window's events from a launcher's output lines (``EVENT_PREFIX`` + JSON each)."""
    out = []
    for line in lines:
        i = line.find(EVENT_PREFIX)
        if i < 0:
            continue
        try:
            doc = json.loads(line[i + len(EVENT_PREFIX):])
        except ValueError:
            continue
        if isinstance(doc, dict) and "event" in doc:
            out.append(doc)
    return out
