"""What each fix would buy: ``findings[].gain`` = ``{low, high, basis}``, the speed-up of the steady step if the
finding's cause were removed, so the report can say which fix comes first.

A report that led with "CPU-bound: host busy" and put "fp32 matrix work on CUDA cores (79% of kernel time)" third
sent a Trainer fine-tune's user to the smaller fix (H100, plain runs: TF32 1.63x, DataLoader workers 1.22x). The
estimate is Amdahl's law on the step, not on GPU time alone. Per phase (step family), from its steady steps:

- ``T``: the step as the GPU finished it (``median_effective_ns``); ``B``: the GPU's busy time in it; the host's
  floor ``H = T - (time the host spent blocked in synchronising calls)``: the host's own work, which no GPU-side
  fix shortens (where the host ran ahead of the GPU, at most the step less the GPU's time beyond the host's own
  iteration, ``median_effective_ns - median_iteration_ns``).
- **GPU work made faster** (matrix work off the Tensor Cores, layout transposes): the finding's kernel time per
  steady step ``M`` shrinks to ``M / r``, ``S = M (1 - 1/r)``. ``r`` runs from ``MATRIX_SPEEDUP_LOW`` (what a
  small or memory-bound GEMM gains) to the ratio of the GPU's Tensor Core peak for the fix's dtype to its CUDA-core
  FP32 peak (``analysis.peak``). Two ends for the host: it waits for the GPU each step (the saving is all the
  step's: ``T - S``) or it overlaps the GPU fully (``max(H, B - S)``); ``low`` is the lesser of the two at the low
  ``r``, ``high`` the greater at the peak ratio. A fix to bf16/fp16 (autocast) may also halve the rest of the GPU
  work at the high end (half the bytes); work already on the Tensor Cores in TF32 gains 1x to the bf16/TF32 peak ratio.
- **Host causes** (a DataLoader fetch, host work in a range, launch overhead, synchronising calls, pageable copies):
  the GPU idle time they make per step, ``I``, and no step gets shorter than its GPU work: ``high`` removes all of
  ``I`` (``max(T - I, B)``), ``low`` half of it (a fix that overlaps part of the work); a DataLoader fetch shared by
  N workers (8, the advice's, or the variant's N) loses all but ``1/N`` of it at the low end; a loader that has
  workers, half (``host_gain.data_fraction``); a library's one-input call (``timeline.per_item``) keeps at the high end
  the parts its batched form still runs per input (``host_gain.host_fix``'s ``idle_high``).
- **Distributed**: a straggler's excess step time, or the communication no compute overlaps, removed (all, or half).

Several phases: the program's steady time is the phases' weighted by their share of the steps' wall time
(``wall_share_of_steps``; with a plain run, its steps x step time); a fix in one phase speeds up the program by its share. Without a timeline (Nsight
Compute alone) the step is taken as the kernels' time (GPU-bound), which the basis says.

``try`` recomputes the predictions from the same verdict with each phase's step time from a plain run
(``plain``): the profiler's own host time (torch.profiler adds microseconds to every operator) is taken out of the
host causes and the host floor, so a host-bound-looking profile does not overrate host fixes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..durations import duration
from . import intervals, kernel_arch, peak as peak_mod, wide_gain
from .host_gain import HOST_LOW_FRACTION, data_fraction, host_fix, idle_width
from .timeline import per_item

# What a matrix kernel moved from the CUDA cores to the Tensor Cores gains at least: a small or memory-bound GEMM
# reads as much as it computes. Seen on the H100 (reports/try): BERT-base's GEMMs (4096 x 768 x 768, Trainer fp32
# -> TF32) about 2.4x per kernel; the large MNIST MLP's (8192-wide) 5.1x per step.
MATRIX_SPEEDUP_LOW = 2.0
# A GPU not in the peak table: the ratio of H100 SXM's dense Tensor Core peak to its CUDA-core FP32 peak
# (tf32 494.7 / 67, bf16 989.5 / 67), and the basis says it was assumed.
ASSUMED_RATIO = {"tf32": 7.4, "bf16": 14.8, "fp16": 14.8}


# finding id -> how its cost is removed: "gpu" (kernel time made faster by r), "gpu-all" (kernel time removed),
# "host" (GPU idle time removed), "job" (a distributed wait removed)
KIND = {"fp32-matmul-on-cuda-cores": "gpu", "fp16-conv-on-cuda-cores": "gpu", "nchw-layout-transposes": "gpu-all",
        "tf32-tensor-core-work": "gpu",
        "gpu-starved-by-data-loading": "host", "gpu-idle-during-host-range": "host", "launch-bound": "host",
        "synchronising-calls": "host", "pageable-host-copies": "host", "host-bound-optimizer-step": "host",
        "per-step-logging": "host", "host-bound-model-code": "host", "synchronising-line": "host",
        "host-bound-checkpoint": "host", "host-copies-every-step": "host",
        "straggler-rank": "job", "exposed-communication": "job", "exposed-sharded-communication": "job",
        "per-input-calls": "host", "shape-churn": "loop", "checkpoint-in-loop": "loop", "host-copies-in-loop": "loop"}
# The findings on the host's launching, whose gain a recording of a CUDA graph's capture does not give: it holds each
# kernel launched once on its own while being captured, and none of the replays the loop runs (vLLM capturing its
# piecewise graphs on an MI300, TraceLens' traces: "up to 4.2x" from launch gaps of a phase that never recurs)
LAUNCH_FINDINGS = ("launch-bound", "host-bound-model-code")
CAPTURE_ONLY = ("the recording holds CUDA graph captures and none of their replays: the loop that replays them, whose "
                "host time a fix would cut, is not in it")


def _captures_only(doc: dict) -> bool:
    g = ((doc.get("timeline") or {}).get("in_use") or {}).get("cuda_graphs") or {}
    return bool(g.get("captures"))  # (``in_use``: set where the graphs were replayed once each at most)


# the loop findings whose gain is their steps' cost removed half to all (``wide_gain.checkpoint``)
CHECKPOINTS = ("checkpoint-in-loop", "host-copies-in-loop")
# the dtype a GPU-side fix moves matrix work to, per finding (the best one the finding's advice names)
FIX_DTYPE = {"fp32-matmul-on-cuda-cores": "bf16", "fp16-conv-on-cuda-cores": "fp16", "tf32-tensor-core-work": "bf16"}
# the dtype the finding's work runs in now, when it runs on the Tensor Cores already (else: FP32 on CUDA cores)
FROM_DTYPE = {"tf32-tensor-core-work": "tf32"}
# findings whose fix to bf16/fp16 is autocast over fp32 data: the rest of the step's GPU work then moves half the
# bytes too (not fp16-conv-on-cuda-cores: its data is half already, its fix is padding the channels)
AUTOCAST_FIXES = {"fp32-matmul-on-cuda-cores", "tf32-tensor-core-work"}
DATA_LOADING = "gpu-starved-by-data-loading"

WHY_NONE = {"matrix-work-unknown": "whether this work reached the Tensor Cores is unknown: nothing to estimate",
            "low-tensor-pipe-utilisation": "the fix (larger or fused GEMMs) changes the work itself: not estimated",
            "misaligned-tensor-core-path": "how much faster an aligned kernel runs depends on the shapes: not estimated",
            "same-name-different-verdicts": "not a cost", "warm-up-excluded": "not a cost",
            "cuda-graphs-traced-whole": "not a cost", "ranks-differ-in-tensor-cores": "not estimated",
            "rank-without-gpu-work": "not a cost: a recording to make again"}


def fix_dtype(f_id: str, doc: dict) -> str:
    """``FIX_DTYPE`` on this verdict's GPU: fp16 where its Tensor Cores have no bf16 (``peak.fp16_only``: a V100)."""
    d = FIX_DTYPE.get(f_id, "bf16")
    return "fp16" if d == "bf16" and peak_mod.fp16_only(kernel_arch.device_cc(doc.get("device"))) else d


