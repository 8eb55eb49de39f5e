"""Busy time: the profiled window, GPU busy per device, the longest gaps, CUDA-graph work, and the
compact activity picture that plots draw from ``verdict.json``.

GPU busy = union of kernels, copies, sets and whole-graph executions on any device of the process
(overlapping streams counted once).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...parse.range_paths import paths_at
from ...parse.timeline import corr_key
from ... import labels
from .. import function_names, intervals
from .base import GRAPH_LAUNCH_CALLS


def window(ops: pd.DataFrame, ranges: pd.DataFrame, u: intervals.Union, launch_start: np.ndarray | None = None,
           work_end: np.ndarray | None = None) -> tuple[float, float]:
    """Profiled window: the span of top-level ranges when the workload is annotated, else of GPU work. The GPU's
    work belongs to the window that launched it: a host that finishes launching before its GPU does (an inference
    trace from another project: the host done after 29 ms, its GPU running 494 ms more) ends the window where the
    GPU work begun in it ends, not where its last range closes. ``u``: the GPU's busy intervals (of ``ops``);
    ``launch_start``/``work_end``: each launch's call and the end of its GPU work, where traced: work launched in the
    window that began only after it (a graph launched at the end of a serving engine's step: TraceLens' vLLM decode
    trace on an MI300, its 10.7 ms of kernels starting 6 ms after the host's last range) ends it too."""
    if not ranges.empty:
        top = ranges[~labels.per_category(ranges["path"], lambda p: "/" in p, dtype=bool)]
        lo, hi = float(top["start_ns"].min()), float(top["end_ns"].max())
        return lo, max(gpu_drain_end(u, hi), launched_work_end(launch_start, work_end, lo, hi))
    if ops.empty:
        return 0.0, 0.0
    return float(ops["start_ns"].min()), float(ops["end_ns"].max())


def launched_work_end(launch_start: np.ndarray | None, work_end: np.ndarray | None, lo: float, hi: float) -> float:
    """The end of the GPU work whose launch call began within [``lo``, ``hi``] (``hi`` where none was, or none traced)."""
    if launch_start is None or work_end is None or not len(launch_start):
        return hi
    m = (launch_start >= lo) & (launch_start <= hi) & np.isfinite(work_end)
    return max(hi, float(work_end[m].max())) if m.any() else hi


# A GPU draining the queue its host filled runs kernel after kernel: gaps of microseconds. A gap this long after the
# host's last range ends the drain (what follows is other work, not the window's).
DRAIN_GAP_NS = 100_000.0


def gpu_drain_end(u: intervals.Union, hi: float) -> float:
    """Where the GPU work running at ``hi`` (the host's last range end) finishes: the busy stretch of ``u`` (the
    GPU's busy intervals) from ``hi`` on, through gaps shorter than ``DRAIN_GAP_NS``."""
    i = int(np.searchsorted(u.ends, hi, side="right"))  # the first busy stretch ending after hi
    if i >= len(u.starts) or u.starts[i] > hi:
        return hi
    gaps = u.starts[i + 1:] - u.ends[i:-1]
    far = np.flatnonzero(gaps > DRAIN_GAP_NS)
    j = i + (int(far[0]) if len(far) else len(gaps))
    return max(hi, float(u.ends[j]))


def devices(ops: pd.DataFrame, devs: dict, lo: float, hi: float, all_devices: intervals.Union) -> list[dict]:
    out = []
    dev_ids = ops["device"].to_numpy()
    uniq = pd.unique(dev_ids[~pd.isna(dev_ids)])
    single = len(uniq) == 1
    for dev in sorted(uniq):  # one device (the usual case): its union is the whole one, no copy of the table
        if single:
            u = all_devices
        else:
            m = dev_ids == dev
            u = intervals.union(ops["start_ns"].to_numpy()[m], ops["end_ns"].to_numpy()[m])
        busy = float(intervals.busy_within(u, np.array([lo]), np.array([hi]))[0]) if hi > lo else 0.0
        info = devs.get(int(dev), {}) if pd.notna(dev) else {}
        out.append({"device": int(dev) if pd.notna(dev) else None, "name": info.get("name"),
                    "gpu_busy_share": busy / (hi - lo) if hi > lo else 0.0})
    return out


def top_gaps(u: intervals.Union, lo: float, hi: float, ranges: pd.DataFrame, top: int = 10) -> list[dict]:
    if hi <= lo:
        return []
    gs, ge = intervals.gaps(u, lo, hi)
    if len(gs) == 0:
        return []
    order = np.argsort(-(ge - gs))[:top]
    mid = pd.Series((gs[order] + ge[order]) / 2)
    pid = ranges["pid"].mode().iloc[0] if not ranges.empty else 0
    during = paths_at(ranges, pd.Series([pid] * len(mid)), mid) if not ranges.empty else pd.Series([""] * len(mid))
    return [{"start_ns": float(gs[j] - lo), "duration_ns": float(ge[j] - gs[j]), "during": during.iloc[n] or None}
            for n, j in enumerate(order)]


def graphs(ops: pd.DataFrame, api: pd.DataFrame, u: intervals.Union, kernels: pd.DataFrame | None = None) -> dict:
    """CUDA-graph launches and the GPU time they held.

    Work belongs to a graph when its correlation id is a ``cudaGraphLaunch`` call's: whole-graph records
    (nsys ``--cuda-graph-trace=graph``, kind ``graph``) and per-node kernels (nsys ``node`` mode, and
    torch.profiler, which records graph kernels under the launch's correlation id) alike."""
    if api.empty:
        launches = pd.DataFrame(columns=["pid", "correlation"])
    else:
        launches = api[api["name"].isin(GRAPH_LAUNCH_CALLS).to_numpy()]  # categorical: per name, not per row
    n = int(len(launches))
    whole = (ops["kind"] == "graph").to_numpy()
    if n == 0 and not whole.any():
        return {"launches": 0}
    in_graph = np.isin(corr_key(ops["pid"], ops["correlation"]), corr_key(launches["pid"], launches["correlation"])) | whole
    g = ops[in_graph]
    gu = intervals.union(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
    trace = "graph" if whole.any() else "node" if ((g["kind"] == "kernel").any()) else None
    outside = (~in_graph) & (ops["kind"] == "kernel").to_numpy()
    out = {"launches": n, "executions": int(whole.sum()) if whole.any() else n,
           "trace": trace, "kernels": int((g["kind"] == "kernel").sum()), "kernels_outside": int(outside.sum()),
           "gpu_busy_ns": gu.total, "share_of_gpu_busy": gu.total / u.total if u.total else 0.0}
    if outside.any() and kernels is not None and {"pid", "launch_id", "name"} <= set(kernels.columns):
        # what a graphed loop still launches one by one, by name (the kernel table's launch_id is the correlation id):
        # the advice names it
        out_k = ~np.isin(corr_key(kernels["pid"], kernels["launch_id"]), corr_key(launches["pid"], launches["correlation"]))
        per_name = kernels.loc[out_k, "name"].value_counts()  # (categorical: counted per name)
        per_name = per_name[per_name > 0]
        # by the function launched (the template arguments apart: one elementwise kernel, many functors)
        top = per_name.groupby([function_names.function(str(k)) for k in per_name.index]).sum().nlargest(3)
        out["outside_top"] = [{"name": str(k), "count": int(v)} for k, v in top.items()]
    return out


def activity(u: intervals.Union, launches: pd.DataFrame, ranges: pd.DataFrame, lo: float, hi: float,
             bins: int = 240, max_ranges: int = 400) -> dict:
    """A compact picture of the window for plots: GPU busy and Tensor Core busy share per time bin, and
    the range instances (outermost two levels, the longest first when there are many). Small enough to
    live in verdict.json, so `nsighttc report` can draw the timeline without the raw trace."""
    if hi <= lo:
        return {}
    edges = np.linspace(lo, hi, bins + 1)
    width = edges[1] - edges[0]
    busy = intervals.busy_within(u, edges[:-1], edges[1:]) / width
    tc = tensor_core_busy(launches, lo, hi, bins)
    inst = []
    if not ranges.empty:
        depth = pd.Series(labels.per_category(ranges["path"], lambda p: p.count("/"), dtype=np.int64), index=ranges.index)
        inside = (ranges["end_ns"] > lo).to_numpy() & (ranges["start_ns"] < hi).to_numpy()
        shown = sorted(set(depth[inside]))[-2:] if inside.any() else []  # the two innermost levels in view
        r = ranges[inside & depth.isin(shown).to_numpy()]
        r = r.assign(d=depth[r.index], w=r["end_ns"] - r["start_ns"])
        if len(r) > max_ranges:
            r = r.nlargest(max_ranges, "w")
        inst = [{"path": str(p), "depth": int(d), "start_ns": float(max(s0, lo) - lo), "end_ns": float(min(e0, hi) - lo)}
                for p, d, s0, e0 in zip(r["path"], r["d"], r["start_ns"], r["end_ns"])]
    return {"bin_ns": float(width), "busy": [round(float(x), 4) for x in busy],
            "tensor_core_busy": tc, "ranges": inst}


def tensor_core_busy(launches: pd.DataFrame, lo: float, hi: float, bins: int) -> list[float]:
    """The activity picture's Tensor Core row: per time bin of ``[lo, hi)``, the share of it in launches
    judged on Tensor Cores (``tc_state`` yes). Apart from the GPU busy row because the judgement may come
    after the timeline was analysed (the default run's hardware evidence: ``refresh_tensor_cores``)."""
    edges = np.linspace(lo, hi, bins + 1)
    width = edges[1] - edges[0]
    tc = np.zeros(bins)
    if "start_ns" in launches and not launches.empty and "tc_state" in launches:
        start = launches["start_ns"].to_numpy(dtype="float64")
        m = (launches["tc_state"] == "yes").to_numpy() & ~np.isnan(start)
        if m.any():  # two columns of the Tensor Core launches, not a subset of the whole launch table
            s = start[m]
            tu = intervals.union(s, s + launches["duration_ns"].to_numpy(dtype="float64")[m])
            tc = intervals.busy_within(tu, edges[:-1], edges[1:]) / width
    return [round(float(x), 4) for x in tc]
