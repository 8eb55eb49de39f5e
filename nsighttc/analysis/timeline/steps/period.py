"""Steps from the GPU alone: the period of the kernel-name sequence, for recordings with no marks at all (an nsys
run of a program that annotates nothing, a trace whose host side was not recorded).

A training or inference loop launches the same kernels in the same order every iteration. So, with the kernels in
launch order as name codes ``s``:

1. *candidate periods*: for every kernel name seen four times or more, the most common distance (in kernels)
   between its launches, when at least half of its distances are that one (a kernel launched once per iteration
   repeats at exactly the period);
2. *the period* ``P``: the smallest candidate for which ``s[i] == s[i + P]`` holds, over a stretch of at least
   three periods, for at least ``MATCH`` of the kernels (tolerates a few kernels that change between iterations,
   such as a cuBLAS choice that depends on the data);
   When several loops repeat (a program of several phases), the one that holds the most time wins (its median
   period times its number of periods); among loops that hold about as much, an inner loop (a model's layers)
   is told from the iteration by how much of its stretch matches (``MATCH_SLACK``);
3. *the anchor*: the name launched once per period that starts an iteration (where the loop has optimizer
   kernels, an iteration ends with them: the anchor is the first once-per-period name after them), whose
   launches in and before the periodic stretch start the steps. Iterations just before the stretch that launch the loop's kernels plus
   others (warm-up: autotuning, compilation) become the family's leading steps.
4. *the optimizer's step*: a period whose iterations hold an optimizer update less than half the time, where the
   updates recur, is a part of the step (gradient accumulation's micro-batches repeat exactly; the update comes every
   k-th): the approximate loop below, if its iterations hold one each, is the step, cut at each update's end
   (``_part_of_optimizer_step``, ``_after_updates``).

Where the iterations do not launch exactly the same kernels (a DDP step's NCCL launches vary: 798-807 kernels per
step in tests/fixtures/ddp), no period is exact; names launched once per iteration still repeat at *nearly* the
same distance, and those give the loop (``_approximate``), used when the exact period finds none or a far smaller
loop.

Array passes, one sort of the codes for the distances, one comparison per candidate period, one pass per name for
the approximate distances.
"""
from __future__ import annotations

import re

import numpy as np

MATCH = 0.8            # share of kernels equal one period later, over the periodic stretch
MIN_PERIODS = 3        # a stretch shorter than this many periods is no loop
MAX_CANDIDATES = 64    # periods tried, smallest first
# An inner loop (a decoder's layers) repeats through most of each iteration, so its stretch can hold as much time as
# the iteration's own period; its kernels equal one period later far less often over that stretch: a 4-layer
# decoder's layer period (41 kernels) matched 60% of one generate() request's kernels, the model call's period
# (223) 98% (tests/fixtures/inference/llm_generate_user_torch.json.xz cut to one request). A multiple of the true
# period matches as well as the period itself, so the smallest period within this of the best match still wins.
MATCH_SLACK = 0.05
# Kernels of optimizer steps (torch 2.11 foreach AdamW/SGD: multi_tensor_apply_kernel<...Functor...>, seen in
# tests/fixtures/multi_phase_torch.json.xz; fused Adam/AdamW: fused_adam*/FusedAdam*, apex multi_tensor_*): they
# close an iteration, so the one after them starts it. Not "lamb" inside "lambda": nearly every PyTorch elementwise
# kernel's name holds a `{lambda()#1}` (an HF generate() loop's, tests/fixtures/inference/), and "lion" only as a
# word of its own.
OPTIMIZER_KERNEL = re.compile(r"multi_tensor_apply|fused_?adam|adamw?_|_adam|sgd|lamb(?!da)|\blion|_lion|foreach",
                              re.IGNORECASE)
