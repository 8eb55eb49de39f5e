"""torch.profiler (Kineto) chrome traces (``.json`` / ``.json.gz``) -> kernel table + Timeline.

Events used (``traceEvents``, complete events ``ph: X``, timestamps in µs):
``kernel``, ``gpu_memcpy``, ``gpu_memset`` (GPU side, ``args.correlation``, ``args.device``),
``cuda_runtime`` / ``cuda_driver`` (host API calls with the same correlation ids), and
``user_annotation`` (``record_function`` labels, including ``ProfilerStep#N``). ``ac2g`` flow events
repeat the correlation ids and are not needed. ``deviceProperties`` names the GPUs.

Traces of long runs reach gigabytes: the events array is read in blocks that msgspec decodes into records
of only the fields we use (``kineto_scan``; 1 GB in ~7 s on two cores), compacted block by block into numpy
arrays and label codes, so memory grows with the GPU events and API calls kept (~0.4 GB per GB of trace),
not with the file. Traces the block reader cannot cut cleanly are streamed event by event with ijson.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import labels
from ..errors import InputError, ParseError
from ..model import conform
from . import textio
from .parsed import Parsed
from .sniff import Kind
from . import kineto_devices, marks as marks_mod
from .marks import COMPILE_OPS
from .range_paths import nest_paths
from .timeline import (API_COLUMNS, GPU_OP_COLUMNS, RANGE_COLUMNS, Timeline, attribute_ranges, last_timestamp,
                       name_devices, sanitize, strip_api_version)

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
            # torch 1.8-1.9's Kineto named its categories with capitals (the V100 ResNet-50 sample of pytorch/kineto's
            # tb_plugin, June 2021: Kernel, Memcpy, Memset, Runtime, Operator; lower case with new names from 1.10)
            "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
API_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
RANGE_CATS = {"user_annotation"}
# ... and wrote the program's ranges as operators: ProfilerStep#N, enumerate(DataLoader)#..., Optimizer.step#...,
# record_function's names are "Operator" events beside the ATen operators (``aten::``, ``torch::autograd::``), the
# autograd nodes (``CudnnConvolutionBackward``, ``ReluBackward1``) and the in-place operators written without their
# namespace (``detach_``): what has none of those shapes is a range (user_annotation from torch 1.10 on)
OLD_OPERATOR = "Operator"
_NOT_A_RANGE = re.compile(r"::|Backward\d*$|^[a-z0-9_]+_$")


def old_range(name) -> bool:
    """Whether an old trace's ``Operator`` event is one of the program's ranges (``OLD_OPERATOR``)."""
    return isinstance(name, str) and bool(name) and _NOT_A_RANGE.search(name) is None
# Devices that are no GPU, by the categories their events carry in a torch.profiler trace: counted, never read (Meta's
# MTIA accelerator: `mtia_ccp_events`, `mtia_runtime`; HolisticTraceAnalysis's test data, 25,814 device events and no
# GPU kernel, was told "the workload launched no GPU work" before)
OTHER_DEVICE_CATS = {"mtia_ccp_events": "MTIA", "mtia_runtime": "MTIA"}
# with_stack's Python calls, counted while the events are read (parse.python_calls reads them only where there are
# some): a 263 MB with_stack trace of a transformers pipeline on H200 held its first python_function event past its
# first 4 MB (its operators first), and a look at the file's head found none (benchmarks/gpu/gpu_steps_time.sh users6)
PYTHON_CAT = "python_function"
GROUP = {**{c: 0 for c in GPU_CATS}, **{c: 1 for c in API_CATS}, **{c: 2 for c in RANGE_CATS},
         **{c: 3 for c in OTHER_DEVICE_CATS}, OLD_OPERATOR: 4, PYTHON_CAT: 5}
# (a table per category; 3 and 5: counted only; 4: by name)
# cpu_op events are read only for torch.compile's spans of a compilation (parse.marks.COMPILE_OPS), and only in the
# blocks whose bytes hold their names: bucketing every cpu_op cost the 1 GB benchmark trace ~0.25 s of ~4.5 s
COMPILE_BYTES = b'"entire_'
_MEMCPY_NAME = re.compile(r"Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")


def _open(path: Path):
    return textio.open_binary(path)


def events_prefix(path: Path) -> str:
    """Where a trace's events are, for ijson: under ``traceEvents`` (Kineto since torch 1.8), or the document itself
    (Chrome's JSON Array Format, which the Kineto of late 2020 wrote: pytorch/kineto's first tb_plugin sample)."""
    return "item" if _array_document(textio.head_bytes(path, 4096)) else "traceEvents.item"


def _array_document(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")


def _events(path: Path):
    prefix = events_prefix(path)
    try:
        import ijson  # C backend when available: fast and constant memory per event
    except ImportError:  # small traces still work with the standard library
        import json
        with _open(path) as fh:
            doc = json.load(fh)
        if isinstance(doc, list):
            yield from doc
            return
        if not isinstance(doc, dict) or "traceEvents" not in doc:
            raise ParseError("JSON without 'traceEvents': not a torch.profiler/chrome trace", path)
        yield from doc["traceEvents"]
        return
    with _open(path) as fh:
        try:
            yield from ijson.items(fh, prefix, use_float=True)
        except ijson.IncompleteJSONError:
            if prefix == "traceEvents.item":
                raise
            # the Array Format's closing "]" is optional (a process that dies mid-trace): the events before it stand


def _events_or_refuse(path: Path) -> None:
    """Refuse a JSON array that holds no trace events: the Array Format's events are objects with a phase (``"ph"``),
    as every Kineto event is; ``[1, 2, 3]`` or a list of records of another tool read as an empty trace otherwise."""
    head = textio.head_bytes(path, 1 << 16)
    if _array_document(head) and b'"ph"' not in head and head.strip(b"\xef\xbb\xbf \t\r\n[]"):
        raise ParseError("a JSON array without trace events (objects with a \"ph\" phase): not a torch.profiler/"
                         "chrome trace", path)


def _has_trace_events(path: Path) -> bool:
    import ijson
    with _open(path) as fh:
        for prefix, event, value in ijson.parse(fh):
            if prefix == "" and event == "map_key" and value == "traceEvents":
                return True
            if prefix == "" and event == "start_array":
                return True  # the Array Format: the document is the events array
    return False


MAX_DEPTH = 64            # Kineto traces nest 4 deep; a streaming parser pays per level on every value
DEPTH_SCAN_BYTES = 64 << 20


def _check_depth(path: Path) -> None:
    """Refuse absurd nesting before streaming: ``[[[[...]]]]`` 100,000 deep (200 KB) kept ijson busy for
    minutes (its item prefixes grow with the depth). Brackets inside strings (kernel names with
    ``[lambda]``) are balanced in practice and far below the limit. Vectorised over the first 64 MB."""
    depth = 0
    with _open(path) as fh:
        left = DEPTH_SCAN_BYTES
        while left > 0:
            chunk = fh.read(min(left, 8 << 20))
            if not chunk:
                return
            left -= len(chunk)
            b = np.frombuffer(chunk, dtype=np.uint8)
            step = ((b == 91) | (b == 123)).astype(np.int64) - ((b == 93) | (b == 125)).astype(np.int64)
            run = depth + np.cumsum(step)
            if len(run) and run.max() > MAX_DEPTH:
                raise ParseError(f"JSON nested more than {MAX_DEPTH} levels deep: not a torch.profiler trace", path)
            depth = int(run[-1]) if len(run) else depth


def _columns() -> tuple[dict, dict, dict]:
    return ({k: [] for k in ("cat", "name", "ts", "dur", "corr", "device", "stream", "bytes", "grid", "block", "pid")},
            {k: [] for k in ("name", "ts", "dur", "corr", "pid", "tid")}, {k: [] for k in ("name", "ts", "dur", "pid", "tid")})


def read(path: Path) -> Parsed:
    """The block reader when the trace allows it, else the event-by-event reader (which also words the
    error for a malformed file)."""
    _events_or_refuse(path)
    try:
        fast = _read_blocks(path)
    except ParseError:
        raise
    except Exception:  # kineto_scan.NotFast, RecursionError, or a gzip/IO error the event-by-event path reports precisely
        fast = None
    if fast is not None:
        return _build(path, *fast)
    _check_depth(path)
    return _read_events(path)


@dataclass
class Coded:
    """A label column kept as integer codes into its distinct values (-1 = missing): a trace's millions of
    API calls share a few dozen names, and Python strings per row cost ~60 bytes each."""
    codes: np.ndarray
    labels: list

    def take(self, rows: np.ndarray) -> "Coded":
        return Coded(self.codes[rows], self.labels)


class _Coder:
    """Values -> codes, with one table shared by every block of a file (first seen, first code)."""

    def __init__(self):
        self.table: dict = {}
        self.parts: list[np.ndarray] = []

    def add(self, values: list) -> None:
        table = self.table
        self.parts.append(np.fromiter((-1 if v is None else table.setdefault(v, len(table)) for v in values),
                                      dtype=np.int64, count=len(values)))

    def column(self) -> Coded:
        return Coded(np.concatenate(self.parts) if self.parts else np.empty(0, dtype=np.int64), list(self.table))


class _Numbers:
    """Numeric values kept as one numpy array per block (8 bytes a value, not a Python object)."""

    def __init__(self, convert):
        self.convert = convert
        self.parts: list[np.ndarray] = []

    def add(self, values: list) -> None:
        self.parts.append(self.convert(values))

    def column(self) -> np.ndarray:
        if not self.parts:
            return np.empty(0)
        if len({p.dtype for p in self.parts}) > 1:
            return np.concatenate([p.astype(object) for p in self.parts])
        return np.concatenate(self.parts)


def _ids_array(values) -> np.ndarray:
    """Ids as int64 when every one is an integer, else an object array of the values as written."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array(values, dtype=object)


