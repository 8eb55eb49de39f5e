#!/usr/bin/env python3
"""Make a test fixture from a real recording by removing what nsighttc never reads, nothing else.

- nsys SQLite: drops the OS-runtime tables (``OSRT_API``, ``OSRT_CALLCHAINS``: 276,795 rows and 10 MB of a
  13 MB DDP rank; NCCL's polling threads) and the CPU-sampling ones (``SAMPLING_CALLCHAINS``, ``COMPOSITE_EVENTS``,
  ``SCHED_EVENTS``: 3.7 MB of a 6.9 MB recording of BERT inference, `nsys profile` by default; nsighttc's host
  samples come from its own sampler), then VACUUM; every table the parser reads is unchanged.
- nsys SQLite, also: the runtime calls that launch, copy, wait for or order nothing, as ``QUIET`` below, and the
  driver's ``cuKernelGetName``/``cuKernelGetFunction`` beside each launch (a third of a recent recording's calls);
  the strings no row refers to (``StringIds`` holds the whole program's, a plain recording's start-up included:
  ~30% of a short loop's compressed export).
- torch.profiler JSON: drops ``cpu_op``, ``ac2g`` (flow arrows) and ``fwdbwd`` events (the parser reads
  kernels, copies, sets, CUDA runtime/driver calls and user annotations), except the ``cpu_op`` events that span
  a torch.compile compilation (``parse.marks.COMPILE_OPS``: the parser reads those); with ``--keep-events`` every
  event stays (a fixture whose operators a test replays); with ``--as-is`` the recording's bytes stay as they are,
  only compressed again (a fixture in torch's own layout, which the block reader's tests need).
- Both: the arguments of GPU work and API calls that no reader takes (``UNREAD_ARGS``: occupancy, registers, blocks
  and warps per SM, shared memory, context, the CUPTI callback id; ~10-18% of a gzipped trace), and the runtime calls
  that launch, copy, wait for or order nothing (``nsighttc.runtime.cupti_quiet.QUIET``: what nsighttc's own recordings
  leave out since; a third of an FSDP2 rank's runtime calls, ~20% of its compressed trace).

``--until SECONDS``: also drops the events that begin more than SECONDS after the recording's first event (a loop of
300 CUDA-graph replays kept to its first 120; every kept event unchanged); in an nsys SQLite, the rows of every table
with a ``start`` column, measured from the first kernel's or runtime call's start. ``--from SECONDS`` (nsys SQLite):
likewise the rows that begin before then (a program's start-up, where a test reads its loop only).

Output is compressed by its name: ``.xz`` (what the fixtures use: ~40% smaller than gzip, decoded at ~150 MB/s) or
``.gz``. Usage: strip_fixture.py [--keep-events|--as-is] [--from SECONDS] [--until SECONDS] IN OUT.xz   (IN may be gzip- or xz-compressed)
"""
from __future__ import annotations

import gzip
import json
import lzma
import re
import sqlite3
import sys
import tempfile
from pathlib import Path

DROP_TABLES = ("OSRT_API", "OSRT_CALLCHAINS", "SAMPLING_CALLCHAINS", "COMPOSITE_EVENTS", "SCHED_EVENTS")
DROP_CATS = {"cpu_op", "ac2g", "fwdbwd"}
# Kineto's arguments of kernels, copies, sets and API calls that no reader of nsighttc takes (parse.kineto_scan.Args
# holds what the readers read: correlation, device, stream, bytes, grid, block; kineto_ops reads "External id")
UNREAD_ARGS = {"est. achieved occupancy %", "registers per thread", "blocks per SM", "warps per SM", "shared memory",
               "context", "queued", "cbid"}