@dataclass
class Scope:
    """One phase's steady step: ``T`` (ns), GPU busy ``B``, host floor ``H``, its weight in the program."""
    name: str
    T: float
    B: float
    H: float
    weight: float
    calibrated: bool = False
    scale: float = 1.0          # host idle times are multiplied by this (a plain run's step against the profile's)
    notes: list[str] = field(default_factory=list)


def kernel_costs(found: list, launches, families: list[dict]) -> None:
    """Each kernel finding's GPU time per steady step of every phase (``Finding.per_step_ns``), from the launches it
    is about (``Finding.rows``) that started inside the phase's steady iterations."""
    if not families or launches is None or launches.empty:
        return
    start = launches["start_ns"].to_numpy(dtype="float64")
    dur = launches["duration_ns"].to_numpy(dtype="float64")
    for f in found:
        if f.rows is None or len(f.rows) != len(start):
            continue
        s, d = start[f.rows], dur[f.rows]
        cost = {}
        for fam in families:
            n = max(fam["count"] - fam["warmup_steps"], 1)
            t = float(np.nansum(d[intervals.inside(s, *fam["_steady"])]))
            if t > 0:
                cost[fam["name"]] = t / n
        f.per_step_ns = cost


def scopes(doc: dict, plain: dict[str, dict] | None = None) -> list[Scope]:
    """The phases the estimate works on (see the module docstring); ``plain``: a plain run's phases
    (``{phase: {step_ns, steps}}``, ``experiment.measure.read``)."""
    tl = doc.get("timeline")
    if not tl:
        total = sum(k.get("total_time_ns") or 0.0 for k in doc.get("kernels") or [])
        return [Scope("(kernels)", total, total, 0.0, 1.0,
                      notes=["no timeline: the step is taken as the kernels' time (GPU-bound)"])] if total else []
    fams = tl.get("step_families") or []
    if not fams:
        from .timeline.findings import WINDOW_SCOPE
        wall = tl.get("wall_ns") or 0.0
        busy = wall * (tl.get("gpu_busy_share") or 0.0)
        blocked = (tl.get("sync") or {}).get("host_blocked_ns") or 0.0
        out = [Scope(WINDOW_SCOPE, wall, busy, max(wall - blocked, wall - busy), 1.0,
                     notes=["no steps: the whole profiled window is taken as one step"])] if wall else []
    else:
        out = []
        for f in fams:
            n = max(f["count"] - f["warmup_steps"], 1)
            T = f.get("median_effective_ns") or f["median_iteration_ns"]
            acc = f.get("time_accounting") or {}
            if (f.get("shape_churn") or f.get("checkpoint_steps")) and acc.get("mean_ns"):
                # its median leaves out what the new shapes (or the checkpoints) cost, and its per-step costs are
                # the other steps' over all of them: the loop's mean step holds both (a checkpointing loop's two slow
                # reads, 0.30 s of its 2.12 s, read "data loading up to 2.49x" on its 19.2 ms median step)
                T = max(T, acc["mean_ns"])
            share = f.get("steady_gpu_busy_share", f.get("median_gpu_busy_share", 0.0))
            B = min(T * share, T)
            blocked = min((f.get("steady_sync_blocked_ns") or 0.0) / n, B)
            # a host that ran ahead of the GPU launched a step in its own iteration: the GPU's step beyond it
            # (``median_effective_ns`` over ``median_iteration_ns``) is no host work either
            ahead = (f.get("median_effective_ns") or f["median_iteration_ns"]) - f["median_iteration_ns"]
            out.append(Scope(f["name"], T, B, T - max(blocked, ahead), f.get("wall_share_of_steps", 1.0)))
    if plain:
        _calibrate(out, plain)
    return out


