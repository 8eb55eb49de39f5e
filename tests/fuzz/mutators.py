"""Mutations of a recording: each takes a ``random.Random`` and the file's bytes and returns new bytes.

Byte-level ones apply to every kind (truncation, flips, huge strings, wrong encodings); structural ones
know the format (CSV columns and cells, SQLite tables/columns/values, JSON values, keys and nesting), so
the reader gets past its first checks and meets data that parses but cannot be true."""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import sqlite3
import tempfile
import zlib

HOSTILE_NUMBERS = ["-1", "-1e308", "1e308", "1e400", "nan", "NaN", "inf", "-inf", "0", "-0", "9" * 40]
HOSTILE_TEXT = ["", " ", "abc", "\x00", "é", "\u202e", "x" * 100_000, "n/a", "(1, 2)", "[]"]


# --- every kind ----------------------------------------------------------------------------------------
def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(0, max(1, len(data)))]


def flip_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 32)):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def insert_huge_string(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(0, len(data) + 1)
    return data[:at] + b"A" * rng.choice([1_000, 100_000, 400_000]) + data[at:]


def wrong_encoding(rng: random.Random, data: bytes) -> bytes:
    text = data.decode("utf-8", errors="replace")
    return text.encode(rng.choice(["utf-16", "utf-32", "latin-1", "cp1252"]), errors="replace")


def duplicate_chunk(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 4096))
    return data[:b] + data[a:b] + data[b:]


def empty(rng: random.Random, data: bytes) -> bytes:
    return b""


BYTES = [truncate, flip_bytes, insert_huge_string, wrong_encoding, duplicate_chunk, empty]


# --- CSV (ncu raw / details pages) ---------------------------------------------------------------------
def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))))