# Kernels only a training step launches: optimizer updates (OPTIMIZER_KERNEL's families) and the backward pass
# (autograd's *Backward* kernels, cuDNN's dgrad/wgrad convolutions): whether a recording is of training
# (analysis.timeline), and a loop no generation split is tried on (steps.generation).
TRAINING_KERNEL = r"multi_tensor_apply|fused_?adam|adamw|_adam|sgd_|[Bb]ackward|dgrad|wgrad"


def _runs(ok: np.ndarray) -> tuple[int, int]:
    """(start, length) of the longest run of True in ``ok`` ((0, 0) when none)."""
    if not ok.any():
        return 0, 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    starts, ends = edges[::2], edges[1::2]
    i = int(np.argmax(ends - starts))
    return int(starts[i]), int(ends[i] - starts[i])


JOIN_PERIODS = 4  # periodic stretches at most this many periods apart are one loop (``_joined_runs``)


def _joined_runs(ok: np.ndarray, gap: int) -> tuple[int, int]:
    """(start, length) of the longest stretch of True in ``ok``, where runs at most ``gap`` apart count as one: a
    generation loop's decode calls repeat exactly, but each request's prefill (other GEMM tiles) breaks the period
    for about a call; its requests are one loop. Without joining, a plain nsys recording of an HF ``generate()`` loop
    on the H100 took its slow first request alone as the loop (every new KV length a new shape there: 85 ms per call
    against 12 ms later)."""
    if not ok.any():
        return 0, 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    starts, ends = edges[::2], edges[1::2]
    first = np.r_[True, starts[1:] - ends[:-1] > gap]  # runs that start a new joined stretch
    at = np.flatnonzero(first)
    g_start, g_end = starts[at], np.maximum.reduceat(ends, at)
    i = int(np.argmax(g_end - g_start))
    return int(g_start[i]), int(g_end[i] - g_start[i])


