"""The timeline tables that nsys and torch.profiler inputs add to the kernel table.

Both parsers fill the same ``Timeline`` so the analysis never asks which tool recorded it:

* ``gpu_ops``: every GPU activity interval (kernels, memcpy, memset) -- ``device``, ``start_ns``,
  ``end_ns``, ``kind`` (kernel/memcpy/memset), ``correlation``, ``pid``, ``bytes``, ``copy_kind``
  (HtoD/DtoH/DtoD/...), ``src_kind`` (pageable/pinned/device/...);
* ``api``: host-side CUDA runtime/driver calls -- ``pid``, ``tid``, ``start_ns``, ``end_ns``, ``name``
  (version suffixes like ``_v3020`` removed), ``correlation``;
* ``ranges``: NVTX push/pop and start/end ranges or torch ``record_function`` labels -- ``pid``, ``tid``,
  ``start_ns``, ``end_ns``, ``name``, ``path`` (``outer/inner``, nesting on the range's own thread);
* ``marks``: the ranges that say where steps and compilations were (nsighttc's step hooks, torch.compile's
  events: ``parse.marks``), kept out of ``ranges`` -- ``pid``, ``tid``, ``start_ns``, ``end_ns``, ``name``.

Kernels keep living in the kernel table (``nsighttc.model``) with ``start_ns`` and ``launch_id`` =
correlation id; ``nvtx`` is filled by ``attribute_ranges`` from where the *launch call* happened.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import labels
from ..allocator import slices
from .range_paths import paths_at

GPU_OP_COLUMNS = ["device", "start_ns", "end_ns", "kind", "correlation", "pid", "bytes", "copy_kind", "src_kind",
                  "stream"]
API_COLUMNS = ["pid", "tid", "start_ns", "end_ns", "name", "correlation"]
RANGE_COLUMNS = ["pid", "tid", "start_ns", "end_ns", "name", "path"]


@dataclass
class Timeline:
    source: str                       # "nsys" | "torch"
    gpu_ops: pd.DataFrame
    api: pd.DataFrame
    ranges: pd.DataFrame
    devices: dict[int, dict] = field(default_factory=dict)   # device id -> {"name", "compute_capability"}
    notes: list[str] = field(default_factory=list)
    marks: pd.DataFrame = field(default_factory=lambda: _empty_marks())  # parse.marks: steps, compilations
    host_samples: object | None = None  # parse.host_samples.HostSamples: the host's stacks, on this clock
    python_calls: int = 0  # torch.profiler with_stack's Python calls the trace holds (parse.python_calls reads them)


def _empty_marks() -> pd.DataFrame:
    from .marks import empty
    return empty()


def last_timestamp(gpu_ops: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame) -> float:
    """The latest finite time the recording holds (where marks left open are closed)."""
    best = None
    for t, c in ((gpu_ops, "end_ns"), (api, "end_ns"), (ranges, "end_ns"), (ranges, "start_ns")):
        if not len(t):
            continue
        a = t[c].to_numpy(dtype="float64")
        top = a.max()  # one pass; the finite ones apart only where a range is left open (inf) or a value is NaN
        if not np.isfinite(top):
            a = a[np.isfinite(a)]
            if not len(a):
                continue
            top = a.max()
        best = float(top) if best is None else max(best, float(top))
    return 0.0 if best is None else best


_API_KEY_CACHE: dict[int, tuple] = {}


def corr_key(pid, corr) -> np.ndarray:
    """One int64 per (host process, correlation id): what joins GPU work to the host call that launched it."""
    p = _int64(pid)
    c = _int64(corr)
    return (p << 40) ^ c


def _int64(values) -> np.ndarray:
    """Integer ids as int64 (missing -> -1) without a round trip through pandas where they already are."""
    a = values.to_numpy() if isinstance(values, pd.Series) and values.dtype == np.int64 else values
    if isinstance(a, np.ndarray) and a.dtype == np.int64:
        return a
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.Int64Dtype):  # the kernel table's ids:
        return values.to_numpy(dtype=np.int64, na_value=-1)  # no detour through a million Python objects
    return pd.to_numeric(pd.Series(np.asarray(values)), errors="coerce").fillna(-1).to_numpy(dtype=np.int64)


class _CallIndex:
    """Where each (process, correlation id) sits in the API table, built once per table.

    Correlation ids are small dense counters per process (nsys, CUPTI), so a direct table indexed by
    (process code, id) answers a million lookups with one gather (1M kernels: ~0.01 s instead of 0.15 s
    of binary search); sparse or huge ids fall back to a sorted key array. First occurrence wins."""

    def __init__(self, api: pd.DataFrame):
        pid, corr = _int64(api["pid"]), _int64(api["correlation"])
        self.pids = np.sort(pd.unique(pid))
        pc = self._process_codes(pid)
        self.width = int(corr.max()) + 2 if len(corr) else 1
        ok = corr >= 0
        self.dense = len(self.pids) * self.width <= 4 * len(api) + (1 << 20)  # table <= 32 B per API row
        if self.dense:
            # rows as int32 while they fit: the table lives as long as the API table (4M kernels: 27 MB saved)
            self.table = np.full(len(self.pids) * self.width, -1, dtype=np.int32 if len(api) < 2**31 else np.int64)
            rows = np.flatnonzero(ok)[::-1]  # reversed: the first occurrence is written last
            self.table[pc[rows] * self.width + corr[rows]] = rows
        else:
            key = corr_key(pid, corr)
            self.order = np.argsort(key, kind="stable")
            self.sorted = key[self.order]

    def _process_codes(self, pid: np.ndarray) -> np.ndarray:
        """Each row's process as its place among the table's few processes, -1 for another: a binary search in a
        handful of values (a hash lookup per row, ``Index.get_indexer``, cost ~0.1 s per million rows)."""
        if len(self.pids) == 0:
            return np.full(len(pid), -1, dtype=np.int64)
        pc = np.searchsorted(self.pids, pid)
        np.minimum(pc, len(self.pids) - 1, out=pc)
        pc[self.pids[pc] != pid] = -1
        return pc

    def find(self, pid, corr) -> np.ndarray:
        """Row of the API table for each (pid, correlation id), -1 where none."""
        if not self.dense:
            p, c = _int64(pid), _int64(corr)
            out = np.full(len(c), -1, dtype=np.int64)
            if len(self.sorted) == 0:
                return out
            for sl in slices(len(c)):  # a slice at a time: 4M launches made ~200 MB of temporaries
                kk = corr_key(p[sl], c[sl])
                pos = np.searchsorted(self.sorted, kk)
                np.clip(pos, 0, len(self.sorted) - 1, out=pos)
                out[sl] = np.where(self.sorted[pos] == kk, self.order[pos], -1)
            return out
        pc = self._process_codes(_int64(pid))
        c = _int64(corr)
        ok = (pc >= 0) & (c >= 0) & (c < self.width)
        out = np.full(len(c), -1, dtype=np.int64)
        out[ok] = self.table[pc[ok] * self.width + c[ok]]
        return out


def launch_times(kernels: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Start/end of each kernel's launch call (joined on pid + correlation id); NaN where not traced."""
    if api.empty or kernels.empty:
        return pd.DataFrame({"start_ns": np.nan, "end_ns": np.nan}, index=kernels.index)
    cached = _API_KEY_CACHE.get(id(api))
    if cached is not None and cached[0]() is api:
        index = cached[1]
    else:  # kernels, copies and syncs all ask for the same table: index it once
        index = _CallIndex(api)
        _API_KEY_CACHE.clear()
        _API_KEY_CACHE[id(api)] = (weakref.ref(api), index)  # weak: never keeps a table alive
    src = index.find(kernels["pid"], kernels["launch_id"])
    starts, ends = api["start_ns"].to_numpy(dtype="float64"), api["end_ns"].to_numpy(dtype="float64")
    start, end = np.full(len(src), np.nan), np.full(len(src), np.nan)
    for sl in slices(len(src)):
        hit = np.flatnonzero(src[sl] >= 0)
        start[sl][hit] = starts[src[sl][hit]]
        end[sl][hit] = ends[src[sl][hit]]
    return pd.DataFrame({"start_ns": start, "end_ns": end}, index=kernels.index, copy=False)


