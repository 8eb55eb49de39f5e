"""Which PyTorch operator launched a GPU kernel, with the arguments it was called with: what ``nsighttc
replay`` needs to launch the same kernel again without running the program.

torch.profiler links each launch to the innermost operator around it: the kernel event and its
``cudaLaunchKernel`` carry the operator's ``External id`` (seen in torch 2.11 traces on H100/H200: the
``nvjet_*`` GEMM of ``aten::mm``, cudnn's convolutions under ``aten::cudnn_convolution``). With
``record_shapes=True`` the operator event carries ``Input Dims``, ``Input Strides``, ``Input type`` (the C++
type name of each tensor's dtype, ``Scalar``/``ScalarList``/``TensorList`` or ``""`` for None and values it
does not record) and ``Concrete Inputs`` (scalars and lists as text). Launches made outside any operator (CUDA
graph replays, Triton kernels launched by compiled code) have no such link.

Two byte scans of the trace for just the ids asked for (``launching_ops``); memory stays at one 17 MB window.
``kernel_launches`` reads the kernel events alone (a third of ResNet-50 AMP's events), so the replay can be
planned before the whole trace is parsed.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import kineto_scan, textio

if kineto_scan.msgspec is not None:
    import msgspec

    class _OpArgs(msgspec.Struct, gc=False):
        external: Any = msgspec.field(default=None, name="External id")
        dims: Any = msgspec.field(default=None, name="Input Dims")
        strides: Any = msgspec.field(default=None, name="Input Strides")
        types: Any = msgspec.field(default=None, name="Input type")
        concrete: Any = msgspec.field(default=None, name="Concrete Inputs")

    class _OpEvent(msgspec.Struct, gc=False):
        cat: Any = None
        name: Any = ""
        args: _OpArgs | None = None

    _OP = msgspec.json.Decoder(_OpEvent)

    class _KernelArgs(msgspec.Struct, gc=False):
        external: Any = msgspec.field(default=None, name="External id")
        device: Any = None

    class _KernelEvent(msgspec.Struct, gc=False):
        cat: Any = None
        name: Any = ""
        ts: Any = None
        dur: Any = 0
        args: _KernelArgs | None = None

    _KERNEL = msgspec.json.Decoder(_KernelEvent)


@dataclass
class OpCall:
    """One operator call as the profiler recorded it (lists aligned by argument position)."""
    name: str                       # "aten::addmm"
    types: list[str]
    dims: list
    strides: list
    concrete: list[str]
    launches: list[int] = field(default_factory=list)  # correlation ids of the launches it made that we asked for

    def to_json(self) -> dict:
        """The call as the replay list holds it (``replay_ops.json``)."""
        return {"name": self.name, "types": self.types, "dims": self.dims, "strides": self.strides,
                "concrete": self.concrete}


BLOCK = 16 << 20
OVERLAP = 1 << 20  # an operator event (arguments of a long tensor list included) is far below this
CAUGHT_UP = 1 << 20  # a file still written: scanned once this much more has come


def _windows(path: Path, fh=None):
    """Windows over the (decompressed) file, each starting ``OVERLAP`` bytes before the end of the previous
    one, so an event cut by one window lies whole in the next. ``fh``: the file, already open."""
    for _, buf in _windows_at(path, fh):
        yield buf


def _windows_at(path: Path, fh=None, written: Callable[[], bool] | None = None):
    """``_windows`` with each window's offset in the file. ``fh``, ``written``: read an open plain file that
    is still being written (``growing_trace``) until ``written()`` says the writer is done and the end is
    reached; a window then also comes whenever the reader has caught up with the writer and ``CAUGHT_UP``
    new bytes wait (what is written is scanned as it comes, not 16 MB later)."""
    with (textio.open_binary(path) if fh is None else fh) as fh:
        buf, offset, done = b"", 0, written is None
        while True:
            block = fh.read(BLOCK)
            if not block:
                if done:
                    if buf:
                        yield offset, buf
                    return
                if len(buf) >= OVERLAP + CAUGHT_UP:
                    yield offset, buf
                    offset += len(buf) - OVERLAP
                    buf = buf[-OVERLAP:]
                done = written()  # once done: read on to the end of what was written before the signal
                if not done:
                    time.sleep(0.01)
                continue
            buf += block
            if len(buf) >= BLOCK + OVERLAP:
                yield offset, buf
                offset += len(buf) - OVERLAP
                buf = buf[-OVERLAP:]


# Kineto writes its trace to ``<file>.tmp`` and renames it to ``<file>`` once complete (libkineto
# output_json.cpp, ChromeTraceLogger::openTraceFile); older writers write ``<file>`` itself.
KINETO_TEMP_SUFFIX = ".tmp"


def current_trace(path: Path):
    """The trace as it is now, open: Kineto's ``<trace>.tmp`` while it writes, ``<trace>`` once renamed;
    None when neither exists."""
    for candidate in (path.with_name(path.name + KINETO_TEMP_SUFFIX), path):
        try:
            return candidate.open("rb")
        except FileNotFoundError:
            continue
    return None


def growing_trace(path: Path, gone: Callable[[], bool]):
    """The trace file Kineto is writing, open for reading from its start (the descriptor follows the rename
    to ``path``), or None when ``gone()`` says it will not come. Polls every 20 ms."""
    first = first_growing_trace([(path, gone)])
    return None if first is None else first[1]


def first_growing_trace(candidates: list[tuple[Path, Callable[[], bool]]]):
    """Of several traces Kineto may write, the first to appear, in the order given: (its path, the file open as in
    ``growing_trace``, its ``gone``); None once every ``gone()`` says none will come. ``gone`` is asked before
    looking, so a trace written meanwhile is still found."""
    while True:
        done = all(gone() for _, gone in candidates)
        for path, gone in candidates:
            if (fh := current_trace(path)) is not None:
                return path, fh, gone
        if done:
            return None
        time.sleep(0.02)


def _first_per_id(path: Path, pattern: re.Pattern, read, count: int, fh=None) -> dict:
    """id (``pattern``'s group 1) -> ``read(window, match)`` for the first match of each id that ``read``
    accepts (not None); stops reading once ``count`` ids have one."""
    got: dict = {}
    for buf in _windows(path, fh):
        for m in pattern.finditer(buf):
            key = int(m.group(1))
            if key not in got and (value := read(buf, m)) is not None:
                got[key] = value
        if len(got) == count:
            break
    return got


def _enclosing_event(buf: bytes, pos: int) -> bytes | None:
    """The event object around position ``pos`` inside its ``"args": {...}`` (Kineto writes no braces inside
    argument values), or None when the window does not hold all of it."""
    args = buf.rfind(b'"args"', 0, pos)
    start = buf.rfind(b"{", 0, args) if args >= 0 else -1
    close = buf.find(b"}", pos)
    end = buf.find(b"}", close + 1) if close >= 0 else -1
    if start < 0 or end < 0 or b"{" in buf[start + 1:args] or b"{" in buf[close + 1:end]:
        return None
    return buf[start:end + 1]


def _alternation(ids) -> bytes:
    return b"|".join(str(int(i)).encode() for i in sorted(ids))


_KERNEL_CAT = re.compile(rb'"cat": "kernel"')


def kernel_launches(path: Path, fh=None, written: Callable[[], bool] | None = None,
                    on_new: Callable[[list[dict]], None] | None = None,
                    index: OperatorIndex | None = None) -> list[dict]:
    """Each distinct kernel of the trace: ``{name, device, first_ns, time_ns, launches, external}`` (its first
    launch's start, device and operator ``External id``, None outside any operator), from the kernel events
    alone: one byte scan for ``"cat": "kernel"``, each event decoded by itself. Kineto writes ``ph`` and
    ``cat`` before ``name`` and ``args`` last, and no braces inside argument values; a kernel name may hold
    braces (``{lambda()#1}``), so the event is delimited from its ``cat`` and its ``args``.

    ``fh``, ``written``: the trace as Kineto writes it (``growing_trace``), read while it grows: the scan is
    done soon after the writer (ResNet-50 AMP's 114 MB: written in ~1 s, scanned in ~0.5 s on H100's host).
    ``on_new(list)``: after each window, the kernels first seen in it, from their first event in the file
    (the same keys; ``launches`` 1): the replay is planned from them while the trace is still written.
    ``index``: filled with the operators' offsets (``OperatorIndex``) up to the first window with a kernel,
    before that window's kernels are handed over."""
    if kineto_scan.msgspec is None:
        if fh is not None:
            fh.close()
        return []
    first: dict[str, list] = {}
    done = -1  # file offset of the last event decoded: a window's overlap holds it again
    for offset, buf in _windows_at(path, fh, written):
        fresh: list[str] = []
        if index is not None and index.open:
            index.add(buf, offset)
        for m in _KERNEL_CAT.finditer(buf):
            start = buf.rfind(b"{", 0, m.start())
            args = buf.find(b'"args"', m.end())
            close = buf.find(b"}", args) if args >= 0 else -1
            end = buf.find(b"}", close + 1) if close >= 0 else -1
            if start < 0 or end < 0 or offset + start <= done:
                continue
            try:
                ev = _KERNEL.decode(buf[start:end + 1])
            except msgspec.DecodeError:
                continue
            done = offset + start
            if ev.cat != "kernel" or ev.ts is None:
                continue
            ts_ns, dur_ns = float(ev.ts) * 1e3, float(ev.dur or 0) * 1e3
            a = ev.args
            f = first.get(ev.name)
            if f is None:
                first[ev.name] = [ts_ns, a.external if a else None, a.device if a else None, 1, dur_ns]
                fresh.append(ev.name)
                continue
            f[3] += 1
            f[4] += dur_ns
            if ts_ns < f[0]:
                f[0], f[1], f[2] = ts_ns, a.external if a else None, a.device if a else None
        if on_new is not None and fresh:
            on_new([_launch(n, first[n]) for n in fresh])
    return [_launch(n, f) for n, f in first.items()]


def _launch(name, f: list) -> dict:
    return {"name": str(name), "device": int(f[2] or 0), "first_ns": f[0], "time_ns": f[4], "launches": f[3],
            "external": int(f[1]) if f[1] is not None else None}


def operators(path: Path, external_ids, fh=None) -> dict[int, OpCall]:
    """``External id`` -> the operator event with that id and its recorded arguments (those with none are
    left out): one byte scan for just these ids. ``fh``: the file already open (one still written: up to
    where the writer is)."""
    by_op = {int(e): [] for e in external_ids}
    return _operators(path, by_op, fh)


def _operators(path: Path, by_op: dict[int, list[int]], fh=None) -> dict[int, OpCall]:
    if not by_op or kineto_scan.msgspec is None:
        if fh is not None:
            fh.close()
        return {}

    def operator(buf: bytes, m: re.Match) -> OpCall | None:
        ext = int(m.group(1))
        return _operator_at(buf, m.start(), ext, by_op[ext])

    op_re = re.compile(rb'"External id": (' + _alternation(by_op) + rb')\b')
    return _first_per_id(path, op_re, operator, len(by_op), fh)


def _operator_at(buf: bytes, pos: int, ext: int, launches: list[int]) -> OpCall | None:
    """The operator event whose ``"External id": ext`` is at ``pos``, decoded alone; None when the event there
    is not a ``cpu_op`` with recorded arguments (the id also appears in its launches' events) or is not whole."""
    raw = _enclosing_event(buf, pos)
    if raw is None or b'"cpu_op"' not in raw:
        return None
    try:
        ev = _OP.decode(raw)
    except msgspec.DecodeError:
        return None
    a = ev.args
    if ev.cat != "cpu_op" or a is None or a.external != ext or a.types is None:
        return None
    return OpCall(str(ev.name), list(a.types), list(a.dims or []), list(a.strides or []),
                  [str(c) for c in (a.concrete or [])], sorted(launches))


_EXTERNAL_ID = re.compile(rb'"External id": (\d+)')


class OperatorIndex:
    """Where each ``External id`` first occurs in the trace (its operator's event: Kineto writes the operators
    before the GPU events), filled by the kernel scan (``kernel_launches(..., index=)``) while it reads the
    operator half of a trace still being written, so that an operator is then read where it lies instead of
    by a scan of everything written so far.

    Why: the replay's calls are listed as the scan finds kernels in the GPU half; each lookup by scan read the
    operator half again from its start (~60 MB for ResNet-50 AMP) until it had every id asked for, and the
    operators of a program's first step lie far apart in it: Kineto groups them by thread (in ResNet-50 AMP's
    H100 trace the autograd thread's backward operators fill the first half, the main thread's forward ones
    the second).
    The index stops at the first window with a kernel event: the ids of GPU events are not operators.
    An id it lacks, or whose event is not whole within ``SPAN``, is left to the caller's scan."""

    SPAN = (4096, 1 << 16)  # bytes read before and after the id: an event's head, and arguments up to 64 KB

    def __init__(self):
        self.offsets: dict[int, int] = {}
        self.open = True        # still in the operator half
        self._end = 0           # file offset up to which windows were indexed

    def add(self, buf: bytes, offset: int) -> None:
        """Index a window of the file starting at ``offset`` (the part indexed before is skipped); the index
        closes with the first window that holds a kernel event."""
        start = max(0, self._end - offset - 64)  # an id cut by the last window's end is found again
        setdefault = self.offsets.setdefault
        for m in _EXTERNAL_ID.finditer(buf, start):
            setdefault(int(m.group(1)), offset + m.start())
        self._end = offset + len(buf)
        self.open = _KERNEL_CAT.search(buf) is None

    def operators(self, fh, external_ids) -> dict[int, OpCall]:
        """``External id`` -> its operator call, for the ids indexed whose event is whole around its offset.
        ``fh``: the trace, open for reading."""
        got: dict[int, OpCall] = {}
        before, after = self.SPAN
        for ext in external_ids:
            off = self.offsets.get(int(ext))
            if off is None:
                continue
            lo = max(0, off - before)
            fh.seek(lo)
            call = _operator_at(fh.read(off - lo + after), off - lo, int(ext), [])
            if call is not None:
                got[int(ext)] = call
        return got


def launching_ops(path: Path, correlations) -> dict[int, OpCall]:
    """Correlation id -> the operator that made that launch, for the launches asked for that have one with
    recorded arguments (a trace recorded without ``record_shapes`` gives none).

    Two byte scans of the trace, each a regular expression for just the ids wanted: the launches' events
    (``"correlation": C``, with the operator's ``"External id"`` in the same arguments), then the operators'
    events, each decoded alone. A 100 MB ResNet-50 trace: ~0.5 s against ~3 s to decode every event."""
    wanted = {int(c) for c in correlations}
    if not wanted or kineto_scan.msgspec is None:
        return {}
    corr_re = re.compile(rb'"correlation": (' + _alternation(wanted) + rb')\b')
    ext_re = re.compile(rb'"External id": (\d+)')

    def operator_id(buf: bytes, m: re.Match) -> int | None:
        """The ``External id`` in the same arguments as the launch's correlation id."""
        args = buf.rfind(b"{", 0, m.start())
        e = ext_re.search(buf, args, m.start()) if args >= 0 else None
        return int(e.group(1)) if e is not None else None

    external = _first_per_id(path, corr_re, operator_id, len(wanted))
    if not external:
        return {}
    by_op: dict[int, list[int]] = {}
    for corr, ext in external.items():
        by_op.setdefault(ext, []).append(corr)
    found = _operators(path, by_op)
    return {corr: call for call in found.values() for corr in call.launches}
