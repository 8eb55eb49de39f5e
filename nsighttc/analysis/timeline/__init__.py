"""Was the GPU kept busy, and if not, why? Timeline verdicts from nsys / torch.profiler inputs.

Split by question:
- ``busy``: the window, GPU busy per device, CUDA-graph work, the longest gaps, the activity picture;
- ``steps``: step families (phases), each judged on its own with warm-up left out;
- ``ranges``: per-range wall time, busy share, kernels and verdict;
- ``idle``: the cause of every idle moment (sync, pageable copy, launch overhead, host range, GPU wait),
  summed per range, per step family and per window;
- ``findings``: causes turned into fixes;
- ``comm``: a rank's compute apart from its communication; ``held_back``: a GPU-bound family one cause holds back;
- ``extent``: where the recording's time begins and ends, and whose; ``call_summaries``: syncs, copies, launches.

Definitions (thresholds configurable through ``Thresholds``): a verdict is ``insufficient-data`` if the
scope lasts < 2 ms in total or launches < 10 kernels, else ``cpu-bound`` (busy < 50%), ``gpu-bound``
(>= 75%), ``mixed`` between (torch-tb-profiler's and ``nsys analyze``'s 50% line, see
shared/reference/tensor-cores.md section 3). Loops run over range families and paths, never over kernels.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...parse.host_samples import without_clock_marks
from ...parse.timeline import Timeline, launch_starts
from ...record_format import DECODE, WINDOW
from ... import labels, stages
from .. import intervals
from . import busy, call_summaries, comm as comm_mod, host_frames, idle, in_use, inference as inference_mod, \
    ranges as ranges_mod, state_copies_host, steps as steps_mod
from .extent import first_time, last_time, launching_threads, union_of
from .held_back import held_back
from .base import GRAPH_LAUNCH_CALLS, STEP_PATTERN, SYNC_CALLS, Thresholds, TimelineResult, classify
from .findings import findings
from .state_findings import checkpoint_words
from .steps import slow as slow_mod, slow_causes
from .steps.launch_order import LaunchOrder
from .steps.period import TRAINING_KERNEL

# Causes kept per range (the ranges' table shows the first): a range holds every range under it, and Lightning's
# ``ProfilerStep``s nest each inside the ones before, so each of its 1,943 ranges listed up to 1,912 host ranges with
# their 7 KB paths: a 2.4 GB verdict (tests/fixtures/steps/lightning_profiler_cpu_torch.json.xz)
RANGE_CAUSES = 8

__all__ = ["GRAPH_LAUNCH_CALLS", "STEP_PATTERN", "SYNC_CALLS", "Thresholds", "TimelineResult", "analyze_timelines",
           "classify", "extend_ranges", "findings", "refresh_tensor_cores", "to_json"]


def _merge(timelines: list[Timeline]) -> Timeline:
    if len(timelines) == 1:
        return timelines[0]
    return Timeline("+".join(t.source for t in timelines),
                    pd.concat([t.gpu_ops for t in timelines], ignore_index=True),
                    pd.concat([t.api for t in timelines], ignore_index=True),
                    pd.concat([t.ranges for t in timelines], ignore_index=True),
                    {k: v for t in timelines for k, v in t.devices.items()},
                    marks=pd.concat([t.marks for t in timelines], ignore_index=True))


def _containers(fams: list[dict]) -> set[str]:
    """Step ranges and every range that holds steps: they frame iterations, they are not host work."""
    out: set[str] = set()
    for f in fams:
        parts = f["name"].split("/")
        out.update("/".join(parts[:i + 1]) for i in range(len(parts)))
    return out


def without_launcher_syncs(api: pd.DataFrame, marks: pd.DataFrame) -> pd.DataFrame:
    """``api`` less the synchronising calls that began after a process' last window of steady steps ended (its
    ``nsighttc.window`` mark): there the launcher drains the GPU before it stops the recording
    (``runtime.trace_writing.write_trace``) and syncs to time the steps after it (``runtime.unrecorded``), inside the
    program's own call, so they read as the program's; no step after a window is a steady one. Where the host ran
    ahead of the GPU that drain waited for the backlog of every recorded step: a loop replaying two CUDA graphs a
    step, with no sync in its loop (H200, ``wrappers/graph_replay.py --two-graphs``, a cached run), was judged "mixed:
    a synchronising call at `synchronize` emptied the GPU's queue (63% of the GPU's idle time, 6.09 ms)", the host
    blocked 40.3 ms in it; the same program with one graph a step read GPU-bound beside the same drain."""
    if api.empty or marks.empty:
        return api
    w = marks[(marks["name"] == WINDOW).to_numpy()]
    if w.empty:
        return api
    ends = w.groupby("pid")["end_ns"].max() if "pid" in w and "pid" in api else None
    end = api["pid"].map(ends).to_numpy(dtype="float64") if ends is not None else \
        np.full(len(api), float(w["end_ns"].max()))
    late = api["name"].isin(SYNC_CALLS).to_numpy() & (api["start_ns"].to_numpy(dtype="float64") >= end)
    return api[~late] if late.any() else api


def analyze_timelines(timelines: list[Timeline], launches: pd.DataFrame, th: Thresholds | None = None,
                      step_range: str | None = None) -> TimelineResult:
    with stages.stage("timeline"):
        return _analyze_timelines(timelines, launches, th, step_range)


def _analyze_timelines(timelines: list[Timeline], launches: pd.DataFrame, th: Thresholds | None,
                       step_range: str | None) -> TimelineResult:
    th = th or Thresholds()
    tl = _merge(timelines)
    hs = next((t.host_samples for t in timelines if getattr(t, "host_samples", None) is not None), None)
    tl.marks = without_clock_marks(tl.marks)  # less the host sampler's clock marks (they placed the samples)
    tl.api = without_launcher_syncs(tl.api, tl.marks)
    ops, ranges, api = tl.gpu_ops, tl.ranges, tl.api
    u = intervals.union(ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    with stages.stage("timeline.launch_calls"):
        launch_start = launch_starts(launches, api)
    work_end = (launches["start_ns"] + launches["duration_ns"]).to_numpy(dtype="float64") \
        if "start_ns" in launches else np.full(len(launches), np.nan)
    lo, hi = busy.window(ops, ranges, u, launch_start, work_end)
    # the idle pieces need no steps but the last rule (``idle.finish``): on a big recording they are cut on another
    # core while the steps are found (1M-kernel benchmark: ~0.2 s of wall time); numpy lets go of the interpreter
    paths = np.array(sorted(set(labels.strings(ranges["path"]))) if not ranges.empty else [],
                     dtype=object)
    cutting = _beside(len(launches), idle.cut, u, lo, hi, ops, api, ranges, paths, th)
    wall = max(hi - lo, 0.0)
    busy_ns = float(intervals.busy_within(u, np.array([lo]), np.array([hi]))[0]) if wall else 0.0
    n_kernels = int(ops["kind"].isin(["kernel", "graph"]).sum())

    with stages.stage("timeline.steps"):
        step_sets = steps_mod.find(ranges, tl.marks, launches, launch_start, step_range, api, ops)
    generated = next((st.calls for st in step_sets if st.calls is not None), None)  # calls found from kernels
    compiles = steps_mod.compile_union(tl.marks)
    with stages.stage("timeline.steps"):
        fams = steps_mod.families(step_sets, u, launch_start, work_end, th, compiles, steps_mod.malloc_times(api),
                                  *steps_mod.window_marks(tl.marks))
    del work_end, step_sets  # 16 B per launch, not needed past the step families
    _account_steps(fams, launches, launch_start, slow_mod.capture_times(api))
    _state_copies(fams, ops, u)
    steady = union_of(fams, "_steady")
    with stages.stage("timeline.range_stats"):
        rstats = ranges_mod.range_stats(ranges, u, launches, th, steady if fams else None)

    # every idle moment of the window with its cause, then summed per scope
    containers = _containers(fams)
    with stages.stage("timeline.idle_pieces"):
        pieces = idle.finish(cutting(), containers)
    rinfo = {r.name: {"count": int(r.count), "median_wall_ns": float(r.median_wall_ns),
                      "gpu_busy_share": float(r.gpu_busy_share), "leaf_work": r.name not in containers}
             for r in rstats.itertuples(index=False)}
    with stages.stage("timeline.causes"):
        sync_t = pieces.calls.sync["t"].to_numpy(dtype="float64")
        sync_ns = pieces.calls.sync["ns"].to_numpy(dtype="float64")
        for f in fams:
            # the host's time blocked in synchronising calls during the steady steps: what it spent waiting for the GPU,
            # so not a floor under the step (analysis.gain)
            f["steady_sync_blocked_ns"] = float(sync_ns[intervals.inside(sync_t, *f["_steady"])].sum()) if len(sync_t) else 0.0
            sc = idle.time_scope(pieces, *f["_steady"])
            f["_idle_by"] = sc.idle  # (the host samples' strata: host_frames.table)
            f["causes"] = idle.causes(sc, f["steady_busy_ns"], paths, rinfo)
            f["headline_cause"] = idle.headline(f["causes"], f["verdict"])
        if fams:  # why the slow steps at known shapes were slow (``steps.slow_causes``): the loop's time line says
            fams[0]["_slow_causes"] = slow_causes.explain(fams[0], pieces, u, paths, rinfo, ops, api)
        if not rstats.empty:
            # ranges judged on the steady steps: their idle pieces outside them are left out; ranges outside the
            # steady steps (start-up, between phases): their warm-up iterations are left out, as before
            warm = union_of(fams, "_warm")
            names = rstats["name"].tolist()
            in_steps = (rstats["scope"] == ranges_mod.STEADY).to_numpy()
            by_warm, *by_steps = idle.range_scopes(pieces, names, (warm.starts, warm.ends),
                                                   *([intervals.gaps(steady, -np.inf, np.inf)] if in_steps.any() else []))
            by_steps = by_steps[0] if by_steps else {}
            warm_busy = ranges_mod.busy_in(ranges, rstats["name"], u, warm)
            steady_busy = np.where(in_steps, rstats["busy_ns"], rstats["busy_ns"] - warm_busy)
            rstats["causes"] = [idle.causes((by_steps if s else by_warm)[n], b, paths, rinfo, first=RANGE_CAUSES)
                                for n, b, s in zip(names, steady_busy, in_steps)]
        else:
            rstats["causes"] = pd.Series(dtype=object)
        window_sc = idle.time_scope(pieces, np.array([lo]), np.array([hi]))
        window_causes = idle.causes(window_sc, busy_ns, paths, rinfo)
    # the host's stacks while the GPU idled: per step family (its steady steps) and for the window
    window_scope = (np.array([lo]), np.array([hi]))
    scope = (steady.starts, steady.ends) if fams else window_scope
    att = threads = None
    if hs is not None:  # (a recording without host stacks pays nothing here: a million API calls' thread ids)
        threads = launching_threads(api)
        if hs.calls is not None:  # recorded calls: read them in the idle time
            hs = host_frames.sample_calls(hs, pieces, scope, threads)
        att = host_frames.attribute(hs, pieces, threads, scope)
        for f in fams:
            host_frames.cause_frames(att, f["_steady"], f["causes"], paths, f["_idle_by"])
            f["host_frames"] = host_frames.table(att, f["_steady"], sum(c["idle_ns"] for c in f["causes"]),
                                                 idle_by=f["_idle_by"])
            f["headline_cause"] = idle.headline(f["causes"], f["verdict"], f["host_frames"])
        host_frames.cause_frames(att, window_scope, window_causes, paths, window_sc.idle)
    steady_from = float(fams[0]["_steady"][0][0]) if fams and len(fams[0]["_steady"][0]) else -np.inf
    hooked = tl.marks is not None and not tl.marks.empty and (tl.marks["name"] == DECODE).any()
    gen_marks, found_by = (tl.marks, None) if hooked or generated is None else (generated.marks, generated.found_by)
    if found_by and not (fams and fams[0]["warmup_steps"]):
        steady_from = -np.inf  # no warm-up steps: the first request's prefill, before the first step (its GEMMs
                               # break the period), is no warm-up either
    inference = inference_mod.summarize(gen_marks, u, launches, launch_start, pieces, paths, rinfo, th, steady_from,
                                        found_by)
    work = comm_mod.Work(ops, launches)
    communication = comm_mod.judge(work, fams, window_causes, lo, hi, n_kernels, th, api) if work.any else {}
    if communication:
        dom_ = fams[0] if fams else None
        communication["collectives"] = work.collectives(
            launch_start, dom_["_steady"] if dom_ else (np.array([lo]), np.array([hi])), _model_phases(tl.marks),
            dom_["count"] - dom_["warmup_steps"] if dom_ else 1)
    del launch_start
    for f in fams:
        held_back(f)

    if n_kernels == 0 and ops.empty:
        verdict = "no-gpu-work"
    elif fams:
        verdict = fams[0]["verdict"]
    elif communication:
        verdict = classify(communication["compute_busy_share"], wall, n_kernels, th)
    else:
        verdict = classify(busy_ns / wall if wall else 0.0, wall, n_kernels, th)
    dom = fams[0] if fams else {}
    steps = steps_mod.public(dom) if dom else {}
    if steps:
        steps["families"] = sorted(f["name"] for f in fams)
        steps["rule"] = steps_mod.RULE
    causes = dom.get("causes", window_causes) if dom else window_causes
    res = TimelineResult(wall, busy_ns, (lo, hi), verdict, rstats, steps, fams, busy.top_gaps(u, lo, hi, ranges),
                         causes, busy.devices(ops, tl.devices, lo, hi, u), call_summaries.sync_summary(pieces),
                         call_summaries.pageable_summary(pieces), call_summaries.launch_summary(pieces, launches),
                         busy.graphs(ops, api, u, launches), n_kernels, notes=list(tl.notes))
    res.headline_cause = idle.headline(causes, verdict, dom.get("host_frames") if dom else None)
    if dom and dom.get("shape_churn"):  # the loop's first cause: what its steps at new shapes cost beyond its median
        res.headline_cause = shape_churn_words(dom["shape_churn"])
    res.communication = communication
    res.inference = inference
    res.training = _training(tl.marks, ranges, launches)
    res.in_use = in_use.detect(launches, tl.marks, ranges, res.graphs, api, fams)
    if hs is not None:
        rows = dom.get("host_frames") if dom else \
            host_frames.table(att, window_scope, sum(c["idle_ns"] for c in window_causes), idle_by=window_sc.idle)
        basis = f"steady-state steps of `{dom['name']}`" if dom else "profiled window"
        res.host_frames = host_frames.summary(att, hs, basis, rows or [])
        res.host_collapsed = host_frames.collapsed(att, hs, dom["_steady"] if dom else window_scope)
    if dom:
        first = first_time(ops, api, ranges, lo)
        res.startup = steps_mod.startup(dom, first, compiles)
        res.loop_time = slow_mod.split(dom, first, last_time(ops, api, ranges, hi))
        ck = (res.loop_time.get("slow_causes") or {}).get("checkpoint")
        loop = float((dom.get("time_accounting") or {}).get("loop_ns") or 0.0)
        if ck and hs is not None and dom.get("_checkpoint") is not None:  # did they save? the host's stacks say
            starts, ends = dom["_iterations"]
            ck["host"] = state_copies_host.evidence(hs, starts[dom["_checkpoint"]], ends[dom["_checkpoint"]], threads)
        if ck and not dom.get("shape_churn") and ck["cost_ns"] >= slow_mod.NEW_SHAPE_SHARE * loop and \
                ck["cost_ns"] > max([c["idle_ns"] for c in causes] or [0.0]):
            # the loop's first cause: its checkpoints hold more of its time than any cause of a typical step's idle time
            res.headline_cause = ("copies to the host (" if state_copies_host.unsaved(ck) else "checkpoints (") + \
                checkpoint_words(ck, loop) + ")"
    # the picture shows where the question is: the dominant phase's steady steps when there are steps
    a_lo, a_hi = dom["steady_window_ns"] if dom else (lo, hi)
    res.activity = busy.activity(u, launches, ranges, a_lo, a_hi)
    res.activity_window = (float(a_lo), float(a_hi))
    res.activity["scope"] = f"steady-state steps of `{dom['name']}`" if dom else "profiled window"
    if dom:
        res.activity["phase"] = dom["phase"] or dom["name"]
    return res



def shape_churn_words(acc: dict) -> str:
    """The headline's cause for a loop of changing input shapes (``steps.slow``)."""
    from ...durations import duration
    from .steps import shape_costs
    per = acc["new_shape_excess_ns"] / max(acc["new_shape_steps"], 1)
    n_cap = int(acc.get("capture_steps") or 0)
    at = (f"{acc['new_shape_steps'] - n_cap} of {acc['steps']} steady steps at a shape not seen before and {n_cap} "
          "recording a CUDA graph for one" if n_cap else
          f"{acc['new_shape_steps']} of {acc['steps']} steady steps at a shape not seen before")
    return (f"new input shapes ({at}, "
            f"{duration(per)} beyond a step at a known shape ({duration(acc['base_ns'])}) each: "
            f"{100 * acc['new_shape_excess_ns'] / acc['loop_ns']:.0f}% of the loop's time"
            f"{shape_costs.headline_words(acc)})")


