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
        return {"name": self.name, "types": self.types, "dims": self.dims, "strides": self.strides,
                "concrete": self.concrete, "launches": self.launches}

    @classmethod
    def from_json(cls, d: dict) -> "OpCall":
        return cls(d["name"], list(d["types"]), list(d["dims"]), list(d["strides"]), list(d["concrete"]),
                   list(d.get("launches", [])))


BLOCK = 16 << 20
OVERLAP = 1 << 20  # an operator event (arguments of a long tensor list included) is far below this


def _windows(path: Path):
    """(offset, bytes) windows over the (decompressed) file, each starting ``OVERLAP`` bytes before the end
    of the previous one, so an event cut by one window lies whole in the next."""
    with textio.open_binary(path) as fh:
        buf, base = b"", 0
        while True:
            block = fh.read(BLOCK)
            if not block:
                if buf:
                    yield base, buf
                return
            buf += block
            if len(buf) >= BLOCK + OVERLAP:
                yield base, buf
                keep = buf[-OVERLAP:]
                base += len(buf) - len(keep)
                buf = keep


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
    external: dict[int, int] = {}
    for _, buf in _windows(path):
        for m in corr_re.finditer(buf):
            corr = int(m.group(1))
            if corr in external:
                continue
            args = buf.rfind(b"{", 0, m.start())
            e = ext_re.search(buf, args, m.start()) if args >= 0 else None
            if e is not None:
                external[corr] = int(e.group(1))
        if len(external) == len(wanted):
            break
    if not external:
        return {}
    by_op: dict[int, list[int]] = {}
    for corr, ext in external.items():
        by_op.setdefault(ext, []).append(corr)
    op_re = re.compile(rb'"External id": (' + _alternation(by_op) + rb')\b')
    found: dict[int, OpCall] = {}
    for _, buf in _windows(path):
        for m in op_re.finditer(buf):
            ext = int(m.group(1))
            if ext in found:
                continue
            raw = _enclosing_event(buf, m.start())
            if raw is None or b'"cpu_op"' not in raw:
                continue
            try:
                ev = _OP.decode(raw)
            except msgspec.DecodeError:
                continue
            a = ev.args
            if ev.cat == "cpu_op" and a is not None and a.external == ext and a.types is not None:
                found[ext] = OpCall(str(ev.name), list(a.types), list(a.dims or []), list(a.strides or []),
                                    [str(c) for c in (a.concrete or [])], sorted(by_op[ext]))
        if len(found) == len(by_op):
            break
    return {corr: call for call in found.values() for corr in call.launches}