def find(codes: np.ndarray, names: list[str], times: np.ndarray | None = None) -> dict | None:
    """The loop in a sequence of kernel name codes (launch order; ``names[c]`` is code c's name; ``times``: their
    launch times, to prefer the loop that holds the most time): {"period", "anchor" (a code), "launches" (indices
    of the anchor launches that start the steps, warm-up ones first), "warmup" (how many precede the periodic
    stretch), "end" (index after the stretch)} or None."""
    n = len(codes)
    if n < 2 * MIN_PERIODS:
        return None
    codes = codes.astype(np.int64, copy=False)
    order = np.argsort(codes, kind="stable")  # by name, launch order within a name
    c_sorted = codes[order]
    same = c_sorted[1:] == c_sorted[:-1]
    gaps = np.diff(order)[same]
    gap_code = c_sorted[1:][same]
    if not len(gaps):
        return None
    key = gap_code * (n + 1) + gaps
    uk, cnt = np.unique(key, return_counts=True)
    kc, kg = uk // (n + 1), uk % (n + 1)
    per_code_gaps = np.bincount(gap_code, minlength=int(codes.max()) + 1)
    # the most frequent distance per name
    best = np.lexsort((-cnt, kc))
    first_of_code = np.r_[True, kc[best][1:] != kc[best][:-1]]
    mode_code, mode_gap, mode_cnt = kc[best][first_of_code], kg[best][first_of_code], cnt[best][first_of_code]
    regular = (mode_cnt >= 3) & (mode_cnt >= 0.5 * per_code_gaps[mode_code])
    update = _updates(codes, names)
    candidates = np.unique(mode_gap[regular])[:MAX_CANDIDATES]
    by_updates = _update_period(update)  # (a period no name repeats at: the optimizer's updates only)
    if by_updates is not None and by_updates not in candidates:
        candidates = np.append(candidates, by_updates)
    found = []
    for p in candidates:
        p = int(p)
        if p < 2 or n < MIN_PERIODS * p + p:  # one kernel repeated is no iteration to judge
            continue
        eq = (codes[:-p] == codes[p:]).astype(np.float64)
        # a window of one period around each position: tolerant of a few kernels that change per iteration
        csum = np.concatenate([[0.0], np.cumsum(eq)])
        rolling = (csum[p:] - csum[:-p]) / p
        start, length = _joined_runs(rolling >= MATCH, JOIN_PERIODS * p)
        lo, hi = start, min(start + length + 2 * p, n)  # kernels [lo, hi) repeat with period p
        if not length or hi - lo < MIN_PERIODS * p:
            continue
        found.append((_loop_time(times, lo, hi, p), p, lo, hi, float(eq[lo:max(hi - p, lo + 1)].mean())))
    exact = None
    if found:
        top = max(f[0] for f in found)
        held = [f for f in found if f[0] >= 0.95 * top]  # the loops that hold (nearly) the most time
        best_match = max(f[4] for f in held)
        for cover, p, lo, hi, match in sorted(held, key=lambda f: f[1]):  # the smallest period: no multiple
            if match < best_match - MATCH_SLACK:  # an inner loop (a model's layers) inside the iteration
                continue
            anchors = mode_code[regular & (mode_gap == p)]
            if not len(anchors):  # no name launched once a period: the steps start where each update ends
                held_loop = {"period": p, "anchor": -1, "launches": np.array([lo], dtype=np.int64), "warmup": 0,
                             "end": int(hi), "loop_time": cover}
                by_update = _after_updates(codes, update, held_loop)
                if by_update is held_loop:
                    continue
                exact = by_update
                break
            pick = _anchor(codes, anchors, names, lo, hi, p)
            at = np.flatnonzero(codes == pick)
            inside = _iteration_starts(at[(at >= lo) & (at < hi)], p)
            if len(inside) < MIN_PERIODS:
                continue
            before = _warm_iterations(codes, at[at < lo], int(inside[0]), p)
            exact = {"period": p, "anchor": int(pick), "launches": np.concatenate([before, inside]),
                     "warmup": int(len(before)), "end": int(hi), "loop_time": cover}
            break
    # the exact period is the better answer where it holds the loop; the approximate one only where the exact
    # finds none, or a far smaller loop (a repeated block inside a step whose kernel count varies), or where the
    # exact period is a part of the optimizer's step (``_part_of_optimizer_step``)
    approx = _approximate(codes, names, times, order, c_sorted)
    if approx is not None and (exact is None or approx["loop_time"] > 2 * exact["loop_time"]):
        return _inner(codes, exact, approx) or approx
    if exact is not None and _part_of_optimizer_step(update, exact):
        if approx is not None and not _part_of_optimizer_step(update, approx) and \
                2 * approx["loop_time"] >= exact["loop_time"]:
            return _after_updates(codes, update, approx)
        # no approximate loop holding the steps (Lightning's micro-batches launch 479, 554, 554 and 570 kernels in
        # turn: names once a micro-batch repeat at no single distance, and the approximate loop found was the first
        # four, 65 ms of an 837 ms stretch; lit_accum.py under a plain nsys, an H200): the exact loop's updates cut it
        by_update = _after_updates(codes, update, exact)
        if by_update is not exact:
            return by_update
    return exact


def _updates(codes: np.ndarray, names: list[str]) -> np.ndarray:
    """Whether each launch is an optimizer update's kernel (``OPTIMIZER_KERNEL``); one test per distinct name."""
    by_code = np.array([bool(OPTIMIZER_KERNEL.search(str(n or ""))) for n in names], dtype=bool)
    return by_code[codes]


UPDATE_GAP = 32  # optimizer kernels at most this many kernels apart are one update (clipping's, then AdamW's)