def _account_steps(fams: list[dict], launches: pd.DataFrame, launch_start: np.ndarray,
                   captures: np.ndarray | None = None) -> None:
    """Each family's steady time split into its steps at the median and its slow steps' excess (``steps.slow``). Where
    the slow steps are new input shapes (``shape_churn``), the idle causes and the frames are those of its other
    steps: what a typical step waits for, beside what the new shapes cost (counted once, in ``shape_churn``)."""
    if not fams:
        return
    first = slow_mod.first_seen(launches, launch_start)
    memo: list = []

    def order():  # the launches in time order, sorted once and only where a family has slow steps at new shapes
        if not memo:
            memo.append(LaunchOrder.of(launches, launch_start))
        return memo[0]
    total = sum(float(x.get("steady_wall_ns") or 0.0) for x in fams)
    for f in fams:
        acc = slow_mod.account(f, first, order, captures)
        if acc is None:
            continue
        f["_slow_known"], f["_typical"] = acc.pop("_slow_known"), acc.pop("_typical")
        f["time_accounting"] = acc
        if slow_mod.new_shapes(acc, total - float(f.get("steady_wall_ns") or 0.0)):
            f["shape_churn"] = acc
            starts, ends = f["_iterations"]
            it = ends - starts
            keep = it <= slow_mod.SLOW_FACTOR * acc["base_ns"]
            if keep.sum() >= 2:
                u = intervals.union(starts[keep], ends[keep])
                f["_steady"] = (u.starts, u.ends)


