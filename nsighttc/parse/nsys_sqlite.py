"""Nsight Systems SQLite exports (``nsys export --type sqlite``) -> kernel table + Timeline.

Tables read (others ignored; any except the kernel table may be missing):
``CUPTI_ACTIVITY_KIND_KERNEL`` (start, end, deviceId, streamId, correlationId, globalPid, demangledName,
grid/block), ``_MEMCPY`` (bytes, copyKind, srcKind), ``_MEMSET``, ``_RUNTIME`` (host API calls with
correlation ids), ``_SYNCHRONIZATION``, ``NVTX_EVENTS`` (push/pop = eventType 59, start/end = 60;
text inline or via ``textId``), ``StringIds``, ``TARGET_INFO_GPU``/``TARGET_INFO_CUDA_DEVICE``.

Seen in nsys 2025.3.1 (shared/fixtures/h200): runtime names carry version suffixes
(``cudaLaunchKernel_v7000``); ``globalTid``/``globalPid`` pack the pid in bits 24-47.
Each query selects only the columns used, and string ids are mapped through one dictionary, so a
million-kernel export stays a few vectorised passes.
"""
from __future__ import annotations

import gzip
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError, ParseError
from ..model import conform
from . import Parsed
from .sniff import Kind
from .timeline import API_COLUMNS, GPU_OP_COLUMNS, RANGE_COLUMNS, Timeline, attribute_ranges, nest_paths, strip_api_version
from .textio import is_gzip

NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
COPY_KIND = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
             10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}   # ENUM_CUDA_MEMCPY_OPER (11-13: unified memory)
MEM_KIND = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device-static",
            6: "managed-static"}                                # ENUM_CUDA_MEM_KIND


def _pid(global_id: pd.Series) -> pd.Series:
    ids = pd.to_numeric(global_id, errors="coerce").fillna(0).to_numpy(dtype="int64")
    return pd.Series((ids >> 24) & 0xFFFFFF, index=global_id.index)


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def read(path: Path) -> Parsed:
    if is_gzip(path):
        with tempfile.TemporaryDirectory(prefix="nsighttc-") as tmp:
            plain = Path(tmp) / "export.sqlite"
            try:
                with gzip.open(path, "rb") as src, plain.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            except (OSError, EOFError) as exc:
                raise ParseError(f"corrupt or truncated gzip data ({exc})", path) from None
            parsed = _read_plain(plain, path)
        return parsed
    return _read_plain(path, path)


def _read_plain(db: Path, shown: Path) -> Parsed:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        tables = _tables(con)
    except sqlite3.DatabaseError as exc:
        raise ParseError(f"not a readable SQLite database ({exc})", shown) from None
    try:
        return _read_con(con, tables, shown)
    except sqlite3.DatabaseError as exc:
        raise ParseError(f"SQLite export is damaged or truncated ({exc})", shown) from None
    finally:
        con.close()


