"""Fast reading of large torch.profiler traces: the ``traceEvents`` array cut into blocks, each decoded at
once by msgspec into small typed records that keep only the fields ``kineto`` uses.

Measured on the 1 GB benchmark trace (4.1M events, 2-core machine; ``benchmarks/README.md`` has the table):
ijson's C backend, event by event, took ~30 s; ``json.load`` of the whole file needs ~5x the file in memory;
orjson on blocks ~2x faster than ijson but builds every field of every event as Python objects; msgspec on
blocks decodes only the declared fields (unknown keys are skipped in C) and is the fastest of the three.
Memory stays at one block plus the kept columns, whatever the file's size.

Blocks are cut at ``}`` ``,`` ``{`` between events; a cut that falls inside a string or a nested object
makes the block invalid JSON, so the decoder itself verifies every cut. Anything unexpected (no top-level
``traceEvents``, a block that does not decode, a trailer that is not the rest of an object) returns
``None`` and the caller streams the file with ijson, which reports malformed input precisely.
"""
from __future__ import annotations

import queue
import re
import threading
from typing import Any, Callable

try:
    import msgspec
except ImportError:  # optional speed-up: without it, the ijson path reads every trace
    msgspec = None

BLOCK = 16 << 20
_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}\s*,\s*(?=\{)")
_END = re.compile(rb"\}\s*\]")
_EMPTY = re.compile(rb"\s*\]")
_ARRAY = re.compile(rb"(?:\xef\xbb\xbf)?\s*\[")  # a document that is the events array itself

if msgspec is not None:
    # gc=False: a block holds ~10^5 records, none in a reference cycle; tracking them only feeds the collector
    class Args(msgspec.Struct, gc=False):
        correlation: Any = None
        device: Any = None
        stream: Any = None
        bytes: Any = None
        grid: Any = None
        block: Any = None

    class Event(msgspec.Struct, gc=False):
        ph: Any = None
        cat: Any = None
        name: Any = ""
        ts: Any = None
        dur: Any = 0
        pid: Any = None
        tid: Any = None
        args: Args | None = None

    _EVENTS = msgspec.json.Decoder(list[Event])
    _ANY = msgspec.json.Decoder()


def prefetching(fh) -> Callable[[int], bytes]:
    """A ``read`` that hands out blocks a background thread has already read (and decompressed: zlib and
    ISA-L release the GIL), so the disk and gzip work overlaps with decoding on the second core."""
    q: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def worker():
        try:
            while not stop.is_set():
                block = fh.read(BLOCK)
                q.put(block)
                if not block:
                    return
        except BaseException as exc:  # handed to the reader, raised there
            q.put(exc)

    thread = threading.Thread(target=worker, daemon=True, name="nsighttc-read")
    thread.start()
    done = [False]

    def read(_n: int = BLOCK) -> bytes:
        if done[0]:
            return b""
        got = q.get()
        if isinstance(got, BaseException):
            done[0] = True
            raise got
        if not got:
            done[0] = True
            stop.set()
        return got
    def close() -> None:
        """Stop the reader thread (the scan may have given up early) before the file is closed."""
        stop.set()
        while thread.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
    read.close = close  # type: ignore[attr-defined]
    return read


class NotFast(Exception):
    """The trace does not have the shape the block reader relies on: read it event by event instead."""


def _decode_events(buf: bytearray, n: int) -> list:
    """Decode ``buf[:n]``, which starts with ``[`` and ends with ``]``, without copying it."""
    try:
        with memoryview(buf) as mv, mv[:n] as piece:
            return _EVENTS.decode(piece)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise NotFast(str(exc)) from None


def scan(read: Callable[[int], bytes], on_events: Callable[..., None], watch: bytes | None = None) -> dict | None:
    """Feed every event of the trace to ``on_events`` in blocks; return the document's other top-level keys
    (``deviceProperties``, ``distributedInfo``...). ``None`` when msgspec is missing; ``NotFast`` when the
    file is not shaped as expected (the caller restarts from scratch with the event-by-event reader).
    ``watch``: bytes whose presence in a block is passed to ``on_events`` as a second argument (a byte search in C,
    so that a caller can skip a rare kind of event in every block that cannot hold it, without looking at events).

    The buffer always starts with ``[`` before the next event: the comma of the last cut becomes ``]`` for
    the decoder and then ``[`` for the next block, so no block is copied to be framed."""
    if msgspec is None:
        return None
    head = read(BLOCK)
    top = _ARRAY.match(head)
    if top:  # Chrome's JSON Array Format: the events are the document (torch 1.8's Kineto, late 2020)
        return _scan_events(read, on_events, watch, bytearray(b"[") + head[top.end():], {}, array=True)
    m = _START.search(head)
    while m is None:
        more = read(BLOCK)
        if not more or len(head) > 8 * BLOCK:
            raise NotFast("no traceEvents array near the start")
        head += more
        m = _START.search(head)
    before = head[:m.start()].rstrip().rstrip(b",")
    try:  # the keys before the array; also proves "traceEvents" is a key of the top-level object
        header = _ANY.decode(before + b"}") if before.strip() != b"{" else {}
    except msgspec.DecodeError:
        raise NotFast("traceEvents is not a top-level key") from None
    if not isinstance(header, dict):
        raise NotFast("not an object")
    buf = bytearray(b"[")
    buf += head[m.end():]
    del head
    return _scan_events(read, on_events, watch, buf, header)


def _scan_events(read, on_events, watch, buf: bytearray, header: dict, array: bool = False) -> dict:
    """The events array from ``buf`` (its ``[`` and what follows) on, then the document's trailer; ``array``: the
    array is the whole document, so nothing but white space may follow it."""
    e = _EMPTY.match(buf, 1)
    if e:  # "traceEvents": []
        return {**header, **_trailer(bytes(buf[e.end():]), read, array)}
    while more := read(BLOCK):
        buf += more
        comma = _last_cut(buf)
        if comma is None:
            continue  # one event larger than the block: read on
        buf[comma] = 0x5D  # ']'
        events = _decode_events(buf, comma + 1)
        buf[comma] = 0x5B  # '['
        seen = watch is not None and buf.find(watch, 0, comma) >= 0
        del buf[:comma]
        on_events(events, seen) if watch is not None else on_events(events)
    # the array's end: a "}]" after which the rest is the document's trailer and before which the events
    # decode; tried from the end (the trailer is short), cheap trailer check first
    for e in reversed(list(_END.finditer(buf, max(1, len(buf) - (4 << 20))))):
        try:
            tail = _trailer(bytes(buf[e.end():]), read, array)
            events = _decode_events(buf, e.end())
        except NotFast:
            continue
        on_events(events, buf.find(watch, 0, e.end()) >= 0) if watch is not None else on_events(events)
        return {**header, **tail}
    raise NotFast("the events array does not end")


def _last_cut(buf: bytearray) -> int | None:
    """Position of the comma of the buffer's last ``},{`` (or ``},\n  {``) between two events."""
    i = buf.rfind(b"},{")
    if i >= 0:
        return i + 1
    tail = max(0, len(buf) - (1 << 20))  # pretty-printed traces: "},\n  {"
    last = None
    for m in _CUT.finditer(buf, tail):
        last = m
    return buf.index(b",", last.start()) if last else None


def _trailer(rest: bytes, read: Callable[[int], bytes], array: bool = False) -> dict:
    while more := read(BLOCK):
        rest += more
        if len(rest) > 64 * BLOCK:
            raise NotFast("trailer too long")
    rest = rest.strip()
    if array:
        if rest:
            raise NotFast("bytes after the document's array")
        return {}
    if rest == b"}":
        return {}
    if not rest.startswith(b","):
        raise NotFast("unexpected bytes after the events array")
    try:
        tail = _ANY.decode(b"{" + rest[1:])
    except msgspec.DecodeError:
        raise NotFast("the keys after the events array do not parse") from None
    if not isinstance(tail, dict):
        raise NotFast("not an object")
    return tail