def _csv(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def csv_drop_column(rng, data):
    rows = _rows(data)
    if not rows or not rows[0]:
        return data
    i = rng.randrange(len(rows[0]))
    return _csv([r[:i] + r[i + 1:] for r in rows])


def csv_duplicate_column(rng, data):
    rows = _rows(data)
    if not rows or not rows[0]:
        return data
    i = rng.randrange(len(rows[0]))
    return _csv([r + [r[i]] if i < len(r) else r for r in rows])


def csv_reorder_columns(rng, data):
    rows = _rows(data)
    if not rows or not rows[0]:
        return data
    order = list(range(len(rows[0])))
    rng.shuffle(order)
    return _csv([[r[i] for i in order if i < len(r)] for r in rows])


def csv_hostile_cells(rng, data):
    rows = _rows(data)
    if len(rows) < 2:
        return data
    for _ in range(rng.randint(1, 50)):
        r = rows[rng.randrange(1, len(rows))]
        if r:
            r[rng.randrange(len(r))] = rng.choice(HOSTILE_NUMBERS + HOSTILE_TEXT)
    return _csv(rows)


def csv_drop_or_duplicate_rows(rng, data):
    rows = _rows(data)
    if len(rows) < 3:
        return data
    if rng.random() < 0.5:
        del rows[rng.randrange(len(rows)): rng.randrange(len(rows)) + 1]
    else:
        i = rng.randrange(len(rows))
        rows[i:i] = [list(rows[i])] * rng.randint(1, 20)
    return _csv(rows)


CSV = [csv_drop_column, csv_duplicate_column, csv_reorder_columns, csv_hostile_cells, csv_drop_or_duplicate_rows]


# --- SQLite (nsys exports) -----------------------------------------------------------------------------
def _with_db(data: bytes, change) -> bytes:
    fd, path = tempfile.mkstemp(suffix=".sqlite")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        con = sqlite3.connect(path)
        try:
            change(con)
            con.commit()
        finally:
            con.close()
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(path)


def _tables(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _columns(con, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def sql_drop_table(rng, data):
    def change(con):
        t = rng.choice(_tables(con))
        con.execute(f'DROP TABLE "{t}"')
    return _with_db(data, change)


def sql_drop_column(rng, data):
    def change(con):
        t = rng.choice([t for t in _tables(con) if len(_columns(con, t)) > 1])
        c = rng.choice(_columns(con, t))
        try:
            con.execute(f'ALTER TABLE "{t}" DROP COLUMN "{c}"')
        except sqlite3.OperationalError:  # a key column: rebuild the table without it instead
            keep = ", ".join(f'"{x}"' for x in _columns(con, t) if x != c)
            con.execute(f'CREATE TABLE "_tmp" AS SELECT {keep} FROM "{t}"')
            con.execute(f'DROP TABLE "{t}"')
            con.execute(f'ALTER TABLE "_tmp" RENAME TO "{t}"')
    return _with_db(data, change)


_ACTIVITY = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_MEMCPY",
             "StringIds", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"]


def sql_hostile_values(rng, data):
    def change(con):
        tables = [t for t in _ACTIVITY if t in _tables(con)] or _tables(con)
        for _ in range(rng.randint(1, 4)):
            t = rng.choice(tables)
            c = rng.choice(_columns(con, t))
            value = rng.choice([None, -1, -10**15, 10**18, 2**63 - 1, 1e308, "abc", "", 0.5, "x" * 10_000])
            where = rng.choice(["", " WHERE rowid % 3 = 0", " WHERE rowid = 1", " WHERE rowid > (SELECT MAX(rowid) / 2 FROM \"%s\")" % t])
            try:
                con.execute(f'UPDATE "{t}" SET "{c}" = ?{where}', (value,))
            except sqlite3.DatabaseError:
                pass  # a constraint refused it: another mutation then
    return _with_db(data, change)


def sql_swap_start_end(rng, data):
    def change(con):
        for t in [t for t in _ACTIVITY if t in _tables(con)]:
            cols = _columns(con, t)
            if "start" in cols and "end" in cols:
                con.execute(f'UPDATE "{t}" SET start = "end", "end" = start WHERE rowid % ? = 0', (rng.randint(1, 5),))
    return _with_db(data, change)


def sql_duplicate_rows(rng, data):
    def change(con):
        t = rng.choice([t for t in _ACTIVITY if t in _tables(con)] or _tables(con))
        cols = ", ".join(f'"{c}"' for c in _columns(con, t))
        try:
            con.execute(f'INSERT INTO "{t}" ({cols}) SELECT {cols} FROM "{t}" WHERE rowid % 2 = 0')
        except sqlite3.DatabaseError:
            pass
    return _with_db(data, change)


SQLITE = [sql_drop_table, sql_drop_column, sql_hostile_values, sql_swap_start_end, sql_duplicate_rows]


# --- JSON (Kineto traces, verdict.json) ----------------------------------------------------------------
def _load(data: bytes):
    gz = data[:2] == b"\x1f\x8b"
    return json.loads(gzip.decompress(data) if gz else data), gz


def _dump(doc, gz: bool) -> bytes:
    raw = json.dumps(doc, allow_nan=True).encode()
    return gzip.compress(raw, compresslevel=1) if gz else raw


def _nodes(doc, limit=20000):
    """(container, key) pairs of the document, breadth first."""
    out, queue = [], [doc]
    while queue and len(out) < limit:
        node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in items:
            out.append((node, k))
            if isinstance(v, (dict, list)):
                queue.append(v)
    return out


def _hostile_value(rng):
    return rng.choice([None, -1, -1e308, 1e308, float("nan"), float("inf"), 0, "", "x" * 50_000, [], {}, True,
                       "1e400", [[[[[]]]]], {"": None}, 2**70])


def json_hostile_values(rng, data):
    doc, gz = _load(data)
    nodes = _nodes(doc)
    for _ in range(rng.randint(1, 30)):
        if nodes:
            node, k = rng.choice(nodes)
            node[k] = _hostile_value(rng)
    return _dump(doc, gz)


def json_drop_keys(rng, data):
    doc, gz = _load(data)
    dicts = [(n, k) for n, k in _nodes(doc) if isinstance(n, dict)]
    for _ in range(rng.randint(1, 20)):
        if dicts:
            node, k = rng.choice(dicts)
            node.pop(k, None)
    return _dump(doc, gz)


def json_duplicate_items(rng, data):
    doc, gz = _load(data)
    lists = [n for n, _ in _nodes(doc) if isinstance(n, list) and n]
    if lists:
        lst = rng.choice(lists)
        i = rng.randrange(len(lst))
        lst[i:i] = [lst[i]] * rng.randint(1, 50)
    return _dump(doc, gz)


def json_deep_nesting(rng, data):
    depth = rng.choice([100, 1_000, 100_000])
    raw = (b"[" * depth + b"]" * depth) if rng.random() < 0.5 else (b'{"traceEvents": ' + b"[" * depth + b"]" * depth + b"}")
    return gzip.compress(raw, compresslevel=1) if data[:2] == b"\x1f\x8b" else raw  # keep the seed's gzip-ness


def json_wrong_top(rng, data):
    doc, gz = _load(data)
    return _dump(rng.choice([[], {}, None, 1, "x", [doc]]), gz)


JSON = [json_hostile_values, json_drop_keys, json_duplicate_items, json_deep_nesting, json_wrong_top]


def mutators_for(kind: str) -> list:
    structural = {"ncu-raw": CSV, "ncu-details": CSV, "nsys-sqlite": SQLITE, "kineto": JSON, "kineto-gz": JSON,
                  "verdict": JSON, "ncu-rep": []}[kind]
    return structural + BYTES


def mutate(kind: str, rng: random.Random, data: bytes, rounds: int = 1) -> tuple[list[str], bytes]:
    """Apply ``rounds`` mutations; returns their names and the bytes. A structural mutation that cannot
    parse what an earlier one broke falls back to a byte-level one."""
    names = []
    for _ in range(rounds):
        fn = rng.choice(mutators_for(kind))
        try:
            data = fn(rng, data)
        except (ValueError, UnicodeDecodeError, sqlite3.DatabaseError, OSError, EOFError, IndexError, RecursionError,
                csv.Error, zlib.error):
            fn = rng.choice(BYTES)
            data = fn(rng, data)
        names.append(fn.__name__)
    return names, data