def _update_period(update: np.ndarray) -> int | None:
    """The distance, in kernels, at which the optimizer's updates recur, where most of them recur at exactly one:
    a period no single name may repeat at. Lightning's ``accumulate_grad_batches=4`` under a plain nsys run (an H200,
    benchmarks/gpu/user_programs/lit_accum.py): the micro-batches launched 479, 554, 554 and 570 kernels in turn (the
    first assigns the gradients, the others add to them, the last also updates), no name was launched once a step
    (AdamW's 16 ``multi_tensor_apply`` kernels come together), and no loop was found: "no steps: the whole profiled
    window is taken as one step". Each optimizer step launched 2,157 kernels, the same ones."""
    flagged = np.flatnonzero(update)
    if len(flagged) <= MIN_PERIODS:
        return None
    starts = flagged[np.r_[True, np.diff(flagged) > UPDATE_GAP]]
    d = np.diff(starts)
    if len(d) < MIN_PERIODS:
        return None
    vals, cnt = np.unique(d, return_counts=True)
    i = int(np.argmax(cnt))
    return int(vals[i]) if cnt[i] >= MIN_PERIODS and cnt[i] >= 0.5 * len(d) and vals[i] > 2 * UPDATE_GAP else None


OPTIMIZER_STEP_SHARE = 0.5  # a loop whose iterations hold an optimizer update less often than this is part of a step


def _part_of_optimizer_step(update: np.ndarray, loop: dict) -> bool:
    """Whether a loop's iterations are parts of the optimizer's step: its updates recur in at least ``MIN_PERIODS``
    of the iterations, but in fewer than ``OPTIMIZER_STEP_SHARE`` of them. A training step ends with its update, so
    iterations without one are micro-batches (gradient accumulation) or layers. Why: transformers' Trainer with
    ``gradient_accumulation_steps=4`` under a plain nsys run (H200, BERT-base; each micro-batch 955 kernels that
    repeat exactly, the AdamW update's 25 kernels every fourth) read "48 steps of 63.7 ms" where the program's
    optimizer steps took 254 ms; the approximate loop had the 12 steps of 3,669 kernels
    (tests/fixtures/steps/trainer_accum_nsys.sqlite.xz)."""
    at = np.asarray(loop["launches"][loop["warmup"]:], dtype=np.int64)
    if len(at) < MIN_PERIODS:
        return False
    before = np.concatenate([[0], np.cumsum(update)])
    bounds = np.append(at, min(int(loop["end"]), len(update)))
    held = (before[bounds[1:]] - before[bounds[:-1]]) > 0  # each iteration: does it launch an update?
    return int(held.sum()) >= MIN_PERIODS and held.mean() < OPTIMIZER_STEP_SHARE