def read_stream(path: Path, fh) -> Parsed:
    """``read`` from ``fh``, a stream of the trace (``textio.GrowingFile`` while the launcher writes it),
    with the block reader only: ``kineto_scan.NotFast`` (or the reader's error) when it does not apply, and
    the caller reads the finished file with ``read``."""
    fast = _read_blocks(path, fh=fh)
    if fast is None:
        raise ParseError("msgspec is not installed: the trace cannot be read while it is written", path)
    return _build(path, *fast)


def _read_blocks(path: Path, fh=None):
    """The whole trace through ``kineto_scan`` (msgspec on blocks); None where it does not apply.

    Columns are compacted block by block (numbers into numpy arrays, labels into codes), so memory grows
    with the number of GPU events and API calls at ~8-16 bytes each, not with Python objects: a 4 GB trace
    held 3.3 GB of lists before, ~1 GB of arrays now. ``fh``: the trace already open (``read_stream``)."""
    from . import kineto_scan
    if kineto_scan.msgspec is None:
        return None
    count, python = [0], [0]
    other: dict[str, int] = {}
    g = {"cat": _Coder(), "name": _Coder(), "stream": _Coder(), "grid": _Coder(), "block": _Coder(),
         "ts": _Numbers(_floats), "dur": _Numbers(_floats), "corr": _Numbers(_floats), "device": _Numbers(_floats),
         "bytes": _Numbers(_floats)}
    a = {"name": _Coder(), "ts": _Numbers(_floats), "dur": _Numbers(_floats), "corr": _Numbers(_floats),
         "pid": _Numbers(_ids_array), "tid": _Numbers(_ids_array)}
    rng = {k: [] for k in ("name", "ts", "dur", "pid", "tid")}
    r_name, r_ts, r_dur, r_pid, r_tid = (rng[k] for k in ("name", "ts", "dur", "pid", "tid"))

    def shape(v):
        return tuple(v) if isinstance(v, list) and len(v) == 3 else None

    def on_events(events: list, compiling: bool = False) -> None:
        """Columns from one block: events bucketed by table in one pass (file order kept within each),
        then one comprehension per kept field (4.1M events of the 1 GB benchmark: ~1 s, against ~3 s for
        a filter per category)."""
        count[0] += len(events)
        buckets: tuple[list, list, list, list, list, list] = ([], [], [], [], [], [])
        group = GROUP.get
        for ev in events:
            b = group(ev.cat)
            if b is not None:
                buckets[b].append(ev)
        if buckets[4]:  # (an old trace's operators: its ranges among them)
            buckets[2].extend(ev for ev in buckets[4] if old_range(ev.name))
        for ev in buckets[3]:
            other[OTHER_DEVICE_CATS[ev.cat]] = other.get(OTHER_DEVICE_CATS[ev.cat], 0) + 1
        python[0] += len(buckets[5])
        gg, c, r = ([ev for ev in evs if ev.ph == "X"] for evs in buckets[:3])
        if compiling:
            r += [ev for ev in events if ev.cat == "cpu_op" and ev.name in COMPILE_OPS and ev.ph == "X"]
        if gg:
            args = [ev.args or _NO_ARGS for ev in gg]
            g["cat"].add([GPU_CATS[ev.cat] for ev in gg]); g["name"].add([ev.name for ev in gg])
            g["ts"].add([ev.ts for ev in gg]); g["dur"].add([ev.dur for ev in gg])
            g["corr"].add([x.correlation for x in args])
            g["device"].add([ev.pid if x.device is None else x.device for ev, x in zip(gg, args)])
            g["stream"].add([ev.tid if x.stream is None else x.stream for ev, x in zip(gg, args)])
            g["bytes"].add([x.bytes for x in args])
            g["grid"].add([shape(x.grid) for x in args]); g["block"].add([shape(x.block) for x in args])
        if c:
            a["name"].add([ev.name for ev in c]); a["ts"].add([ev.ts for ev in c]); a["dur"].add([ev.dur for ev in c])
            a["corr"].add([ev.args.correlation if ev.args is not None else None for ev in c])
            a["pid"].add([ev.pid for ev in c]); a["tid"].add([ev.tid for ev in c])
        if r:
            r_name.extend([ev.name for ev in r]); r_ts.extend([ev.ts for ev in r]); r_dur.extend([ev.dur for ev in r])
            r_pid.extend([ev.pid for ev in r]); r_tid.extend([ev.tid for ev in r])

    _NO_ARGS = kineto_scan.Args()
    with (_open(path) if fh is None else fh) as fh:
        read = kineto_scan.prefetching(fh)
        try:
            doc = kineto_scan.scan(read, on_events, watch=COMPILE_BYTES)
        finally:
            read.close()
    if doc is None:
        return None
    gpu = {k: v.column() for k, v in g.items()}
    api = {k: v.column() for k, v in a.items()}
    return gpu, api, rng, kineto_devices.properties(doc.get("deviceProperties")), count[0], other, python[0]


