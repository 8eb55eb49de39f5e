"""Columns of an SQLite export read fast: through Arrow's ADBC SQLite driver (columnar: ~3x faster on millions of rows),
else sqlite3 in chunks, as numpy arrays (text as codes and their distinct strings), never as per-row Python objects. The
nsys reader's question "how do I get a million rows out quickly and small" apart from its question "what do they
mean" (``nsys_sqlite``)."""
from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd


def tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def row_estimate(con: sqlite3.Connection, table: str) -> int:
    """The table's largest row id: its row count for an export nothing was deleted from, in one B-tree descent
    (``count(*)`` reads every page)."""
    try:
        return int(con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0)
    except sqlite3.DatabaseError:
        return 0


# Launch shapes packed into one integer in SQL (x < 2^31, y and z < 2^16 in CUDA): SQLite's cost is per value
# handed out, so two packed columns instead of six made the kernel query 1.8x faster (1M kernels: 0.58 s vs
# 1.02 s through ADBC, 2-core machine).
PACKED = {f"{d}Key": (f"(({d}X << 32) | ({d}Y << 16) | {d}Z)", (f"{d}X", f"{d}Y", f"{d}Z")) for d in ("grid", "block")}


# Timestamps come out of SQLite as doubles (what every table downstream holds): the tables then take the
# arrays as they are, instead of an integer copy and a float copy of each (4M-kernel export: ~300 MB less at
# the reader's peak). Nanosecond timestamps stay exact below 2^53 ns (104 days).
REAL = {"start", "end"}


def select(cols: list[str], have: set[str]) -> str:
    parts = []
    for i, c in enumerate(cols):
        if c in PACKED:
            expr, needs = PACKED[c]
            parts.append(f"COALESCE({expr}, -1) AS c{i}" if set(needs) <= have else f"-1 AS c{i}")
        elif c not in have:
            parts.append(f"{'-1.0' if c in REAL else '-1'} AS c{i}")
        elif c in REAL:
            parts.append(f"COALESCE(CAST({c} AS REAL), -1.0) AS c{i}")
        else:
            parts.append(f"COALESCE({c}, -1) AS c{i}")
    return ", ".join(parts)


def ints(_unused, db: str, table: str, cols: list[str], have: set[str], chunk: int = 262144,
         rows: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    """Integer columns of a table as numpy arrays (missing column or NULL -> -1; ``PACKED`` names computed;
    ``REAL`` ones as float64); ``rows``: only the rows whose row id is in [first, last] (``row_parts``).

    Through Arrow's ADBC SQLite driver (a dependency; columnar, ~3x faster on millions of rows), else
    sqlite3 in chunks: either way no per-row Python objects survive, so a million rows cost tens of
    MB, not gigabytes."""
    sel = select(cols, have)
    where = f" WHERE rowid BETWEEN {int(rows[0])} AND {int(rows[1])}" if rows else ""
    if db is not None:
        try:
            import adbc_driver_sqlite.dbapi as adbc
            with adbc.connect(f"file:{db}?mode=ro") as acon, acon.cursor() as cur:
                cur.execute(f'SELECT {sel} FROM "{table}"{where}')
                tbl = cur.fetch_arrow_table()
            want = ["double" if c in REAL else "int64" for c in cols]
            if tbl.num_rows == 0 or [str(t) for t in tbl.schema.types] == want:
                arrays = tbl.columns
                del tbl
                out = {}
                for i, c in enumerate(cols):  # each Arrow column freed once converted: no second copy of the table
                    out[c], arrays[i] = arrays[i].to_numpy(), None
                    if c in REAL:
                        out[c] = out[c].astype(np.float64, copy=False)  # an empty table's columns are null-typed
                return out
        except Exception:  # driver missing or a column it cannot type: the stdlib path below is exact
            pass
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # one per thread: connections are not shared
    cur = con.execute(f'SELECT {sel} FROM "{table}"{where}')
    types = [np.float64 if c in REAL else np.int64 for c in cols]
    parts: list[list[np.ndarray]] = [[] for _ in cols]
    while rows := cur.fetchmany(chunk):  # ints and floats side by side: each chunk typed column by column at once
        block = np.array(rows, dtype=object).reshape(-1, len(cols))
        for i, t in enumerate(types):
            parts[i].append(block[:, i].astype(t))
    con.close()
    return {c: np.concatenate(parts[i]) if parts[i] else np.empty(0, dtype=types[i]) for i, c in enumerate(cols)}



def row_parts(con: sqlite3.Connection, table: str, rows_per_part: int, most: int) -> list[tuple[int, int] | None]:
    """Row-id ranges that split a big table into parts of about ``rows_per_part`` rows (at most ``most``), read by
    one query each on their own cores and joined in row-id order (``join_parts``): SQLite hands out one value at a
    time, so a million-kernel query is one core's 0.8 s however few columns it asks for. [None] (the whole table,
    one query) for a small one."""
    try:  # (two queries: each is one B-tree descent, where both in one query read the whole table)
        lo = con.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
        hi = con.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
    except sqlite3.DatabaseError:
        return [None]
    if lo is None or most < 2 or hi - lo + 1 < 2 * rows_per_part:
        return [None]
    n = min(most, (hi - lo + 1) // rows_per_part)
    cuts = [lo + (hi - lo + 1) * i // n for i in range(n + 1)]
    return [(cuts[i], cuts[i + 1] - 1) for i in range(n)]


def join_parts(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The columns of a table read in parts (``row_parts``), in row-id order."""
    if len(parts) == 1:
        return parts[0]
    return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}


def query_columns(con: sqlite3.Connection, db: str, sql: str) -> dict:
    """A query's columns as numpy arrays; text columns as (codes, list of distinct strings). Through ADBC
    (columnar, dictionary-encoded in Arrow) when it can type the columns, else sqlite3."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
        import pyarrow.compute as pc
        with adbc.connect(f"file:{db}?mode=ro") as acon, acon.cursor() as cur:
            cur.execute(sql)
            tbl = cur.fetch_arrow_table()
        out = {}
        for name, col in zip(tbl.column_names, tbl.columns):
            if str(col.type) in ("string", "large_string"):
                enc = pc.dictionary_encode(col).combine_chunks()
                out[name] = (enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist())
            else:
                out[name] = col.to_numpy()
        return out
    except Exception:
        frame = pd.read_sql_query(sql, con)
        out = {}
        for name in frame.columns:
            if frame[name].dtype.kind in "iuf":
                out[name] = frame[name].to_numpy()
            else:
                codes, uniq = pd.factorize(frame[name].astype(object).fillna(""))
                out[name] = (codes.astype(np.int64), [str(u) for u in uniq])
        return out
