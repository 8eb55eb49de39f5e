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
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _windows(path: Path):
    """Windows over the (decompressed) file, each starting ``OVERLAP`` bytes before the end of the previous
    one, so an event cut by one window lies whole in the next."""
    with textio.open_binary(path) as fh:
        buf = b""
        while True:
            block = fh.read(BLOCK)
            if not block:
                if buf:
                    yield buf
                return
            buf += block
            if len(buf) >= BLOCK + OVERLAP:
                yield buf
                buf = buf[-OVERLAP:]


def _first_per_id(path: Path, pattern: re.Pattern, read, count: int) -> dict:
    """id (``pattern``'s group 1) -> ``read(window, match)`` for the first match of each id that ``read``
    accepts (not None); stops reading once ``count`` ids have one."""
    got: dict = {}
    for buf in _windows(path):
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

    def operator(buf: bytes, m: re.Match) -> OpCall | None:
        """The operator event with that ``External id``, decoded alone (the id also appears in its launches'
        events, which are not ``cpu_op``)."""
        raw = _enclosing_event(buf, m.start())
        if raw is None or b'"cpu_op"' not in raw:
            return None
        try:
            ev = _OP.decode(raw)
        except msgspec.DecodeError:
            return None
        a, ext = ev.args, int(m.group(1))
        if ev.cat != "cpu_op" or a is None or a.external != ext or a.types is None:
            return None
        return OpCall(str(ev.name), list(a.types), list(a.dims or []), list(a.strides or []),
                      [str(c) for c in (a.concrete or [])], sorted(by_op[ext]))

    op_re = re.compile(rb'"External id": (' + _alternation(by_op) + rb')\b')
    found = _first_per_id(path, op_re, operator, len(by_op))
    return {corr: call for call in found.values() for corr in call.launches}
