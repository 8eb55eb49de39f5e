"""Every second of a loop accounted for: its steady steps at their median, and the slow steps beyond it, with why.

The median step says what a typical step costs; a loop whose steps are not alike spends its time elsewhere. Inference
on requests of many lengths (BERT-base fp16, batches padded to their longest request, one H200): model calls of 9 ms at
a length seen before, 51-58 ms at a new one, where the attention backend builds its plan for the new shape; the median
step (9.9 ms) hid two thirds of the loop's time, and the report's first fix was the launch overhead of the 9 ms steps.

``account`` splits a family's steady time into its typical steps and each slow step's excess (a step over
``SLOW_FACTOR`` times the median step at a known shape), and tells which slow steps launched a kernel configuration
(name, grid, block) the recording had not seen before: a new input shape. ``new_shapes`` is the one cause a loop of
changing shapes has that no idle-time cause names: the GPU idles while the host prepares the new shape's kernels
(cuDNN/cuBLAS plans, autotuning, a recompilation), and padding to a few lengths removes it, where CUDA graphs cannot
(they need fixed shapes).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .... import labels
from .... import step_cycle
from ....step_time import typical_step
from ... import name_rules
from ..base import with_hip
from . import shape_costs

SLOW_FACTOR = 1.5          # a steady step this many times the typical step is slow
PAID_TOP = 3               # kernels named as the ones a new shape's preparation came before
NEW_SHAPE_SHARE = 0.2      # slow steps at new shapes holding this share of the steady time make a finding
MIN_STEPS = 6              # a family this short has no median to stand on
MIN_KNOWN = 3              # steps at known shapes that make a baseline of their own
KNOWN_HIGH = 95            # the percentile of the known-shape steps that stands for the longest (padded to the longest)
MIN_NEW_SHAPES = 4         # new shapes a loop paid to churn: a loop padded to a few shapes pays three
                           # (``wide_gain.BUCKETS``), so fewer are its warm-up (public traces of a FLUX pipeline
                           # capturing its graphs, TraceLens tests: 1 new shape in 24 steps read "up to 1.25x", "0.41x")


def first_seen(launches: pd.DataFrame, launch_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(when each kernel configuration (name, grid, block) was first launched, sorted; its kernel's name): a
    configuration first seen in the steady steps is a new input shape (or a new code path)."""
    none = (np.array([]), np.array([], dtype=object))
    if launches.empty or len(launch_start) != len(launches):
        return none
    names = labels.as_categorical(launches["name"])
    parts = [names.cat.codes.to_numpy().astype(np.int64)]
    for col in ("grid", "block"):
        if col in launches:
            parts.append(labels.as_categorical(launches[col]).cat.codes.to_numpy().astype(np.int64))
    key = parts[0]
    for p in parts[1:]:
        key = key * (int(p.max(initial=0)) + 2) + (p + 1)
    t = np.asarray(launch_start, dtype="float64")
    ok = ~np.isnan(t)
    if not ok.any():
        return none
    frame = pd.DataFrame({"key": key[ok], "t": t[ok], "name": parts[0][ok]})
    first = frame.sort_values("t", kind="stable").drop_duplicates("key")
    cats = np.asarray(list(names.cat.categories) + [""], dtype=object)
    return first["t"].to_numpy(), cats[first["name"].to_numpy()]


