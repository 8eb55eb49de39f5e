"""nsighttc's own ``record_function`` labels inside the program (the annotate ranges, the step hooks' marks, the module
ranges of ``--annotate modules``), kept in one registry so that they can move from one torch.profiler session to the
next, and a count of the *other* ``record_function`` contexts open on the main thread.

Why: a first run records operators with their arguments until the window of steady steps, then the window with the
ranges only (``runtime.recording.OperatorsUntilWindow``): two profiler sessions, one after the other, in one
process. A RecordFunction begun while the first session records keeps that session's exit callback, which at its end
writes into the *current* session's thread-local state: begun under the first and ended under the second, it writes
into the first session's freed event storage (torch 2.11; ``benchmarks/probes/gpu_record_scope_probe.py``,
reports/window call12). So at the change of session nsighttc ends its own open labels under the first session and
begins them again under the second (``suspend``/``resume``); the ones it does not own (torch's
``Optimizer.step#...``, the DataLoader's ``enumerate(DataLoader)#...``, the program's own ``record_function``) cannot be
moved, so the change waits until none is open (``OpenElsewhere``).

Our labels are made with ``torch.ops.profiler._record_function_enter_new`` (the call ``record_function`` itself makes),
so the count of the others, kept by wrapping ``record_function.__enter__``/``__exit__``, never counts ours.
"""
from __future__ import annotations

import sys
import threading


def _enter(name: str):
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return torch.ops.profiler._record_function_enter_new(name, None)
    except Exception:  # an older torch: NVTX only
        return None


def _exit(rf) -> None:
    torch = sys.modules.get("torch")
    try:
        torch.ops.profiler._record_function_exit(rf)
    except Exception:
        pass


_open: dict[int, "Label"] = {}  # the labels whose record_function is open now


class Label:
    """One of our ``record_function`` labels, open until ``end``: entered and exited by handle, so labels need not
    nest (the step hooks' marks open and close at different depths of the program)."""

    __slots__ = ("name", "_rf")

    def __init__(self, name: str):
        self.name = name
        self._rf = None
        self._begin()

    def _begin(self) -> None:
        self._rf = _enter(self.name)
        if self._rf is not None:
            _open[id(self)] = self

    @property
    def active(self) -> bool:
        return self._rf is not None

    def end(self) -> None:
        rf, self._rf = self._rf, None
        if rf is not None:
            _open.pop(id(self), None)
            _exit(rf)


def suspend() -> list[Label]:
    """End every open label's record_function (under the session about to stop); ``resume`` begins them again."""
    labels = list(_open.values())
    for label in labels:
        label.end()
    return labels


def resume(labels: list[Label]) -> None:
    """Begin again, under the session now recording, the labels ``suspend`` ended."""
    for label in labels:
        if label._rf is None:
            label._begin()


class OpenElsewhere:
    """Counts the ``record_function`` contexts that are not ours, open on the main thread, from ``install`` on, and
    runs a callback once none is (``when_none_open``): at once if none is open, else right after the last one's exit.

    Only the main thread counts: torch.profiler's callbacks are thread-local to the thread that started it (the
    launcher's), so another thread's record_function records nothing and cannot cross a change of session."""

    def __init__(self):
        self.count = 0
        self._pending: list = []
        self._main = threading.main_thread().ident
        self._undo = None

    def install(self) -> bool:
        try:
            import torch.autograd.profiler as ap
            cls = ap.record_function
            enter, exit_ = cls.__enter__, cls.__exit__
        except (ImportError, AttributeError):
            return False
        state = self

        def __enter__(rf):
            result = enter(rf)
            if threading.get_ident() == state._main:
                rf._nsighttc_counted = True
                state.count += 1
            return result

        def __exit__(rf, *exc):
            try:
                return exit_(rf, *exc)
            finally:
                if rf.__dict__.pop("_nsighttc_counted", False):
                    state.count = max(0, state.count - 1)
                    if state.count == 0 and state._pending:
                        state._run()

        cls.__enter__, cls.__exit__ = __enter__, __exit__

        def undo():
            cls.__enter__, cls.__exit__ = enter, exit_
        self._undo = undo
        return True

    def remove(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None
        self._pending.clear()

    def when_none_open(self, callback) -> bool:
        """Run ``callback`` now if no other record_function is open on the main thread (True), else once the last
        one exits (False)."""
        if self.count == 0:
            callback()
            return True
        self._pending.append(callback)
        return False

    def cancel(self) -> None:
        self._pending.clear()

    def _run(self) -> None:
        pending, self._pending = self._pending, []
        for callback in pending:
            callback()
