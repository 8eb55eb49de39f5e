"""The step hooks' marks as ranges (``runtime.steps``): each an NVTX start/end range, plus a ``record_function`` of the
same name while torch.profiler records. Start/end ranges, because the hooks' marks open and close at different depths
of the program and must never take a user's push/pop range off its stack; a ``record_function`` entered and exited
by handle (``rf_labels.Label``) for the same reason."""
from __future__ import annotations

import sys

from .rf_labels import Label


def _nvtx():
    try:
        import nvtx
        return nvtx.start_range, nvtx.end_range
    except Exception:  # pragma: no cover - a broken install: marks go to torch.profiler only
        return (lambda *a, **k: None), (lambda *a: None)


class Mark:
    """One mark, open until ``end``: an NVTX start/end range and, while torch.profiler records, a
    ``record_function`` label (``rf_labels.Label``: entered and exited by handle, so marks need not nest)."""

    __slots__ = ("_id", "_rf")

    def __init__(self, name: str, start, profiling: bool):
        self._id = start(message=name)
        self._rf = Label(name) if profiling else None

    def end(self, end_range) -> None:
        if self._rf is not None:
            self._rf.end()
            self._rf = None
        if self._id is not None:
            end_range(self._id)
            self._id = None


class OpenMark:
    """A mark opened outside the step hooks (the window's, ``runtime.window``): ``close`` ends it once."""

    __slots__ = ("_mark", "_end")

    def __init__(self, name: str):
        start, self._end = _nvtx()
        self._mark: Mark | None = Mark(name, start, _profiling())

    def close(self) -> None:
        if self._mark is not None:
            self._mark.end(self._end)
            self._mark = None


def _profiling() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:
        return False