def _state_copies(fams: list[dict], ops: pd.DataFrame, u: intervals.Union) -> None:
    """Steps that bring the model's state to the host. Each family whose median step copies that much is marked
    (``host_copy_bytes_per_step``: a save in every step, which its host-range finding names). The dominant family's
    checkpoint steps (``slow_causes.checkpoint_steps``: slow steps that copied the model's
    state to the host) are left out of its steady steps' scope, as steps at new shapes are: the idle causes, the
    host's frames and the findings per step then say what a typical step waits for, and the checkpoints get their own
    account and finding (``checkpoint-in-loop``), on the loop's whole time. Why: a loop saving a 1.2 GB checkpoint every
    15 steps (H200, wrappers/checkpoint_loop.py) led with "Synchronising calls stall the launch queue, up to 2.91x" and,
    live, "the GPU idles while the host runs `save`, up to 2.91x", both on the median step, where the checkpoints held
    most of the loop (plain: 7.1 s of its 8.9 s)."""
    copies = slow_causes.host_copies(ops)  # (read once: every family's steps, then the dominant one's checkpoints)
    for f in fams:  # (a family whose every step copies the model's state to the host: ``slow_causes.copies_per_step``)
        per = slow_causes.copies_per_step(f, copies)
        if per is not None:
            f["host_copy_bytes_per_step"] = per
    if not fams or fams[0].get("_slow_known") is None:
        return
    f = fams[0]
    ck = slow_causes.checkpoint_steps(f, copies, u)
    if ck is None:
        return
    f["_checkpoint"] = ck
    f["checkpoint_steps"] = int(ck.sum())
    if f.get("shape_churn"):
        return  # (its scope holds the steps at the typical step's speed already: no slow step is in it)
    starts, ends = f["_iterations"]
    keep = ~ck
    if keep.sum() >= 2:
        u = intervals.union(starts[keep], ends[keep])
        f["_steady"] = (u.starts, u.ends)


