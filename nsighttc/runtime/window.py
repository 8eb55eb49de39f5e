"""A window of steady steps, chosen inside the program while it runs: what the default ``nsighttc profile`` run
records in detail, so that a training run of hours gives its verdict in seconds and the rest of it runs at full
speed, or not at all.

The launcher (``nsighttc.runtime.launch --window-*``) tells the window about every step boundary it sees: the step
hooks' ``nsighttc.step`` (``runtime.steps``) and the program's own ``annotate.step()`` ranges (which win, as in the
analysis). Per phase (the path of ``annotate`` ranges a step family sits in; the hook steps are one phase) it waits
out a warm-up, records a window of steps, then ends it: how long each is, ``window_sizing``; how it ends and what
runs after it, ``window_end``; the ranks of a distributed job agreeing on each decision, ``window_ranks``. Where the
steps fall inside the window (the warm-up's agreeing steps were a plateau of slow early ones), the window runs on for
a window's worth of steps at the new rate, within the bounds its length had (not in a window the ranks agreed on).

What is switched is a ``Recorder`` (``window_recorders``): torch.profiler (never paused: torch 2.11's
``toggle_collection_dynamic`` dropped every GPU event of the trace; with ``--record-from window`` it starts at the
window), ``cudaProfilerStart``/``Stop`` around the window for the Nsight Compute pass, or nothing to switch (nsys). A
recorder with work to do before a window (``Recorder.wants_prepare``: a distributed first run's rank 0, which changes
profiler sessions) gets a ``prepare`` decision one step before the window's ``start``. Each window is also a
``nsighttc.window`` mark in the recording (``record_format.WINDOW``), from which the analysis leaves every earlier
step out of the steady state; an extended window's mark starts again where it extended (the analysis starts there
after a plateau: ``steps.steady.restarted``). Each event is printed as one line (``EVENT_PREFIX`` + JSON) for the
profile run to read (``window_events``, ``profile.window``).
"""
from __future__ import annotations

import json
import time

from ..record_format import HOOK_PHASE, WINDOW_EVENT as EVENT_PREFIX
from .lines import say
from .recording import OPERATOR_STEPS
from .unrecorded import AfterWindow, before_window
from .window_end import WindowEnd
from .window_events import warmup_shapes, window_data
from .window_recorders import CudaProfilerRecorder, Recorder
from .window_sizing import (END_WINDOW_STEPS, GEN_REQUESTS, GEN_WINDOW_S, MAX_WARMUP_S, MAX_WARMUP_STEPS, MIN_STEPS,
                            MIN_WARMUP, PHASE_GRACE_S, PREPARE_WAIT_STEPS, STEADY_RUN, STEADY_TOLERANCE, Phase,
                            is_steady, known_shape_steps, recent_median, shapes_changed, window_steps)

SHAPES_MAX = 10_000  # input-shape signatures remembered (a loop whose every call is new stops adding at this many)