def _calibrate(out: list[Scope], plain: dict[str, dict]) -> None:
    """Take each phase's step from a plain run (``{phase: {step_ns, steps}}``): what the profile added beyond it was
    the profiler's host time; and weigh the phases by their time in that run (steps x median), as ``try`` does."""
    match = match_phases([s.name for s in out], list(plain))
    if match:
        for s in out:
            p = plain.get(match.get(s.name, ""))
            # (a phase whose steps never settled has no step: ``experiment.measure.read``)
            s.weight = p["step_ns"] * p.get("steps", 1) if p and p.get("step_ns") else 0.0
    for s in out:
        t0 = (plain.get(match.get(s.name, "")) or {}).get("step_ns")
        if not t0 or t0 <= 0 or s.T <= 0:
            continue
        idle = s.T - s.B
        if t0 >= s.T:             # the plain step is no shorter: nothing to take out; scale to its length
            k = t0 / s.T
            s.T, s.B, s.H = t0, s.B * k, s.H * k
        elif t0 >= s.B:           # the profiler's time was host time: the idle shrinks, the GPU work stays
            s.scale = (t0 - s.B) / idle if idle > 0 else 1.0
            s.H = max(s.H - (s.T - t0), t0 - s.B)
            s.T = t0
        else:                     # even the GPU work was longer under the profiler: scale everything
            k = t0 / s.T
            s.T, s.B, s.H, s.scale = t0, s.B * k, s.H * k, k
        s.calibrated = True