# Launches for which the idle pieces are cut on a thread of their own: below, the hand-over costs more than it saves;
# above, memory comes first (their temporaries and the steps' would be held together; the Tensor Core side's rule,
# ``api.SIDE_BY_SIDE_MAX_LAUNCHES``).
BESIDE_MIN_LAUNCHES, BESIDE_MAX_LAUNCHES = 200_000, 2_000_000


def _beside(n_launches: int, func, *args):
    """``func(*args)`` on a worker thread for a big recording, else here and now; returns what gives its result."""
    if not BESIDE_MIN_LAUNCHES <= n_launches <= BESIDE_MAX_LAUNCHES:
        with stages.stage("timeline.idle_cut"):
            done = func(*args)
        return lambda: done
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsighttc-idle")

    def timed():
        with stages.stage("timeline.idle_cut"):
            return func(*args)
    future = pool.submit(timed)
    pool.shutdown(wait=False)  # the worker ends after this one task
    return future.result


def _training(marks: pd.DataFrame, ranges: pd.DataFrame, launches: pd.DataFrame) -> bool:
    """Whether the recording is of training: the hooks saw an optimizer step or a backward call, torch.profiler an
    ``Optimizer.step#`` range, or the GPU ran optimizer or backward kernels. The launch-bound fix depends on it
    (a fused optimizer means nothing to an inference loop marked with its own step ranges)."""
    from ...record_format import BACKWARD, OPTIMIZER
    if marks is not None and not marks.empty and marks["name"].isin([OPTIMIZER, BACKWARD]).any():
        return True
    if not ranges.empty and labels.per_category(ranges["path"], lambda p: "Optimizer.step#" in p, dtype=bool).any():
        return True
    from ..name_rules import name_mask
    return bool("name" in launches and not launches.empty and name_mask(launches["name"], TRAINING_KERNEL).any())


