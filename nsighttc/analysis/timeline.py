"""Was the GPU kept busy? Timeline verdicts and the causes of idle time.

Inputs: one or more ``parse.timeline.Timeline`` (nsys or torch.profiler) plus the classified launch
table (for Tensor Core shares per range). Everything is interval arithmetic (``intervals``) and
grouped pandas; loops run over range *families* and ranges, never over kernels.

Definitions (thresholds configurable through ``Thresholds``):
- GPU busy = union of kernels, copies and sets on any device of the process (overlaps counted once);
- a range's verdict: ``insufficient-data`` if its instances last < 2 ms in total or launch < 10 kernels,
  else ``cpu-bound`` (busy < 50%), ``gpu-bound`` (>= 75%), ``mixed`` between (torch-tb-profiler's and
  ``nsys analyze``'s 50% line, see shared/reference/tensor-cores.md section 3);
- iterations of a step family run from one step's start to the next step's start, so the host work
  between steps (data loading) belongs to the iteration. Medians, not means: the first steps of a
  run pay one-time CUDA/cuBLAS/autograd initialisation (H200 recording: 185 ms and 17 ms against a
  0.76 ms steady state), and a mean would blame that on the loop;
- idle time inside a range is attributed to its child ranges robustly: median idle per instance x
  instances, so warm-up outliers cannot outvote the steady state.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..model import Finding
from ..parse.timeline import Timeline, launch_times, paths_at
from . import intervals
from .tensor_cores import path_prefixes

SYNC_CALLS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
              "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cuCtxSynchronize",
              "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cudaMemset"}
STEP_PATTERN = re.compile(r"^(ProfilerStep|.*step.*|iteration|iter|train_batch|batch)$", re.IGNORECASE)


@dataclass
class Thresholds:
    cpu_bound: float = 0.50
    gpu_bound: float = 0.75
    min_wall_ns: float = 2e6
    min_kernels: int = 10
    launch_gap_ns: float = 100e3      # idle gaps shorter than this, before a kernel launched after the
                                      # GPU went idle, are launch overhead; longer ones are host work
    warmup_factor: float = 3.0        # leading steps longer than this x median are warm-up


@dataclass
class TimelineResult:
    wall_ns: float
    busy_ns: float
    window: tuple[float, float]
    verdict: str
    ranges: pd.DataFrame
    steps: dict
    gaps: list[dict]
    causes: list[dict]
    devices: list[dict]
    sync: dict
    pageable: dict
    launch: dict
    kernels: int
    headline_cause: str | None = None
    notes: list[str] = field(default_factory=list)
    activity: dict = field(default_factory=dict)

    @property
    def window_busy_share(self) -> float:
        return self.busy_ns / self.wall_ns if self.wall_ns else 0.0

    @property
    def busy_share(self) -> float:
        """The headline number: the median step iteration's busy share when the run has steps (steady
        state), else the whole profiled window's."""
        if self.steps.get("count"):
            return self.steps["median_gpu_busy_share"]
        return self.window_busy_share

    @property
    def basis(self) -> str:
        return "median step iteration" if self.steps.get("count") else "profiled window"


def classify(busy_share: float, wall_ns: float, kernels: int, th: Thresholds) -> str:
    if wall_ns < th.min_wall_ns or kernels < th.min_kernels:
        return "insufficient-data"
    if busy_share < th.cpu_bound:
        return "cpu-bound"
    if busy_share >= th.gpu_bound:
        return "gpu-bound"
    return "mixed"


def _merge(timelines: list[Timeline]) -> Timeline:
    if len(timelines) == 1:
        return timelines[0]
    return Timeline("+".join(t.source for t in timelines),
                    pd.concat([t.gpu_ops for t in timelines], ignore_index=True),
                    pd.concat([t.api for t in timelines], ignore_index=True),
                    pd.concat([t.ranges for t in timelines], ignore_index=True),
                    {k: v for t in timelines for k, v in t.devices.items()})


