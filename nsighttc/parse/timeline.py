"""The timeline tables that nsys and torch.profiler inputs add to the kernel table.

Both parsers fill the same ``Timeline`` so the analysis never asks which tool recorded it:

* ``gpu_ops``: every GPU activity interval (kernels, memcpy, memset) -- ``device``, ``start_ns``,
  ``end_ns``, ``kind`` (kernel/memcpy/memset), ``correlation``, ``pid``, ``bytes``, ``copy_kind``
  (HtoD/DtoH/DtoD/...), ``src_kind`` (pageable/pinned/device/...);
* ``api``: host-side CUDA runtime/driver calls -- ``pid``, ``tid``, ``start_ns``, ``end_ns``, ``name``
  (version suffixes like ``_v3020`` removed), ``correlation``;
* ``ranges``: NVTX push/pop and start/end ranges or torch ``record_function`` labels -- ``pid``, ``tid``,
  ``start_ns``, ``end_ns``, ``name``, ``path`` (``outer/inner``, nesting on the range's own thread).

Kernels keep living in the kernel table (``nsighttc.model``) with ``start_ns`` and ``launch_id`` =
correlation id; ``nvtx`` is filled by ``attribute_ranges`` from where the *launch call* happened.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

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


def nest_paths(ranges: pd.DataFrame) -> pd.Series:
    """'outer/inner' path of every range from nesting on its own thread (one stack sweep over the
    ranges in start order, on plain arrays: ranges are far fewer than kernels, but can be 10^5)."""
    if ranges.empty:
        return pd.Series([], dtype=object)
    order = np.lexsort((-ranges["end_ns"].to_numpy(), ranges["start_ns"].to_numpy(),
                        pd.factorize(ranges["tid"])[0], pd.factorize(ranges["pid"])[0]))
    starts = ranges["start_ns"].to_numpy()[order]
    ends = ranges["end_ns"].to_numpy()[order]
    keys = (pd.factorize(ranges["pid"])[0] * 1_000_003 + pd.factorize(ranges["tid"])[0])[order]
    codes, uniques = pd.factorize(ranges["name"].astype(str))
    leaves = [_family(u) for u in uniques]
    leaf_of = [leaves[c] for c in codes[order]]
    out: list[str] = [""] * len(order)
    stack: list[tuple[float, str]] = []
    current = None
    for j in range(len(order)):
        if keys[j] != current:
            stack, current = [], keys[j]
        s = starts[j]
        while stack and stack[-1][0] <= s:
            stack.pop()
        path = f"{stack[-1][1]}/{leaf_of[j]}" if stack else leaf_of[j]
        out[j] = path
        stack.append((ends[j], path))
    result = np.empty(len(order), dtype=object)
    result[order] = out
    # categorical: 10^5 range instances share a handful of paths; string work then runs per path
    return pd.Series(result, index=ranges.index, dtype="category")


_FAMILY = re.compile(r"#\d+$")


def _family(name: str) -> str:
    """'ProfilerStep#12' -> 'ProfilerStep': numbered instances of one range form one family."""
    return _FAMILY.sub("", name)


def paths_at(ranges: pd.DataFrame, pids: pd.Series, times: pd.Series) -> pd.Series:
    """Innermost range path open in process ``pid`` at time ``t`` (any thread of it), per row; '' if none.
    Vectorised: one segment table per process, then a binary search per timestamp."""
    out = pd.Series("", index=times.index, dtype=object)
    if ranges.empty or times.empty:
        return out
    frame = pd.DataFrame({"pid": pids, "t": times}).dropna(subset=["t"])
    for pid, grp in frame.groupby("pid"):
        seg_start, seg_path = _segments(ranges[ranges["pid"] == pid])
        if len(seg_start) == 0:
            continue
        pos = np.searchsorted(seg_start, grp["t"].to_numpy(), side="right") - 1
        out.loc[grp.index] = np.where(pos >= 0, seg_path[np.clip(pos, 0, None)], "")
    return out


_API_KEY_CACHE: dict[int, tuple] = {}


def corr_key(pid, corr) -> np.ndarray:
    """One int64 per (host process, correlation id): what joins GPU work to the host call that launched it."""
    p = pd.to_numeric(pd.Series(np.asarray(pid)), errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    c = pd.to_numeric(pd.Series(np.asarray(corr)), errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    return (p << 40) ^ c


def launch_times(kernels: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Start/end of each kernel's launch call (joined on pid + correlation id); NaN where not traced."""
    out = pd.DataFrame({"start_ns": np.nan, "end_ns": np.nan}, index=kernels.index)
    if api.empty or kernels.empty:
        return out
    # one int64 key per (pid, correlation id); a binary search instead of a hash join of millions of rows
    key = corr_key
    cached = _API_KEY_CACHE.get(id(api))
    if cached is not None and cached[0]() is api:
        order, sk = cached[1], cached[2]
    else:  # kernels, copies and syncs all ask for the same table: sort its keys once
        api_key = key(api["pid"], api["correlation"])
        order = np.argsort(api_key, kind="stable")
        sk = api_key[order]
        _API_KEY_CACHE.clear()
        _API_KEY_CACHE[id(api)] = (weakref.ref(api), order, sk)  # weak: never keeps a table alive
    kk = key(kernels["pid"], kernels["launch_id"])
    pos = np.clip(np.searchsorted(sk, kk), 0, len(sk) - 1)
    hit = sk[pos] == kk
    src = order[pos]
    out["start_ns"] = np.where(hit, api["start_ns"].to_numpy(dtype="float64")[src], np.nan)
    out["end_ns"] = np.where(hit, api["end_ns"].to_numpy(dtype="float64")[src], np.nan)
    return out