def name_devices(kernels: pd.DataFrame, devices: dict[int, dict], device_ids: np.ndarray | None = None) -> None:
    """``device_name`` and ``cc`` of each launch from the recording's device table (categoricals: a million
    launches run on a few GPUs). ``device_ids``: the ``device`` column as int64 already (-1 = none), where the
    reader has it (the nullable column's conversion cost ~40 ms per million launches)."""
    if not devices:
        return
    dev = device_ids if device_ids is not None and len(device_ids) == len(kernels) else \
        kernels["device"].to_numpy(dtype=np.int64, na_value=-1)
    kernels["device_name"] = labels.mapped(dev, {d: v["name"] for d, v in devices.items()})
    # a GPU of another vendor has no compute capability: its vendor's name stands in its place, so that nothing measured
    # on NVIDIA's chips answers for it (known_kernels) and no rule of theirs reads a number that is not theirs
    kernels["cc"] = labels.mapped(dev, {d: v["compute_capability"] or v.get("vendor") for d, v in devices.items()})


def attribute_ranges(kernels: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame) -> None:
    """Add ``launch_ns`` (when the kernel's launch call started, joined on pid + correlation id) and ``nvtx``
    (NVTX path of each kernel = innermost range of the launching process open at that moment: where the call
    was made, not where the kernel happened to run on the GPU) to the kernel table, in place. The launch time is
    kept so that the timeline analysis does not join the API table again (1M kernels: ~0.13 s)."""
    if "launch_ns" in kernels:
        pass  # the reader joined its GPU work to the calls already (``op_launch_calls``)
    elif kernels.empty or api.empty:
        kernels["launch_ns"] = np.full(len(kernels), np.nan)
    else:
        kernels["launch_ns"] = launch_times(kernels, api)["start_ns"].to_numpy()
    if kernels.empty or api.empty or ranges.empty:
        kernels["nvtx"] = pd.Series("", index=kernels.index, dtype=object)
        return
    kernels["nvtx"] = paths_at(ranges, kernels["pid"], kernels["launch_ns"])


