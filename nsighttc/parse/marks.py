"""Marks: the ranges a timeline recording holds that say *where the steps and compilations were*, kept apart from
the program's own ranges.

- nsighttc's step hooks (``runtime.steps``: ``nsighttc.step``, ``nsighttc.optimizer``, ``nsighttc.data``,
  ``nsighttc.forward``, ``nsighttc.compile``): NVTX start/end ranges and ``record_function`` labels that open and
  close at different depths of the program. Taken out of the range table, they neither change the paths of the
  program's own ranges nor become the range a kernel is attributed to: a program's verdict per range is the same
  with and without them, and they only serve the step finder (``analysis.timeline.steps``).
- torch.compile's own profiler events: ``dynamo_timed`` writes a zero-length ``user_annotation`` marker per
  compile phase (``dynamo_data: compile_id=0/0``, ``entire_frame_compile_data: fn_name=..., compile_id=0/0``,
  dozens per compilation; torch 2.11-2.13) and a ``cpu_op`` spanning each compilation (``entire_frame_compile``,
  ``entire_backward_compile``: seen in a torch 2.13 CPU trace of a compiled training loop). The markers are
  dropped (they made a range table of nine rows of compiler internals); the spanning events become
  ``nsighttc.compile`` marks, so recordings made without our hooks still say how long compilation took.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..record_format import (BACKWARD, CAPTURED_OP, CLOCK_MARK, COMPILE, DATA, FORWARD, MARK_NAMES as HOOK_NAMES,
                             OPTIMIZER, STEP)

MARK_COLUMNS = ["pid", "tid", "start_ns", "end_ns", "name"]
# cpu_op events of torch.compile that span a whole compilation (torch/_dynamo/utils.py dynamo_timed phase names)
COMPILE_OPS = frozenset({"entire_frame_compile", "entire_backward_compile"})
# (also with other fields: ``CachingAutotuner.benchmark_all_configs_data: kernel_name=triton_poi_..., is_backward=True,
# compile_id=0/0``, Inductor's autotuning, torch 2.11 on H100)
_DYNAMO_MARKER = re.compile(r"_data: (?:[A-Za-z_]+=[^,]*, )*compile_id=[^ ]+$")
# Each call of a compiled graph is a range named by its hash (``## Call CompiledFxGraph f3x...5a ##``, torch 2.11 on
# H100, reports/unmarked): one row per graph and per run of the compiler; folded into one name.
_COMPILED_CALL = re.compile(r"^## Call CompiledFxGraph \S+ ##$")
COMPILED_GRAPH = "torch.compile graph"
# Serving engines mark each engine iteration (one scheduled batch: prefill, decode or both) with a range whose name
# carries that iteration's token counts, so no two share a name; folded into one name per engine, they are the
# program's steps (``STEP_PATTERN``: each folded name holds "step"), and a recording of one iteration has one. Seen in
# the public traces of AMD's TraceLens tests (tests/traces/: a B200 eager trace, vLLM's decode and prefill+decode
# graph executions, SGLang's Qwen3-8B decode), where the step found without them was a transformer layer ("36 steps
# of 1.9 ms", "36 steps of 0 ns" inside one graph launch).
ENGINE_STEPS = (
    # vLLM's model runner: execute_context_2(14721)_generation_0(0); with roofline counts:
    # execute_64_context_0(sq0sk0sqsq0sqsk0)_generation_64(sq64sk131072sqsq64sqsk131072). SGLang's traces there
    # carry the same name around their own step[...] (sglang_Qwen3-8B_decode), so it is named for no one engine
    (re.compile(r"^execute_(?:\d+_)?context_\d+\([^)]*\)_generation_\d+\([^)]*\)$"),
     "engine step (execute_context_*_generation_*)"),
    # SGLang: step[DECODE bs=32], step[EXTEND bs=2 toks=14721], step[MIXED bs=2 ...]
    (re.compile(r"^step\[(?:EXTEND|DECODE|MIXED|IDLE)\b[^\]]*\]$"), "SGLang step[...]"),
    # ATOM: prefill[bs=2 tok=14721 ctx=[7803, 6918]], decode[bs=64 tok=64 d=64]
    (re.compile(r"^(?:prefill|decode)\[bs=\d+.*\]$"), "ATOM step (prefill[...], decode[...])"),
)
ENGINE_STEP_NAMES = frozenset(name for _, name in ENGINE_STEPS)
# Leaves that mark an iteration. torch.optim's own record_function labels (`Optimizer.step#AdamW.step`,
# torch 2.11 traces, tests/fixtures/multi_phase_torch) contain "step" but are not iterations (they are the
# analysis' "profiler-op" source), and nsighttc's own marks (`nsighttc.step`) are kept apart here.
STEP_PATTERN = re.compile(r"^(ProfilerStep|(?!Optimizer\.|nsighttc\.).*step.*|iteration|iter|train_batch|batch)$",
                          re.IGNORECASE)


def empty() -> pd.DataFrame:
    return pd.DataFrame({"pid": pd.Series(dtype=object), "tid": pd.Series(dtype=object),
                         "start_ns": pd.Series(dtype="float64"), "end_ns": pd.Series(dtype="float64"),
                         "name": pd.Series(dtype=object)})


def is_dynamo_marker(name: str) -> bool:
    return bool(_DYNAMO_MARKER.search(name))


DATALOADER_RANGE = "enumerate(DataLoader)#"  # torch.profiler's own range around each fetch
OPTIMIZER_RANGE = "Optimizer.step#"          # torch.profiler's own range around each optimizer step


def split(ranges: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the program's ranges, the marks) of a range table with a ``name`` column. Names are looked at once
    each (a trace's ranges share a few hundred names).

    Some marks stay ranges as well, so that the GPU's idle time is put down to what the host was doing, not to
    the program's top-level range, and its kernels to where they were launched:
    - ``nsighttc.data`` and ``nsighttc.optimizer`` where the recording has no range of its own around the
      DataLoader's fetches / optimizer steps (nsys; torch.profiler has ``enumerate(DataLoader)#...`` and
      ``Optimizer.step#...``); each opens and closes inside one call, so it holds no other range of the program;
    - ``nsighttc.forward`` and ``nsighttc.backward`` (the main model's calls, ``backward``) in a recording without
      step ranges of its own: a program that marks its steps keeps its range table as it would be without nsighttc.
    torch.compile's per-graph ranges are folded into one name (``COMPILED_GRAPH``), a serving engine's iterations into
    one per engine (``ENGINE_STEPS``)."""
    if ranges.empty:
        return ranges, empty()
    codes, uniq = pd.factorize(ranges["name"].astype(object), use_na_sentinel=True)
    names = [str(u) for u in uniq]
    kind = np.array([_kind(n) for n in names] + [0], dtype=np.int8)  # 0 range, 1 mark, 2 dropped, 3 both
    as_range = {DATA: not any(n.startswith(DATALOADER_RANGE) for n in names),
                OPTIMIZER: not any(n.startswith(OPTIMIZER_RANGE) for n in names),
                FORWARD: not any(STEP_PATTERN.match(n.rsplit("/", 1)[-1]) for n in names)}
    as_range[BACKWARD] = as_range[FORWARD]
    for name, keep in as_range.items():
        if keep and name in names:
            kind[names.index(name)] = 3
    folds = {i: f for i, n in enumerate(names) if (f := _folded(n)) is not None}
    if folds:
        table = np.array([folds.get(i) for i in range(len(names))] + [None], dtype=object)
        to = table[np.where(codes < 0, len(names), codes)]
        ranges = ranges.assign(name=np.where(pd.isna(to), ranges["name"].astype(object).to_numpy(), to))
    k = kind[np.where(codes < 0, len(uniq), codes)]
    if not k.any():
        return ranges, empty()
    marks = ranges.loc[(k == 1) | (k == 3), ["pid", "tid", "start_ns", "end_ns", "name"]].copy()
    marks["name"] = marks["name"].astype(str).map(lambda n: COMPILE if n in COMPILE_OPS else n)
    return ranges[(k == 0) | (k == 3)].reset_index(drop=True), marks.reset_index(drop=True)