def _read_events(path: Path) -> Parsed:
    gpu, api, rng = _columns()
    n_events = n_python = 0
    other: dict[str, int] = {}
    try:
        for ev in _events(path):
            n_events += 1
            if not isinstance(ev, dict):
                continue
            cat = ev.get("cat")
            if ev.get("ph") != "X" or cat is None:
                continue
            if cat in GPU_CATS:
                a = ev.get("args") or {}
                gpu["cat"].append(GPU_CATS[cat]); gpu["name"].append(ev.get("name", ""))
                gpu["ts"].append(ev.get("ts")); gpu["dur"].append(ev.get("dur", 0))
                gpu["corr"].append(a.get("correlation")); gpu["device"].append(a.get("device", ev.get("pid")))
                gpu["stream"].append(a.get("stream", ev.get("tid"))); gpu["bytes"].append(a.get("bytes"))
                gpu["grid"].append(a.get("grid")); gpu["block"].append(a.get("block")); gpu["pid"].append(None)
            elif cat in API_CATS:
                a = ev.get("args") or {}
                api["name"].append(ev.get("name", "")); api["ts"].append(ev.get("ts")); api["dur"].append(ev.get("dur", 0))
                api["corr"].append(a.get("correlation")); api["pid"].append(ev.get("pid")); api["tid"].append(ev.get("tid"))
            elif cat in RANGE_CATS or (cat == "cpu_op" and ev.get("name") in COMPILE_OPS) or \
                    (cat == OLD_OPERATOR and old_range(ev.get("name"))):
                rng["name"].append(ev.get("name", "")); rng["ts"].append(ev.get("ts")); rng["dur"].append(ev.get("dur", 0))
                rng["pid"].append(ev.get("pid")); rng["tid"].append(ev.get("tid"))
            elif cat in OTHER_DEVICE_CATS:
                other[OTHER_DEVICE_CATS[cat]] = other.get(OTHER_DEVICE_CATS[cat], 0) + 1
            elif cat == PYTHON_CAT:
                n_python += 1
    except ParseError:
        raise
    except Exception as exc:  # ijson.IncompleteJSONError, JSONError, gzip EOFError, ...
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParseError(f"truncated or malformed JSON ({msg})", path) from None
    if n_events == 0 and not _has_trace_events(path):
        raise ParseError("JSON without 'traceEvents': not a torch.profiler/chrome trace", path)
    props = kineto_devices.device_properties(path, _open)
    return _build(path, gpu, api, rng, props, n_events, other, n_python)