def analyze_timelines(timelines: list[Timeline], launches: pd.DataFrame, th: Thresholds | None = None,
                      step_range: str | None = None) -> TimelineResult:
    th = th or Thresholds()
    tl = _merge(timelines)
    ops, ranges, api = tl.gpu_ops, tl.ranges, tl.api
    u = intervals.union(ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    lo, hi = _window(ops, ranges)
    wall = max(hi - lo, 0.0)
    busy = float(intervals.busy_within(u, np.array([lo]), np.array([hi]))[0]) if wall else 0.0
    n_kernels = int((ops["kind"] == "kernel").sum())

    has_launch = "start_ns" in launches and "pid" in launches and not api.empty and not launches.empty
    lt = launch_times(launches, api) if has_launch else pd.DataFrame({"start_ns": np.nan, "end_ns": np.nan},
                                                                      index=launches.index)
    rstats = _range_stats(ranges, u, launches, th)
    steps = _steps(ranges, u, lt["start_ns"].to_numpy(), th, step_range)
    # Causes are judged where the question is: inside the steady-state loop when the run has steps (not
    # in one-off set-up such as building the model), else inside the profiled window.
    c_lo, c_hi, scope = lo, hi, None
    if steps.get("count"):
        c_lo, c_hi = steps["steady_window_ns"]
        scope = steps["name"].rsplit("/", 1)[0] if "/" in steps["name"] else None
    w_ops = ops[(ops["start_ns"] >= c_lo) & (ops["start_ns"] <= c_hi)]
    w_api = api[(api["start_ns"] >= c_lo) & (api["start_ns"] <= c_hi)]
    in_win = (lt["start_ns"] >= c_lo).to_numpy() & (lt["start_ns"] <= c_hi).to_numpy()
    sync = _sync(w_api, ranges, w_ops)
    pageable = _pageable(w_ops)
    launch = _launch_overhead(launches[in_win], lt[in_win], u, th)
    g = _gaps(u, lo, hi, ranges)
    scoped = rstats if scope is None else rstats[rstats["name"].str.startswith(scope + "/")]
    causes = _causes(scoped, sync, pageable, launch)
    devices = _devices(ops, tl.devices, lo, hi, u)

    if n_kernels == 0 and ops.empty:
        verdict = "no-gpu-work"
    elif steps.get("count"):
        verdict = steps["verdict"]
    else:
        verdict = classify(busy / wall if wall else 0.0, wall, n_kernels, th)
    res = TimelineResult(wall, busy, (lo, hi), verdict, rstats, steps, g, causes, devices, sync, pageable, launch,
                         n_kernels, notes=list(tl.notes))
    res.headline_cause = _headline_cause(res)
    # the picture shows where the question is: the steady-state loop when there are steps
    a_lo, a_hi = steps["steady_window_ns"] if steps.get("count") else (lo, hi)
    res.activity = _activity(u, launches, ranges, a_lo, a_hi)
    res.activity["scope"] = "steady-state steps" if steps.get("count") else "profiled window"
    return res


def _activity(u: intervals.Union, launches: pd.DataFrame, ranges: pd.DataFrame, lo: float, hi: float,
              bins: int = 240, max_ranges: int = 400) -> dict:
    """A compact picture of the window for plots: GPU busy and Tensor Core busy share per time bin, and
    the range instances (outermost two levels, the longest first when there are many). Small enough to
    live in verdict.json, so `nsighttc report` can draw the timeline without the raw trace."""
    if hi <= lo:
        return {}
    edges = np.linspace(lo, hi, bins + 1)
    width = edges[1] - edges[0]
    busy = intervals.busy_within(u, edges[:-1], edges[1:]) / width
    tc = np.zeros(bins)
    if "start_ns" in launches and not launches.empty:
        k = launches[(launches["tc_state"] == "yes").to_numpy() & launches["start_ns"].notna().to_numpy()] \
            if "tc_state" in launches else launches.iloc[0:0]
        if not k.empty:
            tu = intervals.union(k["start_ns"].to_numpy(), (k["start_ns"] + k["duration_ns"]).to_numpy())
            tc = intervals.busy_within(tu, edges[:-1], edges[1:]) / width
    inst = []
    if not ranges.empty:
        depth = ranges["path"].astype(str).str.count("/")
        inside = (ranges["end_ns"] > lo).to_numpy() & (ranges["start_ns"] < hi).to_numpy()
        shown = sorted(set(depth[inside]))[-2:] if inside.any() else []  # the two innermost levels in view
        r = ranges[inside & depth.isin(shown).to_numpy()]
        r = r.assign(d=depth[r.index], w=r["end_ns"] - r["start_ns"])
        if len(r) > max_ranges:
            r = r.nlargest(max_ranges, "w")
        inst = [{"path": str(p), "depth": int(d), "start_ns": float(max(s0, lo) - lo), "end_ns": float(min(e0, hi) - lo)}
                for p, d, s0, e0 in zip(r["path"], r["d"], r["start_ns"], r["end_ns"])]
    return {"bin_ns": float(width), "busy": [round(float(x), 4) for x in busy],
            "tensor_core_busy": [round(float(x), 4) for x in tc], "ranges": inst}


# --- pieces ---------------------------------------------------------------------------------------
def _window(ops: pd.DataFrame, ranges: pd.DataFrame) -> tuple[float, float]:
    """Profiled window: the span of top-level ranges when the workload is annotated, else of GPU work."""
    if not ranges.empty:
        top = ranges[~ranges["path"].str.contains("/", regex=False).astype(bool).to_numpy()]
        return float(top["start_ns"].min()), float(top["end_ns"].max())
    if ops.empty:
        return 0.0, 0.0
    return float(ops["start_ns"].min()), float(ops["end_ns"].max())


def _kernels_per_path(launches: pd.DataFrame) -> pd.DataFrame:
    """Kernel count / time per range path, a kernel in a/b counting for a and a/b (like the TC table)."""
    nv = launches.loc[(launches["nvtx"] != "").to_numpy(), ["nvtx", "time_ns"]]
    if nv.empty:
        return pd.DataFrame(columns=["kernels", "kernel_ns"])
    per = nv.astype({"nvtx": str}).groupby("nvtx").agg(kernels=("time_ns", "size"), kernel_ns=("time_ns", "sum"))
    joined = per.reset_index().merge(path_prefixes(per.index), on="nvtx")
    return joined.groupby("range")[["kernels", "kernel_ns"]].sum().rename_axis("path")


def _range_stats(ranges: pd.DataFrame, u: intervals.Union, launches: pd.DataFrame, th: Thresholds) -> pd.DataFrame:
    cols = ["name", "count", "wall_ns", "busy_ns", "gpu_busy_share", "median_wall_ns", "kernels", "verdict",
            "idle_causes", "warmup_ns"]
    if ranges.empty:
        return pd.DataFrame(columns=cols)
    r = ranges.assign(wall=ranges["end_ns"] - ranges["start_ns"])
    r["busy"] = intervals.busy_within(u, r["start_ns"].to_numpy(), r["end_ns"].to_numpy())
    r["idle"] = r["wall"] - r["busy"]
    g = r.groupby("path", sort=False, observed=True)
    st = g.agg(count=("wall", "size"), wall_ns=("wall", "sum"), busy_ns=("busy", "sum"),
               median_wall_ns=("wall", "median"), median_idle=("idle", "median"), idle_ns=("idle", "sum"),
               first=("start_ns", "min"))
    kp = _kernels_per_path(launches)
    st = st.join(kp, how="left").fillna({"kernels": 0, "kernel_ns": 0.0})
    st["gpu_busy_share"] = np.where(st["wall_ns"] > 0, st["busy_ns"] / st["wall_ns"], 0.0)
    st["verdict"] = [classify(b, w, int(k), th) for b, w, k in zip(st["gpu_busy_share"], st["wall_ns"], st["kernels"])]
    st["robust_idle_ns"] = st["median_idle"] * st["count"]
    # warm-up: leading instances much longer than the family's median
    warm = {}
    for path, grp in g:
        w = grp.sort_values("start_ns")["wall"].to_numpy()
        if len(w) >= 3:
            med = np.median(w)
            lead = []
            for x in w:
                if x > th.warmup_factor * med:
                    lead.append(float(x))
                else:
                    break
            if lead:
                warm[path] = lead
    st["warmup_ns"] = [warm.get(p, []) for p in st.index]
    causes = {}
    for parent in st.index:
        kids = st[[p.startswith(parent + "/") and "/" not in p[len(parent) + 1:] for p in st.index]]
        if kids.empty:
            causes[parent] = []
            continue
        total_idle = st.at[parent, "idle_ns"]
        lst = [{"range": p, "idle_ns": float(k.robust_idle_ns), "instances": int(k["count"]),
                "median_idle_ns": float(k.median_idle), "share_of_idle": float(k.robust_idle_ns / total_idle) if total_idle else 0.0}
               for p, k in kids.iterrows()]
        outside = float(total_idle - kids["idle_ns"].sum())
        if outside > 0:
            lst.append({"range": f"{parent} (outside child ranges)", "idle_ns": outside, "instances": int(st.at[parent, "count"]),
                        "median_idle_ns": None, "share_of_idle": outside / total_idle if total_idle else 0.0})
        causes[parent] = sorted(lst, key=lambda c: -c["idle_ns"])
    st["idle_causes"] = [causes[p] for p in st.index]
    st = st.sort_values("first").reset_index().rename(columns={"path": "name"})
    return st[cols + ["robust_idle_ns", "kernel_ns"]]


def _steps(ranges: pd.DataFrame, u: intervals.Union, launch_start: np.ndarray, th: Thresholds,
           step_range: str | None) -> dict:
    if ranges.empty:
        return {}
    codes, paths = pd.factorize(ranges["path"])
    leaves = [str(p).rsplit("/", 1)[-1] for p in paths]
    per_path = np.array([(lf == step_range) if step_range else bool(STEP_PATTERN.match(lf)) for lf in leaves] + [False])
    is_step = pd.Series(per_path[codes], index=ranges.index)
    cand = ranges[is_step.to_numpy()]
    sizes = cand["path"].value_counts()
    fams = cand[cand["path"].isin(sizes[sizes >= 2].index)]
    if fams.empty:
        return {}
    # kernels per iteration counted by when they were *launched* (async GPU work runs later)
    k_start = np.sort(launch_start[~np.isnan(launch_start)]) if len(launch_start) else np.array([])
    best = None
    for path, grp in fams.groupby("path", observed=True):
        grp = grp.sort_values("start_ns")
        s, e = grp["start_ns"].to_numpy(), grp["end_ns"].to_numpy()
        it_end = np.concatenate([s[1:], e[-1:]])
        it_end = np.maximum(it_end, e)  # overlapping/odd ranges: an iteration at least covers its step
        it_wall = it_end - s
        it_busy = intervals.busy_within(u, s, it_end)
        share = np.where(it_wall > 0, it_busy / it_wall, 0.0)
        med_wall = float(np.median(it_wall))
        warm = 0
        while warm < len(it_wall) - 1 and it_wall[warm] > th.warmup_factor * med_wall:
            warm += 1
        steady = slice(warm, None)
        k_in = (np.searchsorted(k_start, it_end) - np.searchsorted(k_start, s)) if len(k_start) else np.zeros(len(s))
        med_share = float(np.median(share[steady]))
        med_it = float(np.median(it_wall[steady]))
        fam = {"name": path, "count": int(len(s)), "median_ns": float(np.median((e - s)[steady])),
               "median_iteration_ns": med_it, "median_gpu_busy_share": med_share,
               "gpu_busy_shares": [float(x) for x in share], "iteration_ns": [float(x) for x in it_wall],
               "median_kernels": float(np.median(k_in[steady])) if len(k_in) else 0.0,
               "warmup_steps": int(warm), "warmup_ns": [float(x) for x in it_wall[:warm]],
               "steady_window_ns": [float(s[warm]), float(it_end[-1])]}
        fam["verdict"] = classify(med_share, med_it * max(len(s) - warm, 1), int(np.sum(k_in[steady])), th)
        weight = med_it * (len(s) - warm)
        if best is None or weight > best[0]:
            best = (weight, fam)
    result = dict(best[1])
    result["families"] = sorted(str(p) for p in fams["path"].unique())
    return result


def _sync(api: pd.DataFrame, ranges: pd.DataFrame, ops: pd.DataFrame) -> dict:
    if api.empty:
        return {"calls": 0, "host_blocked_ns": 0.0, "by_name": {}, "by_range": {}, "dtoh_copies": 0}
    is_sync = api["name"].isin(SYNC_CALLS)
    s = api[is_sync]
    by_name = s.groupby("name").agg(calls=("name", "size"), ns=("start_ns", lambda x: 0.0))
    dur = (s["end_ns"] - s["start_ns"])
    by_name["ns"] = dur.groupby(s["name"]).sum()
    where = paths_at(ranges, s["pid"], s["start_ns"]) if not s.empty else pd.Series(dtype=object)
    by_range = dur.groupby(where.replace("", "(no range)")).agg(["size", "sum"]) if not s.empty else pd.DataFrame()
    dtoh = int(((ops["kind"] == "memcpy") & (ops["copy_kind"] == "DtoH")).sum())
    return {"calls": int(len(s)), "host_blocked_ns": float(dur.sum()),
            "by_name": {n: {"calls": int(r.calls), "ns": float(r.ns)} for n, r in by_name.iterrows()},
            "by_range": {n: {"calls": int(r["size"]), "ns": float(r["sum"])} for n, r in by_range.iterrows()},
            "dtoh_copies": dtoh}


def _pageable(ops: pd.DataFrame) -> dict:
    m = ops[(ops["kind"] == "memcpy") & (ops["copy_kind"] == "HtoD") & (ops["src_kind"] == "pageable")]
    return {"copies": int(len(m)), "bytes": float(m["bytes"].fillna(0).sum()),
            "ns": float((m["end_ns"] - m["start_ns"]).sum())}


def _launch_overhead(launches: pd.DataFrame, lt: pd.DataFrame, u: intervals.Union, th: Thresholds) -> dict:
    """Idle gaps the host caused by launching too slowly: the kernel's launch call started after the GPU
    had gone idle (HTA's "host wait"), and the gap is short (the host was launching, not computing)."""
    ok = (launches["start_ns"].notna() & lt["start_ns"].notna()).to_numpy() if "start_ns" in launches else \
        np.zeros(len(launches), dtype=bool)
    k, lt = launches[ok], lt[ok]
    if k.empty:
        return {"kernels": int(len(k)), "host_wait_ns": 0.0, "short_gaps_ns": 0.0, "median_kernel_ns": None,
                "launch_bound_kernels": 0}
    start = k["start_ns"].to_numpy()
    # end of GPU activity just before each kernel started
    i = np.searchsorted(u.starts, start, side="left") - 1
    prev_end = np.where(i >= 0, u.ends[np.clip(i, 0, None)], -np.inf)
    gap = start - np.minimum(prev_end, start)
    gap = np.where(np.isfinite(prev_end), gap, 0.0)
    launched_after_idle = lt["start_ns"].to_numpy() >= prev_end
    host_wait = (gap > 0) & launched_after_idle
    short = host_wait & (gap < th.launch_gap_ns)
    return {"kernels": int(len(k)), "host_wait_ns": float(gap[host_wait].sum()), "short_gaps_ns": float(gap[short].sum()),
            "launch_bound_kernels": int(short.sum()), "median_kernel_ns": float(np.median(k["duration_ns"]))}


def _gaps(u: intervals.Union, lo: float, hi: float, ranges: pd.DataFrame, top: int = 10) -> list[dict]:
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


def _causes(rstats: pd.DataFrame, sync: dict, pageable: dict, launch: dict) -> list[dict]:
    """Candidate causes of idle GPU time in the steady state, each with its number, largest first."""
    out = []
    if not rstats.empty:
        names = rstats["name"].tolist()
        leaves = rstats[[not any(o.startswith(n + "/") for o in names) for n in names]]
        for r in leaves.itertuples(index=False):
            if r.robust_idle_ns > 0:
                out.append({"kind": "host-range", "name": r.name, "idle_ns": float(r.robust_idle_ns),
                            "detail": f"{r.count} × median {r.median_wall_ns / 1e6:.3g} ms with the GPU busy "
                                      f"{100 * r.gpu_busy_share:.1f}%"})
    if launch.get("short_gaps_ns"):
        out.append({"kind": "launch-overhead", "name": "kernel launches", "idle_ns": launch["short_gaps_ns"],
                    "detail": f"{launch['launch_bound_kernels']:,} kernels started right after their launch "
                              f"call on an idle GPU; median kernel {launch['median_kernel_ns'] / 1e3:.1f} µs"})
    if sync.get("calls"):
        out.append({"kind": "sync", "name": ", ".join(sorted(sync["by_name"])), "idle_ns": sync["host_blocked_ns"],
                    "detail": f"{sync['calls']} synchronising calls; the host waited {sync['host_blocked_ns'] / 1e6:.3g} ms"})
    if pageable.get("copies"):
        out.append({"kind": "pageable-copy", "name": "pageable host-to-device copies", "idle_ns": pageable["ns"],
                    "detail": f"{pageable['copies']} copies, {pageable['bytes'] / 1e6:.3g} MB from pageable memory"})
    return sorted(out, key=lambda c: -c["idle_ns"])


def _devices(ops: pd.DataFrame, devs: dict, lo: float, hi: float, all_devices: intervals.Union) -> list[dict]:
    out = []
    single = ops["device"].nunique() == 1
    for dev, grp in ops.groupby("device"):
        u = all_devices if single else intervals.union(grp["start_ns"].to_numpy(), grp["end_ns"].to_numpy())
        busy = float(intervals.busy_within(u, np.array([lo]), np.array([hi]))[0]) if hi > lo else 0.0
        info = devs.get(int(dev), {}) if pd.notna(dev) else {}
        out.append({"device": int(dev) if pd.notna(dev) else None, "name": info.get("name"),
                    "gpu_busy_share": busy / (hi - lo) if hi > lo else 0.0})
    return out


def _headline_cause(res: TimelineResult) -> str | None:
    if res.verdict not in ("cpu-bound", "mixed") or not res.causes:
        return None
    c = res.causes[0]
    if c["kind"] == "host-range":
        return f"host busy in `{c['name']}` ({c['detail']})"
    if c["kind"] == "launch-overhead":
        return f"launch overhead ({c['detail']})"
    if c["kind"] == "sync":
        return f"synchronising calls ({c['detail']})"
    return c["detail"]


# --- ranges, JSON, findings ----------------------------------------------------------------------
def extend_ranges(tc_ranges: pd.DataFrame, res: TimelineResult) -> pd.DataFrame:
    """Join the timeline's per-range numbers onto the Tensor Core range table (outer join on path)."""
    tl = res.ranges.drop(columns=["busy_ns", "robust_idle_ns", "kernel_ns"], errors="ignore")
    if tc_ranges.empty:
        merged = tl.assign(kernel_time_ns=0.0, tc_time_share=0.0, tc_verdict=None, tc_evidence=None, by_dtype=None,
                           launches=tl["kernels"], unknown_time_share=0.0)
    else:
        merged = tl.merge(tc_ranges, on="name", how="outer")
        order = {n: i for i, n in enumerate(tl["name"])}
        merged["_o"] = merged["name"].map(order).fillna(len(order))
        merged = merged.sort_values("_o", kind="stable").drop(columns="_o")
    merged["kernel_time_ns"] = merged["kernel_time_ns"].fillna(0.0)
    merged["tc_time_share"] = merged["tc_time_share"].fillna(0.0)
    return merged.reset_index(drop=True)


def to_json(res: TimelineResult) -> dict:
    steps = dict(res.steps) if res.steps else {}
    return {
        "gpu_busy_share": res.busy_share, "basis": res.basis, "verdict": res.verdict,
        "window": {"start_ns": res.window[0], "end_ns": res.window[1], "wall_ns": res.wall_ns,
                   "gpu_busy_share": res.window_busy_share},
        "wall_ns": res.wall_ns, "kernels": res.kernels,
        "headline_cause": res.headline_cause,
        "steps": steps, "gaps": res.gaps, "causes": res.causes, "devices": res.devices,
        "sync": res.sync, "pageable_copies": res.pageable, "launch": res.launch, "notes": res.notes,
        "activity": res.activity,
    }


def findings(res: TimelineResult) -> list[Finding]:
    out: list[Finding] = []
    bound = res.verdict in ("cpu-bound", "mixed")
    steps = res.steps or {}
    host = [c for c in res.causes if c["kind"] == "host-range"]
    idle_total = sum(c["idle_ns"] for c in res.causes if c["kind"] in ("host-range", "launch-overhead")) or 1.0
    data = [c for c in host if re.search(r"data|load|batch|prep|augment|collate", c["name"], re.I)
            and c["idle_ns"] >= 0.25 * idle_total]
    if bound and data:
        c = data[0]
        out.append(Finding(
            "gpu-starved-by-data-loading", "high", f"The GPU waits for the host in `{c['name']}`",
            f"{c['idle_ns'] / 1e6:.3g} ms of GPU idle time in steady state ({100 * c['idle_ns'] / idle_total:.0f}% of "
            f"it): {c['detail']}",
            "Load and preprocess in parallel: `DataLoader(ds, num_workers=8, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=4)`; move host preprocessing off the critical path "
            "(GPU transforms, or pre-processed data), and do not compute in numpy float16 on the CPU "
            "(it is emulated and slow): preprocess in float32 and cast on the GPU.", c["idle_ns"], []))
    others = [c for c in host if c not in data[:1]][:3]
    if bound and others:
        lst = "; ".join(f"`{c['name']}` {c['idle_ns'] / 1e6:.3g} ms ({c['detail']})" for c in others)
        out.append(Finding(
            "gpu-idle-during-host-range", "medium", "The GPU idles while the host works in these ranges",
            f"steady-state GPU idle time: {lst}",
            "Overlap this host work with GPU work (DataLoader workers, a background thread), move it to the GPU, "
            "or, when the range is the step itself, cut per-kernel host cost (see launch overhead); py-spy shows "
            "where host time goes.", others[0]["idle_ns"], []))
    lb = res.launch
    if bound and lb.get("short_gaps_ns") and lb["short_gaps_ns"] >= 0.2 * max(res.wall_ns - res.busy_ns, 1):
        # launch gaps are at least a fifth of the window's idle time: launching, not host work, starves it
        out.append(Finding(
            "launch-bound", "high", "Launch-bound: the host cannot issue kernels as fast as the GPU runs them",
            f"{lb['launch_bound_kernels']:,} kernels (median {lb['median_kernel_ns'] / 1e3:.1f} µs) began right "
            f"after their launch call on an idle GPU: {lb['short_gaps_ns'] / 1e6:.3g} ms of idle time",
            "Cut per-kernel host cost: capture the step in a CUDA graph (`torch.cuda.graphs` / "
            "`torch.compile(model, mode=\"reduce-overhead\")`), fuse small ops (`torch.compile`), or give each "
            "kernel more work (larger batches).", lb["short_gaps_ns"], []))
    sync = res.sync
    if sync.get("calls"):
        top = ", ".join(f"{n} ×{v['calls']}" for n, v in sorted(sync["by_name"].items(), key=lambda x: -x[1]["calls"]))
        where = ", ".join(f"`{r}` ×{v['calls']}" for r, v in sorted(sync["by_range"].items(), key=lambda x: -x[1]["calls"])[:3])
        out.append(Finding(
            "synchronising-calls", "medium" if bound else "low", "Synchronising calls stall the launch queue",
            f"{sync['calls']} calls ({top}) in {where}; host blocked {sync['host_blocked_ns'] / 1e6:.3g} ms; "
            f"{sync['dtoh_copies']} device-to-host copies",
            "Remove per-step syncs: avoid `.item()`, `.cpu()`, `print(tensor)` and `torch.cuda.synchronize()` "
            "inside the loop (accumulate on the GPU, read once per epoch); use `non_blocking=True` copies; "
            "`torch.cuda.set_sync_debug_mode(\"warn\")` points at each one.", sync["host_blocked_ns"], []))
    pg = res.pageable
    if pg.get("copies"):
        out.append(Finding(
            "pageable-host-copies", "low", "Host-to-device copies from pageable memory",
            f"{pg['copies']} copies, {pg['bytes'] / 1e6:.3g} MB, {pg['ns'] / 1e6:.3g} ms on the GPU; pageable copies "
            "are staged by the driver and block the host",
            "Pin the source: `DataLoader(..., pin_memory=True)` or `tensor.pin_memory()`, then "
            "`x.to('cuda', non_blocking=True)`.", pg["ns"], []))
    if steps.get("warmup_steps"):
        w = ", ".join(f"{x / 1e6:.3g} ms" for x in steps["warmup_ns"])
        out.append(Finding(
            "warm-up-excluded", "info", f"The first {steps['warmup_steps']} step(s) were warm-up and are left out",
            f"`{steps['name']}` iterations took {w} before settling at a median of "
            f"{steps['median_iteration_ns'] / 1e6:.3g} ms (one-time CUDA/cuBLAS/autograd initialisation)",
            "Nothing to fix; profile more steps after warm-up (e.g. `torch.profiler.schedule(wait=1, warmup=2, "
            "active=5)`) for steadier numbers.", 0.0, []))
    return out