def match_phases(names: list[str], timed: list[str]) -> dict[str, str]:
    """Step families of a verdict -> the phases of a plain run's step times (``runtime.step_timer``): a family named
    after the ranges its steps sit in (``prog.py/train/step`` <- ``prog.py/train``); with none matched, the dominant
    family (the first) <- the hooks' phase, else the first timed one."""
    out = {}
    for n in names:
        hit = [t for t in timed if t and (n == t or n.startswith(t + "/"))]
        if hit:
            out[n] = max(hit, key=len)
    if not out and names and timed:
        out[names[0]] = "nsighttc.step" if "nsighttc.step" in timed else timed[0]
    return out


def _ratio(doc: dict, dtype: str, src: str | None = None) -> tuple[float, float, str]:
    """(low, high) speed-up of matrix work moved to ``dtype`` from ``src`` (None: FP32 on the CUDA cores; else a
    Tensor Core dtype), and where the numbers came from: high is the ratio of the two peaks, low
    ``MATRIX_SPEEDUP_LOW`` from the CUDA cores (1 between two Tensor Core dtypes: a GEMM held back by something else)."""
    name = (doc.get("device") or {}).get("name")
    p = peak_mod.match(name)
    arch = (doc.get("device") or {}).get("from_kernel_names") or {}
    if name is None and arch.get("stands_in"):  # the GPU unnamed: its kernels' architecture's figures, as assumed
        low, high, basis = _ratio({"device": {"name": arch["stands_in"]}}, dtype, src)
        return low, high, f"the recording names no GPU, its kernels are {arch['architecture']}'s: {basis} assumed"
    if src is not None:
        if p and p.tflops.get(dtype) and p.tflops.get(src):
            r = p.tflops[dtype] / p.tflops[src]
            return 1.0, r, f"{p.gpu}: {dtype} / {src} Tensor Core peaks {p.tflops[dtype]:g} / {p.tflops[src]:g} TFLOP/s"
        return 1.0, 2.0, f"{name or 'this GPU'} not in the peak table: {dtype} assumed 2x {src}"
    fp32 = peak_mod.CUDA_CORE_FP32.get(p.gpu) if p else None
    if p and fp32 and p.tflops.get(dtype):
        r = p.tflops[dtype] / fp32
        return min(MATRIX_SPEEDUP_LOW, r), r, (f"{p.gpu}: {dtype} Tensor Core peak {p.tflops[dtype]:g} / FP32 CUDA-core "
                                               f"peak {fp32:g} TFLOP/s")
    r = ASSUMED_RATIO.get(dtype, 8.0)
    return MATRIX_SPEEDUP_LOW, r, f"{name or 'this GPU'} not in the peak table: a ratio of {r:g} assumed (H100's)"


def _gpu_fix(s: Scope, save_low: float, save_high: float) -> tuple[float, float]:
    """Speed-up of a phase whose GPU work shrinks by ``save_low`` .. ``save_high`` per step: between a host that waits
    for the GPU each step (the whole saving is the step's) and one that overlaps it (the host's floor stays)."""
    def serial(save):
        return max(s.T - save, 1.0)

    def overlap(save):
        return max(s.H, s.B - save, 1.0)
    low = min(s.T / serial(save_low), s.T / overlap(save_low))
    high = max(s.T / serial(save_high), s.T / overlap(save_high))
    return max(low, 1.0), max(high, 1.0)


def _combine(per_phase: dict[str, tuple[float, float]], ss: dict[str, Scope]) -> tuple[float, float]:
    """Program speed-up from per-phase speed-ups: each phase's share of the steps' time shrinks by its own."""
    if not sum(s.weight for s in ss.values()):
        ss = {n: Scope(s.name, s.T, s.B, s.H, 1.0) for n, s in ss.items()}
    total = sum(s.weight for s in ss.values())
    lo = hi = 0.0
    for name, s in ss.items():
        g = per_phase.get(name, (1.0, 1.0))
        lo += s.weight / total / g[0]
        hi += s.weight / total / g[1]
    return 1 / lo, 1 / hi


def _costs(f: dict, ss: list[Scope]) -> dict[str, float]:
    """The finding's cost per step in each phase the estimate knows."""
    by = {s.name: s for s in ss}
    cost = dict(f.get("per_step_ns") or {})
    if len(ss) == 1 and ss[0].name == "(kernels)" and not cost:
        cost = {ss[0].name: f.get("time_ns") or 0.0}
    if len(ss) == 1 and cost and ss[0].name not in cost and not set(cost) & set(by):
        cost = {ss[0].name: sum(cost.values())}
    return {k: v for k, v in cost.items() if k in by and v > 0}


