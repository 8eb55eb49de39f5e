"""Nsight Systems SQLite exports (``nsys export --type sqlite``) -> kernel table + Timeline.

Tables read (others ignored; any except the kernel table may be missing):
``CUPTI_ACTIVITY_KIND_KERNEL`` (start, end, deviceId, streamId, correlationId, globalPid, demangledName,
grid/block), ``_MEMCPY`` (bytes, copyKind, srcKind), ``_MEMSET``, ``_GRAPH_TRACE`` (whole CUDA-graph
executions: what nsys writes instead of the graph's kernels under its default ``--cuda-graph-trace=graph``;
seen with nsys 2025.3.1 on H100: start, end, deviceId, streamId, correlationId = the ``cudaGraphLaunch``
call's, globalPid, graphId, graphExecId), ``_RUNTIME`` (host API calls with
correlation ids), ``_SYNCHRONIZATION``, ``NVTX_EVENTS`` (push/pop = eventType 59, start/end = 60;
text inline or via ``textId``), ``StringIds``, ``TARGET_INFO_GPU``/``TARGET_INFO_CUDA_DEVICE``.

Seen in nsys 2025.3.1 (shared/fixtures/h200): runtime names carry version suffixes
(``cudaLaunchKernel_v7000``); ``globalTid``/``globalPid`` pack the pid in bits 24-47.
Each query selects only the columns used, and string ids are mapped through one dictionary, so a
million-kernel export stays a few vectorised passes.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from .. import allocator, labels, stages
from ..errors import InputError, ParseError
from ..model import conform
from .parsed import Parsed
from .sniff import Kind
from . import marks as marks_mod
from . import sqlite_columns
from .range_paths import nest_paths
from .timeline import (API_COLUMNS, GPU_OP_COLUMNS, RANGE_COLUMNS, Timeline, attribute_ranges, last_timestamp,
                       name_devices, op_launch_calls, sanitize, strip_api_version)
from . import textio

NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
COPY_KIND = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
             10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}   # ENUM_CUDA_MEMCPY_OPER (11-13: unified memory)
MEM_KIND = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device-static",
            6: "managed-static"}                                # ENUM_CUDA_MEM_KIND


def _pid(global_id) -> np.ndarray:
    """The process id packed in bits 24-47 of a ``globalPid``/``globalTid`` (one new array for the SQL
    columns: 7M API calls made three 57 MB temporaries through pandas)."""
    if isinstance(global_id, np.ndarray) and global_id.dtype == np.int64:
        out = global_id >> 24
    else:
        out = pd.to_numeric(pd.Series(global_id), errors="coerce").fillna(0).to_numpy(dtype="int64") >> 24
    out &= 0xFFFFFF
    return out


@contextlib.contextmanager
def plain_database(path: Path):
    """The path of an uncompressed copy of a gzip- or xz-compressed export (removed afterwards), or the export
    itself: SQLite opens files, not streams."""
    with textio.plain_copy(path, "export.sqlite") as plain:
        yield plain


def read(path: Path) -> Parsed:
    with plain_database(path) as db:
        return _read_plain(db, path)


def _read_plain(db: Path, shown: Path) -> Parsed:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        tables = sqlite_columns.tables(con)
    except sqlite3.DatabaseError as exc:
        raise ParseError(f"not a readable SQLite database ({exc})", shown) from None
    try:
        return _read_con(con, tables, shown, str(db))
    except sqlite3.DatabaseError as exc:
        raise ParseError(f"SQLite export is damaged or truncated ({exc})", shown) from None
    finally:
        con.close()


def _read_con(con: sqlite3.Connection, tables: set[str], path: Path, db: str) -> Parsed:
    nsys_like = bool(tables & {"StringIds", "TARGET_INFO_GPU", "META_DATA_CAPTURE", "CUPTI_ACTIVITY_KIND_RUNTIME"})
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        if not nsys_like:
            raise InputError("a SQLite database, but not an Nsight Systems export (no StringIds or CUPTI_* "
                             "tables)", path)
        raise ParseError("nsys export has no CUPTI_ACTIVITY_KIND_KERNEL table: no kernels were traced (record "
                         "with `nsys profile -t cuda,nvtx ...`; if the program ran no GPU work, there is nothing "
                         "to analyse)", path)
    strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall()) if "StringIds" in tables else {}

    kcols = sqlite_columns.columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = "demangledName" if "demangledName" in kcols else "shortName"
    want = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", name_col, "gridKey", "blockKey"]
    # The big tables are independent: read them on all cores (SQLite and Arrow work outside the GIL).
    jobs = {"kernel": ("CUPTI_ACTIVITY_KIND_KERNEL", want, kcols)}
    gpu = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid"]
    for key, table, extra in (("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY", ["bytes", "copyKind", "srcKind"]),
                              ("memset", "CUPTI_ACTIVITY_KIND_MEMSET", ["bytes"]),
                              ("graph", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ["graphId"])):
        if table in tables:
            jobs[key] = (table, gpu + extra, sqlite_columns.columns(con, table))
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        jobs["runtime"] = ("CUPTI_ACTIVITY_KIND_RUNTIME", ["start", "end", "globalTid", "correlationId", "nameId"],
                           sqlite_columns.columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME"))
    # Big exports: the API calls are read once the GPU tables are in, as their columns (as many rows as kernels and
    # more) and the kernel query's would otherwise be held together while the tables are built (4M kernels: ~290 MB
    # more at the reader's peak); the read then runs beside building the kernel and GPU tables. Below
    # ``API_BESIDE_KERNELS_MAX`` kernels both queries run at once, one per core (1M kernels: ~0.35 s less, ~70 MB more).
    # A big kernel table is read in parts, one query each (``KERNEL_ROWS_PER_PART``).
    runtime_job = jobs.pop("runtime", None)
    beside = runtime_job is not None and \
        sqlite_columns.row_estimate(con, "CUPTI_ACTIVITY_KIND_KERNEL") <= API_BESIDE_KERNELS_MAX
    cores = os.cpu_count() or 1
    kernel_parts = sqlite_columns.row_parts(con, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_ROWS_PER_PART, cores)
    with ThreadPoolExecutor(max_workers=min(4, cores)) as pool:
        kernel_spec = jobs.pop("kernel")
        kernel_futures = [pool.submit(sqlite_columns.ints, None, db, *kernel_spec, rows=part) for part in kernel_parts]
        runtime_future = pool.submit(sqlite_columns.ints, None, db, *runtime_job) if beside else None
        futures = {key: pool.submit(sqlite_columns.ints, None, db, *spec) for key, spec in jobs.items()}
        nvtx_future = pool.submit(_nvtx, db, tables, strings)
        with stages.stage("parse.gpu_tables"):
            got = {"kernel": sqlite_columns.join_parts([f.result() for f in kernel_futures])}
            got.update({key: f.result() for key, f in futures.items()})
        if runtime_job is not None and not beside:
            runtime_future = pool.submit(sqlite_columns.ints, None, db, *runtime_job)
        try:
            return _build(con, tables, path, got, strings, name_col, nvtx_future, runtime_future)
        finally:
            for f in (nvtx_future, runtime_future):
                if f is not None:
                    f.cancel()


# Kernels (estimated from the table's last row id) up to which the API calls are read beside the kernel table.
API_BESIDE_KERNELS_MAX = 2_000_000
# A kernel table of at least twice this many rows is read in parts of about this many, at most one a core
# (``sqlite_columns.row_parts``): gen_big_sqlite's 1M-kernel export on the 2-core machine, 0.83 s in one query, ~0.45 s
# in two beside the API calls' (a query's Arrow batches are joined by one copy per part, and a part is smaller)
KERNEL_ROWS_PER_PART = 250_000


def _build(con, tables: set[str], path: Path, got: dict, strings: dict, name_col: str, nvtx_future,
           runtime_future) -> Parsed:
    """The kernel table and the Timeline from the GPU tables' columns (``got``), then the ranges and API calls
    as their reads finish."""
    k = got["kernel"]
    names = _categorical(k[name_col], strings)
    graphs = got.get("graph")
    kernels = pd.DataFrame({
        "source": labels.constant("nsys", len(names)), "input": labels.constant(str(path), len(names)),
        "launch_id": pd.array(k["correlationId"], dtype="Int64"),
        "name": names,
        "duration_ns": k["end"] - k["start"],
        "start_ns": k["start"],  # float64 from SQL (``REAL``): taken as it is
        "stream": _categorical(k["streamId"], None),
        "device": pd.array(k["deviceId"], dtype="Int64"),
    }, copy=False)
    if (k["gridKey"] >= 0).all() and len(k["gridKey"]):
        kernels["grid"] = _dims(k["gridKey"])
        kernels["block"] = _dims(k["blockKey"])
    kernel_pid = _pid(k["globalPid"])
    kernels["pid"] = kernel_pid
    device_ids = k["deviceId"]
    n_graphs = len(graphs["start"]) if graphs is not None else 0
    if n_graphs:
        kernels = pd.concat([kernels, _graph_rows(graphs, path)], ignore_index=True)
        device_ids = np.concatenate([device_ids, graphs["deviceId"]])
    devices = _devices(con, tables)
    name_devices(kernels, devices, device_ids)

    gpu_ops = _gpu_ops([("kernel", k), ("memcpy", got.get("memcpy")), ("memset", got.get("memset")),
                        ("graph", graphs if graphs is not None and len(graphs["start"]) else None)])
    # the kernel query's columns the tables did not take as they are: freed before the API table is built
    for key in ("kernel", "memcpy", "memset", "graph"):
        got.pop(key, None)
    del k, graphs
    allocator.give_back_free_memory()

    api = pd.DataFrame(columns=API_COLUMNS)
    if runtime_future is not None:
        with stages.stage("parse.wait_api_calls"):
            r = runtime_future.result()
        api_names = _categorical(r["nameId"], strings)
        api_names = api_names.cat.rename_categories(strip_api_version(pd.Series(api_names.cat.categories)).tolist()) \
            if strip_api_version(pd.Series(api_names.cat.categories)).is_unique else \
            pd.Series(strip_api_version(api_names.astype(str)), dtype="category")
        api = pd.DataFrame({"pid": _pid(r["globalTid"]), "tid": r["globalTid"], "start_ns": r["start"],
                            "end_ns": r["end"], "name": api_names,
                            "correlation": r["correlationId"]}, copy=False)
        del r
    del got  # the raw columns: ~100 MB of a million-kernel export, no longer needed
    allocator.give_back_free_memory()
    with stages.stage("parse.wait_ranges"):
        ranges, marks = nvtx_future.result()

    _launch_calls(kernels, gpu_ops, api, n_graphs)
    kernels, gpu_ops, ranges, notes = sanitize(path, kernels, gpu_ops, api, ranges)
    marks = marks_mod.sanitize(marks, last_timestamp(gpu_ops, api, ranges))
    with stages.stage("parse.kernel_ranges"):
        attribute_ranges(kernels, api, ranges)
    kernels = conform(kernels)
    # what the reader freed goes back to the system: the analysis runs on two threads, each with its own
    # malloc arena, and the second could not reuse this one's free memory (4M kernels: ~680 MB of it)
    allocator.give_back_free_memory()
    timeline = Timeline("nsys", gpu_ops, api, ranges, devices, marks=marks)
    return Parsed(path, Kind.NSYS_SQLITE, kernels, notes, timeline)


def _launch_calls(kernels: pd.DataFrame, gpu_ops: pd.DataFrame, api: pd.DataFrame, n_graphs: int) -> None:
    """The launching call of every GPU op, joined once (``launch_start_ns``/``launch_end_ns`` on the GPU op table, the
    idle analysis' question), and each kernel's ``launch_ns`` taken from it: the op table starts with the kernels'
    rows and ends with the whole graphs', the kernel table is those rows in that order (1M kernels: one join of
    ~0.08 s instead of two)."""
    calls = op_launch_calls(gpu_ops, api)
    start, end = calls["start_ns"].to_numpy(), calls["end_ns"].to_numpy()
    gpu_ops["launch_start_ns"] = start
    gpu_ops["launch_end_ns"] = end
    n_kernels = len(kernels) - n_graphs
    kernels["launch_ns"] = np.concatenate([start[:n_kernels], start[len(start) - n_graphs:]]) if n_graphs else \
        start[:n_kernels].copy()


def _gpu_ops(parts: list[tuple[str, dict | None]]) -> pd.DataFrame:
    """The GPU activity table from the kernel, memcpy, memset and graph columns: each output column is one
    numpy concatenation, labels are categoricals built from codes (no per-table frames to concatenate)."""
    parts = [(kind, t) for kind, t in parts if t is not None]
    lens = [len(t["start"]) for _, t in parts]
    n = sum(lens)

    def col(name, fill, dtype, f=lambda a: a):
        return np.concatenate([f(t[name]).astype(dtype, copy=False) if name in t else np.full(m, fill, dtype=dtype)
                               for (_, t), m in zip(parts, lens)]) if parts else np.empty(0, dtype=dtype)

    kinds = [kind for kind, _ in parts]
    return pd.DataFrame({
        "device": col("deviceId", -1, np.int64), "start_ns": col("start", np.nan, np.float64),
        "end_ns": col("end", np.nan, np.float64),
        "kind": pd.Categorical.from_codes(np.repeat(np.arange(len(kinds)), lens), categories=kinds)
        if len(set(kinds)) == len(kinds) else pd.Categorical(np.repeat(kinds, lens)),
        "correlation": col("correlationId", -1, np.int64), "pid": col("globalPid", -1, np.int64, _pid),
        "bytes": col("bytes", np.nan, np.float64),
        "copy_kind": labels.mapped(col("copyKind", -1, np.int64), COPY_KIND),  # -1 (no such column): missing
        "src_kind": labels.mapped(col("srcKind", -1, np.int64), MEM_KIND), "stream": col("streamId", -1, np.int64),
    }, columns=GPU_OP_COLUMNS, copy=False) if n or parts else pd.DataFrame(columns=GPU_OP_COLUMNS)


def graph_kernel_name(graph_id) -> str:
    """The kernel-table name of one whole-graph execution (``name_rules`` knows it: Tensor Cores unknown)."""
    return f"CUDA graph #{graph_id} (traced whole)"


def _graph_rows(g: dict[str, np.ndarray], path: Path) -> pd.DataFrame:
    """Whole-graph executions as kernel-table rows: their GPU time belongs to the range of the
    ``cudaGraphLaunch`` call (correlation id) like any kernel's, while what ran inside is unknown."""
    return pd.DataFrame({
        "source": "nsys", "input": str(path),
        "launch_id": pd.array(g["correlationId"], dtype="Int64"),
        "name": [graph_kernel_name(x) for x in g["graphId"]],
        "duration_ns": (g["end"] - g["start"]).astype("float64"), "start_ns": g["start"].astype("float64"),
        "stream": [str(x) for x in g["streamId"]], "device": pd.array(g["deviceId"], dtype="Int64"),
        "pid": _pid(g["globalPid"]),
    })


