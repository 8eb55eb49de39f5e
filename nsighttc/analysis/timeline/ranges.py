"""Per-range timeline numbers: wall time, GPU busy share, kernels launched inside, verdict, and the old
median-based split of a parent's idle time among its child ranges (``idle_causes``).

A range path aggregates all of its instances; a kernel launched in ``a/b`` counts for ``a`` and ``a/b``
(like the Tensor Core range table). Idle time among children is attributed robustly: median idle per
instance x instances, so warm-up outliers cannot outvote the steady state.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import labels
from .. import intervals
from ..grouping import aggregate
from ..tensor_cores import path_prefixes
from .base import Thresholds, classify

COLUMNS = ["name", "count", "wall_ns", "busy_ns", "gpu_busy_share", "median_wall_ns", "kernels", "verdict",
           "idle_causes", "warmup_ns", "truncated", "scope"]
STEADY, OUTSIDE, WHOLE = "steady steps", "outside the steady steps", "profiled window"


def _kernels_per_path(launches: pd.DataFrame) -> pd.DataFrame:
    """Kernel count / time per range path, a kernel in a/b counting for a and a/b (like the TC table)."""
    nv = launches.loc[(launches["nvtx"] != "").to_numpy(), ["nvtx", "time_ns"]]
    if nv.empty:
        return pd.DataFrame(columns=["kernels", "kernel_ns"])
    per = aggregate(nv.groupby(labels.as_categorical(nv["nvtx"]), observed=True), kernels=("time_ns", "size"),
                    kernel_ns=("time_ns", "sum"))
    per.index = per.index.astype(str)
    joined = per.reset_index().merge(path_prefixes(per.index), on="nvtx")
    return joined.groupby("range")[["kernels", "kernel_ns"]].sum().rename_axis("path")


def _in_scope(r: pd.DataFrame, u: intervals.Union, scope: intervals.Union) -> pd.DataFrame:
    """Each instance's wall and busy time within the steady steps (``scope``: few disjoint intervals, one per phase
    as a rule). A path with time there keeps only its instances' steady part; a path with none (start-up, model
    building, the time between phases) keeps its whole instances and says so in ``scope``."""
    s, e = r["start_ns"].to_numpy(dtype="float64"), r["end_ns"].to_numpy(dtype="float64")
    ow, ob = np.zeros(len(r)), np.zeros(len(r))
    for ws, we in zip(scope.starts, scope.ends):
        a, b = np.maximum(s, ws), np.minimum(e, we)
        m = b > a
        if m.any():
            ow[m] += (b - a)[m]
            ob[m] += intervals.busy_within(u, a[m], b[m])
    hit = ow > 0
    path_hit = pd.Series(hit).groupby(labels.strings(r["path"])).transform("any").to_numpy()
    r = r.assign(wall=np.where(path_hit, ow, r["wall"]), busy=np.where(path_hit, ob, r["busy"]),
                 scope=np.where(path_hit, STEADY, OUTSIDE))
    return r[hit | ~path_hit]


def range_stats(ranges: pd.DataFrame, u: intervals.Union, launches: pd.DataFrame, th: Thresholds,
                scope: intervals.Union | None = None) -> pd.DataFrame:
    """Per range path. ``scope``: the steady steps of every phase, when the run has steps: each range is then
    judged on its time within them (``_in_scope``), as the verdict is."""
    if ranges.empty:
        return pd.DataFrame(columns=COLUMNS + ["robust_idle_ns", "kernel_ns"])
    r = ranges.assign(wall=ranges["end_ns"] - ranges["start_ns"])
    r["busy"] = intervals.busy_within(u, r["start_ns"].to_numpy(), r["end_ns"].to_numpy())
    r["scope"] = WHOLE
    if scope is not None and len(scope.starts):
        r = _in_scope(r, u, scope)
    r["idle"] = r["wall"] - r["busy"]
    g = r.groupby("path", sort=False, observed=True)
    st = aggregate(g, count=("wall", "size"), wall_ns=("wall", "sum"), busy_ns=("busy", "sum"),
                   median_wall_ns=("wall", "median"), median_idle=("idle", "median"), idle_ns=("idle", "sum"),
                   first=("start_ns", "min"))
    st["truncated"] = g["truncated"].any() if "truncated" in r else False  # closed by us at the trace's end
    st["scope"] = g["scope"].first()
    kp = _kernels_per_path(launches)
    st = st.join(kp, how="left").fillna({"kernels": 0, "kernel_ns": 0.0})
    st["gpu_busy_share"] = np.where(st["wall_ns"] > 0, st["busy_ns"] / st["wall_ns"], 0.0)
    st["verdict"] = [classify(b, w, int(k), th) for b, w, k in zip(st["gpu_busy_share"], st["wall_ns"], st["kernels"])]
    st["robust_idle_ns"] = st["median_idle"] * st["count"]
    st["warmup_ns"] = [_warmup(grp["wall"].to_numpy()[np.argsort(grp["start_ns"].to_numpy())], th)
                       for _, grp in g] if len(st) else []
    st["warmup_ns"] = st["warmup_ns"].astype(object)
    st["idle_causes"] = _child_splits(st)
    st = st.sort_values("first").reset_index().rename(columns={"path": "name"})
    return st[COLUMNS + ["robust_idle_ns", "kernel_ns"]]


def _warmup(w: np.ndarray, th: Thresholds) -> list[float]:
    """Leading instances much longer than the family's median."""
    if len(w) < 3:
        return []
    med = np.median(w)
    lead = []
    for x in w:
        if x > th.warmup_factor * med:
            lead.append(float(x))
        else:
            break
    return lead