def _estimate(items: list[tuple[dict, str | None]], doc: dict, ss: list[Scope], workers: int | None = None,
              fused: float | None = None) -> dict:
    """The gain of removing the causes of ``items`` ([(finding, dtype of the fix)]) together: GPU-side savings are
    added per phase (with autocast, the other GPU work may shrink to half: half the bytes), host-side idle times too.
    ``fused``: a compiling fix (torch.compile, and transformers' compiled static cache): at the high end its fusion
    may also remove the GPU work that is not matrix work, ``fused`` being the matrix work's share of kernel time, so
    the step is no shorter than its matrix work instead of its whole GPU work."""
    by = {s.name: s for s in ss}
    if not ss:
        return {"low": None, "high": None, "basis": "no step and no kernel time to weigh it against"}
    save: dict[str, list[float]] = {}     # phase -> [low, high] GPU time saved per step
    matrix: dict[str, float] = {}         # phase -> GPU time of the findings' kernels per step
    idle: dict[str, list[float]] = {}     # phase -> [idle removed at the low end (as profiled), idle at the high end]
    basis, half_precision = [], False
    for f, dtype in items:
        kind = KIND.get(f["id"])
        cost = _costs(f, ss)
        if kind in ("gpu", "gpu-all"):
            if kind == "gpu":
                dtype = dtype or fix_dtype(f["id"], doc)
                r_low, r_high, src = _ratio(doc, dtype, FROM_DTYPE.get(f["id"]))
                half_precision |= dtype in ("bf16", "fp16") and f["id"] in AUTOCAST_FIXES
                basis.append(f"`{f['id']}`: its kernels {r_low:g}x to {r_high:.3g}x faster in {dtype} ({src})")
            else:
                r_low, r_high = 2.0, 1e9
                basis.append(f"`{f['id']}`: its kernels halved to removed")
            for name, M in cost.items():
                M = min(M, by[name].B or M)
                sv = save.setdefault(name, [0.0, 0.0])
                sv[0] += M * (1 - 1 / r_low)
                sv[1] += M * (1 - 1 / r_high)
                matrix[name] = matrix.get(name, 0.0) + M
        else:
            frac, kept = HOST_LOW_FRACTION, 0.0
            if f["id"] == per_item.PER_ITEM_ID:
                kept, parts = per_item.kept_share(doc)
                basis.append(f"`{f['id']}`: {100 * frac:.0f}% to all of the GPU idle time under the per-input call "
                             "removed" + (f", but its {parts} ({100 * kept:.0f}% of it), which the batched call still "
                                          "runs one input at a time" if kept >= 0.005 else ""))
            elif f["id"] == DATA_LOADING:
                frac, why = data_fraction(f, doc, workers)
                basis.append(f"`{f['id']}`: {100 * frac:.0f}% ({why}) to all of the GPU idle time it causes removed")
            else:
                basis.append(f"`{f['id']}`: {100 * frac:.0f}% to all of the GPU idle time it causes removed")
            for name, t in cost.items():
                cur = idle.setdefault(name, [0.0, 0.0, frac])
                cur[0] += t
                cur[1] += t * kept  # what the fix leaves (the idle time, as profiled, may pass the step's gap)
                cur[2] = min(cur[2], frac)
    if not save and not idle:
        kinds = {KIND.get(f["id"]) for f, _ in items}
        return {"low": None, "high": None, "basis": "none of its kernels ran in the steady steps" if "host" not in kinds
                else "no GPU idle time of the steady steps is attributed to it"}
    if half_precision:
        for name, sv in save.items():
            sv[1] += 0.5 * max(by[name].B - matrix.get(name, 0.0), 0.0)
        basis.append("under autocast the other GPU work may halve too (half the bytes)")
    per: dict[str, tuple[float, float]] = {}
    for name in set(save) | set(idle):
        s = by[name]
        g_lo, g_hi = _gpu_fix(s, *save[name]) if name in save else (1.0, 1.0)
        if name in idle:
            kept = idle[name][1] / idle[name][0] if idle[name][0] > 0 else 0.0
            h_lo, h_hi = host_fix(s, idle[name][0], idle[name][2], min(idle[name][0], s.T - s.B) * (1 - kept))
            g_lo, g_hi = g_lo * h_lo, g_hi * h_hi
            floor = s.B - save.get(name, [0, 0])[1]
            if fused is not None:  # compiled: the non-matrix kernels may be fused away at the high end
                floor = min(floor, s.B * fused)
                left = s.T - min(idle[name][0], s.T - s.B) - (s.B - floor)  # all its idle and the fused work gone
                g_hi = max(g_hi, s.T / max(left, floor, 1.0))
            g_hi = min(g_hi, s.T / max(floor, 1.0))  # never past the GPU work left
        per[name] = (g_lo, g_hi)
    low, high = _combine(per, by)
    total = sum(x.weight for x in ss) or 1.0
    phases = []
    for n in sorted(per, key=lambda n: -by[n].weight):
        cost = (f"up to {duration(save[n][1])} of GPU work saved" if n in save else "") + \
               (" and " if n in save and n in idle else "") + (f"{duration(idle[n][0])} idle" if n in idle else "")
        share = f", {100 * by[n].weight / total:.0f}% of the steps' time" if len(by) > 1 else ""
        phases.append(f"`{n}` {duration(by[n].T)}/step ({duration(by[n].B)} GPU{share}): {cost}")
    basis.append("; ".join(phases))
    if fused is not None:
        basis.append(f"compiled: at the high end its fusion also removes the GPU work that is not matrix work (the "
                     f"step no shorter than its matrix work, {100 * fused:.0f}% of kernel time)")
    if any(by[n].calibrated for n in per):
        basis.append("step times from a plain run")
    basis += list(dict.fromkeys(n for s in ss for n in s.notes))
    low, high = round(max(low, 1.0), 3), round(max(high, low, 1.0), 3)
    if idle and high > wide_gain.WIDTH * low:
        basis.append(idle_width(idle, by, low, high))
    return {"low": low, "high": high, "basis": "; ".join(basis)}