def paid_before(order, starts: np.ndarray, ends: np.ndarray, paid: np.ndarray, known: np.ndarray) -> dict:
    """Which kernels the host paused before, in the steps ``paid`` (the slow ones at new shapes), beyond its pause
    before the same kernel in the steps ``known`` (at known shapes): the op that launches it prepared the new shape
    there (a cuDNN plan, cuBLAS's heuristics, autotuning, a recompilation), whatever the recording kind (the launch
    times are in every one). ``{"kernels": [{"name", "ns", "launches"}] (the most first, ``PAID_TOP`` at most),
    "libraries": [{"who", "ns", "kernels"}] (the same pauses summed by the library whose kernel came after them,
    ``shape_costs.preparer``), "launch_ratio": the launches of a step at a new shape over a step at a known one}``.

    Why not the kernels first launched there: a new shape launches new GEMM tiles too, which cost nothing to choose.
    BERT-base fp16 at 36 lengths on an H200 (``varlen_infer``): the steps at new lengths first launched `nvjet` GEMM
    configurations, and the host's pauses were before cuDNN's attention kernel, 50 ms and more each (cuDNN builds a
    plan per shape; a plain torch.profiler recording: `aten::_cudnn_attention_forward` up to 107 ms, median 105 us).
    Why by library too: where the preparation runs kernels of its own, the pauses spread over them. An image loop
    under ``cudnn.benchmark`` (H200, ``varlen_conv``) paused before 40-odd of cuDNN's convolution kernels at each
    new size, the first of them 26% of the cost, and its new-size steps launched 3.6-5x the kernels of a step at a
    known size: cuDNN timing its algorithms."""
    none = {"kernels": [], "libraries": [], "launch_ratio": None}
    if order is None:
        return none
    t, codes, names = order.times, order.codes, order.names  # (``launch_order.LaunchOrder``)
    if len(t) < 2 or not paid.any() or not known.any():
        return none
    gap = np.diff(t, prepend=t[0])
    step = np.searchsorted(starts, t, side="right") - 1
    inside = (step >= 0) & (t < ends[np.clip(step, 0, None)])
    step = np.where(inside, step, -1)
    in_paid = inside & paid[np.clip(step, 0, None)]
    in_known = inside & known[np.clip(step, 0, None)]
    per_step = np.bincount(step[inside], minlength=len(starts))
    ratio = float(np.median(per_step[paid])) / max(float(np.median(per_step[known])), 1.0)
    k = len(names)
    base = pd.Series(gap[in_known]).groupby(codes[in_known]).median().reindex(range(k))
    base = base.fillna(float(np.median(gap[in_known])) if in_known.any() else 0.0).to_numpy()
    excess = np.clip(gap[in_paid] - base[codes[in_paid]], 0.0, None)
    if not len(excess):
        return {**none, "launch_ratio": ratio}
    per = np.bincount(codes[in_paid], weights=excess, minlength=k)
    n = np.bincount(codes[in_paid], weights=(excess > 0).astype(float), minlength=k)
    top = np.argsort(-per, kind="stable")[:PAID_TOP]
    libs: dict[str, list] = {}
    for c in np.flatnonzero(per > 0):
        p = shape_costs.preparer(str(names[c]))
        if p is not None:
            lib = libs.setdefault(p.who, [0.0, 0])
            lib[0] += float(per[c])
            lib[1] += 1
    return {"kernels": [{"name": str(names[c]), "ns": float(per[c]), "launches": int(n[c])} for c in top if per[c] > 0],
            "libraries": [{"who": w, "ns": v[0], "kernels": v[1]} for w, v in sorted(libs.items(), key=lambda x: -x[1][0])],
            "launch_ratio": round(ratio, 2)}


# Host calls that begin recording a CUDA graph (``cudaStreamBeginCapture``; an instantiation where no capture call was
# recorded): the step that holds one paid for a graph of its shape.
CAPTURE_CALLS = with_hip(("cudaStreamBeginCapture", "cuStreamBeginCapture", "cudaStreamBeginCaptureToGraph",
                          "cuStreamBeginCaptureToGraph"))
INSTANTIATE_CALLS = with_hip(("cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams",
                              "cuGraphInstantiate", "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams"))


def capture_times(api: pd.DataFrame | None) -> np.ndarray:
    """When the program began recording a CUDA graph, sorted (its capture calls; its instantiations where no capture
    was recorded). ``torch.compile(mode="reduce-overhead")`` records one per input shape, at the shape's second call
    (CUDA graph trees: the first runs eagerly), so in a loop of changing shapes a step at a shape seen once before is
    slow too: BERT-base at 36 lengths on an H200, 13-19 ms against 3.3 ms (wrappers/varlen_infer.py --compile
    reduce-overhead, reports/steps_time/compiled)."""
    if api is None or api.empty or "name" not in api:
        return np.array([])
    names = api["name"]
    for calls in (CAPTURE_CALLS, INSTANTIATE_CALLS):
        hit = names.isin(calls).to_numpy()
        if hit.any():
            return np.sort(api.loc[hit, "start_ns"].to_numpy(dtype="float64"))
    return np.array([])