def _after_updates(codes: np.ndarray, update: np.ndarray, loop: dict) -> dict:
    """The loop's steps started where each ends: at the kernel after its optimizer update. The approximate loop's
    anchor is a name launched once a step, which in an accumulation loop can be a kernel inside the update (the
    Trainer's gradient clipping, ``lpnorm_cleanup``, between the clipping's and AdamW's ``multi_tensor_apply``
    kernels), so its steps would have run from inside one update into the next. An update is the run of update
    kernels with less than a quarter of the period between them; the anchor named is then the name most of the new
    starts launch."""
    flagged = np.flatnonzero(update)
    at = np.asarray(loop["launches"], dtype=np.int64)
    p = int(loop["period"])
    if not len(flagged) or not len(at):
        return loop
    last_of_block = flagged[np.r_[np.diff(flagged) > p // 4, True]]
    starts = last_of_block + 1
    end = min(int(loop["end"]), len(codes))
    starts = starts[(starts >= at[0]) & (starts < end)]
    if len(starts) and end - starts[-1] < p // 2:  # the last update ends the loop: no step starts after it
        starts, end = starts[:-1], int(starts[-1])
    warm = int((starts < at[loop["warmup"]]).sum()) if loop["warmup"] < len(at) else 0
    if len(starts) - warm < MIN_PERIODS:
        return loop
    return {**loop, "anchor": int(np.bincount(codes[starts]).argmax()), "launches": starts, "warmup": warm,
            "end": end}


def _inner(codes: np.ndarray, exact: dict | None, approx: dict) -> dict | None:
    """The exact loop over the approximate loop's stretch, where the approximate period is a whole number of exact
    ones and the exact anchor starts each of them there. A generation loop's requests break the exact period at
    every prefill, so its exact stretch is one request long, while names launched every other decode call made the
    approximate loop two model calls long (an HF ``generate()`` trace on the H100: 446 kernels for calls of 223)."""
    if exact is None:
        return None
    p, q = exact["period"], approx["period"]
    k = round(q / p)
    if k < 2 or abs(q - k * p) > max(2.0, NEAR * q):
        return None
    lo, hi = int(approx["launches"][approx["warmup"]]) if len(approx["launches"]) > approx["warmup"] else 0, \
        int(approx["end"])
    at = np.flatnonzero(codes == exact["anchor"])
    inside = _spaced(at[(at >= lo - p // 2) & (at < hi)], p)
    if len(inside) < k * (len(approx["launches"]) - approx["warmup"]) * 0.9:
        return None  # the exact anchor does not start (nearly) every inner iteration there
    before = _warm_iterations(codes, at[at < inside[0]], int(inside[0]), p) if len(inside) else np.array([], np.int64)
    return {"period": p, "anchor": exact["anchor"], "launches": np.concatenate([before, inside]),
            "warmup": int(len(before)), "end": hi, "loop_time": approx["loop_time"]}


WARM_COVER = 0.9  # share of one period's kernel names a warm-up iteration of the same loop launches too


FRAGMENT = 0.5  # an anchor launch less than this many periods before the next one starts no iteration


def _iteration_starts(inside: np.ndarray, p: int) -> np.ndarray:
    """The anchor's launches in the periodic stretch that start an iteration: those at least ``FRAGMENT`` of a
    period before the next one. The stretch can begin inside the start-up, where the start-up's last kernels are
    the loop's own (the same halo exchanges and state updates), and the anchor launched there once more: CloverLeaf
    under nsys (pipit's test data, an A100; 10 time steps of 125 kernels) read "11 steady steps", the first of 27
    kernels and 5 ms against 32.5 ms. The earlier launch of a close pair is the one left out, so its kernels join the
    start-up (the stretch's first) or the iteration before."""
    if len(inside) < 2:
        return inside
    return inside[np.r_[np.diff(inside) >= FRAGMENT * p, True]]


def _warm_iterations(codes: np.ndarray, before: np.ndarray, first: int, p: int) -> np.ndarray:
    """The anchor's launches just before the periodic stretch that start iterations of the same loop (warm-up:
    the same kernels plus extra ones, autotuning or compilation), walking back from the stretch: an iteration
    counts while it launches at least ``WARM_COVER`` of the names of one steady period; the first that does
    not (another loop, start-up) ends the walk."""
    body = np.unique(codes[first:first + p])
    keep: list[int] = []
    nxt = first
    for at in before[::-1]:
        seg = np.unique(codes[at:nxt])
        if np.isin(body, seg, assume_unique=True).mean() < WARM_COVER:
            break
        keep.append(int(at))
        nxt = at
    return np.array(keep[::-1], dtype=np.int64)


NEAR = 0.02  # a loop whose iterations launch a few kernels more or fewer: distances within 2% are one period


def _approximate(codes: np.ndarray, names: list[str], times: np.ndarray | None, order: np.ndarray,
                 c_sorted: np.ndarray) -> dict | None:
    """The loop when its iterations do not launch exactly the same kernels (a DDP step's NCCL launches and a
    cuDNN choice vary: 798-807 kernels per step in tests/fixtures/ddp): names launched once per iteration repeat
    at *nearly* the same distance. Names whose distances are within ``NEAR`` of their median for most launches are
    grouped by that median; the group holding the most time is the loop, and its launches where the distances
    hold are the steady steps."""
    bounds = np.flatnonzero(np.r_[True, c_sorted[1:] != c_sorted[:-1], True])
    groups: dict[int, list] = {}
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a < MIN_PERIODS + 1:
            continue
        idx = order[a:b]  # this name's launches, in order
        g = np.diff(idx)
        med = float(np.median(g))
        near = np.abs(g - med) <= max(2.0, NEAR * med)
        if med < 2 or near.mean() < 0.6:
            continue
        groups.setdefault(int(round(np.log(med) / np.log1p(NEAR))), []).append((int(c_sorted[a]), idx, med, near))
    best = None
    for members in groups.values():
        code, idx, med, near = max(members, key=lambda m: len(m[1]))
        start, length = _runs(near)
        if length + 1 < MIN_PERIODS:
            continue
        steady = idx[start:start + length + 1]
        d = np.diff(times[steady]) if times is not None else np.diff(steady).astype(float)
        loop_time = float(np.median(d)) * len(d)
        if best is None or loop_time > 1.05 * best[0] or (loop_time >= 0.95 * best[0] and med < best[2]):
            best = (loop_time, members, med, steady)
    if best is None:
        return None
    loop_time, members, med, steady = best
    p = int(round(med))
    lo, hi = int(steady[0]), int(min(steady[-1] + p, len(codes)))
    pick = _anchor(codes, np.array([m[0] for m in members]), names, lo, hi, p)
    at = np.flatnonzero(codes == pick)
    inside = _spaced(at[(at >= lo - p // 2) & (at < hi)], p)
    if len(inside) < MIN_PERIODS or _runs(np.abs(np.diff(inside) - p) <= max(2.0, NEAR * p))[1] < MIN_PERIODS - 1:
        # the steps the anchor starts must repeat at the period too, not only the name's distances: a name launched
        # three times in each of two AlexNet forwards (7, 16 and 16 kernels apart, the forwards' boundary 16 by
        # chance) made "3 steps" of 23, 16 and 16 kernels cut through both forwards (HolisticTraceAnalysis's
        # critical-path test trace: a benchmark's warm-up and measured forward, no loop to find)
        return None
    before = _warm_iterations(codes, at[at < inside[0]], int(inside[0]), p)
    return {"period": p, "anchor": int(pick), "launches": np.concatenate([before, inside]), "warmup": int(len(before)),
            "end": hi, "loop_time": loop_time, "approximate": True}


def _spaced(at: np.ndarray, p: int) -> np.ndarray:
    """The launches of an anchor that start iterations: each at least 0.9 period after the one kept before it
    (an anchor also launched a few times close together, once per iteration's extra work, counts once)."""
    kept: list[int] = []
    for a in at:
        if not kept or a - kept[-1] >= 0.9 * p:
            kept.append(int(a))
    return np.array(kept, dtype=np.int64)


def _loop_time(times: np.ndarray | None, lo: int, hi: int, p: int) -> float:
    """How much of the run a periodic stretch holds: its typical period times the number of periods (a median,
    so the stretch's slow first iteration does not make a short loop look long); kernels when no times."""
    if times is None:
        return float(hi - lo)
    d = np.diff(times[np.arange(lo, hi - p + 1, p)])
    return float(np.median(d)) * len(d) if len(d) else 0.0


def _anchor(codes: np.ndarray, anchors: np.ndarray, names: list[str], lo: int, hi: int, p: int) -> int:
    """The anchor: the name that starts an iteration. Where the loop has optimizer kernels, an iteration ends
    with them, so it starts with the first name launched once per period after the last of them; otherwise with
    the once-per-period name launched first in the periodic stretch."""
    pool = set(int(a) for a in anchors)
    w0 = min(lo + p, hi - p)  # one steady period, past the stretch's first
    window = codes[w0:w0 + p]
    opt = [i for i, c in enumerate(window) if OPTIMIZER_KERNEL.search(names[int(c)] or "")]
    if opt:
        for k in range(1, p + 1):
            c = int(window[(opt[-1] + k) % p])
            if c in pool:
                return c
    cand = np.array(sorted(pool), dtype=np.int64)
    seen, first_at = np.unique(codes[lo:hi], return_index=True)  # each name's first launch in the stretch
    pos = np.clip(np.searchsorted(seen, cand), 0, len(seen) - 1)
    first = np.where(seen[pos] == cand, first_at[pos], hi)
    return int(cand[int(np.argmin(first))])