class Window(WindowEnd):
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
        self.phases: dict[tuple, Phase] = {}
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
        self._shapes: set = set()  # the main model's input-shape signatures seen so far (``note_shape``)
        self._step_new: bool | None = None  # the open step's first model call met a new signature (None: no call yet)
        self._data_s = 0.0  # the open step's wait in DataLoader fetches (``add_data``)
        self.loader_workers: int | None = None  # the most worker processes of a DataLoader the steps fetched from

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
    def note_shape(self, signature) -> None:
        """The main model is called with inputs of these shapes (``runtime.steps.model_enter``, after the boundary
        that opened the step): the open step met a new input shape where its first call's signature is new. Not in
        a generation loop, whose calls change shapes every token by design (its window holds whole requests)."""
        if self._step_new is not None or self.generation:
            return
        new = signature not in self._shapes
        if new and len(self._shapes) < SHAPES_MAX:
            self._shapes.add(signature)
        self._step_new = new

    wants_drained = False  # (``add_data`` reads the wait only: the loop hooks make no CUDA call for it)

    def add_data(self, ns: float, drained: bool | None = None) -> None:
        """A DataLoader fetch of the open step returned after ``ns`` (the step hooks' ``__next__``): what each step
        waited for its data, said beside the unrecorded steps' times, since a stretch that waited less for data than
        the window did is no measure of the recording's slowdown (``profile.data_waits``)."""
        self._data_s += ns / 1e9

    def note_loader(self, workers) -> None:
        """A DataLoader with ``workers`` worker processes delivered a batch (the step hooks' ``__next__``): said in the
        window's end event, since more workers share a fetch only among more than it has (``analysis.gain``)."""
        if isinstance(workers, int) and workers >= 0:
            self.loader_workers = max(self.loader_workers or 0, workers)

    def hook_boundary(self, last: bool = False) -> None:
        """A hook step ended (``runtime.steps``); ignored once the program marks its own steps. ``last``: it ended with
        the optimizer step the program's last run ended after (``_at_last_step``)."""
        if self.enabled and not self.explicit:
            self._boundary(HOOK_PHASE, named=False, last=last)

    def replays_begin(self) -> None:
        """The program's hook steps are its CUDA graph replays from here (``runtime.steps.graph_replay``: its first
        replay from its own loop), after steps of another kind: the eager calls that warmed the model up and the
        capture. Those are no measure of a replay: a warm-up still under way starts again on the replays (the window
        then holds replays and is sized on them); a window already under way says so (a ``replays`` event), and the
        warm-up's unrecorded steps before it are then no measure of the recording's cost (``profile.window``).
        H200, ``wrappers/graph_serve.py`` (three graphs captured after three eager calls each, then a replay a batch):
        a cached run's window began at the sixth eager call, and its line said "842 µs unrecorded (the unrecorded
        steps were no faster (0.63x) ...)" of replays that ran at 0.46 ms, from two eager calls (61.2 and 1.21 ms)
        before the window and the two replays after it."""
        ph = self.phases.get(HOOK_PHASE)
        if not self.enabled or self.explicit or ph is None or self._after is not None:
            return
        if ph.state == "warmup" and not (ph.prepared or ph.settled):
            del self.phases[HOOK_PHASE]  # (the next boundary begins the replays' warm-up)
            self._event("replays", HOOK_PHASE, None, warmup_again=True)
        elif ph.state == "window":
            self._event("replays", ph.key, ph)

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
            ph = self.phases[key] = Phase(key, self.clock(), self.compiles())
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
        data, self._data_s = self._data_s, 0.0
        if self._after is not None:
            self._after_boundary(key, took, data)
            return
        now = self.clock()
        compiles = self.compiles()
        ph = self.phases.get(key)
        first = ph is None
        if first:
            ph = self.phases[key] = Phase(key, now, compiles)
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
                ph.new_shape.append(bool(self._step_new))
                # (a step timed by its own range, ``took``: its fetch came before the range, not in its time)
                ph.data.append(data if took is None else 0.0)
            ph.compiles_at = compiles
            if ph.state == "window":
                self.recorder.step_in_window()  # (a change of sessions still waiting is given up here)
        self._step_new = None  # (the next step's first model call says its shapes)
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

    def _decide(self, ph: Phase, now: float, last: bool = False) -> list | None:
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
                is_steady(*known_shape_steps(ph), ph.n) or ph.n >= MAX_WARMUP_STEPS
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
        # times, and one rank stopped while the other waited in its next collective: two H200s, FSDP2)
        if self.steps is None and not ph.agreed and ph.median_s and len(ph.durations) >= STEADY_RUN and \
                all(d < (1 - STEADY_TOLERANCE) * ph.median_s for d in ph.durations[-STEADY_RUN:]):
            # the steps fell inside the window: the warm-up's agreeing steps were a plateau, not the rate;
            # the window runs on until it holds a window's worth of steps at the new rate, those it holds counted
            # (a first run's warm-up, slowed by recording the operators' arguments, made a Lightning loop's 46.8 ms
            # steps 92 ms: its window, extended by a whole window 9 steps in, recorded to the program's end and left no
            # step to time unrecorded; an H200, benchmarks/gpu/user_programs/lit_accum.py)
            new = ph.median_s = recent_median(ph)
            held = sum(abs(d - new) <= STEADY_TOLERANCE * new for d in ph.durations[ph.window_from or 0:])
            ph.left = max(ph.left, self._window_steps(ph, new) - held)
            # its mark starts again here, the steady steps there after a plateau (``steady.restarted``), unless shapes
            # change (steps at new shapes are the loop's own cost): a pipeline's first run (H200, users6b) held 33
            # plateau steps of 48-56 ms before its 10-14 ms ones: a 22.2 ms median, "52 slow steps" 61% of its time
            if not shapes_changed(ph):
                self._open_mark()
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

    def _past_last_warmup(self, ph: Phase) -> bool:
        """The warm-up is as long as the program's last run's (``warmup_max``; its step before the window included,
        where the recorder takes one), and its last steps compiled nothing."""
        if self.warmup_max is None:
            return False
        bound = self.warmup_max - (1 if self.recorder.wants_prepare() else 0)
        return ph.n >= max(bound, MIN_WARMUP) and not any(ph.compiled[-STEADY_RUN:])

    def _window_steps(self, ph: Phase, median_s: float | None = None) -> int:
        """The window's length (``_sized_steps``); ``END_WINDOW_STEPS`` for a program whose end is known
        (``_end_known``). ``median_s``: sized on this step time instead (a window extended at its steps' new rate,
        which keeps the same bounds: a cached run's extension once recorded a 12-step window's program to its end,
        55 steps, on a loaded 2-core CI host)."""
        n = self._sized_steps(ph, median_s)
        return min(n, END_WINDOW_STEPS) if self._end_known(ph) is not None else n

    def _sized_steps(self, ph: Phase, median_s: float | None = None) -> int:
        """``TARGET_WINDOW_S`` of the warm-up's last steps, at most the program's last run's window (``steps_max``).
        Why a bound: a run recording from the window (a cached run) sized it on unrecorded steps, faster than the
        recorded ones a first run sized it on: two H200s, FSDP2, 39 steps of 51.6 ms against 24 of 80 ms, and the
        cached run, recording 65 ms steps to the program's end instead of stopping it, cost more than the first
        (1.50x against 1.41x plain) for a longer window than the first run's verdict had."""
        n = window_steps(median_s or self._sizing_median(ph), self.steps)
        return min(n, max(int(self.steps_max), MIN_STEPS)) if self.steps is None and self.steps_max else n

    @classmethod
    def _sizing_median(cls, ph: Phase) -> float | None:
        """The warm-up's step time the window is sized on: its last steps' median, taken before the recorder's first
        change of sessions where it made one (the steps that held a change are the recorder's, not the program's:
        with two, a CPU test's rank 0 sized its window on two 1 s stops, 10 steps instead of 100)."""
        return ph.sized_s if ph.sized_s is not None else recent_median(ph)

    def _apply(self, action: list, ph: Phase, named: bool, now: float) -> None:
        what = action[0]
        if what == "prepare" and ph.state == "warmup":
            if not ph.prepared:
                ph.sized_s = recent_median(ph)
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
            waited = before_window(ph.data, ph.recorded, ph.compiled, MIN_WARMUP)  # (their DataLoader waits)
            ph.window_from = len(ph.durations)
            self.recorder.window_start(last=not named)
            _sampler_budget(True)
            self._open_mark()
            # (the window a program whose end is known holds: the steps it would have held are what the evidence cache
            # keeps, ``profile.window.window_steps_seen``, for a run whose end is not known)
            sized = self._sized_steps(ph) if self._end_known(ph) is not None else ph.steps
            self._event("start", ph.key, ph, **({"sized_steps": sized} if sized != ph.steps else {}),
                        **({"unrecorded_before_ms": [round(d * 1e3, 4) for d in before]} if before else {}),
                        **({"unrecorded_before_data_ms": [round(d * 1e3, 4) for d in waited]}
                           if before and any(waited) else {}),
                        **warmup_shapes(ph))
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
        """The window's ``nsighttc.window`` mark (``record_format.WINDOW``), opened after the recorder's start so that
        a recording that starts with the window holds it; a recording stopped while it is open closes it."""
        if self.mark_windows:
            from .mark_ranges import OpenMark
            from ..record_format import WINDOW
            self._close_mark()
            self._mark = OpenMark(WINDOW)

    def _close_mark(self) -> None:
        if self._mark is not None:
            self._mark.close()
            self._mark = None

    def _event(self, event: str, key: tuple, ph: Phase | None, **extra) -> None:
        doc = {"event": event, "phase": "/".join(key), "recorder": self.recorder.name}
        if ph is not None:
            doc.update({"step": ph.n, "warmup": ph.warmup, "steps": ph.steps,
                        "median_ms": None if ph.median_s is None else round(ph.median_s * 1e3, 3),
                        "auto_warmup": self.warmup is None})
            if event in ("end", "ended"):
                doc.update(window_data(ph))
                if self.loader_workers is not None:
                    doc["loader_workers"] = self.loader_workers
        doc.update(extra)
        self.events.append(doc)
        self.emit(EVENT_PREFIX + json.dumps(doc))


def _sampler_budget(on: bool) -> None:
    """The host sampler, where one runs, samples more often inside a window (``runtime.host_samples.in_window``)."""
    import sys
    mod = sys.modules.get(__package__ + ".host_samples")
    if mod is not None:
        mod.in_window(on)
