"""Steps and phases: where the steps are (``find``: the program's marks, nsighttc's hooks, torch.profiler's
optimizer and DataLoader ranges, or the period of the kernel sequence), which are warm-up (``steady``), and each
family (phase) judged on its steady steps alone, so one loop cannot speak for a program of several phases and
start-up never speaks for the loop.

An iteration of a family runs from one step's start to the next step's start (the host work between steps, such
as data loading, belongs to it). Medians, not means.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .... import step_cycle
from ....record_format import COMPILE, DECODE, PREFILL, WINDOW
from ... import intervals
from ..base import Thresholds, classify
from . import copies as copies_mod, find as find_mod, generation, period, replays as replays_mod, steady
from .launch_order import LaunchOrder
from .find import EXPLICIT, GRAPH_REPLAY, HOOK, KERNEL_PERIOD, PROFILER_OP, RESULT_COPY, StepSet, step_paths
from .steady import RULE, malloc_times

__all__ = ["EXPLICIT", "GRAPH_REPLAY", "HOOK", "KERNEL_PERIOD", "PROFILER_OP", "RESULT_COPY", "RULE", "StepSet", "compile_union", "families", "find",
           "malloc_times", "public", "startup", "step_paths", "window_marks"]


def find(ranges: pd.DataFrame, marks: pd.DataFrame, launches: pd.DataFrame, launch_start: np.ndarray,
         step_range: str | None, api: pd.DataFrame | None = None, ops: pd.DataFrame | None = None) -> list[StepSet]:
    """The step families of a recording, from the first source that has any, and the program's CUDA graph replays
    beside them (``find`` module docstring)."""
    sets = [without_profiler_stop(st, launch_start) for st in find_mod.explicit(ranges, step_range)]
    if sets or step_range:
        return sets
    from ..base import GRAPH_LAUNCH_CALLS
    replays = replays_mod.graph_replays(api, GRAPH_LAUNCH_CALLS, ops) if api is not None else []
    sets = find_mod.hooks(marks)
    if sets:
        sets = replays_mod.with_graph_replays(sets, replays)
        # the hooks labelled the calls (a live run): they saw a generation loop's cache or knew it was none (a
        # variable-length loop's calls are "prefill" each, its new shapes other tiles and heavier: no requests)
        return sets if marks["name"].isin([DECODE, PREFILL]).any() else _with_calls(sets, launches, launch_start)
    ok = ~np.isnan(launch_start)
    first_launch = float(launch_start[ok].min()) if ok.any() else np.inf
    sets = find_mod.profiler_ops(ranges, first_launch)
    if sets:
        return _with_calls(replays_mod.with_graph_replays(sets, replays), launches, launch_start)
    if replays:
        copies = copies_mod.result_copies(ops)
        if copies_mod.replays_within(copies, replays):  # (some iterations replay a graph, the others run eagerly)
            return copies
        order = LaunchOrder.of(launches, launch_start)
        return _with_calls(replays_mod.before_replays(replays + replays_mod.outside(_from_kernels(order), replays)),
                           launches, launch_start, order)
    order = LaunchOrder.of(launches, launch_start)
    return copies_mod.wider_loop(within_one_range(_from_kernels(order), ranges, order), copies_mod.result_copies(ops))


PROFILER_STOP_SHARE = 0.1  # a last ProfilerStep under this share of the others' median, launching nothing: a stub


def without_profiler_stop(st: StepSet, launch_start: np.ndarray) -> StepSet:
    """``st`` less its last step where that is torch.profiler's closing stub: the program's last ``prof.step()`` opens
    a ``ProfilerStep#N`` that the profiler's stop closes, with none of the loop's work in it. Such a step launched no
    GPU work and is under ``PROFILER_STOP_SHARE`` of the other steps' median; left in, two steps have a median that is
    neither (HTA's MI250 training trace, ``amd_trace``: ``ProfilerStep#1`` 9.29 ms with all 16 kernels, ``#2`` 49 us
    with none, read as "2 steady steps of 4.69 ms", the real step "slow")."""
    if st.source != EXPLICIT or len(st.starts) < 2 or \
            not st.name.rsplit("/", 1)[-1].startswith(find_mod.PROFILER_STEP):
        return st
    wall = st.ends - st.starts
    launched = ((launch_start >= st.starts[-1]) & (launch_start <= st.ends[-1])).any()  # (NaN compares False)
    if launched or wall[-1] >= PROFILER_STOP_SHARE * float(np.median(wall[:-1])):
        return st
    return dataclasses.replace(st, starts=st.starts[:-1], ends=st.ends[:-1])


INNER_SHARE = 0.5  # a kernel loop holding less than this share of one host range's launches, inside it: a part of it


def within_one_range(sets: list[StepSet], ranges: pd.DataFrame, order: LaunchOrder | None) -> list[StepSet]:
    """``sets`` less a kernel-period family that is one part of a single host range's work: the innermost range
    instance around all its steps launched kernels before its first step and after its last, and the loop holds under
    ``INNER_SHARE`` of that instance's launches. What repeats there is a block of layers inside one call, not the
    program's iteration (a host boundary never falls between its steps). HolisticTraceAnalysis's critical-path test
    trace (a benchmark's AlexNet, one warm-up and one measured forward, each in its own range): three 5-kernel conv
    blocks of the warm-up forward read "3 steady steps of 1.95 ms", the forward's other 24 kernels outside them."""
    if not sets or order is None or not len(order.times):
        return sets
    # the recording itself is the range around a loop no range holds (a trace of torch.compile capturing a model's
    # CUDA graphs, TraceLens' xdit_flux.1 capture trace: "24 steady steps of 1.21 ms", its transformer blocks)
    whole = pd.DataFrame({"start_ns": [float(order.times[0])], "end_ns": [float(order.times[-1]) + 1.0]})
    ranges = whole if ranges is None or ranges.empty else pd.concat([ranges[["start_ns", "end_ns"]], whole])
    r_start = ranges["start_ns"].to_numpy(dtype="float64")
    r_end = ranges["end_ns"].to_numpy(dtype="float64")
    out = []
    for st in sets:
        if st.source != KERNEL_PERIOD or not len(st.starts):
            out.append(st)
            continue
        lo, hi = float(st.starts[0]), float(st.ends[-1])
        around = np.flatnonzero((r_start <= lo) & (r_end >= hi))
        if not len(around):
            out.append(st)
            continue
        i = around[np.argmin(r_end[around] - r_start[around])]  # the innermost instance around the loop
        a, b = np.searchsorted(order.times, [r_start[i], r_end[i]], side="left")
        first, last = np.searchsorted(order.times, [lo, hi], side="left")
        n_inst, n_loop = int(b - a), int(last - first)
        if n_inst and n_loop < INNER_SHARE * n_inst and first > a and b > last:
            continue
        out.append(st)
    return out


def _from_kernels(order: LaunchOrder | None) -> list[StepSet]:
    """Steps from the repeating kernel sequence (``period``)."""
    if order is None:
        return []
    codes, names, times = order.codes, order.names, order.times
    found = period.find(codes, names, times)
    if found is None:
        return []
    at = found["launches"]
    starts = times[at]
    if len(starts) > 1 and (np.diff(starts) <= 0).mean() >= 0.5:
        # the period's iterations share their launch: one call launched them all, the nodes of one CUDA graph (a
        # torch.profiler trace times each graph kernel's launch at its graph's launch): a part of one step (a
        # transformer layer), no host boundary between them. Public traces of vLLM and SGLang decode steps replayed
        # as one graph (TraceLens tests: "36 steps of 0 ns", then a new-shape gain "up to 1,823,664x").
        return []
    end_at = min(found["end"], len(times) - 1)
    ends = np.append(starts[1:], times[end_at])
    anchor = str(names[found["anchor"]])
    short = anchor if len(anchor) <= 60 else anchor[:57] + "..."
    # a loop that steps an optimizer or runs a backward pass trains: no generation loop to split
    trains = len(at) > 1 and order.trains(int(at[0]), int(at[1]))
    calls = None if trains else order.split(at, int(found["end"]), generation.PERIOD)
    return [StepSet(f"kernel period ({found['period']} kernels)", None, starts, ends, KERNEL_PERIOD,
                    f"the repeating kernel sequence ({found['period']} kernels per iteration, each starting with "
                    f"`{short}`): the recording has no step marks", calls)]


def _with_calls(sets: list[StepSet], launches: pd.DataFrame, launch_start: np.ndarray,
                order: LaunchOrder | None = None) -> list[StepSet]:
    """``sets``, the first family of model calls (the hooks' calls, drawn without their prefill and decode marks: a
    recording by an earlier nsighttc, or a program's own ranges named so) or of CUDA graph replays given the
    prefill and decode calls of a generation loop where its kernels show one (``generation.split``)."""
    fam = next((st for st in sets if st.calls is None and len(st.starts) >= 3 and
                (st.source == GRAPH_REPLAY or (st.source == HOOK and st.name == find_mod.MODEL_CALLS))), None)
    if fam is None:
        return sets
    order = order if order is not None else LaunchOrder.of(launches, launch_start)
    if order is None:
        return sets
    at = np.searchsorted(order.times, fam.starts, side="left")
    if fam.source == HOOK:
        end = int(np.searchsorted(order.times, float(fam.ends[-1]), side="right"))
    else:  # the last replay and what the host launched after it, as much as a typical step holds
        end = int(min(at[-1] + np.median(np.diff(at)), len(order.times)))
    if len(np.unique(at)) < len(at) or at[-1] >= len(order.times) or order.trains(int(at[0]), int(at[1])):
        return sets
    fam.calls = order.split(at, end, generation.CALLS if fam.source == HOOK else generation.REPLAYS)
    return sets


REBASE_GAP_NS = 1e6  # a window mark opened within this of the last one's end: the same window, started again


def window_marks(marks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(the starts of the windows of steady steps the launcher chose, where a window's mark started again), each
    sorted: ``runtime.steps.WINDOW`` marks; one that begins as the one before it ends is that window started again
    (``runtime.window``: its steps fell to a new rate inside it), not another, and ``steady.warmup`` moves the
    window's start there where the steps before ran at a plateau (``steady.PLATEAU_FACTOR``)."""
    if marks is None or marks.empty:
        return np.array([]), np.array([])
    m = marks.loc[(marks["name"] == WINDOW).to_numpy()].sort_values("start_ns")
    starts = m["start_ns"].to_numpy(dtype="float64")
    ends = m["end_ns"].to_numpy(dtype="float64")
    again = np.zeros(len(starts), dtype=bool)
    again[1:] = np.abs(starts[1:] - ends[:-1]) <= REBASE_GAP_NS
    return starts[~again], starts[again]


def compile_union(marks: pd.DataFrame) -> intervals.Union:
    """torch.compile's compilations in the recording (``parse.marks``), merged."""
    if marks is None or marks.empty:
        return intervals.union(np.array([]), np.array([]))
    m = marks[(marks["name"] == COMPILE).to_numpy()]
    return intervals.union(m["start_ns"].to_numpy(dtype="float64"), m["end_ns"].to_numpy(dtype="float64"))


def families(sets: list[StepSet], u: intervals.Union, launch_start: np.ndarray, work_end: np.ndarray,
             th: Thresholds, compiles: intervals.Union | None = None, mallocs: np.ndarray | None = None,
             windows: np.ndarray | None = None, restarts: np.ndarray | None = None) -> list[dict]:
    """One dict per step family, the one whose steady state holds the most wall time first.

    ``launch_start``/``work_end``: when each kernel (or whole-graph execution) was launched and when it
    finished on the GPU. A loop whose host runs ahead of the GPU (CUDA-graph replays, async launches)
    has host iterations much shorter than its GPU work: the family's span then runs until the GPU has
    finished the work its steps launched, so the verdict is judged on the time the loop really took.
    Private keys (``_steady``) carry the steady iterations' intervals for the cause analysis."""
    if not sets:
        return []
    compiles = compiles if compiles is not None else intervals.union(np.array([]), np.array([]))
    mallocs = mallocs if mallocs is not None else np.array([])
    ok = ~np.isnan(launch_start)
    if not ok.all():
        launch_start, work_end = launch_start[ok], work_end[ok]
    k_order = np.argsort(launch_start, kind="stable")
    k_start = launch_start[k_order]
    k_end_max = work_end[k_order]  # a copy: the running maximum is taken in place
    del k_order
    np.maximum.accumulate(k_end_max, out=k_end_max)
    windows = windows if windows is not None else np.array([])
    out = [_family(st, u, k_start, k_end_max, th, compiles, mallocs, windows, restarts) for st in sets
           if len(st.starts) >= 2 or (len(st.starts) == 1 and st.source == "explicit")]  # (one ProfilerStep#)
    total = sum(f["steady_wall_ns"] for f in out) or 1.0
    for f in out:
        f["wall_share_of_steps"] = f["steady_wall_ns"] / total
    return sorted(out, key=lambda f: -f["steady_wall_ns"])


def _family(st: StepSet, u: intervals.Union, k_start: np.ndarray, k_end_max: np.ndarray, th: Thresholds,
            compiles: intervals.Union, mallocs: np.ndarray, windows: np.ndarray,
            restarts: np.ndarray | None = None) -> dict:
    s, e = st.starts, st.ends
    it_end = np.concatenate([s[1:], e[-1:]])
    it_end = np.maximum(it_end, e)  # overlapping/odd ranges: an iteration at least covers its step
    it_wall = it_end - s
    it_busy = intervals.busy_within(u, s, it_end)
    share = np.where(it_wall > 0, it_busy / it_wall, 0.0)
    warm, reasons = steady.warmup(s, it_end, it_wall, th.warmup_factor, th.warmup_explained, compiles, mallocs,
                                  windows, restarts)
    steady_part = slice(warm, None)
    k_in = (np.searchsorted(k_start, it_end) - np.searchsorted(k_start, s)) if len(k_start) else np.zeros(len(s))
    med_share = float(np.median(share[steady_part]))
    k = step_cycle.cycle(it_wall[steady_part])  # steps that take turns (DataLoader workers): their cycle's mean
    med_it = step_cycle.typical(it_wall[steady_part], k)
    # the GPU's end of the work launched during the steady iterations (host ran ahead: later than it_end)
    n_before = np.searchsorted(k_start, it_end[-1], side="right") if len(k_start) else 0
    n_first = np.searchsorted(k_start, s[warm], side="left") if len(k_start) else 0
    gpu_end = float(k_end_max[n_before - 1]) if n_before > n_first else float(it_end[-1])
    span_end = max(float(it_end[-1]), gpu_end)
    span = span_end - float(s[warm])
    span_busy = float(intervals.busy_within(u, np.array([s[warm]]), np.array([span_end]))[0])
    # When each iteration's GPU work was done: a host that runs ahead of the GPU (async launches, no
    # sync per step) has short host iterations and one long one where it finally waits; per step, the
    # time between the GPU finishing one iteration's work and the next's is what the loop really costs.
    n_done = np.searchsorted(k_start, it_end, side="right") if len(k_start) else np.zeros(len(s), dtype=int)
    gpu_done = np.where(n_done > 0, k_end_max[np.clip(n_done - 1, 0, None)] if len(k_start) else 0.0, np.nan)
    gpu_done = np.fmax(gpu_done, it_end)  # a step whose work finished earlier still ends with its host
    completion = np.diff(np.concatenate([s[:1], gpu_done]))
    effective = np.fmax(it_wall, completion)  # fmax: NaN (no GPU work yet) never wins
    fam = {"name": st.name, "phase": st.phase, "source": st.source, "found_by": st.detail,
           "count": int(len(s)), "median_ns": float(np.median((e - s)[steady_part])),
           "median_iteration_ns": med_it, "median_gpu_busy_share": med_share,
           "median_effective_ns": _effective(it_wall[steady_part], completion[steady_part], effective[steady_part], k),
           "wall_ns": float(it_wall.sum()), "steady_wall_ns": span, "steady_busy_ns": span_busy,
           "steady_gpu_busy_share": span_busy / span if span > 0 else 0.0,
           "host_ahead_ns": max(gpu_end - float(it_end[-1]), 0.0),
           "gpu_busy_shares": share.astype("float64").tolist(), "iteration_ns": it_wall.astype("float64").tolist(),
           "median_kernels": float(np.median(k_in[steady_part])) if len(k_in) else 0.0,
           "warmup_steps": int(warm), "warmup_ns": [float(x) for x in it_wall[:warm]], "warmup_reasons": reasons,
           "first_step_start_ns": float(s[0]),
           "steady_window_ns": [float(s[warm]), span_end],
           "_steady": _disjoint(np.append(s[steady_part], it_end[-1]), np.append(it_end[steady_part], span_end)),
           "_warm": (s[:warm].astype("float64"), it_end[:warm].astype("float64")),
           "_iterations": (s[steady_part].astype("float64"), it_end[steady_part].astype("float64")),
           "_gpu_done": gpu_done[steady_part].astype("float64")}  # (each steady step's work done on the GPU)
    if k > 1:
        fam["steps_per_cycle"] = k
    if st.per_step > 1:  # (the launcher times each replay: the profile run sums them into steps, ``profile.window``)
        fam["replays_per_step"] = st.per_step
    q25, w_med, q75 = time_weighted(share[steady_part], it_wall[steady_part], (0.25, 0.5, 0.75))
    fam["median_verdict"] = classify(w_med, span, int(np.sum(k_in[steady_part])), th)
    fam["busy_quartiles"] = [q25, q75]
    fam["verdict"] = most_steps_agree(fam["median_verdict"], q25, q75, th)
    return fam


def _effective(it_wall: np.ndarray, completion: np.ndarray, effective: np.ndarray, k: int) -> float:
    """The typical step on whichever clock is later, host's or GPU's. Steps one at a time: each at the later of its
    host iteration and the GPU's finishing its work. Steps that take turns (``k`` > 1): the later of the two clocks' means
    over a cycle, not the mean of each step's later one: a cycle whose host queues work for two steps and waits for
    the GPU in its third (a graph replay loop recorded in cycles of 3 whose recording ends with the profiler waiting
    for the GPU: 1.1, 1.0 and 14.5 ms on the host, about 5 ms each on the GPU; H200, ``parse.segments``) is three
    steps of 5.6 ms, not of 9 ms, the host's wait counted once."""
    if k <= 1:
        return step_cycle.typical(effective, k)
    return max(step_cycle.typical(it_wall, k), step_cycle.typical(completion, k))


def time_weighted(share: np.ndarray, wall: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """The busy shares at ``qs`` of the steps' time (each step weighs its iteration's wall time), not of their count:
    a loop whose steps differ is judged where its time is. Two DataLoader workers that deliver their batches together
    make steps of 146 ms at 2% busy alternate with steps of 1 ms at 97% (H200, wrappers/graph_loader.py, the cached
    run): by count the quartiles were 5% and 97%, "mixed" at 6% busy over the steps' time; by time both are about 2%."""
    if not len(share):
        return [0.0 for _ in qs]
    order = np.argsort(share, kind="stable")
    w = np.clip(wall[order].astype("float64"), 0.0, None)
    if w.sum() <= 0:
        return [float(x) for x in np.percentile(share, [100 * q for q in qs])]
    cum = np.cumsum(w) / w.sum()
    return [float(share[order][min(int(np.searchsorted(cum, q, side="left")), len(cum) - 1)]) for q in qs]


def most_steps_agree(verdict: str, q25: float, q75: float, th: Thresholds) -> str:
    """CPU-bound only when three steps in four (of the steps' time: ``time_weighted``) are under the threshold, GPU-bound
    only when three in four are at or over it; else mixed. The median step alone flipped between runs of one program: a Trainer fine-tune on the H100
    measured 52% and 47% busy on its first and cached runs (steps' quartiles 51-56% and 44-51%), "mixed" then
    "CPU-bound", with the same cause holding the same share of the idle time."""
    if verdict == "cpu-bound" and q75 >= th.cpu_bound:
        return "mixed"
    if verdict == "gpu-bound" and q25 < th.gpu_bound:
        return "mixed"
    return verdict


def startup(fam: dict, trace_start: float, compiles: intervals.Union) -> dict:
    """What came before the steady steps of the family that speaks for the run: how long (from the first thing
    the recording holds), how much of it torch.compile compiled, and when the first step (warm-up included)
    began."""
    steady_from = fam["steady_window_ns"][0]
    compile_ns = float(intervals.busy_within(compiles, np.array([trace_start]), np.array([steady_from]))[0]) \
        if len(compiles.starts) and steady_from > trace_start else 0.0
    return {"seconds": max(steady_from - trace_start, 0.0) / 1e9, "compile_seconds": compile_ns / 1e9,
            "first_step_ns": max(fam["first_step_start_ns"] - trace_start, 0.0),
            "compile_total_seconds": compiles.total / 1e9, "warmup_steps": fam["warmup_steps"]}


def _disjoint(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, non-overlapping intervals (iterations of odd, overlapping step ranges are merged)."""
    u = intervals.union(s, e)
    return u.starts, u.ends


def public(fam: dict) -> dict:
    return {k: v for k, v in fam.items() if not k.startswith("_")}