def estimate(f: dict, doc: dict, ss: list[Scope], dtype: str | None = None) -> dict | None:
    """``gain`` of one finding (a ``findings[]`` dict); ``dtype``: the dtype of the fix (default: ``FIX_DTYPE``)."""
    kind = KIND.get(f["id"])
    if kind is None:
        return {"low": None, "high": None, "basis": WHY_NONE.get(f["id"], "not estimated")}
    if kind == "job":  # on the job's slowest step (``wide_gain``)
        return wide_gain.job(f, doc, HOST_LOW_FRACTION)
    if f["id"] in LAUNCH_FINDINGS and _captures_only(doc):
        return {"low": None, "high": None, "basis": CAPTURE_ONLY}
    if kind == "loop":  # on the loop's whole time
        g = wide_gain.checkpoint(f, doc) if f["id"] in CHECKPOINTS else wide_gain.loop(f, doc)
        return {**g, "of": "the loop"} if g.get("high") else g
    g = _estimate([(f, dtype)], doc, ss)
    if kind == "gpu" and g.get("high"):
        g["dtype"] = dtype or fix_dtype(f["id"], doc)
    return g


def attach(doc: dict, plain: dict[str, dict] | None = None) -> dict:
    """Set ``gain`` on every finding of a verdict document and order the findings by what they would buy (``order``;
    findings without an estimate after, by the time they concern). Returns the document."""
    ss = scopes(doc, plain)
    for f in doc.get("findings") or []:
        f["gain"] = estimate(f, doc, ss)
    doc["findings"] = order(doc.get("findings") or [])
    return doc


def _worth(g: dict | None) -> float:
    """What a fix buys, for ordering: the middle of its range on a log scale (the geometric mean of its ends), its
    high end where it has no low one. The high end alone let a range that may buy nothing lead one that surely buys
    something: Lightning's ResNet-18 (`../shared/programs/lit_cifar.py`, H200, a cached run) led with "fp32 matrix
    work ran on CUDA cores" 1.00-1.33x over launch-bound 1.12-1.26x, which its first run put first; TensorBoard's
    ResNet-50 sample recorded with `num_workers=0` (HTA's test traces) with fp32 1.02-1.76x over its data loading
    1.40-1.48x."""
    g = g or {}
    high, low = g.get("high") or 0.0, g.get("low")
    return (low * high) ** 0.5 if low and high else high


def order(found: list[dict]) -> list[dict]:
    sev = {"high": 0, "medium": 1, "low": 2, "info": 3}
    return sorted(found, key=lambda f: (-_worth(f.get("gain")), f["severity"] == "info",
                                        -(f.get("time_ns") or 0.0), sev.get(f["severity"], 4)))
