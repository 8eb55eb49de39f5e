"""Where are the steps? Four sources, the first that finds any wins, and the verdict says which
(``timeline.steps.source``):

1. ``explicit``: the program's own step ranges: ``ProfilerStep#N``, ranges named like ``step`` (``annotate.step``),
   or ``--step-range NAME``. Each repeating path is a family (a phase).
2. ``hook``: nsighttc's step hooks inside the program (``runtime.steps``, ``parse.marks``): ``nsighttc.step``
   marks that hold the end of an optimizer step (an open one at the program's end, or one around an evaluation
   with no optimizer step, is no step); a program with no optimizer (inference) falls back to the iterations
   between DataLoader fetches, then to the calls of its main model.
3. ``profiler-op``: what torch.profiler records of any program: ``Optimizer.step#<Class>.step`` and
   ``enumerate(DataLoader)#...`` ranges, read with the hooks' rule (a step ends at the first fetch after an
   optimizer step, else at the optimizer step's end); DataLoader iterations without an optimizer.
4. ``kernel-period``: from the GPU alone (an nsys recording of a program that marks nothing): the repeating
   kernel sequence (``period``); or ``result-copy``: the copies that bring each iteration's result back to the host,
   where the kernel sequence does not repeat through the loop (``result_copies``).

Beside them, ``graph-replay``: a program that replays its own CUDA graph (``cudaGraphLaunch`` again and again) repeats
the replay, whatever else it marks: its eager warm-up steps are a few optimizer steps before the graph was captured,
and the thousands of replays after hold the loop's time. The replays are a family of their own wherever they fall
outside the steps the first source found (``with_graph_replays``), and the family that holds the most steady time
speaks in the headline (``families``). Seen on one H200: a whole training step captured after three eager steps and
replayed 2,000 times (1.1 ms a replay, 3.9 ms eager) was judged on the three eager steps, "GPU busy 4%".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .... import labels
from ....parse.marks import ENGINE_STEP_NAMES
from ....record_format import DATA, FORWARD, OPTIMIZER, STEP
from ..base import is_step_leaf

EXPLICIT, HOOK, PROFILER_OP, KERNEL_PERIOD = "explicit", "hook", "profiler-op", "kernel-period"
RESULT_COPY = "result-copy"
MIN_COPIES = 6        # result copies that make a loop
COPY_MATCH = 0.9      # copies per iteration: the byte counts repeat with this period for this share of the copies
COPIES_SPAN = 2.0     # the copies' steps replace the kernel period's where they span this many times its loop
GRAPH_REPLAY = "graph-replay"
MIN_REPLAYS = 10  # graph launches that make a loop (a model captured once and replayed a handful of times is no loop)
MAX_CYCLE = 64      # graph replays in turn that make one iteration, at most (gradient accumulation: K + 1)
MIN_CYCLES = 4      # ... seen this many times over
CYCLE_MATCH = 0.9   # ... where this share of the replays' graphs equals the one a cycle before
CYCLE_BETTER = 0.5  # ... and this share as many differ as from one replay to the next, at most
WARMUP_OF_REPLAYS = 0.5  # a family wholly before the replays with fewer steps than this share of them: their warm-up
MODEL_CALLS = "model calls"               # the hooks' family of the main model's calls (``hooks``)
PROFILER_STEP = "ProfilerStep"            # torch.profiler's step mark ``ProfilerStep#N`` (profile.step(); a schedule's steps)
OPTIMIZER_OP = "Optimizer.step#"          # torch/optim/optimizer.py profile_hook_step (torch 2.11, 2.13)
DATALOADER_OP = "enumerate(DataLoader)#"  # torch/utils/data/dataloader.py _BaseDataLoaderIter.__next__


@dataclass
class StepSet:
    """One family of steps: step i runs from ``starts[i]``; its iteration ends where the next step starts (the
    last: at ``ends[-1]``)."""
    name: str
    phase: str | None
    starts: np.ndarray
    ends: np.ndarray
    source: str
    detail: str
    calls: object = None  # generation.Calls: a generation loop's prefill/decode calls found from its kernels
    per_step: int = 1     # CUDA graph replays a step holds (graphs replayed in turn: ``replay_cycle``)


def step_paths(ranges: pd.DataFrame, step_range: str | None) -> list[str]:
    """Range paths whose leaf marks a step and which repeat (a family needs two instances or more), and torch's own
    ``ProfilerStep#N`` even once: a recording made elsewhere often holds one step (a single-step inference trace, one
    step per rank of an 8-rank job), and a repeating kernel sequence found inside it instead (an optimizer's 4-kernel
    loop of 73 us) is no step of the program."""
    if ranges.empty:
        return []
    counts = ranges["path"].value_counts()
    leaf = lambda p: str(p).rsplit("/", 1)[-1]  # noqa: E731
    found = sorted(str(p) for p, n in counts.items()
                   if (n >= 2 or _once_a_step(leaf(p))) and is_step_leaf(leaf(p), step_range))
    # a step range inside another family's step (a/step/step, ProfilerStep#/train_step) is part of that iteration
    return [p for p in found if not any(p.startswith(q + "/") for q in found)]


def _once_a_step(leaf: str) -> bool:
    """Marks that are a step even once: torch.profiler's ``ProfilerStep#N`` and a serving engine's iteration
    (``parse.marks.ENGINE_STEPS``): a recording of one iteration has one."""
    return leaf.rstrip("#0123456789") == PROFILER_STEP or leaf in ENGINE_STEP_NAMES


def explicit(ranges: pd.DataFrame, step_range: str | None) -> list[StepSet]:
    paths = step_paths(ranges, step_range)
    if not paths:
        return []
    out = []
    cand = ranges[labels.per_category(ranges["path"], lambda p: p in paths, dtype=bool)]
    for path, grp in cand.groupby(labels.strings(cand["path"])):
        grp = grp.sort_values("start_ns")
        out.append(StepSet(path, path.rsplit("/", 1)[0] if "/" in path else None, grp["start_ns"].to_numpy(dtype="float64"),
                           grp["end_ns"].to_numpy(dtype="float64"), EXPLICIT, f"the program's `{path}` ranges"))
    return out


def graph_replays(api: pd.DataFrame, launch_calls: set[str], ops: pd.DataFrame | None = None) -> list[StepSet]:
    """The program's CUDA graph replays as steps: each from its ``cudaGraphLaunch`` call to the next one's (on the
    thread that launches most of them), when there are ``MIN_REPLAYS`` or more; where the program replays several
    graphs in a fixed order each iteration (``replay_cycle``), one step per cycle of them, from the replay that
    follows the cycle's odd graph out (a partial cycle at either end of the recording is left out)."""
    if api.empty:
        return []
    g = api[api["name"].isin(launch_calls).to_numpy()]
    if len(g) < MIN_REPLAYS:
        return []
    if "tid" in g and g["tid"].nunique() > 1:
        g = g[(g["tid"] == g["tid"].mode().iloc[0]).to_numpy()]
    g = g.sort_values("start_ns", kind="stable")
    if len(g) < MIN_REPLAYS:
        return []
    starts, ends = g["start_ns"].to_numpy(dtype="float64"), g["end_ns"].to_numpy(dtype="float64")
    p, first = replay_cycle(g, ops)
    if p > 1:
        n = (len(starts) - first) // p
        return [StepSet("CUDA graph replays", None, starts[first:first + n * p:p], ends[first + p - 1:first + n * p:p],
                        GRAPH_REPLAY, f"the program's CUDA graph replays (`cudaGraphLaunch`): {p} graphs replayed in "
                        "turn, each cycle of them an iteration", per_step=p)]
    return [StepSet("CUDA graph replays", None, starts, ends, GRAPH_REPLAY,
                    "the program's CUDA graph replays (`cudaGraphLaunch`): each replay is an iteration")]