def account(fam: dict, seen: tuple[np.ndarray, np.ndarray], order=None,
            captures: np.ndarray | None = None) -> dict | None:
    """The family's steady time: ``loop_ns`` (its steady iterations' wall time); the steps that launched a kernel
    configuration first seen there (new input shapes) and the others (known shapes); ``base_ns``, the median step at a
    known shape (the median of all steps where fewer than ``MIN_KNOWN`` are known: a loop whose window sees mostly
    new shapes has a median that is itself a new shape's step); ``slow_steps`` over ``SLOW_FACTOR`` x that base and
    their ``excess_ns`` beyond it; of those, the steps at new shapes (``new_shape_steps``, ``new_shape_excess_ns``),
    beside the new-shape steps that cost nothing (``normal_new_shape_steps``: a shape the recording had not seen but
    the program had, before a window recorded from its start) and the slow steps at known shapes. ``captures``
    (``capture_times``): a step that recorded a CUDA graph paid for its shape too, and counts with the new shapes
    (``capture_steps`` of them at a shape seen before)."""
    it = np.asarray(fam.get("iteration_ns") or [], dtype="float64")[int(fam.get("warmup_steps", 0)):]
    if len(it) < MIN_STEPS:
        return None
    k = int(fam.get("steps_per_cycle") or 1)  # (steps that take turns: their cycle's mean, ``step_cycle``)
    med = step_cycle.typical(it, k)
    first, first_names = seen
    starts, ends = fam["_iterations"]
    lo, hi = np.searchsorted(first, starts, side="left"), np.searchsorted(first, ends, side="left")
    shape_new = (hi - lo) > 0 if len(first) else np.zeros(len(it), dtype=bool)
    captured = _holds(captures, starts, ends)
    new = shape_new | captured
    base = step_cycle.typical(it[~new]) if (~new).sum() >= MIN_KNOWN else med
    slow = it > SLOW_FACTOR * step_cycle.slow_against(it, base, k)
    # the kernels whose new configurations the slow steps launched: what the new shapes were paid for
    at_new = np.concatenate([np.arange(a, b) for a, b in zip(lo[slow & new], hi[slow & new])] or [np.array([], int)])
    kernels = pd.Series(dtype=int)
    if len(at_new):  # matrix work first (attention, GEMMs: where a backend plans per shape), then by count
        counts = pd.Series(first_names[at_new]).value_counts()
        matrix = name_rules.is_matrix_work(pd.Series(counts.index, dtype=object)).to_numpy()
        kernels = pd.concat([counts[matrix], counts[~matrix]]).head(3)
    excess = np.where(slow, it - base, 0.0)
    loop = float(it.sum())
    warm = _warm_new_shapes(fam, first, base, captures)
    # (``order``: a callable giving the recording's ``LaunchOrder``, called only where there is something to pay for)
    paid = paid_before(order() if order is not None and (slow & new).any() else None, starts, ends, slow & new,
                       ~slow & ~new)
    return {"loop_ns": loop, "steps": int(len(it)), "median_ns": med, "base_ns": base, "at_median_ns": med * len(it),
            "slow_steps": int(slow.sum()), "slow_excess_ns": float(excess.sum()),
            "slow_share": float(excess.sum()) / loop if loop else 0.0,
            "new_steps": int(new.sum()), "known_slow_steps": int((slow & ~new).sum()),
            "new_shape_steps": int((slow & new).sum()), "new_shape_excess_ns": float(excess[slow & new].sum()),
            "normal_new_shape_steps": int((~slow & new).sum()),
            "new_shape_kernels": [{"name": str(n), "configurations": int(c)} for n, c in kernels.items()],
            "paid_before": paid["kernels"],  # (the kernels the host paused before there: ``paid_before``)
            "paid_by_library": paid["libraries"], "new_shape_launch_ratio": paid["launch_ratio"],
            "known_mean_ns": float(it[~slow & ~new].mean()) if (~slow & ~new).any() else base,
            "known_high_ns": float(np.percentile(it[~slow & ~new], KNOWN_HIGH)) if (~slow & ~new).any() else base,
            "new_shape_excess_each_ns": _each(excess[slow & new]),
            "capture_steps": int((slow & captured & ~shape_new).sum()),
            "capture_excess_ns": float(excess[slow & captured & ~shape_new].sum()),
            "mean_ns": float(it.mean()), "slow_factor": SLOW_FACTOR, **warm,
            "_slow_known": slow & ~new, "_typical": ~slow}  # (private: ``slow_causes``; taken out before the JSON)


def _each(x: np.ndarray) -> list[int]:
    """Per-step times, sorted, in whole nanoseconds: what a gain model reads of their spread (``wide_gain.loop``)."""
    return sorted(int(v) for v in np.asarray(x, dtype="float64"))


