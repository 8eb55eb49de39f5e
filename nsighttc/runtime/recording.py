"""How the launcher starts torch.profiler: with every operator, or with the ranges only.

The timeline's analysis reads the GPU's activities (kernels, copies, memsets), the CUDA runtime and driver calls
that launched them, and the ``record_function`` ranges (``user_annotation``: the program's ``annotate`` ranges, the
step hooks' marks, the DataLoader's ``enumerate(DataLoader)#...`` and the optimizers' ``Optimizer.step#...``
labels). The operators (``cpu_op``: every ``aten::`` call and autograd node) are read only by the replay, which
needs their arguments (``--record-shapes``), and for torch.compile's compilation spans, which the step hooks mark
themselves (``nsighttc.compile``; without the hooks, ``--no-step-marks``, the default run records operators). Their cost shows at the profiler's stop and in the trace's writing.

So without operators, the profiler is enabled with RecordFunction callbacks for ``RecordScope.USER_SCOPE`` only
(``torch.autograd._enable_profiler``'s ``scopes``): the ranges are recorded, an operator's RecordFunction finds
no callback and costs nothing, and CUPTI still records every kernel and launch. torch.profiler's own ``start``
passes no scopes, so the call it makes is given them while ``prof.__enter__`` runs (nothing else sees it).

Seen on this repository's 2-core CPU machine (torch 2.13): 2,000 steps of an eight-layer MLP's forward and
backward, 696,000 operator events: the loop 0.94 s with operators against 0.72 s with the ranges only (0.74 s
unrecorded), the stop 2.98 s against 0.00 s, the same 2,000 ``step`` ranges in the trace. On the H100 (torch 2.11,
``benchmarks/probes/gpu_record_scope_probe.py``, reports/window/call12): ResNet-50 AMP's 32 recorded steps held
100,992 operator events; the stop took 0.48-0.67 s instead of 0.84-1.03 s; the steps themselves were slowed about as
much either way (by CUPTI's recording of every launch, which stays). Second runs' whole stop in the default run:
ResNet-50 AMP 0.71-0.82 s instead of 0.92-1.34 s, Lightning 0.16-0.19 s instead of 0.74-1.04 s (call12-13).
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..record_format import DROPPED_BEFORE_WINDOW, OPS_WRITTEN, SESSION_KEPT  # (the tool reads these lines)
from .lines import say


@contextlib.contextmanager
def inductor_left_unloaded():
    """torch.profiler's start reads inductor's CUDA-graph flag when ``hasattr(torch, "_inductor")``; that attribute is
    lazy, so asking imports ``torch._inductor`` and with it ``torch._dynamo``: 0.8 s of CPU at the start of every
    recording of a program that never compiles (torch 2.13 on this repository's CPU machine; ``profiler.py``'s
    ``prepare_trace``). Where inductor is not loaded, nobody can have set its flag: while the profiler starts, the
    lazy attribute answers "none" instead of importing it. An ``import torch._inductor`` is not affected."""
    torch = sys.modules.get("torch")
    lazy = getattr(torch, "__dict__", {}).get("__getattr__")
    if torch is None or lazy is None or "torch._inductor" in sys.modules:
        yield
        return

    def no_lazy_inductor(name):
        if name == "_inductor":
            raise AttributeError(name)
        return lazy(name)
    torch.__getattr__ = no_lazy_inductor
    try:
        yield
    finally:
        torch.__getattr__ = lazy


def start(prof, operators: bool = True) -> bool:
    """Enter torch.profiler ``prof``; without ``operators``, record the ranges and the GPU only. Returns whether
    the operators are recorded (True also where this torch offers no scopes: it then records everything). The
    runtime calls that do no GPU work are then left out of CUPTI's records (``cupti_quiet``), after every start (a
    session's start may enable CUPTI's runtime records anew); the first time, the launcher says so in one line.
    A process forked while it records (a DataLoader worker) records nothing (``forked_children``)."""
    from . import forked_children
    forked_children.install()
    with inductor_left_unloaded():
        recorded = _start(prof, operators)
    from . import cupti_quiet
    said = cupti_quiet.quiet()
    if said and not _QUIETED:
        _QUIETED.append(said)
        say(f"nsighttc.launch: CUPTI: {said}")
    return recorded


_QUIETED: list = []  # what ``cupti_quiet`` said at the first session's start (said once a process)


def _start(prof, operators: bool) -> bool:
    if operators:
        prof.__enter__()
        return True
    try:
        import torch.autograd.profiler as autograd_profiler
        from torch._C._profiler import RecordScope
        enable = autograd_profiler._enable_profiler
    except (ImportError, AttributeError) as exc:
        say(f"nsighttc.launch: operators recorded: this torch offers no RecordFunction scopes "
              f"({type(exc).__name__}: {exc})")
        prof.__enter__()
        return True

    scoped = []

    def ranges_only(config, activities, *_, **__):
        scoped.append(True)
        return enable(config, activities, {RecordScope.USER_SCOPE})

    autograd_profiler._enable_profiler = ranges_only
    try:
        prof.__enter__()
    finally:
        autograd_profiler._enable_profiler = enable
    if not scoped:  # this torch's profiler enables itself some other way: everything was recorded
        say("nsighttc.launch: operators recorded: this torch's profiler did not take the ranges-only scope")
    return not scoped


# A distributed first run's rank 0 records the operators with their arguments for this many steps before its window
# (``OperatorsUntilWindow``'s ``lead``), the ranges only before them. Why: recording every operator with its arguments
# from the program's start held the whole job: two H200s, DDP ResNet-50 AMP, rank 0's model built in 2.0 s against
# 1.7 s, its warm-up steps 65 ms against 33 ms (the other rank waiting in each all-reduce), and the change of sessions
# at the window 0.65-0.98 s (reports/profile_overhead/torchrun_cost, calls 9 and 10). The replay reads each kernel's
# first launch in a steady step, which the steps just before the window repeat; two, for a step that alternates.
OPERATOR_STEPS = 2


class OperatorsUntilWindow:
    """A first run's two torch.profiler sessions: every operator with its arguments (what the replay reads) from the
    program's start until its window of steady steps begins, written apart (``ops_trace``, by a forked copy of the
    process: ``trace_writer``); then the window with the ranges only (``start(..., operators=False)``), which is the
    timeline the analysis reads. A distributed first run's rank 0 (``lead``) has three: the ranges only from the
    program's start (dropped), the operators for ``OPERATOR_STEPS`` steps, then the window's ranges.

    Why: recording arguments slows a launch-heavy step and makes the profiler's stop long, and the replay needs
    only each kernel's first launch, which a steady step repeats from the warm-up. On H100 (torch 2.11,
    reports/window call14) a first run's recording with arguments timed Lightning's steps at 12.9 ms against 7.0 ms
    with the ranges only (5.5 ms plain) and took ResNet-50 AMP's stop 2.5-3.4 s against 0.7-0.8 s.

    Used only for a window after which the program stops or runs on unrecorded (the hooks' steps, or the program's
    steps outside any named range): a named phase may be followed by others whose new kernels need their operators,
    so such programs keep one session with arguments throughout; except in a distributed job (``any_window``), where
    only one rank records arguments and must not be slower than the others in any window; there the change is asked
    for a step before the window (``window_recorders.TorchRecorder.prepare``), so that the other ranks' wait for it falls in
    no window. The change of session waits until no ``record_function`` but ours is open (``rf_labels``); if the
    window ends first, nothing changes.

    The change comes earlier where the warm-up is steady but the window waits (a generation loop's window starts at a
    request's prefill, a whole request of decode calls later; ``window_recorders.TorchRecorder.settled``): the replay
    needs each kernel's first launch, which the steady warm-up steps hold, and the calls up to the window repeat
    them. The rest of the warm-up is recorded with the ranges only, so a program that ends before its window still
    has its timeline. H100, torch 2.11, a Llama-shaped generate() loop (reports/structural call_overhead): recording
    the first request's 96 model calls with their arguments took 115 ms a call against 12 ms plain, and made the
    first run 1.56x plain.

    ``ops_trace`` None (``trace_for``: the rank's trace, named in its line): the other ranks of that distributed job,
    which record the ranges only from their start, change sessions at the same step and drop the first session
    unwritten. Why: a rank that recorded its whole run stopped its profiler at the program's end with the start-up and
    warm-up still to process and write, the last rank to finish; two H200s, DDP ResNet-50, 20 steps
    (reports/profile_overhead/torchrun_cost): rank 1's stop 0.47-0.66 s against rank 0's 0.27-0.41 s, its trace
    written up to 0.6 s after rank 0's, and the job's end (and the verdict, whose planning and analysis parse it)
    waited for it. The steps before the window are warm-up, left out of every steady-state number, and rank 0 records
    from the same step; its change of sessions holds every rank there anyway (the others wait in their next
    collective), so this rank's stop costs the job nothing. Where no window starts, nothing is dropped: the rank keeps
    its whole run."""

    def __init__(self, first, make_second, ops_trace, t_start: float, clock=None, any_window: bool = False,
                 trace_for=None, lead=None, after_lead: bool = False):
        import time
        from . import rf_labels
        self.prof, self.make_second, self.ops_trace, self.t_start = first, make_second, ops_trace, t_start
        self.trace_for = trace_for  # (``ops_trace`` None: the first session is dropped; the line names this trace)
        # change at the start of any window, not only one that ends the recording: a rank of a distributed job, whose
        # recording of arguments through a named phase's window would make it look like the job's straggler (the
        # kernels of later phases are then measured on the program, not replayed)
        self.any_window = any_window
        self.clock = clock or time.perf_counter
        self.elsewhere = rf_labels.OpenElsewhere()
        # ``lead`` (a distributed first run's rank 0): ``first`` records the ranges only, and the first change starts
        # the operators' session (``lead()``) for ``OPERATOR_STEPS`` steps; the next one the window's, as without it
        self.lead = lead
        # ``after_lead``: the other ranks of a job whose rank 0 has a lead change at the same step as its second one
        # (the window's recordings then begin at the same step on every rank); the first request is let pass
        self.let_pass = 1 if after_lead else 0
        installed = self.elsewhere.install()
        self.state = ("lead" if lead is not None else "operators") if installed else "off"
        # -> pending -> (lead: operators ->) ranges | failed; kept (a window holds the session: nothing changes)
        self._from = self.state  # (what a pending change started from)
        self.switched_at: float | None = None  # when the session now recording began
        self.writing = None  # the operators' trace's writing (``trace_writer.Writing``), once it began
        self.capture = None  # ``op_capture.OpCapture`` where the lead's change could not run (``capture_instead``)
        self.capture_from: float | None = None

    def request(self) -> None:
        """The window that ends the recording starts: change sessions now, or once no other record_function is
        open (inside ``Optimizer.step#...``, where the step hooks see most boundaries, at its end)."""
        if self.state == "capturing":  # (``capture_instead``: its steps are recorded; the session holds the window)
            n = self.capture.end()
            self.state = "kept"
            where = self.trace_for or self.ops_trace
            say(f"{SESSION_KEPT}{where} (program {self.clock() - self.t_start:.2f} s): the window's steps are in the "
                f"session recording the ranges since the program's start; {n} operator calls were recorded with "
                f"their arguments from {self.capture_from - self.t_start:.2f} s for the replay, by a dispatch mode "
                f"({Path(self.capture.path).name})" + (f"; {self.capture.error}" if self.capture.error else "")
                + ("" if n else "; no operators were recorded"))
            return
        if self.state in ("operators", "lead") and self.let_pass:
            self.let_pass -= 1
        elif self.state in ("operators", "lead"):
            self._from, self.state = self.state, "pending"
            self.elsewhere.when_none_open(self._switch)

    def capture_instead(self) -> bool:
        """The lead's change to the operators' session still waits for a ``record_function`` of the program's to
        close, a step after it was asked for: it is given up for good, and the operators are recorded in the session
        recording now, which goes on to hold the window (``op_capture``: a dispatch mode numbers each call in a range
        of its own). True where that began (state ``capturing``, ended by the next ``request``). By construction, no
        session is stopped or replaced here, and the replay still has the operators it needs."""
        if self.state != "pending" or self._from != "lead":
            return False
        from .op_capture import FILE, OpCapture
        where = self.trace_for or self.ops_trace
        if where is None:
            return False
        self.elsewhere.cancel()
        self.capture = OpCapture(Path(where).parent / FILE)
        if not self.capture.begin():
            self.state, self.capture = self._from, None
            return False
        self.state, self.capture_from = "capturing", self.clock()
        say(f"nsighttc.launch: operators recorded by a dispatch mode, for {where} (program "
            f"{self.capture_from - self.t_start:.2f} s): the change of sessions waits for the program's "
            f"record_function open across the steps ({self.elsewhere.count}), so the session recording the ranges "
            "goes on and will hold the window")
        return True

    def keep(self) -> None:
        """A window starts before a session that drops its first recording changed (``ops_trace`` None): that
        recording holds the window now, so it is kept whole, and nothing changes later."""
        self.elsewhere.cancel()
        if self.state in ("operators", "pending"):
            self.state = "kept"

    def hold_window(self) -> None:
        """A window starts while a change asked for before it still waits for a ``record_function`` of the program's
        to close: the change is given up and the session recording now holds the window, to the end. By
        construction, then, once a window has started no change of sessions can stop or replace the session that
        records it, whatever the program's ranges and whether or not the window ever ends. Why: a DDP job with
        ``train`` open around its loop (2 x H200, ``ddp_w.py``) left the change pending into rank 0's window; when
        ``train`` closed after the loop the change ran, stopped the session that held the window and dropped it
        ("rank 0: 0 of the window's 11 steps recorded"). What the replay then lacks is said."""
        self.elsewhere.cancel()
        if self.state == "capturing":  # (a window that starts before the capture's own end: it ends here)
            self.request()
            return
        if self.state != "pending":
            return
        was, self.state = self._from, "kept"
        said = (f"{SESSION_KEPT}{self.trace_for or self.ops_trace} (program {self.clock() - self.t_start:.2f} s): "
                f"the change of sessions could not run before the window (the program's "
                f"record_function open across the steps: {self.elsewhere.count}): the change is given up; the "
                "window's steps are in the session recording since "
                + ("the program's start (the ranges only), kept to the end; no operators were recorded for the "
                   "replay: the kernels that need evidence are measured on the program itself, or named"
                   if was == "lead" else "the program's start (with the operators), kept to the end"))
        say(said)

    def cancel(self) -> None:
        """The window ended (or the program did) before the change: keep the one session."""
        if self.state == "pending":
            self.state = self._from
        if self.state == "capturing":  # (the program ended while its operators were recorded: the list is kept)
            self.request()
        self.elsewhere.cancel()

    def remove(self) -> None:
        self.cancel()
        self.elsewhere.remove()

    def _switch(self) -> None:
        if self.state != "pending":
            return
        from . import rf_labels
        from .window_recorders import _synchronize
        t0 = self.clock()
        _synchronize()  # every kernel of the warm-up is in the first session's trace
        if self._from == "lead":
            self._start_operators(t0)
            return
        moved = rf_labels.suspend()
        try:
            try:
                if self.ops_trace is not None:  # the switches the operators were recorded under, for the replay
                    from . import backend_flags
                    backend_flags.write_once()
                self.prof.__exit__(None, None, None)
                t_stop = self.clock()
                if self.ops_trace is not None:
                    self.ops_trace.parent.mkdir(parents=True, exist_ok=True)
                    self.writing = self._write(t0, t_stop)
            except Exception as exc:  # noqa: BLE001 - the program goes on; nothing is recorded from here
                self.state, self.prof = "failed", None
                say(f"nsighttc.launch: the {'operators' if self.ops_trace is not None else 'first'} recording could "
                    f"not be stopped{' and written' if self.ops_trace is not None else ''} ({type(exc).__name__}: {exc})")
                return
            try:
                second = self.make_second()
                start(second, operators=False)
                self.prof, self.state = second, "ranges"
                self.switched_at = self.clock()
            except Exception as exc:  # noqa: BLE001 - the operators' trace stands in for the timeline
                self.state, self.prof = "failed", None
                say(f"nsighttc.launch: the window's recording could not start ({type(exc).__name__}: {exc})")
        finally:
            rf_labels.resume(moved)
        if self.ops_trace is None:
            say(f"{DROPPED_BEFORE_WINDOW}{self.trace_for} (program {t0 - self.t_start:.2f} s, profiler stop "
                f"{t_stop - t0:.2f} s; the rank recording operators changes sessions here: the window starts a new "
                "recording, ranges only)")

    def _start_operators(self, t0: float) -> None:
        """The lead's change (``lead``): the ranges recorded until here are dropped, and the operators with their
        arguments are recorded from here, for the steps the replay reads before the window's own session."""
        from . import rf_labels
        moved = rf_labels.suspend()
        try:
            try:
                self.prof.__exit__(None, None, None)
                t_stop = self.clock()
                second = self.lead()
                start(second, operators=True)
                self.prof, self.state = second, "operators"
                self.switched_at = self.clock()
            except Exception as exc:  # noqa: BLE001 - the program goes on; nothing is recorded from here
                self.state, self.prof = "failed", None
                say(f"nsighttc.launch: the operators' recording could not start ({type(exc).__name__}: {exc})")
                return
        finally:
            rf_labels.resume(moved)
        say(f"{DROPPED_BEFORE_WINDOW}{self.trace_for} (program {t0 - self.t_start:.2f} s, profiler stop "
            f"{t_stop - t0:.2f} s; the operators are recorded with their arguments from here for "
            f"{OPERATOR_STEPS} steps, then the window with the ranges only)")

    def _write(self, t0: float, t_stop: float):
        """The operators' trace, written by a forked copy of the process (``trace_writer``): the program goes on into
        its window at once (two H200s, DDP ResNet-50: written here, 0.30-0.36 s with every other rank waiting), and the
        copy runs in the idle scheduling class, so that the window it writes beside is timed as the program runs."""
        from . import trace_writer
        prof, path, clock, program_s = self.prof, self.ops_trace, self.clock, t0 - self.t_start

        def write() -> str:
            t_write = clock()
            prof.export_chrome_trace(str(path))
            return (f"{OPS_WRITTEN}{path} (program {program_s:.2f} s, profiler stop {t_stop - t0:.2f} s, "
                    f"trace written in {clock() - t_write:.2f} s; the window records the ranges only)")
        return trace_writer.apart(path, write, trace_writer.limit_for(t_stop - t0), beside_program=True)

    @property
    def written(self) -> bool:
        """The operators' trace is on disk (waits for its writer)."""
        return self.writing is not None and bool(self.writing.wait())