def replay_cycle(g: pd.DataFrame, ops: pd.DataFrame | None) -> tuple[int, int]:
    """(How many replays make one iteration, the index of the replay the first whole one starts at): the smallest
    ``p`` up to ``MAX_CYCLE`` (and a ``MIN_CYCLES``-th of the replays) with which the replayed graphs repeat, where
    ``CYCLE_MATCH`` of the replays' graphs equal the one ``p`` before and at most ``CYCLE_BETTER`` as many differ as
    from one replay to the next; else (1, 0). A graph is told by the GPU work its launch ran (its kernels' count; a
    graph traced whole, one record a replay, by its time within a factor of two). The mismatch rule, not a share of
    consecutive replays alike, tells a long cycle of one graph repeated from a single graph: gradient accumulation
    replays its micro-batch graph K times, then the optimizer's (``wrappers/graph_replay.py --accum 4``, H200: 5
    replays of 3.92 ms an optimizer step were read as 500 steps of 1 ms while at most 4 graphs made a cycle), and a
    cycle of 33 graphs has 31 of 33 consecutive replays alike; the odd replay of a single graph cut at the recording's
    end differs as often one cycle back as one replay back. A training step captured as two graphs (forward and
    backward, then the optimizer's step: ``--two-graphs``) was read as 600 steps of 550 µs for 300 iterations of
    1.13 ms; a server replaying one of three graphs of one shape a batch (``wrappers/graph_serve.py``) keeps one step
    per replay (its graphs' kernels count the same, and their order follows its requests). The cycle starts after its
    one least-replayed graph (the optimizer's, where the micro-batches' graph runs K times), so a window that opened
    mid-cycle still steps from a micro-batch's first replay; with no single such graph, at the first replay."""
    if ops is None or ops.empty or "correlation" not in ops or len(g) < MIN_CYCLES * 2:
        return 1, 0
    from ....parse.timeline import corr_key

    def keys(df: pd.DataFrame) -> np.ndarray:  # (a recording of one process may carry no pid)
        return corr_key(df["pid"] if "pid" in df else np.zeros(len(df), np.int64), df["correlation"])
    key, okey = keys(g), keys(ops)
    mine = np.isin(okey, key)
    if not mine.any():
        return 1, 0
    per = pd.DataFrame({"k": okey[mine], "d": (ops["end_ns"] - ops["start_ns"]).to_numpy(dtype="float64")[mine]})
    agg = per.groupby("k")["d"].agg(["size", "sum"])
    count = agg["size"].reindex(key).fillna(0).to_numpy(dtype="int64")
    sig = count
    if (count <= 1).all():  # (graphs traced whole: their time, in factors of two)
        sig = np.floor(np.log2(np.maximum(agg["sum"].reindex(key).fillna(0).to_numpy(dtype="float64"), 1.0)))
    differ_next = float(np.mean(sig[1:] != sig[:-1]))
    if differ_next == 0.0:
        return 1, 0  # (one graph, or several that look alike: each replay a step)
    for p in range(2, min(MAX_CYCLE, len(sig) // MIN_CYCLES) + 1):
        differ = float(np.mean(sig[p:] != sig[:-p]))
        if differ <= 1.0 - CYCLE_MATCH and differ <= CYCLE_BETTER * differ_next:
            return p, _cycle_start(sig[:p])
    return 1, 0


def _cycle_start(cycle: np.ndarray) -> int:
    """Where in ``cycle`` (one period of the graphs' signatures, from the first replay) an iteration begins: after
    the one graph replayed fewest times in it, where a single graph is; else at its first replay."""
    values, counts = np.unique(cycle, return_counts=True)
    fewest = counts == counts.min()
    if fewest.sum() != 1 or len(values) < 2:
        return 0
    odd = values[fewest][0]
    return int((np.flatnonzero(cycle == odd)[-1] + 1) % len(cycle))


def with_graph_replays(sets: list[StepSet], replays: list[StepSet]) -> list[StepSet]:
    """``sets`` and the graph-replay family, where most replays fall outside every iteration of ``sets`` (steps the
    program marks around each replay already are its steps), less the families that were its warm-up
    (``before_replays``)."""
    if not replays:
        return sets
    r = replays[0].starts
    inside = np.zeros(len(r), dtype=bool)
    for st in sets:
        inside |= (r >= st.starts[0]) & (r <= max(float(st.ends[-1]), float(st.starts[-1])))
    return before_replays(sets + replays) if inside.mean() < 0.5 else sets


def before_replays(sets: list[StepSet]) -> list[StepSet]:
    """``sets`` less the families that are the graph-replaying loop's warm-up: every step of theirs starts before the
    program's first replay, and they hold fewer than ``WARMUP_OF_REPLAYS`` as many steps as the replays (an eager
    phase of its own, a long training run before replayed evaluation, holds more). What a program does before its
    replays are the eager calls that warm the model up and the capture (a model call each), and what it repeats is the
    replay: those steps go to the start-up, as any warm-up does. Seen on one H200 (``wrappers/graph_serve.py``: three
    graphs captured after three eager calls each, then one replay a batch): a cached run's window began at the fifth
    eager call, and its 7 eager calls (2.68 ms each) held more time than its 103 replays (0.55 ms), so the headline
    judged the eager calls: "GPU busy 2% ... CPU-bound: host busy in `Sequential.forward`", first fix "launch-bound in
    `model calls`: replay the model's call as a CUDA graph" (the first run, recorded whole, gave that fix first too)."""
    replays = next((st for st in sets if st.source == GRAPH_REPLAY), None)
    if replays is None:
        return sets
    first = float(replays.starts[0])
    return [st for st in sets if st is replays or not (
        float(st.starts[-1]) < first and len(st.starts) < WARMUP_OF_REPLAYS * len(replays.starts))]


def outside(sets: list[StepSet], replays: list[StepSet]) -> list[StepSet]:
    """The families of ``sets`` whose steps mostly fall outside the span of the graph replays: the program's other
    loops (a multi-phase program's eager phases beside its replayed one); a kernel period found in the replays
    themselves is the replays again. Each is cut where the replays begin: its steps before them end there at the
    latest (an iteration runs to the next step's start, the last to its end), and its steps inside the span go.
    Why: nsys's default (``--cuda-graph-trace=graph``) records each replay as one operation, so a kernel period found
    in the eager warm-up before them ran its last iteration over the 300 replays that followed (H200,
    wrappers/graph_replay.py: "12 steps of kernel period (11 kernels), CPU-bound", one step 312 ms at "a new shape",
    where the program replayed its graph 300 times at 1.13 ms)."""
    if not replays:
        return sets
    lo, hi = float(replays[0].starts[0]), float(replays[0].ends[-1])
    out = []
    for st in sets:
        inside = (st.starts >= lo) & (st.starts <= hi)
        if inside.mean() >= 0.5:
            continue
        before, after = st.starts < lo, st.starts > hi
        keep = before if before.sum() >= after.sum() else after
        if keep.sum() < 2:
            continue
        starts = st.starts[keep]
        ends = st.ends[keep].copy()
        if keep is before:  # (the last iteration, and any step's end, stop where the replays begin)
            ends = np.minimum(ends, lo)
        out.append(StepSet(st.name, st.phase, starts, ends, st.source, st.detail, st.calls))
    return out


def _named(marks: pd.DataFrame, name: str) -> pd.DataFrame:
    return marks[(marks["name"] == name).to_numpy()].sort_values("start_ns", kind="stable")


def hooks(marks: pd.DataFrame) -> list[StepSet]:
    if marks.empty:
        return []
    steps = _named(marks, STEP)
    opt_end = np.sort(_named(marks, OPTIMIZER)["end_ns"].to_numpy(dtype="float64"))
    if len(steps) and len(opt_end):
        s, e = steps["start_ns"].to_numpy(dtype="float64"), steps["end_ns"].to_numpy(dtype="float64")
        done = np.searchsorted(opt_end, e, side="right") > np.searchsorted(opt_end, s, side="left")
        if done.sum() >= 2:
            s, e = s[done], e[done].copy()
            # the last step may have been closed by the program's end (nothing came after its optimizer step): its
            # iteration ends with its optimizer step, not with the program's teardown (a DDP job's ncclCommDestroy)
            e[-1] = min(e[-1], opt_end[np.searchsorted(opt_end, e[-1], side="right") - 1])
            return [StepSet("optimizer steps", None, s, e, HOOK,
                            "optimizer steps, marked by nsighttc's hooks inside the program (no step marks of its own)")]
    data = _named(marks, DATA)
    if len(data) >= 3:
        s = data["start_ns"].to_numpy(dtype="float64")
        return [StepSet("DataLoader iterations", None, s[:-1], s[1:], HOOK,
                        "DataLoader iterations (no optimizer steps), marked by nsighttc's hooks inside the program")]
    fwd = _named(marks, FORWARD)
    if len(fwd) >= 2:
        return [StepSet(MODEL_CALLS, None, fwd["start_ns"].to_numpy(dtype="float64"), fwd["end_ns"].to_numpy(dtype="float64"),
                        HOOK, "calls of the main model (no optimizer, no DataLoader), marked by nsighttc's hooks")]
    return []


def profiler_ops(ranges: pd.DataFrame, first_launch: float) -> list[StepSet]:
    """Steps from torch.profiler's own ``Optimizer.step#`` and ``enumerate(DataLoader)#`` ranges, one family per
    range the optimizer steps sit in (a phase): a step ends at the first fetch after an optimizer step (several
    optimizers stepping before the next fetch, a GAN's, end one step), else at the optimizer step's end; the first
    starts at the fetch before it (or where its phase's range starts)."""
    if ranges.empty:
        return []
    path = labels.strings(ranges["path"])
    is_opt = labels.per_category(ranges["path"], lambda p: p.rsplit("/", 1)[-1].startswith(OPTIMIZER_OP), dtype=bool)
    is_fetch = labels.per_category(ranges["path"], lambda p: p.rsplit("/", 1)[-1].startswith(DATALOADER_OP), dtype=bool)
    f_start = np.sort(ranges["start_ns"].to_numpy(dtype="float64")[is_fetch])
    if is_opt.sum() >= 2:
        opt = ranges[is_opt].assign(parent=[p.rpartition("/")[0] for p in path[is_opt]])
        out = []
        for parent, o in opt.groupby("parent", sort=False):
            if len(o) < 2:
                continue
            o = o.sort_values("start_ns")
            st = _optimizer_steps(o["start_ns"].to_numpy(dtype="float64"), o["end_ns"].to_numpy(dtype="float64"),
                                  f_start, _phase_start(ranges, path, parent, float(o["start_ns"].iloc[0]), first_launch))
            if st is not None:
                name = f"{parent}/{OPTIMIZER_OP}" if parent else OPTIMIZER_OP
                out.append(StepSet(name, parent or None, *st, PROFILER_OP,
                                   f"torch.profiler's `{OPTIMIZER_OP}...` ranges (optimizer steps) of a program with no "
                                   "step marks"))
        return out
    if len(f_start) >= 3:
        return [StepSet(DATALOADER_OP, None, f_start[:-1], f_start[1:], PROFILER_OP,
                        f"torch.profiler's `{DATALOADER_OP}...` ranges (DataLoader iterations, no optimizer)")]
    return []


def _optimizer_steps(o_start: np.ndarray, o_end: np.ndarray, f_start: np.ndarray, b0: float):
    """(starts, ends) of the steps the optimizer steps of one phase end."""
    nxt = np.searchsorted(f_start, o_end)
    has = nxt < len(f_start)
    bound = np.where(has, f_start[np.clip(nxt, 0, max(len(f_start) - 1, 0))] if len(f_start) else 0.0, o_end)
    bound = np.unique(bound)  # optimizers stepping before the same fetch end one step
    if len(bound) < 2:
        return None
    med = float(np.median(np.diff(bound)))
    if has[-1] and bound[-1] - o_end[-1] > 2 * med:  # the next fetch is another loop's (an evaluation after the last step)
        bound[-1] = o_end[-1]
    first = f_start[(f_start < o_start[0]) & (f_start >= b0)]
    starts = np.concatenate([[float(first[0]) if len(first) else b0], bound[:-1]])
    return starts, bound


def _phase_start(ranges: pd.DataFrame, path: np.ndarray, parent: str, first_opt: float, first_launch: float) -> float:
    """Where the first step of a phase can start: its range's start (the instance holding the first optimizer
    step), else the first kernel launch (a trace of one loop)."""
    if not parent:
        return min(first_launch, first_opt)
    inst = ranges[path == parent]
    inst = inst[(inst["start_ns"] <= first_opt).to_numpy() & (inst["end_ns"] >= first_opt).to_numpy()]
    return float(inst["start_ns"].min()) if len(inst) else min(first_launch, first_opt)


def result_copies(ops: pd.DataFrame | None) -> list[StepSet]:
    """Steps bounded by the device-to-host copies that bring each iteration's result back (``loss.item()``,
    ``logits.argmax(1).cpu()``): the host's boundary of a loop whose kernels do not repeat. Where an iteration copies
    more than one result, the copies' byte counts repeat with that period, and one copy in each period bounds the
    iterations (the one followed by the longest time, the median over the loop).

    Why: an image loop at 25 sizes under ``cudnn.benchmark`` launches other kernels at each size (cuDNN's trials,
    another algorithm per shape), so no kernel sequence repeats until the sizes do: a plain torch.profiler recording
    gave "52 steady steps of 1.63 ms", the last 1% of a 6.1 s loop, and left 96% of it "before the first step"; its
    150 batches each ended with one 256-byte copy of the answers (H200, wrappers/varlen_conv.py,
    reports/steps_time; an nsys recording of the same loop at 13 sizes: tests/fixtures/steps/varlen_conv_nsys.sqlite.xz)."""
    if ops is None or ops.empty or "copy_kind" not in ops:
        return []
    dtoh = (ops["kind"] == "memcpy").to_numpy() & (ops["copy_kind"] == "DtoH").to_numpy()
    if dtoh.sum() < MIN_COPIES + 1:
        return []
    c = ops.loc[dtoh, ["end_ns", "bytes"]].sort_values("end_ns", kind="stable")
    ends = c["end_ns"].to_numpy(dtype="float64")
    size = np.nan_to_num(c["bytes"].to_numpy(dtype="float64"), nan=-1.0)
    k = next((k for k in range(1, 9) if len(size) > 2 * k and (size[k:] == size[:-k]).mean() >= COPY_MATCH), None)
    if k is None:
        return []
    if k > 1:  # the copy of each period followed by the longest time: where one iteration ends and the next begins
        after = np.diff(ends)
        phase = int(np.argmax([np.median(after[j::k]) for j in range(k)]))
        ends = ends[phase::k]
    if len(ends) < MIN_COPIES + 1:
        return []
    return [StepSet("result copies", None, ends[:-1], ends[1:], RESULT_COPY,
                    f"the device-to-host copies that end each iteration ({k} a step), where no kernel sequence repeats "
                    "through the loop: the recording has no step marks")]


# iterations of a wider loop inside the replays' span holding no replay: the replays are a part of it. A generation loop
# replaying its decoding step has one prompt between replays per request: 10 of 99 copy-bounded iterations held no
# replay (transformers' static cache under torch.compile, H100; tests/fixtures/inference/llm_static_graphs_nsys is now
# the H200's recording of it), and its
# steps are the replays; a compiled loop of changing lengths, 29 of 60 batches (tests/fixtures/steps)
NO_REPLAY_SHARE = 0.25
MANY_REPLAYS_SHARE = 0.05  # ... and at most this share hold two or more (a loop reading its result every N replays)


def replays_within(copies: list[StepSet], replays: list[StepSet]) -> bool:
    """Whether the result copies' iterations are the loop and the replays one part of some of them: inside the
    replays' span, at least ``NO_REPLAY_SHARE`` of the copies' iterations hold no replay and almost none
    (``MANY_REPLAYS_SHARE``) two or more.
    Why: ``torch.compile(mode="reduce-overhead")`` on requests of many lengths runs each new length eagerly once,
    records its graph at the second call and replays it after (CUDA graph trees), so 31 of 60 batches replayed a
    graph; the replays were taken as the steps and the batches between them left out (H200, a torch.profiler
    recording of ``wrappers/varlen_infer.py --compile reduce-overhead``, tests/fixtures/steps). A loop that replays
    its graph every iteration (one replay in each) or reads its result every N replays (many in each) keeps them."""
    if not copies or not replays:
        return False
    r = np.sort(replays[0].starts)
    s, e = copies[0].starts, copies[0].ends
    inside = (s >= r[0]) & (e <= r[-1])
    if inside.sum() < MIN_COPIES:
        return False
    n = np.searchsorted(r, e[inside], side="left") - np.searchsorted(r, s[inside], side="left")
    return bool((n == 0).mean() >= NO_REPLAY_SHARE and (n >= 2).mean() <= MANY_REPLAYS_SHARE)


def wider_loop(kernels: list[StepSet], copies: list[StepSet]) -> list[StepSet]:
    """The kernel period's family, or the result copies' where they span at least ``COPIES_SPAN`` times the loop the
    kernel period found (the kernels repeat in a corner of the loop only) and are no finer than its iterations:
    copies that end several steps inside one kernel iteration (``FINER_COPIES``) are parts of it."""
    if not copies:
        return kernels
    if not kernels:
        return copies
    span = lambda st: float(st.ends[-1] - st.starts[0])  # noqa: E731
    if span(copies[0]) < COPIES_SPAN * max(span(kernels[0]), 1.0):
        return kernels
    k, c = kernels[0], copies[0]
    inside = int(((c.ends > k.starts[0]) & (c.ends <= k.ends[-1])).sum())
    return kernels if inside >= FINER_COPIES * len(k.starts) else copies


# copies' steps per kernel iteration, over the kernel loop's span, that make them parts of it: transformers' Trainer
# with gradient_accumulation_steps=4 copies a flag to the host after each micro-batch (its NaN/inf check of the
# loss) and the loss every logging step, ~13 copies an optimizer step; a tiny BERT's plain nsys recording on the
# H200 read "128 steady steps of 1.31 ms" where the program's 10 optimizer steps took ~45 ms, its kernel period
# the optimizer steps (tests/fixtures/steps/trainer_accum_nsys.sqlite.xz)
FINER_COPIES = 1.5