def _has(con: sqlite3.Connection, table: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    return lzma.decompress(data) if data[:6] == b"\xfd7zXZ\x00" else data


def _write(dst: Path, data: bytes) -> None:
    if dst.suffix == ".xz":  # (the longest matches at a shallow depth: as small as preset 9e, in a ninth of its time)
        dst.write_bytes(lzma.compress(data, filters=[{"id": lzma.FILTER_LZMA2, "preset": 9, "nice_len": 273,
                                                      "depth": 64}]))
    else:
        dst.write_bytes(gzip.compress(data, compresslevel=9))


# driver calls that look up a kernel's name or function beside its launch (CUDA 13's runtime, nsys 2025.3): no launch,
# copy, wait or order in them
NAME_LOOKUPS = {"cuKernelGetName", "cuKernelGetFunction"}


def _quiet() -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nsighttc.runtime.cupti_quiet import QUIET
    return QUIET


def _cut_sqlite(con: sqlite3.Connection, until: float | None, since: float | None = None) -> None:
    """Rows starting more than ``until`` seconds after the first kernel or runtime call (or less than ``since``), out of
    every timed table."""
    firsts = [con.execute(f'SELECT MIN(start) FROM "{t}"').fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME") if _has(con, t)]
    firsts = [x for x in firsts if x is not None]
    if not firsts:
        return
    end = min(firsts) + int(until * 1e9) if until is not None else None
    begin = min(firsts) + int(since * 1e9) if since is not None else None
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if any(c[1] == "start" for c in con.execute(f'PRAGMA table_info("{t}")')):
            if end is not None:
                con.execute(f'DELETE FROM "{t}" WHERE start > ?', (end,))
            if begin is not None:
                con.execute(f'DELETE FROM "{t}" WHERE start < ?', (begin,))


STRING_REFS = {"nameId", "textId", "domainId", "jsonTextId", "categoryId"}


def _unreferenced_strings(con: sqlite3.Connection) -> None:
    """``StringIds`` rows that no column naming a string refers to (``*Name``: a kernel's demangled, short and mangled
    names; ``nameId``, ``textId``, ``domainId``, ``jsonTextId``, ``categoryId``: calls, threads, NVTX ranges)."""
    if not _has(con, "StringIds"):
        return
    top = con.execute("SELECT MAX(id) FROM StringIds").fetchone()[0]
    if top is None:
        return
    used: set[int] = set()
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'StringIds'").fetchall():
        for c in con.execute(f'PRAGMA table_info("{t}")').fetchall():
            if not (c[1].endswith("Name") or c[1] in STRING_REFS):
                continue
            used.update(v for (v,) in con.execute(
                f'SELECT DISTINCT "{c[1]}" FROM "{t}" WHERE typeof("{c[1]}") = \'integer\' AND "{c[1]}" BETWEEN 0 AND ?',
                (top,)))
    con.execute("CREATE TEMP TABLE used_ids (id INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO used_ids VALUES (?)", ((i,) for i in used))
    con.execute("DELETE FROM StringIds WHERE id NOT IN (SELECT id FROM used_ids)")


def main(argv: list[str]) -> None:
    keep_events = "--keep-events" in argv
    until = since = None
    if "--until" in argv:
        i = argv.index("--until")
        until = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if "--from" in argv:
        i = argv.index("--from")
        since = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    paths = [Path(a) for a in argv if not a.startswith("--")]
    if len(paths) != 2:
        sys.exit("usage: strip_fixture.py [--keep-events|--as-is] [--from SECONDS] [--until SECONDS] IN OUT.xz")
    src, dst = paths
    if not src.is_file():
        sys.exit(f"strip_fixture.py: {src}: no such file")
    data = _read(src)
    if "--as-is" in argv:
        _write(dst, data)
    elif data.startswith(b"SQLite format 3"):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "x.sqlite"
            db.write_bytes(data)
            con = sqlite3.connect(db)
            for t in DROP_TABLES:
                con.execute(f'DROP TABLE IF EXISTS "{t}"')
            quiet = _quiet()
            ids = [i for i, v in con.execute("SELECT id, value FROM StringIds")
                   if re.sub(r"_v\d+$", "", v) in quiet or v in NAME_LOOKUPS] if _has(con, "StringIds") else []
            if ids and _has(con, "CUPTI_ACTIVITY_KIND_RUNTIME"):
                con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN ({','.join(map(str, ids))})")
            if until is not None or since is not None:
                _cut_sqlite(con, until, since)
            _unreferenced_strings(con)
            con.commit()
            con.execute("VACUUM")
            con.close()
            _write(dst, db.read_bytes())
    else:
        doc = json.loads(data)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from nsighttc.parse.marks import COMPILE_OPS
        if not keep_events:
            doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in DROP_CATS
                                  or (e.get("cat") == "cpu_op" and e.get("name") in COMPILE_OPS)]
        if until is not None:
            t0 = min(float(e["ts"]) for e in doc["traceEvents"] if "ts" in e)
            doc["traceEvents"] = [e for e in doc["traceEvents"] if "ts" not in e or float(e["ts"]) - t0 <= until * 1e6]
        quiet = _quiet()
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("cat") == "cuda_runtime" and e.get("name") in quiet)]
        for e in doc["traceEvents"]:
            args = e.get("args") if e.get("cat") != "cpu_op" else None
            if isinstance(args, dict):
                for k in UNREAD_ARGS & args.keys():
                    del args[k]
        _write(dst, json.dumps(doc, separators=(",", ":")).encode())
    print(f"{src} ({len(data):,} B) -> {dst} ({dst.stat().st_size:,} B)")


if __name__ == "__main__":
    main(sys.argv[1:])