def _categorical(ids: np.ndarray, strings: dict | None) -> pd.Series:
    """String ids -> a categorical Series (one Python string per distinct name, not per row)."""
    codes, uniq = pd.factorize(ids)
    cats = [strings.get(int(u), str(u)) if strings is not None else str(u) for u in uniq]
    return pd.Series(labels.categorical(codes, cats))  # two ids with one text fold into one


def _dims(key: np.ndarray) -> pd.Series:
    """'(x, y, z)' strings from the packed shape (``PACKED``), built once per distinct launch shape."""
    codes, uniq = pd.factorize(key)
    cats = [f"({u >> 32}, {(u >> 16) & 0xFFFF}, {u & 0xFFFF})" for u in uniq]
    return pd.Series(pd.Categorical.from_codes(codes, categories=cats))


def _devices(con: sqlite3.Connection, tables: set[str]) -> dict[int, dict]:
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = sqlite_columns.columns(con, "TARGET_INFO_GPU")
    cc = "computeMajor || '.' || computeMinor" if {"computeMajor", "computeMinor"} <= cols else "NULL"
    cu = "cuDevice" if "cuDevice" in cols else "id"
    rows = con.execute(f"SELECT {cu}, name, {cc} FROM TARGET_INFO_GPU").fetchall()
    return {int(d): {"name": n, "compute_capability": c} for d, n, c in rows}