def op_launch_calls(ops: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Start and end of the host call that launched each GPU op (kernel, copy, set, graph; NaN if not traced), as a
    frame with a fresh index: the ``launch_start_ns``/``launch_end_ns`` columns where the reader added them to the
    GPU op table, else joined here on pid + correlation id."""
    if "launch_start_ns" in ops and "launch_end_ns" in ops:
        return pd.DataFrame({"start_ns": ops["launch_start_ns"].to_numpy(dtype="float64"),
                             "end_ns": ops["launch_end_ns"].to_numpy(dtype="float64")})
    if ops.empty or api.empty:
        return pd.DataFrame({"start_ns": np.full(len(ops), np.nan), "end_ns": np.full(len(ops), np.nan)})
    frame = pd.DataFrame({"pid": ops["pid"].to_numpy(), "launch_id": ops["correlation"].to_numpy()})
    return launch_times(frame, api).reset_index(drop=True)


def launch_starts(launches: pd.DataFrame, api: pd.DataFrame) -> np.ndarray:
    """When each launch's call started (float64 ns, NaN where not traced): the reader's ``launch_ns`` where it
    filled it, else joined here."""
    if "launch_ns" in launches and len(launches) and not launches["launch_ns"].isna().all():
        return launches["launch_ns"].to_numpy(dtype="float64")
    if "start_ns" in launches and "pid" in launches and not api.empty and not launches.empty:
        return launch_times(launches, api)["start_ns"].to_numpy(dtype="float64")
    return np.full(len(launches), np.nan)




def sanitize(path, kernels: pd.DataFrame, gpu_ops: pd.DataFrame, api: pd.DataFrame,
             ranges: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """Data that parses but cannot be true is never used silently.

    - GPU work with no start, no end, or an end before its start is dropped (kernel table and GPU ops alike),
      with a note giving the count;
    - ranges ending before they start are dropped, with a note;
    - ranges never closed (NVTX end NULL: the program crashed, was killed by ``--timeout`` or Ctrl-C) arrive
      with an infinite end: they are closed at the end of the trace and marked ``truncated``."""
    notes: list[str] = []
    s, e = gpu_ops["start_ns"].to_numpy(dtype="float64"), gpu_ops["end_ns"].to_numpy(dtype="float64")
    bad = ~(np.isfinite(s) & np.isfinite(e)) | (e < s)
    if bad.any():
        gpu_ops = gpu_ops[~bad].reset_index(drop=True)
        notes.append(f"{path}: {int(bad.sum()):,} GPU activity records without a valid start/end (or ending before "
                     "they start) were left out")
    ks, kd = kernels["start_ns"].to_numpy(dtype="float64"), kernels["duration_ns"].to_numpy(dtype="float64")
    kbad = ~(np.isfinite(ks) & np.isfinite(kd)) | (kd < 0)
    if kbad.any():
        kernels = kernels[~kbad].reset_index(drop=True)
    ranges = ranges.assign(truncated=False) if "truncated" not in ranges else ranges
    if not ranges.empty:
        rs, re_ = ranges["start_ns"].to_numpy(dtype="float64"), ranges["end_ns"].to_numpy(dtype="float64")
        open_ = np.isinf(re_) & (re_ > 0)
        rbad = ~np.isfinite(rs) | np.isnan(re_) | (re_ < rs)
        if rbad.any():
            notes.append(f"{path}: {int(rbad.sum()):,} ranges ending before they start (or without a start) were left out")
        if open_.any():
            seen = np.concatenate([e, api["end_ns"].to_numpy(dtype="float64"), re_, rs])  # every timestamp we have
            seen = seen[np.isfinite(seen)]
            trace_end = float(seen.max()) if len(seen) else 0.0
            ranges = ranges.assign(end_ns=np.where(open_, np.maximum(trace_end, rs), re_),
                                   truncated=ranges["truncated"].to_numpy() | open_)
            names = sorted(set(ranges.loc[open_, "name"].astype(str)))[:5]
            notes.append(f"{path}: {int(open_.sum()):,} ranges were never closed (the program stopped inside them: "
                         f"{', '.join(names)}); they are closed at the end of the trace and marked truncated")
        if rbad.any():
            ranges = ranges[~rbad].reset_index(drop=True)
    return kernels, gpu_ops, ranges, notes


def strip_api_version(names: pd.Series) -> pd.Series:
    """nsys writes 'cudaLaunchKernel_v7000'; torch writes 'cudaLaunchKernel'."""
    return names.str.replace(r"_v\d+$", "", regex=True)


def only_process(parsed, pid: int):
    """The part of a timeline recording that one host process did (its kernels, GPU ops, API calls and
    ranges): one rank of a job that ``nsys profile torchrun ...`` recorded into a single report."""
    from .parsed import Parsed
    tl = parsed.timeline
    k = parsed.kernels
    keep_k = (pd.to_numeric(k["pid"], errors="coerce") == pid).fillna(False).to_numpy()
    ops = tl.gpu_ops[(pd.to_numeric(tl.gpu_ops["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    api = tl.api[(pd.to_numeric(tl.api["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    ranges = tl.ranges[(pd.to_numeric(tl.ranges["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    marks = tl.marks[(pd.to_numeric(tl.marks["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    used = set(pd.to_numeric(ops["device"], errors="coerce").dropna().astype(int))
    devices = {d: v for d, v in tl.devices.items() if d in used}
    return Parsed(parsed.path, parsed.kind, k[keep_k].reset_index(drop=True), list(parsed.warnings),
                  Timeline(tl.source, ops, api, ranges, devices, list(tl.notes), marks))