def _holds(times: np.ndarray | None, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which of the steps ``[starts, ends)`` hold one of ``times`` (sorted)."""
    if times is None or not len(times):
        return np.zeros(len(starts), dtype=bool)
    return (np.searchsorted(times, ends, side="left") - np.searchsorted(times, starts, side="left")) > 0


def _warm_new_shapes(fam: dict, first: np.ndarray, base: float, captures: np.ndarray | None = None) -> dict:
    """The warm-up steps after the first (which sets up the process: handles, kernels' modules) at new input shapes
    and over ``SLOW_FACTOR`` x the known-shape step: a loop meets most of its new shapes first, and the warm-up rule
    left those steps out as slow leading ones. ``warmup_ns`` (those warm-up steps' time), ``warmup_new_shape_steps``,
    ``warmup_new_shape_excess_ns`` (beyond the known-shape step): what a whole run gains beside the steady steps'.
    Why: an image loop at 25 sizes under cudnn.benchmark (H200, a torch.profiler recording of all 150 batches) had 15
    warm-up steps of 2.92 s, 12 of them new sizes at 150-350 ms, against 2.47 s for its 134 steady steps."""
    s, e = fam.get("_warm") or (np.array([]), np.array([]))
    s, e = np.asarray(s, dtype="float64")[1:], np.asarray(e, dtype="float64")[1:]
    if not len(s):
        return {"warmup_ns": 0.0, "warmup_new_shape_steps": 0, "warmup_new_shape_excess_ns": 0.0,
                "warmup_later_steps": 0, "warmup_new_shape_excess_each_ns": []}
    it = e - s
    new = _holds(first, s, e) | _holds(captures, s, e)
    paid = new & (it > SLOW_FACTOR * base)
    return {"warmup_ns": float(it.sum()), "warmup_new_shape_steps": int(paid.sum()), "warmup_later_steps": int(len(it)),
            "warmup_new_shape_excess_each_ns": _each((it - base)[paid]),
            "warmup_new_shape_excess_ns": float((it - base)[paid].sum())}


KNOWN_RATIO = 3.0  # a step at a new shape costs on average this many times a step at a known shape beyond the base


def new_shapes(acc: dict | None, others_ns: float = 0.0) -> bool:
    """Whether a family's slow steps are its new input shapes, and hold enough of its time to be its first cause:
    most of the slow steps' excess is at new shapes, a step at a new shape costs far more beyond the base on average
    than a step at a known shape (``KNOWN_RATIO``), and their excess is at least
    ``NEW_SHAPE_SHARE`` of the steady time, the other families' steady time (``others_ns``) counted too: a
    graph-replaying loop's eager warm-up steps, 5% of the steps' time, whose capture step was slow and launched what
    was new, are no finding of the program's (H200, nsys's graph-level trace: "New input shapes hold 78% of `kernel
    period (11 kernels)`'s time" led the findings).

    Time, not counts: a first run's image loop under cudnn.benchmark had 21 slow steps at new sizes (3.03 s beyond
    the 2.8 ms known-size step) and 18 at known sizes 1.5-2x the base (38 ms in all: the recording's own jitter), so
    "most slow steps are new shapes" failed on counts and the verdict was "launch-bound, up to 22x" (H200,
    wrappers/varlen_conv.py, reports/steps_time/final). Nor how often a new shape is slow: a window that starts once
    the program's steps at known shapes agree holds steps at shapes the program met before it and the recording did
    not, cheap and "new" to it; 13 of 34 such steps were slow, the other 21 cost nothing, and the run said
    "launch-bound" again (reports/steps_time/final2)."""
    if not acc or not acc["slow_steps"] or not acc["loop_ns"]:
        return False
    if acc["new_shape_steps"] + int(acc.get("warmup_new_shape_steps") or 0) < MIN_NEW_SHAPES or not acc["base_ns"]:
        return False  # (a handful of new shapes is a warm-up; a step of no time is no baseline)
    new_cost = acc["new_shape_excess_ns"]
    known_cost = max(acc["slow_excess_ns"] - new_cost, 0.0)
    most = new_cost >= 0.6 * acc["slow_excess_ns"]
    new_mean = new_cost / max(acc["new_steps"], 1)
    known_mean = known_cost / max(acc["steps"] - acc["new_steps"], 1)
    costly = new_cost / (acc["loop_ns"] + others_ns) >= NEW_SHAPE_SHARE
    return most and new_mean >= KNOWN_RATIO * known_mean and costly


QUEUED_SHARE = 0.5  # the host's slow steps whose excess mostly vanishes on the GPU's clock waited for queued work


def _waits_for_queued_work(host_it: np.ndarray, gpu_it: np.ndarray, base: float | None) -> bool:
    """Whether the host's slow steps were its waits for work earlier steps had queued: on the GPU's clock (a step
    ends when its work is done there too) their excess beyond the typical step falls under ``QUEUED_SHARE`` of what it
    was on the host's. A loop that replays a captured step and reads its loss every 50 replays, under a plain nsys
    run (an H200, benchmarks/gpu/user_programs/graph_adamw.py): the host queued ~21 replays at 0.1 ms, then launched
    at the GPU's 1.42 ms, then waited 29.5 ms at the read; its median step was the GPU's, so the host's clock was
    kept, and the loop read "29 slow steps ... 0.82 s beyond it: more GPU work 0.81 s" where the GPU ran a replay
    every 1.43 ms throughout."""
    if not len(host_it):
        return False
    med = float(base) if base else float(np.median(host_it))

    def excess(it: np.ndarray) -> float:
        return float(np.where(it > SLOW_FACTOR * med, it - med, 0.0).sum())
    host = excess(host_it)
    return host > 0 and excess(gpu_it) < QUEUED_SHARE * host


def split(fam: dict, trace_start: float, trace_end: float) -> dict:
    """The recording's wall time, every second of it, by where it went: start-up before the first step, the warm-up
    steps, the typical steady steps, the slow steps (over ``SLOW_FACTOR`` x the typical step: ``account``'s step at a
    known shape, else the median; how much of them is beyond it, and how many ran at new input shapes), the GPU still
    running the last step's work after the host's last step, and what follows the steps. The parts add up to the
    recording's span by construction: a reader checks them against the loop's wall time of a plain run."""
    starts, ends = fam["_iterations"]
    warm_from, steady_from = float(fam["first_step_start_ns"]), float(fam["steady_window_ns"][0])
    span_end = float(fam["steady_window_ns"][1])
    acc = fam.get("time_accounting") or {}
    done = fam.get("_gpu_done")
    has_done = done is not None and len(done) == len(starts) and len(done) > 0
    gpu_clock = typical_step(fam)[1] and has_done
    queued = False  # (the host's slow steps were waits for queued work: their causes, read on its clock, do not apply)
    if has_done:
        # the host ran ahead of the GPU (``step_time``): each step ends when its work is done on the GPU, the next
        # starts there, so the steps' time is the GPU's and no "GPU after the host's last step" is left over
        gpu_ends = np.maximum.accumulate(np.fmax(np.asarray(done, dtype="float64"), ends))
        gpu_starts = np.concatenate([[steady_from], gpu_ends[:-1]])
        queued = not gpu_clock and _waits_for_queued_work(ends - starts, gpu_ends - gpu_starts, acc.get("base_ns"))
        gpu_clock = gpu_clock or queued
        if gpu_clock:
            starts, ends = gpu_starts, gpu_ends
    it = ends - starts
    last_host = float(ends[-1]) if len(ends) else steady_from
    # the typical step: the known-shape step (``account``), else the median; the GPU's median where it is the clock
    k = step_cycle.cycle(it)
    if acc.get("base_ns") and not gpu_clock:
        med = float(acc["base_ns"])
    else:
        med = step_cycle.typical(it, k) if len(it) else 0.0
    slow = it > SLOW_FACTOR * step_cycle.slow_against(it, med, k)
    end = max(trace_end, span_end)
    parts = [("before the first step", max(warm_from - trace_start, 0.0)),
             ("warm-up steps", max(steady_from - warm_from, 0.0)),
             ("steady steps", float(it[~slow].sum())), ("slow steps", float(it[slow].sum())),
             ("between steps", max(last_host - steady_from - float(it.sum()), 0.0)),
             ("GPU after the host's last step", max(span_end - last_host, 0.0)),
             ("after the steps", max(end - span_end, 0.0))]
    total = max(end - min(trace_start, warm_from), 0.0)
    out = {"total_ns": total, "parts": [{"part": p, "ns": v, "share": v / total if total else 0.0} for p, v in parts],
           "steady_steps": int((~slow).sum()), "slow_steps": int(slow.sum()),
           "slow_beyond_median_ns": float(np.where(slow, it - med, 0.0).sum()), "slow_factor": SLOW_FACTOR,
           "typical_step_ns": med}
    if gpu_clock:
        out["clock"] = "gpu"
    if acc.get("new_shape_steps") and acc.get("slow_steps"):
        out["new_shape_steps"] = int(acc["new_shape_steps"])
        out["new_shape_beyond_median_ns"] = float(acc["new_shape_excess_ns"])
    if fam.get("_slow_causes") and out["slow_steps"] and not queued:  # (why the slow steps at known shapes were
        # slow: ``slow_causes``; none where the steps on the GPU's clock held none, or where the host's slow steps
        # were its waits for a queue)
        out["slow_causes"] = fam["_slow_causes"]
    if acc.get("warmup_new_shape_steps"):  # (the warm-up steps after the first at new shapes: ``_warm_new_shapes``)
        out["warmup_new_shape_steps"] = int(acc["warmup_new_shape_steps"])
        out["warmup_new_shape_beyond_ns"] = float(acc["warmup_new_shape_excess_ns"])
    return out