def _nvtx(db: str, tables: set[str], strings: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the program's NVTX ranges with their paths, the marks: ``parse.marks``)."""
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(columns=RANGE_COLUMNS), marks_mod.empty()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cols = sqlite_columns.columns(con, "NVTX_EVENTS")
        sql = ("SELECT start, COALESCE(end, -1) AS end_, eventType, COALESCE(text, '') AS text, "
               f"{'COALESCE(textId, -1)' if 'textId' in cols else '-1'} AS textId, COALESCE(globalTid, -1) AS tid, "
               f"{'COALESCE(domainId, 0)' if 'domainId' in cols else '0'} AS domainId FROM NVTX_EVENTS "
               f"WHERE eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_DOMAIN_CREATE})")
        ev = sqlite_columns.query_columns(con, db, sql)
    finally:
        con.close()
    # names are built once per distinct (text, textId, domain), then spread by codes: 10^5 ranges share a few
    # hundred names, and string work per row (Arrow or object) cost ~0.5 s on the 1M-kernel benchmark
    text_codes, texts = ev["text"] if isinstance(ev["text"], tuple) else (np.zeros(len(ev["start"]), dtype=np.int64), [""])
    is_dom = ev["eventType"] == NVTX_DOMAIN_CREATE
    domains = {int(d): texts[c] for d, c in zip(ev["domainId"][is_dom], text_codes[is_dom])}
    keep = ~is_dom
    key = pd.DataFrame({"t": text_codes[keep], "i": ev["textId"][keep], "d": ev["domainId"][keep]})
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(key))
    names = []
    for t, i, d in uniq:
        name = texts[t] or strings.get(int(i)) or "(unnamed)"
        names.append(f"{domains[int(d)]}@{name}" if int(d) in domains else name)
    # a range never closed (end NULL: the program stopped inside it) ends "never" until sanitize() closes it
    end_ = ev["end_"][keep]
    end = np.where(end_ >= 0, end_.astype("float64"), np.inf)
    tid = ev["tid"][keep]
    ranges = pd.DataFrame({"pid": _pid(tid), "tid": tid, "start_ns": ev["start"][keep].astype("float64"),
                           "end_ns": end, "name": labels.categorical(codes, names)})
    ranges, marks = marks_mod.split(ranges)  # step hooks' marks: not the program's ranges (parse.marks)
    ranges["path"] = nest_paths(ranges)
    return ranges, marks