def _read_con(con: sqlite3.Connection, tables: set[str], path: Path) -> Parsed:
    nsys_like = bool(tables & {"StringIds", "TARGET_INFO_GPU", "META_DATA_CAPTURE", "CUPTI_ACTIVITY_KIND_RUNTIME"})
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        if not nsys_like:
            raise InputError("a SQLite database, but not an Nsight Systems export (no StringIds or CUPTI_* "
                             "tables)", path)
        raise ParseError("nsys export has no CUPTI_ACTIVITY_KIND_KERNEL table: no kernels were traced (record "
                         "with `nsys profile -t cuda,nvtx ...`; if the program ran no GPU work, there is nothing "
                         "to analyse)", path)
    strings = dict(con.execute("SELECT id, value FROM StringIds").fetchall()) if "StringIds" in tables else {}

    kcols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = "demangledName" if "demangledName" in kcols else "shortName"
    want = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", name_col, "gridX", "gridY",
            "gridZ", "blockX", "blockY", "blockZ"]
    sel = ", ".join(c if c in kcols else f"NULL AS {c}" for c in want)
    k = pd.read_sql_query(f"SELECT {sel} FROM CUPTI_ACTIVITY_KIND_KERNEL", con)
    kernels = pd.DataFrame({
        "source": "nsys", "input": str(path),
        "launch_id": k["correlationId"].astype("Int64"),
        "name": k[name_col].map(strings).fillna(k[name_col].astype(str)),
        "duration_ns": (k["end"] - k["start"]).astype("float64"),
        "start_ns": k["start"].astype("float64"),
        "stream": k["streamId"].astype(str),
        "device": k["deviceId"].astype("Int64"),
    })
    if k["gridX"].notna().all() and len(k):
        kernels["grid"] = "(" + k["gridX"].astype(str) + ", " + k["gridY"].astype(str) + ", " + k["gridZ"].astype(str) + ")"
        kernels["block"] = "(" + k["blockX"].astype(str) + ", " + k["blockY"].astype(str) + ", " + k["blockZ"].astype(str) + ")"
    devices = _devices(con, tables)
    if devices:
        kernels["device_name"] = kernels["device"].map({d: v["name"] for d, v in devices.items()})
        kernels["cc"] = kernels["device"].map({d: v["compute_capability"] for d, v in devices.items()})
    kernel_pid = _pid(k["globalPid"])

    ops = [pd.DataFrame({"device": k["deviceId"], "start_ns": k["start"], "end_ns": k["end"], "kind": "kernel",
                         "correlation": k["correlationId"], "pid": kernel_pid, "stream": k["streamId"]})]
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        mc = _columns(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
        src = "srcKind" if "srcKind" in mc else "NULL AS srcKind"
        m = pd.read_sql_query(f"SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind, "
                              f"{src} FROM CUPTI_ACTIVITY_KIND_MEMCPY", con)
        ops.append(pd.DataFrame({"device": m["deviceId"], "start_ns": m["start"], "end_ns": m["end"], "kind": "memcpy",
                                 "correlation": m["correlationId"], "pid": _pid(m["globalPid"]), "bytes": m["bytes"],
                                 "copy_kind": m["copyKind"].map(COPY_KIND), "src_kind": m["srcKind"].map(MEM_KIND),
                                 "stream": m["streamId"]}))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        s = pd.read_sql_query("SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes FROM "
                              "CUPTI_ACTIVITY_KIND_MEMSET", con)
        ops.append(pd.DataFrame({"device": s["deviceId"], "start_ns": s["start"], "end_ns": s["end"], "kind": "memset",
                                 "correlation": s["correlationId"], "pid": _pid(s["globalPid"]), "bytes": s["bytes"],
                                 "stream": s["streamId"]}))
    gpu_ops = pd.concat(ops, ignore_index=True).reindex(columns=GPU_OP_COLUMNS)

    api = pd.DataFrame(columns=API_COLUMNS)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        r = pd.read_sql_query("SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME", con)
        names = pd.Series(pd.Categorical.from_codes(*_codes(r["nameId"], strings)))
        api = pd.DataFrame({"pid": _pid(r["globalTid"]), "tid": r["globalTid"], "start_ns": r["start"].astype("float64"),
                            "end_ns": r["end"].astype("float64"), "name": strip_api_version(names.astype(str)),
                            "correlation": r["correlationId"]})

    ranges = _nvtx(con, tables, strings)
    kernels["pid"] = kernel_pid
    kernels["nvtx"] = attribute_ranges(kernels, api, ranges)
    kernels = conform(kernels)
    timeline = Timeline("nsys", gpu_ops, api, ranges, devices)
    return Parsed(path, Kind.NSYS_SQLITE, kernels, [], timeline)


def _codes(ids: pd.Series, strings: dict) -> tuple[np.ndarray, list[str]]:
    uniq = pd.unique(ids)
    cats = [strings.get(i, str(i)) for i in uniq]
    lookup = {u: j for j, u in enumerate(uniq)}
    return ids.map(lookup).to_numpy(), cats


def _devices(con: sqlite3.Connection, tables: set[str]) -> dict[int, dict]:
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cols = _columns(con, "TARGET_INFO_GPU")
    cc = "computeMajor || '.' || computeMinor" if {"computeMajor", "computeMinor"} <= cols else "NULL"
    cu = "cuDevice" if "cuDevice" in cols else "id"
    rows = con.execute(f"SELECT {cu}, name, {cc} FROM TARGET_INFO_GPU").fetchall()
    return {int(d): {"name": n, "compute_capability": c} for d, n, c in rows}


def _nvtx(con: sqlite3.Connection, tables: set[str], strings: dict) -> pd.DataFrame:
    if "NVTX_EVENTS" not in tables:
        return pd.DataFrame(columns=RANGE_COLUMNS)
    cols = _columns(con, "NVTX_EVENTS")
    text_id = "textId" if "textId" in cols else "NULL AS textId"
    dom = "domainId" if "domainId" in cols else "0 AS domainId"
    ev = pd.read_sql_query(f"SELECT start, end, eventType, text, {text_id}, globalTid, {dom} FROM NVTX_EVENTS "
                           f"WHERE eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}, {NVTX_DOMAIN_CREATE})", con)
    domains = dict(zip(ev.loc[ev["eventType"] == NVTX_DOMAIN_CREATE, "domainId"],
                       ev.loc[ev["eventType"] == NVTX_DOMAIN_CREATE, "text"]))
    ev = ev[(ev["eventType"] != NVTX_DOMAIN_CREATE) & ev["end"].notna()]
    name = ev["text"].where(ev["text"].notna(), ev["textId"].map(strings))
    name = name.fillna("(unnamed)")
    dname = ev["domainId"].map(domains)
    name = name.where(dname.isna(), dname.astype(str) + "@" + name)
    ranges = pd.DataFrame({"pid": _pid(ev["globalTid"]), "tid": ev["globalTid"], "start_ns": ev["start"].astype("float64"),
                           "end_ns": ev["end"].astype("float64"), "name": name.astype(str)}).reset_index(drop=True)
    ranges["path"] = nest_paths(ranges)
    return ranges