def _model_phases(marks: pd.DataFrame) -> dict:
    """{"forward": intervals, "backward": intervals} of the hooks' marks around the main model's calls and the
    program's ``backward`` calls: where a collective was launched (FSDP gathers in forward, reduces in backward)."""
    from ...record_format import BACKWARD, FORWARD
    out = {}
    if marks is None or marks.empty:
        return out
    for phase, name in (("forward", FORWARD), ("backward", BACKWARD)):
        m = marks[(marks["name"] == name).to_numpy()]
        if len(m):
            un = intervals.union(m["start_ns"].to_numpy(dtype="float64"), m["end_ns"].to_numpy(dtype="float64"))
            out[phase] = (un.starts, un.ends)
    return out


def refresh_tensor_cores(res: TimelineResult, launches: pd.DataFrame) -> TimelineResult:
    """A timeline analysed before the Tensor Core evidence was final (``api.TimelineAhead``): redraw the
    one thing of it that depends on that evidence, the activity picture's Tensor Core row. Everything else
    reads launch times, durations, names and ranges only, which the evidence does not change."""
    if res.activity.get("busy"):
        res.activity["tensor_core_busy"] = busy.tensor_core_busy(launches, *res.activity_window,
                                                                 len(res.activity["busy"]))
    return res


# --- ranges, JSON ---------------------------------------------------------------------------------
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
    return {
        "gpu_busy_share": res.busy_share, "basis": res.basis, "verdict": res.verdict,
        "window": {"start_ns": res.window[0], "end_ns": res.window[1], "wall_ns": res.wall_ns,
                   "gpu_busy_share": res.window_busy_share},
        "wall_ns": res.wall_ns, "kernels": res.kernels,
        "headline_cause": res.headline_cause,
        "steps": dict(res.steps), "step_families": [steps_mod.public(f) for f in res.families],
        "gaps": res.gaps, "causes": res.causes, "devices": res.devices,
        "sync": res.sync, "pageable_copies": res.pageable, "launch": res.launch, "graphs": res.graphs,
        "notes": res.notes, "activity": res.activity,
        **({"startup": res.startup} if res.startup else {}),
        **({"loop_time": res.loop_time} if res.loop_time else {}),
        **({"communication": res.communication} if res.communication else {}),
        **({"inference": res.inference} if res.inference else {}),
        **({"in_use": res.in_use} if res.in_use else {}),
        **({"host_frames": res.host_frames} if res.host_frames else {}),
    }
