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
   where the kernel sequence does not repeat through the loop (``copies.result_copies``).

Beside them, ``graph-replay`` (``replays``): a program that replays its own CUDA graph; the result copies' steps
(``copies``) stand in for the kernel period where the kernels repeat in a corner of the loop only.
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
GRAPH_REPLAY = "graph-replay"
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


def _profiler_step(name: str) -> bool:
    """A range named ``ProfilerStep#N`` (or ``ProfilerStep``, as paths name a family)."""
    return name.rstrip("#0123456789") == PROFILER_STEP


def _families(ranges: pd.DataFrame) -> np.ndarray:
    """Each range's family: its path, but torch's ``ProfilerStep#N`` are one family, at the shallowest path any of them
    has. A profiler's steps are one sequence (it closes each before it opens the next), wherever the ranges around
    them put them: Lightning's ``Trainer(profiler="pytorch")`` opens ``run_training_epoch`` inside its first step and
    calls ``prof.step()`` inside ``Optimizer.step``, so its first step sits at "lit_prof.py/ProfilerStep" and the 59
    opened inside the epoch under it (``parse.range_paths`` nests by containment; nested by start, each later step's
    path grew by the ranges left open, and the 61 steps read as one). Worked out per distinct path."""
    path = labels.as_categorical(ranges["path"])
    steps = {str(c) for c in path.cat.categories if _profiler_step(str(c).rsplit("/", 1)[-1])}
    first = min(steps, key=lambda p: (p.count("/"), p)) if steps else None
    return labels.per_category(path, lambda p: first if p in steps else p)


def step_paths(ranges: pd.DataFrame, step_range: str | None, fam: np.ndarray | None = None) -> list[str]:
    """Range paths whose leaf marks a step and which repeat (a family needs two instances or more), and torch's own
    ``ProfilerStep#N`` even once: a recording made elsewhere often holds one step (a single-step inference trace, one
    step per rank of an 8-rank job), and a repeating kernel sequence found inside it instead (an optimizer's 4-kernel
    loop of 73 us) is no step of the program. Paths as ``_families`` gives them (``fam``: already worked out)."""
    if ranges.empty:
        return []
    counts = pd.Series(_families(ranges) if fam is None else fam).value_counts()
    leaf = lambda p: str(p).rsplit("/", 1)[-1]  # noqa: E731
    found = sorted(str(p) for p, n in counts.items()
                   if (n >= 2 or _once_a_step(leaf(p))) and is_step_leaf(leaf(p), step_range))
    # a step range inside another family's step (a/step/step, ProfilerStep#/train_step) is part of that iteration
    return [p for p in found if not any(p.startswith(q + "/") for q in found)]


def _once_a_step(leaf: str) -> bool:
    """Marks that are a step even once: torch.profiler's ``ProfilerStep#N`` and a serving engine's iteration
    (``parse.marks.ENGINE_STEPS``): a recording of one iteration has one."""
    return _profiler_step(leaf) or leaf in ENGINE_STEP_NAMES


def explicit(ranges: pd.DataFrame, step_range: str | None) -> list[StepSet]:
    fam = _families(ranges) if not ranges.empty else None
    paths = step_paths(ranges, step_range, fam)
    if not paths:
        return []
    out = []
    keep = np.isin(fam, np.asarray(paths, dtype=object))
    cand = ranges[keep]
    for path, grp in cand.groupby(fam[keep]):
        grp = grp.sort_values("start_ns")
        out.append(StepSet(path, path.rsplit("/", 1)[0] if "/" in path else None, grp["start_ns"].to_numpy(dtype="float64"),
                           grp["end_ns"].to_numpy(dtype="float64"), EXPLICIT, f"the program's `{path}` ranges"))
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