def _child_splits(st: pd.DataFrame) -> list[list[dict]]:
    """Per range path of ``st`` (in its order): its idle time split among its direct children (``a/b`` is a child of
    ``a``) and the rest outside them, largest first. The children found once for all paths (one pass over the
    index, not one per path: an FSDP2 rank's ~190 paths cost a tenth of its analysis that way)."""
    paths = list(st.index)
    children: dict[str, list[int]] = {}
    for i, p in enumerate(paths):
        if "/" in p:
            children.setdefault(p.rsplit("/", 1)[0], []).append(i)
    robust, count = st["robust_idle_ns"].to_numpy(dtype="float64"), st["count"].to_numpy()
    median_idle, idle = st["median_idle"].to_numpy(dtype="float64"), st["idle_ns"].to_numpy(dtype="float64")
    out = []
    for j, parent in enumerate(paths):
        kids = children.get(parent)
        if not kids:
            out.append([])
            continue
        total_idle = idle[j]
        lst = [{"range": paths[i], "idle_ns": float(robust[i]), "instances": int(count[i]),
                "median_idle_ns": float(median_idle[i]),
                "share_of_idle": float(robust[i] / total_idle) if total_idle else 0.0} for i in kids]
        outside = float(total_idle - np.nansum(idle[kids]))
        if outside > 0:
            lst.append({"range": f"{parent} (outside child ranges)", "idle_ns": outside, "instances": int(count[j]),
                        "median_idle_ns": None, "share_of_idle": outside / total_idle if total_idle else 0.0})
        out.append(sorted(lst, key=lambda c: -c["idle_ns"]))
    return out


def busy_in(ranges: pd.DataFrame, names: pd.Series, u: intervals.Union, w: intervals.Union) -> np.ndarray:
    """Per range path: GPU busy time of its instances that fell inside the intervals ``w`` (warm-up)."""
    if len(w.starts) == 0 or ranges.empty:
        return np.zeros(len(names))
    s, e = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy()
    tot = np.zeros(len(ranges))
    for ws, we in zip(w.starts, w.ends):  # a handful of warm-up iterations
        a, b = np.maximum(s, ws), np.minimum(e, we)
        tot += np.where(b > a, intervals.busy_within(u, a, np.maximum(a, b)), 0.0)
    per = pd.Series(tot).groupby(labels.strings(ranges["path"])).sum()
    return per.reindex(names.astype(str).to_numpy()).fillna(0.0).to_numpy()
