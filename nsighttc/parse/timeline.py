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
    """'outer/inner' path of every range from nesting on its own thread (a stack sweep over ranges,
    which are few compared with kernels)."""
    if ranges.empty:
        return pd.Series([], dtype=object)
    order = ranges.sort_values(["pid", "tid", "start_ns", "end_ns"], ascending=[True, True, True, False]).index
    paths = pd.Series("", index=ranges.index, dtype=object)
    starts, ends, names = ranges["start_ns"], ranges["end_ns"], ranges["name"]
    keys = list(zip(ranges["pid"], ranges["tid"]))
    stack: list[tuple[float, str]] = []
    current = None
    for i in order:
        key = keys[ranges.index.get_loc(i)]
        if key != current:
            stack, current = [], key
        s, e = starts[i], ends[i]
        while stack and stack[-1][0] <= s:
            stack.pop()
        leaf = _family(str(names[i]))
        path = f"{stack[-1][1]}/{leaf}" if stack else leaf
        paths[i] = path
        stack.append((e, path))
    return paths


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


def launch_times(kernels: pd.DataFrame, api: pd.DataFrame) -> pd.DataFrame:
    """Start/end of each kernel's launch call (joined on pid + correlation id); NaN where not traced."""
    calls = api.dropna(subset=["correlation"]).drop_duplicates(["pid", "correlation"])
    k = pd.DataFrame({"pid": kernels["pid"], "launch_id": kernels["launch_id"].astype("float64")}, index=kernels.index)
    m = k.reset_index().merge(calls[["pid", "correlation", "start_ns", "end_ns"]].astype({"correlation": "float64"}),
                              left_on=["pid", "launch_id"], right_on=["pid", "correlation"], how="left")
    return m.set_index("index")[["start_ns", "end_ns"]].reindex(kernels.index)


def attribute_ranges(kernels: pd.DataFrame, api: pd.DataFrame, ranges: pd.DataFrame) -> pd.Series:
    """NVTX path of each kernel = innermost range (of the launching process) open when its launch call
    started. Through the correlation id, not where the kernel happened to run on the GPU."""
    if kernels.empty or api.empty or ranges.empty:
        return pd.Series("", index=kernels.index, dtype=object)
    launch = launch_times(kernels, api)
    return paths_at(ranges, kernels["pid"], launch["start_ns"])


def _segments(r: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Elementary time segments of a process's ranges and the innermost open path in each."""
    if r.empty:
        return np.array([]), np.array([], dtype=object)
    events = pd.concat([
        pd.DataFrame({"t": r["start_ns"], "open": 1, "end": r["end_ns"], "path": r["path"]}),
        pd.DataFrame({"t": r["end_ns"], "open": 0, "end": r["end_ns"], "path": r["path"]}),
    ]).sort_values(["t", "open"], kind="stable")
    seg_t, seg_p = [], []
    active: dict[str, int] = {}
    order: list[tuple[float, str]] = []  # (start, path) of open ranges; innermost = deepest path, latest start
    for t, is_open, _end, path in events.itertuples(index=False):
        if is_open:
            active[path] = active.get(path, 0) + 1
            order.append((t, path))
        else:
            active[path] -= 1
            if not active[path]:
                del active[path]
            for j in range(len(order) - 1, -1, -1):
                if order[j][1] == path:
                    del order[j]
                    break
        inner = max(order, key=lambda o: (o[1].count("/"), o[0]))[1] if order else ""
        seg_t.append(t)
        seg_p.append(inner)
    return np.asarray(seg_t, dtype="float64"), np.asarray(seg_p, dtype=object)


def strip_api_version(names: pd.Series) -> pd.Series:
    """nsys writes 'cudaLaunchKernel_v7000'; torch writes 'cudaLaunchKernel'."""
    return names.str.replace(r"_v\d+$", "", regex=True)