def attribute_ranges(kernels: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame) -> pd.Series:
    """NVTX path of each kernel = innermost range (of the launching process) open when its launch call
    started. Through the correlation id, not where the kernel happened to run on the GPU."""
    if kernels.empty or api.empty or ranges.empty:
        return pd.Series("", index=kernels.index, dtype=object)
    launch = launch_times(kernels, api)
    return paths_at(ranges, kernels["pid"], launch["start_ns"]).astype("category")


_SEGMENT_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _segments(r: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Elementary time segments of a process's ranges and the innermost open path in each.

    Innermost = deepest path, then latest start. A sweep over 2 x ranges boundary events on plain
    arrays; cached, since kernels, sync calls and gaps all ask for the same process."""
    if r.empty:
        return np.array([]), np.array([], dtype=object)
    key = (len(r), float(r["start_ns"].sum()), float(r["end_ns"].sum()), str(r["path"].iloc[0]))
    if key in _SEGMENT_CACHE:
        return _SEGMENT_CACHE[key]
    n = len(r)
    t = np.concatenate([r["start_ns"].to_numpy(), r["end_ns"].to_numpy()])
    is_open = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
    idx = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((is_open, t))  # at equal times close before open
    paths = r["path"].to_numpy()
    depth = np.array([p.count("/") for p in paths])
    seg_t = t[order]
    seg_p = np.empty(len(order), dtype=object)
    open_set: dict[int, tuple[int, float]] = {}
    best: tuple | None = None
    starts = r["start_ns"].to_numpy()
    for j, o in enumerate(order):
        i = idx[o]
        if is_open[o]:
            open_set[i] = (depth[i], starts[i])
            if best is None or (depth[i], starts[i]) >= best[0]:
                best = ((depth[i], starts[i]), i)
        else:
            open_set.pop(i, None)
            if best is not None and best[1] == i:
                best = max(((v, k) for k, v in open_set.items()), default=None)
        seg_p[j] = paths[best[1]] if best is not None else ""
    if len(_SEGMENT_CACHE) > 64:
        _SEGMENT_CACHE.clear()
    _SEGMENT_CACHE[key] = (seg_t, seg_p)
    return seg_t, seg_p


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
    from . import Parsed
    tl = parsed.timeline
    k = parsed.kernels
    keep_k = (pd.to_numeric(k["pid"], errors="coerce") == pid).fillna(False).to_numpy()
    ops = tl.gpu_ops[(pd.to_numeric(tl.gpu_ops["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    api = tl.api[(pd.to_numeric(tl.api["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    ranges = tl.ranges[(pd.to_numeric(tl.ranges["pid"], errors="coerce") == pid).to_numpy()].reset_index(drop=True)
    used = set(pd.to_numeric(ops["device"], errors="coerce").dropna().astype(int))
    devices = {d: v for d, v in tl.devices.items() if d in used}
    return Parsed(parsed.path, parsed.kind, k[keep_k].reset_index(drop=True), list(parsed.warnings),
                  Timeline(tl.source, ops, api, ranges, devices, list(tl.notes)))