def _floats(values: list) -> np.ndarray:
    """A list of JSON numbers (None where missing) as float64; through pandas only when something else is in it."""
    try:
        return np.array(values, dtype="float64")
    except (TypeError, ValueError):
        return np.asarray(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce"), dtype="float64")


def _us_to_ns(values: list) -> np.ndarray:
    return _floats(values) * 1e3


def _ids(values) -> pd.Series:
    """pid/tid values: int64 when every one is an integer, else kept as they are (Kineto writes "Spans")."""
    return pd.Series(_ids_array(values))


def _labels(values, func=str) -> pd.Categorical:
    """Labels (a list, or a ``Coded`` column) as a categorical: ``func`` runs once per distinct value
    (None stays missing)."""
    if isinstance(values, Coded):
        codes, uniq = values.codes, values.labels
    else:
        codes, uniq = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return labels.categorical(codes, [func(u) for u in uniq])


def _dims(values, rows: np.ndarray) -> pd.Categorical:
    """'(x, y, z)' per launch (``rows`` of the GPU events) from Kineto's [x, y, z] lists, built once per
    distinct shape."""
    if isinstance(values, Coded):
        keys = values.take(rows)
    else:
        keys = [tuple(v) if isinstance(v, list) and len(v) == 3 else None for v in (values[i] for i in rows)]
    return _labels(keys, lambda v: f"({v[0]}, {v[1]}, {v[2]})")


def _build(path: Path, gpu: dict, api: dict, rng: dict, devices: dict, n_events: int,
           other: dict | None = None, python_calls: int = 0) -> Parsed:
    """Columns collected from the events -> kernel table and Timeline. Vectorised: string work runs once per
    distinct name (a million launches share a few hundred), numbers go straight into numpy arrays."""
    kind = _labels(gpu["cat"])
    name = _labels(gpu["name"])
    g_start, g_dur = _us_to_ns(gpu["ts"]), _us_to_ns(gpu["dur"])
    g_corr = _floats(gpu["corr"])
    a_corr = _floats(api["corr"])
    a_start = _us_to_ns(api["ts"])
    a_pid = _ids(api["pid"])
    api_names = _labels(api["name"], lambda n: strip_api_version(pd.Series([str(n)])).iloc[0])
    api_df = pd.DataFrame({"pid": a_pid, "tid": _ids(api["tid"]), "start_ns": a_start,
                           "end_ns": a_start + _us_to_ns(api["dur"]), "name": api_names,
                           "correlation": a_corr}, columns=API_COLUMNS)
    # GPU events carry no host pid: take it from the launch call with the same correlation id (first one)
    ok = ~np.isnan(a_corr)
    uniq, first = np.unique(a_corr[ok], return_index=True)
    pos = np.clip(np.searchsorted(uniq, g_corr), 0, max(len(uniq) - 1, 0))
    hit = (len(uniq) > 0) & (uniq[pos] == g_corr) if len(uniq) else np.zeros(len(g_corr), dtype=bool)
    pid_values = a_pid.to_numpy()[ok][first] if len(uniq) else np.array([])
    g_pid = pd.Series(np.where(hit, pid_values[pos], None) if len(uniq) else [None] * len(g_corr), dtype=object)
    if g_pid.notna().all() and len(g_pid) and a_pid.dtype == np.int64:
        g_pid = g_pid.astype(np.int64)
    r_start = _us_to_ns(rng["ts"])
    r = pd.DataFrame({"pid": _ids(rng["pid"]), "tid": _ids(rng["tid"]), "start_ns": r_start,
                      "end_ns": r_start + _us_to_ns(rng["dur"]), "name": pd.Series(rng["name"], dtype=object)})
    r = r.dropna(subset=["start_ns", "end_ns"]).reset_index(drop=True)
    r, marks = marks_mod.split(r)  # step hooks' marks and torch.compile's events: not the program's ranges
    r["path"] = nest_paths(r)
    ranges = r.reindex(columns=RANGE_COLUMNS)

    # memcpy names -> copy kind and source memory, parsed once per distinct name
    names = list(name.categories)
    parsed = [_MEMCPY_NAME.match(str(n)) for n in names]
    copy_of = np.array([m.group(1) if m else None for m in parsed] + [None], dtype=object)
    src_of = np.array([m.group(2).lower() if m and m.group(2) else None for m in parsed] + [None], dtype=object)
    is_copy = np.asarray(kind == "memcpy")
    codes = name.codes
    stream = _labels(gpu["stream"])
    gpu_ops = pd.DataFrame({"device": _floats(gpu["device"]), "start_ns": g_start, "end_ns": g_start + g_dur,
                            "kind": kind, "correlation": g_corr, "pid": g_pid, "bytes": _floats(gpu["bytes"]),
                            "copy_kind": pd.Categorical(np.where(is_copy, copy_of[codes], None)),
                            "src_kind": pd.Categorical(np.where(is_copy, src_of[codes], None)),
                            "stream": stream}, columns=GPU_OP_COLUMNS)

    kk = np.flatnonzero(np.asarray(kind == "kernel"))
    kernels = pd.DataFrame({
        "source": labels.constant("torch", len(kk)), "input": labels.constant(str(path), len(kk)),
        "launch_id": pd.array(g_corr[kk], dtype="Int64") if len(kk) else pd.array([], dtype="Int64"),
        "name": name[kk], "duration_ns": g_dur[kk], "start_ns": g_start[kk],
        "stream": stream[kk], "device": pd.array(gpu_ops["device"].to_numpy()[kk], dtype="Int64"),
        "grid": _dims(gpu["grid"], kk), "block": _dims(gpu["block"], kk),
        "pid": g_pid.to_numpy()[kk],
    })
    name_devices(kernels, devices)
    kernels, gpu_ops, ranges, notes = sanitize(path, kernels, gpu_ops, api_df, ranges)
    marks = marks_mod.sanitize(marks, last_timestamp(gpu_ops, api_df, ranges))
    attribute_ranges(kernels, api_df, ranges)
    if gpu_ops.empty and other:
        kind, n = max(other.items(), key=lambda kv: kv[1])
        raise InputError(f"device type {kind}: not supported: this trace holds {n:,} {kind} device events and no GPU "
                         f"kernel; nsighttc's verdicts are for NVIDIA GPUs (and AMD GPUs by kernel names)", path)
    if gpu_ops.empty:
        notes.append(f"{path}: the trace holds no GPU events: the workload launched no GPU work "
                     "(or the profiler ran without ProfilerActivity.CUDA)")
    timeline = Timeline("torch", gpu_ops, api_df, ranges, devices, marks=marks, python_calls=python_calls)
    return Parsed(path, Kind.KINETO_JSON, conform(kernels), notes, timeline)
