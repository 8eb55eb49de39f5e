"""The timeline's trace read in a thread while the launcher writes it (Kineto's ``<trace>.tmp``, followed
through its rename): the kernel scan the replay's list is made from (``KernelScan``), or the whole parse when
there is no replay to plan (``TraceStream``).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable


class _WhileWritten:
    """Something read from the timeline's trace in a thread while the launcher writes it (Kineto's
    ``<trace>.tmp``, followed through its rename). ``result()`` joins once the writer is done (call it after
    the launcher said the trace is written); None when no trace came or the read failed (``error``)."""

    thread_name = "nsighttc-trace-reader"

    def __init__(self, trace: Path, written: Callable[[], bool]):
        self.trace, self.written = trace, written
        self.error: str | None = None
        self._result = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)

    def start(self):
        self._thread.start()
        return self

    def _read(self, fh):
        raise NotImplementedError

    def _run(self) -> None:
        from ..parse import kineto_ops
        try:
            fh = kineto_ops.growing_trace(self.trace, self.written)
            if fh is not None:
                self._result = self._read(fh)
        except Exception as exc:  # noqa: BLE001 - the caller reads the finished trace itself
            self.error = f"{type(exc).__name__}: {exc}"

    def result(self):
        self._thread.join()
        return self._result


class KernelScan(_WhileWritten):
    """The trace's kernel events (``kineto_ops.kernel_launches``), read in a thread while the timeline's
    launcher writes the trace, handing each window's new kernels to ``on_new`` (a ``StreamPlan``).

    Why a scan of its own: it skips the operator half of the trace at regular-expression speed and keeps up
    with the writer. Fed by the full parse, the plan listed its first call ~0.2 s after ResNet-50 AMP's trace
    was complete (H100's host: the parse lagged behind the writer); with the parse running beside the scan,
    0.5-0.7 s after (the parse took the scan's interpreter time), so the default run parses the trace while
    it is written only when there is no replay to plan (``TraceStream``).

    ``written()``: the writer is done (the launcher said so, or its process ended). ``kernels()`` is None
    when the scan could not be made (no trace came, a read failed)."""

    thread_name = "nsighttc-kernel-scan"

    def __init__(self, trace: Path, written: Callable[[], bool], on_new: Callable[[list], None] | None = None,
                 index=None):
        super().__init__(trace, written)
        self.on_new, self.index = on_new, index

    def _read(self, fh) -> list[dict]:
        from ..parse import kineto_ops
        return kineto_ops.kernel_launches(self.trace, fh, self.written, self.on_new, self.index)

    def kernels(self) -> list[dict] | None:
        """The scan's kernels once the writer is done."""
        return self.result()


class TraceStream(_WhileWritten):
    """The timeline's trace parsed while the launcher writes it (``parse.load_while_written``), in a thread
    started with the timeline pass.

    Why: on H100 the launcher wrote ResNet-50 AMP's 114 MB trace in ~1.2 s and its parse took ~1.3 s after
    that: beside the writer, the parse was waited for 0.10-0.24 s after the trace (second runs of the three
    wrappers). Used when no replay is planned (see ``KernelScan``). ``parsed()`` is None when it could not be
    made (no trace came, the writer stopped mid-way, an unexpected shape): the caller parses the finished
    file as before."""

    thread_name = "nsighttc-trace-stream"

    def _read(self, fh):
        from ..parse import load_while_written, textio
        return load_while_written(self.trace, textio.GrowingFile(fh, self.written))

    def parsed(self):
        """The parsed trace once the writer is done."""
        return self.result()