def _folded(name: str) -> str | None:
    """The one name a family of per-call or per-iteration names is folded into (``COMPILED_GRAPH``,
    ``ENGINE_STEPS``), or None."""
    if _COMPILED_CALL.match(name):
        return COMPILED_GRAPH
    return next((to for pattern, to in ENGINE_STEPS if pattern.match(name)), None)


def _kind(name: str) -> int:
    if name in HOOK_NAMES or name in COMPILE_OPS or name.startswith(CLOCK_MARK):
        return 1  # (the host sampler's clock marks: parse.host_samples places the samples with them)
    # (the ranges around the operator calls a rank recorded by a dispatch mode for the replay: ``runtime.op_capture``)
    return 2 if is_dynamo_marker(name) or name.startswith(CAPTURED_OP) else 0


def sanitize(marks: pd.DataFrame, trace_end: float) -> pd.DataFrame:
    """Marks never closed (nsys: end NULL): a step is the program's tail after its last optimizer step and is
    dropped; any other mark is closed at the end of the trace. Marks without a start are dropped."""
    if marks.empty:
        return marks
    s, e = marks["start_ns"].to_numpy(dtype="float64"), marks["end_ns"].to_numpy(dtype="float64")
    open_ = ~np.isfinite(e)
    keep = np.isfinite(s) & ~(open_ & (marks["name"] == STEP).to_numpy())
    out = marks.assign(end_ns=np.where(open_, np.maximum(trace_end, s), e))[keep]
    out = out[(out["end_ns"] >= out["start_ns"]).to_numpy()]
    return out[outermost(out)].reset_index(drop=True)


def outermost(marks: pd.DataFrame) -> np.ndarray:
    """Which marks are not nested in an earlier mark of the same name on the same thread: same-name ranges nested
    in each other are one step at their outermost level. A ``forward`` range per module, or an NVTX range named like
    the hooks' around every module (56 deep per model call in a recording made elsewhere), made 14,368 "model calls"
    of 256. One sort and a running maximum per (name, thread), no loop over marks."""
    n = len(marks)
    if n < 2:
        return np.ones(n, dtype=bool)
    key = pd.MultiIndex.from_arrays([marks["name"].astype(str), marks["pid"].astype(str),
                                     marks["tid"].astype(str)]).factorize()[0] if n else np.array([], dtype=np.int64)
    s = marks["start_ns"].to_numpy(dtype="float64")
    e = marks["end_ns"].to_numpy(dtype="float64")
    order = np.lexsort((-e, s, key))  # by thread and name, then start; the longer first where two start together
    k, so, eo = key[order], s[order], e[order]
    # the latest end among the earlier marks of the same group: the running maximum restarted at each group
    new_group = np.r_[True, k[1:] != k[:-1]]
    run = pd.Series(eo).groupby(np.cumsum(new_group)).cummax().to_numpy()
    before = np.r_[-np.inf, run[:-1]]
    before[new_group] = -np.inf
    keep_sorted = so >= before  # starts after every earlier same-name mark ended: outermost
    keep = np.empty(n, dtype=bool)
    keep[order] = keep_sorted
    return keep
