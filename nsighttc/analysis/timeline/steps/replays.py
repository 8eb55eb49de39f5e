"""The program's own CUDA graph replays as its steps (``find``'s ``graph-replay`` source).

A program that replays its own CUDA graph (``cudaGraphLaunch`` again and again) repeats
the replay, whatever else it marks: its eager warm-up steps are a few optimizer steps before the graph was captured,
and the thousands of replays after hold the loop's time. The replays are a family of their own wherever they fall
outside the steps the first source found (``with_graph_replays``), and the family that holds the most steady time
speaks in the headline (``families``). Seen on one H200: a whole training step captured after three eager steps and
replayed 2,000 times (1.1 ms a replay, 3.9 ms eager) was judged on the three eager steps, "GPU busy 4%".
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .find import GRAPH_REPLAY, StepSet

MIN_REPLAYS = 10  # graph launches that make a loop (a model captured once and replayed a handful of times is no loop)
MAX_CYCLE = 64      # graph replays in turn that make one iteration, at most (gradient accumulation: K + 1)
MIN_CYCLES = 4      # ... seen this many times over
CYCLE_MATCH = 0.9   # ... where this share of the replays' graphs equals the one a cycle before
CYCLE_BETTER = 0.5  # ... and this share as many differ as from one replay to the next, at most
WARMUP_OF_REPLAYS = 0.5  # a family wholly before the replays with fewer steps than this share of them: their warm-up


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
