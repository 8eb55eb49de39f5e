"""The timeline's trace read in a thread while the launcher writes it (Kineto's ``<trace>.tmp``, followed
through its rename): the kernel scan the replay's list is made from (``KernelScan``), or the whole parse when
there is no replay to plan (``TraceStream``), and ``ReadersOfTheTrace``, which runs them for the default run.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable


class _WhileWritten:
    """Something read from the timeline's trace in a thread while the launcher writes it (Kineto's
    ``<trace>.tmp``, followed through its rename). ``result()`` joins once the writer is done (call it after
    the launcher said the trace is written); None when no trace came or the read failed (``error``)."""

    thread_name = "nsighttc-trace-reader"

    def __init__(self, trace: Path, written: Callable[[], bool], prefer: tuple | None = None,
                 on_choose: Callable[[Path], None] | None = None):
        self.trace, self.written = trace, written
        # ``prefer``: (path, written) of a trace to read instead, should it appear first (a first run's operators
        # until its window, written while the program runs: ``runtime.recording.OperatorsUntilWindow``);
        # ``on_choose(path)``: told which one is read, before anything of it is handed on
        self.prefer, self.on_choose = prefer, on_choose
        self.error: str | None = None
        self._result = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.thread_name)

    def start(self):
        self._thread.start()
        return self

    def _read(self, fh):
        raise NotImplementedError

    def _run(self) -> None:
        from ..collect.yield_cores import idle_thread
        idle_thread()  # read beside the program: no core taken from it (collect.yield_cores)
        try:
            fh = self._open()
            if fh is not None:
                self._result = self._read(fh)
        except Exception as exc:  # noqa: BLE001 - the caller reads the finished trace itself
            self.error = f"{type(exc).__name__}: {exc}"

    def _open(self):
        """The first of the traces to appear (``prefer`` first), open; None when none will come."""
        from ..parse import kineto_ops
        first = kineto_ops.first_growing_trace([*([self.prefer] if self.prefer else []), (self.trace, self.written)])
        if first is None:
            return None
        self.trace, fh, self.written = first
        if self.on_choose is not None:
            self.on_choose(self.trace)
        return fh

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
                 index=None, **choice):
        super().__init__(trace, written, **choice)
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


class ReadersOfTheTrace:
    """Everything the default run reads of the timeline while the launcher writes it, and what it made of it.

    With a replay to plan: the launcher's early kernel list (``replay_plan.EarlyPlan``, before the trace), then
    the kernel scan feeding the replay's list as kernels appear (``KernelScan`` + ``replay_plan.StreamPlan``);
    without one, the whole trace parsed while written (``TraceStream``). ``finish`` ends them once the
    timeline is written and says what the replay's list came from (``info["early_plan"]``) and how the
    trace was parsed (``info["trace_parse"]``)."""

    def __init__(self, run_dir: Path, rp_gate: Path | None, decide: Callable, kernel_ops: Path, ops: Path):
        from .replay_plan import EarlyPlan
        self.run_dir, self.rp_gate, self.decide, self.kernel_ops, self.ops = run_dir, rp_gate, decide, kernel_ops, ops
        self.early = EarlyPlan(kernel_ops, ops, rp_gate, decide).start() if rp_gate is not None else None
        self.streamed = self.scan = self.stream = None
        self.ops_trace: Path | None = None  # a first run's operators until the window (``start``)

    def with_operators(self, trace: Path | None) -> Path | None:
        """The trace that holds the operators: the first run's operators' trace when it was written, else ``trace``."""
        return self.ops_trace if self.ops_trace is not None and self.ops_trace.exists() else trace

    def start(self, trace: Path, tl_run, ops_trace: Path | None = None) -> None:
        """The timeline pass ``tl_run`` now writes ``trace`` (and, on a first run with a window, the operators until
        the window to ``tl_run.p.ops_trace`` first: the replay is planned from those while the window runs, and its
        gate held until the program's GPU work is over, ``tl_run.program_done``). ``ops_trace``: where the operators
        are instead (a distributed job: its rank 0's; the job's traces are read once every rank has written its own,
        but the replay is planned from rank 0's operators while the job runs its window, its gate held until every
        rank said its exit code. Two H200s, DDP ResNet-50: planned from rank 0's trace once the job's traces were
        read, the replay waited 1.2-1.7 s after the planning (first runs 1.31x plain, cost50e); planned here, its first
        call was listed 3.0-3.6 s before the traces and it waited 0.2-0.4 s (1.26x, cost50g))."""
        self.ops_trace = ops_trace if ops_trace is not None else getattr(tl_run.p, "ops_trace", None)
        if not tl_run.early and (ops_trace is None or self.rp_gate is None):
            return
        if self.rp_gate is not None:
            from ..parse.kineto_ops import OperatorIndex
            from .replay_plan import StreamPlan
            index = OperatorIndex()  # the operators' offsets, noted by the scan as it passes them
            self.streamed = StreamPlan(trace, self.ops, self.rp_gate, self.decide, defer_to=self.kernel_ops,
                                       index=index, hold=tl_run.program_done).start()
            prefer = {} if self.ops_trace is None else {"prefer": (self.ops_trace, tl_run.ops_done),
                                                        "on_choose": self.streamed.use_trace}
            self.scan = KernelScan(trace, tl_run.trace_done, self.streamed.add, index=index, **prefer).start()
        elif tl_run.early:  # (a job's ranks are parsed in the rank workers)
            self.stream = TraceStream(trace, tl_run.trace_done).start()

    def abort(self) -> None:
        if self.early is not None:
            self.early.finish()
        if self.streamed is not None:
            self.streamed.finish()

    def finish(self, trace: Path | None, tl_run, stop_everything: bool, info: dict, parsed: dict) -> dict | None:
        """End the readers. Returns the replay's list as planned early (its counts), or None when it is still to
        be made; the trace as parsed while written goes into ``parsed``."""
        early_found = None
        if self.early is not None:  # the launcher wrote its kernel list before the trace, or none: that plan has ended
            early_found = self.early.finish()
            info["early_plan"] = self.early.info if early_found is not None else \
                {"launcher": self.early.error or "no kernel list"}
        if self.streamed is not None:  # the replay's list ends now (first: the replay waits for it, not for the parse)
            t0 = time.monotonic()
            rest = self.scan.kernels() if tl_run.said_written else None
            if rest is None and tl_run.said_written and not stop_everything and early_found is None:
                from ..parse import kineto_ops  # the scan failed: read the finished file's kernels
                rest = kineto_ops.kernel_launches(self.with_operators(trace))
            found = self.streamed.finish(rest)
            if early_found is None and not stop_everything and not self.streamed.errors and not self.streamed.stood_down:
                early_found = found
            info["early_plan"] = {**info.get("early_plan", {}),
                                  "source": ("operators' trace until the window" if self.scan.trace != trace else
                                             "trace") + (" kernel events, read while written"
                                                         if self.scan.error is None else
                                                         f" kernel events (scan: {self.scan.error})"),
                                  "first_call_s": found.get("first_call_s"),
                                  # relative to the trace's completion (negative: before it): when the scan
                                  # handed over the first kernel needing evidence, the first and last call listed
                                  **{f"{k}_after_trace_s": None if found.get(f"{k}_s") is None or
                                     tl_run.p.seconds is None else round(found[f"{k}_s"] - tl_run.p.seconds, 2)
                                     for k in ("first_needed", "first_call", "last_call")},
                                  "lookup_s": found.get("lookup_s"),
                                  "planned_in_s": round(time.monotonic() - t0, 2)}
            if self.streamed.errors:
                info["early_plan"]["error"] = "; ".join(self.streamed.errors)
        t0 = time.monotonic()
        whole = self.stream.parsed() if self.stream is not None and tl_run.said_written else None
        if whole is not None and not stop_everything:  # the trace as parsed while it was written
            parsed[trace] = whole
        if self.stream is not None:
            info["trace_parse"] = {"while_written": whole is not None, "waited_s": round(time.monotonic() - t0, 2),
                                   **({"error": self.stream.error} if self.stream.error else {})}
        if early_found is None and self.rp_gate is not None and not stop_everything and trace is not None \
                and not (self.streamed is not None and self.streamed.first_call_s is not None):
            # the replay is planned from the trace's kernel events alone and runs while the whole trace is parsed
            from .replay_plan import start_from_trace
            t0 = time.monotonic()
            try:
                early_found = start_from_trace(self.with_operators(trace), self.ops, self.rp_gate, self.decide)
                info["early_plan"] = {**info.get("early_plan", {}), "source": "trace kernel events",
                                      "planned_in_s": round(time.monotonic() - t0, 2)}
            except Exception as exc:  # noqa: BLE001 - planned from the parsed trace below instead
                info["early_plan"] = {**info.get("early_plan", {}), "error": f"{type(exc).__name__}: {exc}"}
        return early_found
