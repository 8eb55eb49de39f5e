"""Prefill and decode from the kernels alone: a generation loop recorded without nsighttc's hooks (a plain nsys run,
a torch.profiler trace the program made itself) still has its model calls as the kernel period's steps (``period``:
one step per call), but nothing says which call took the prompt. The kernels do:

- a *prefill* call multiplies the whole prompt, so its matrix kernels are other tiles than a decode call's (a GEMM's
  tile follows its M, the tokens in the call; attention runs a flash kernel over the prompt where decode reads the
  KV cache): on the H100 an HF ``generate()`` prefill launched 48 matrix kernels whose names no decode call launched
  (``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_*``, ``nvjet_sm90_tst_88x64_*`` against decode's
  ``nvjet_sm90_tst_256x8_*``; tests/fixtures/inference/llm_generate_user_*.gz), while decode calls differed from
  each other in one elementwise kernel at most;
- and it is heavier on the GPU than a decode call (more tokens through the same weights): 0.77 against 0.62 ms
  there with a 128-token prompt. An evaluation loop's smaller last batch also runs other tiles, but lighter: no
  prefill.

A step whose matrix launches are at least ``FOREIGN_MATRIX`` foreign (names launched in fewer than half of the
loop's steps) and whose GPU time is above the typical step's is a prefill; the steps after it, up to the next, are
that request's decode calls. The period's anchor need not start a call (there, the LM head's GEMM, the same tile in
both phases, started each step): the kernels a prefill step shares with a decode step from its start are the
previous call's tail (sampling, the stopping check), so every call is taken to start that many kernels after its
anchor. The first request's prefill comes before the loop's first step (its GEMMs break the period), and counts
where its kernels match a prefill found in the loop, or are a prefill by the step's rule.

The same rule splits steps found another way (``mode``): a hook's model calls without the hooks' prefill and decode
marks (each step one call: no tail to skip), and a generation loop that replays its decoding step as a CUDA graph (a
static KV cache, transformers' compiled ``generate()``): each replay, with the eager sampling after it, is a decode
call, and the prompt's call runs eagerly between two replays. There the step that holds a prefill is the previous
request's last replay, its tail, then the prefill: the decode call starts at the replay and the prefill where the
step stops repeating a decode step. On the H100 (the recording ``llm_static_graphs_nsys`` was then; it is now the
H200's of the same command): 78 graph nodes and 49 eager kernels a
decode call, 256 kernels more for each prefill, 91 replays for 4 requests; read as 91 steps and no requests before.

The result is marks as the hooks would have drawn them (``nsighttc.forward``/``prefill``/``decode``/``request``),
for ``inference.summarize``. Array passes over the launches; one small loop over the prefills.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ....record_format import DECODE, FORWARD, PREFILL, REQUEST

FOREIGN_MATRIX = 0.25   # share of a step's matrix launches with names the loop's typical steps never launch
HEAVIER = 1.05          # a prefill's GPU time over the typical step's (the median step's), at least
MIN_DECODE = 2          # decode calls per request, on average, for a loop to be a generation loop
MAX_COMPARED = 32       # decode steps a prefill step is compared with, for the previous call's tail
LEAD_MATCH = 0.8        # share of a prefill found in the loop that the kernels before the loop's first step repeat

FOUND_BY = ("prefill calls found from the kernels: a call whose matrix kernels are other tiles than the loop's "
            "typical call (the prompt's tokens at once) and heavier on the GPU; the calls after it are decode calls")
PERIOD, CALLS, REPLAYS = "period", "calls", "replays"  # what a step is (``split``'s ``mode``)


@dataclass
class Calls:
    """A generation loop's model calls found from its kernels: marks in ``parse.marks``' shape, and how."""
    marks: pd.DataFrame
    found_by: str


def split(codes: np.ndarray, is_matrix: np.ndarray, times: np.ndarray, dur: np.ndarray, gpu_end: np.ndarray,
          at: np.ndarray, end: int, mode: str = PERIOD) -> Calls | None:
    """The calls of a loop when they are a generation loop's, else None.

    ``codes``: kernel name codes in launch order; ``is_matrix[c]``: whether name c is matrix work; ``times``,
    ``dur``, ``gpu_end``: each launch's time, its kernel's duration and end on the GPU; ``at``: the launch indices
    that start the steps; ``end``: the index after the loop. ``mode``: what a step is: ``PERIOD``, a kernel period
    (``period.find``: its anchor anywhere in a call); ``CALLS``, one model call (the hooks'); ``REPLAYS``, a graph
    replay and what the host launched after it (module docstring)."""
    n = len(at)
    if n < 3:
        return None
    bounds = np.r_[at, end].astype(np.int64)
    idx = np.arange(bounds[0], bounds[-1])
    sid = np.searchsorted(bounds, idx, side="right") - 1  # the step of each kernel in the loop
    c = codes[idx]
    # names launched in at least half of the steps are the loop's own; the rest are foreign
    k = int(codes.max()) + 1
    per_name = np.bincount(np.unique(sid * k + c) % k, minlength=k)
    typical = per_name >= 0.5 * n
    matrix = is_matrix[c]
    foreign_matrix = np.bincount(sid, weights=(matrix & ~typical[c]).astype(float), minlength=n)
    matrix_n = np.bincount(sid, weights=matrix.astype(float), minlength=n)
    gpu = np.bincount(sid, weights=dur[idx], minlength=n)
    odd = _other_tiles(foreign_matrix, matrix_n)
    if odd.all() or not (~odd).any():
        return None
    typical_gpu = float(np.median(gpu[~odd]))
    prefill = odd & (gpu > HEAVIER * typical_gpu)
    if prefill.sum() != odd.sum():  # other tiles that are not heavier: another loop's shapes (a last, smaller batch)
        return None
    # the previous call's tail: what a prefill step shares with decode steps from their starts (the longest such
    # prefix over some decode steps: decode calls differ a little among themselves, one elementwise kernel every
    # other call on the H100)
    pre = np.flatnonzero(prefill)
    decode = np.flatnonzero(~odd)[:MAX_COMPARED]
    # (without a prefill in the loop: the loop's last step, where it is short, is the last call's tail alone)
    last = int(bounds[-1] - bounds[-2])
    if mode == CALLS:  # (each step is a call: nothing of the previous one is in it)
        offset = 0
    elif len(pre):
        offset = int(np.median([max(_common_prefix(codes, bounds[i], bounds[i + 1], bounds[j], bounds[j + 1])
                                    for j in decode) for i in pre[:MAX_COMPARED]]))
    else:
        offset = last if mode == PERIOD and last < 0.5 * np.median(np.diff(bounds)) else 0
    i = int(pre[0]) if len(pre) else 0
    if mode == REPLAYS:  # every replay starts a decode call; a prefill step's prefill starts after its repeated part
        starts_at = np.r_[bounds[:-1], bounds[pre] + offset]
        is_prefill = np.r_[np.zeros(n, dtype=bool), np.ones(len(pre), dtype=bool)]
        order = np.argsort(starts_at, kind="stable")
        starts_at, is_prefill = starts_at[order], is_prefill[order]
        first, ref = int(bounds[0]), codes[bounds[i] + offset:bounds[i + 1]]  # (the prefill runs to the next replay)
    else:
        starts_at, is_prefill = bounds[:-1] + offset, prefill
        first, ref = int(bounds[0]) + offset, codes[bounds[i] + offset:bounds[i + 1] + offset]
    # the first request's prefill, before the loop
    lead = _lead(codes, first, ref if len(pre) else ref[:0], int(bounds[1] - bounds[0]), is_matrix, typical, dur,
                 typical_gpu)
    if lead is not None:
        starts_at, is_prefill = np.r_[lead, starts_at], np.r_[True, is_prefill]
    inside = starts_at < end  # (the loop's last step can be the last call's tail alone)
    starts_at, is_prefill = starts_at[inside], is_prefill[inside]
    n_pre = int(is_prefill.sum())
    if n_pre == 0 or (len(is_prefill) - n_pre) / n_pre < MIN_DECODE:
        return None
    return Calls(_marks(times, gpu_end, starts_at, is_prefill, end), FOUND_BY)


def _other_tiles(foreign_matrix, matrix_n):
    """Whether calls run other matrix tiles than the loop's typical call: at least ``FOREIGN_MATRIX`` of their matrix
    launches (and one at least) have foreign names. Arrays or numbers."""
    return foreign_matrix >= np.maximum(1.0, FOREIGN_MATRIX * matrix_n)


def _common_prefix(codes: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> int:
    m = min(a1 - a0, b1 - b0)
    diff = np.flatnonzero(codes[a0:a0 + m] != codes[b0:b0 + m])
    return int(diff[0]) if len(diff) else m


def _lead(codes: np.ndarray, first: int, ref: np.ndarray, size: int, is_matrix: np.ndarray,
          typical: np.ndarray, dur: np.ndarray, typical_gpu: float) -> int | None:
    """Where the prefill before the loop's first call (at launch index ``first``) starts, or None: where the kernels
    just before it repeat a prefill found in the loop (``ref``, its codes; empty where none was found); else (one
    request recorded, or a first prompt of another length: other tiles) a prefill's worth of kernels before it (a
    found prefill's length, else ``size``, a step's; the recording's start at the earliest), when they are a prefill
    by the same rule as a step."""
    if len(ref):
        size = len(ref)
        if len(ref) and first - len(ref) >= 0 and (codes[first - len(ref):first] == ref).mean() >= LEAD_MATCH:
            return int(first - len(ref))
    a = max(first - size, 0)
    if a == first:
        return None
    c = codes[a:first]
    matrix = is_matrix[c]
    if _other_tiles((matrix & ~typical[c]).sum(), matrix.sum()) and dur[a:first].sum() > HEAVIER * typical_gpu:
        return a
    return None


def _marks(times: np.ndarray, gpu_end: np.ndarray, starts_at: np.ndarray, is_prefill: np.ndarray,
           end: int) -> pd.DataFrame:
    """The hooks' marks for calls starting at launch indices ``starts_at``: each call to the next call's start (a
    request's last call to its last launch), each request from its prefill to its last kernel's end on the GPU."""
    t = times[starts_at].astype("float64")
    last_launch = times[np.r_[starts_at[1:], end] - 1].astype("float64")
    req = np.cumsum(is_prefill) - 1
    last_of_request = np.r_[req[1:] != req[:-1], True]
    call_end = np.where(last_of_request, last_launch + 1.0, np.r_[t[1:], np.inf])
    keep = req >= 0  # decode calls before the first prefill found belong to a request not seen whole
    call_end, t, is_prefill = call_end[keep], t[keep], is_prefill[keep]
    nxt = np.r_[starts_at[1:], end][keep]
    run_end = np.maximum.accumulate(gpu_end[: end])  # the GPU's end of everything launched up to each index
    r_first = np.flatnonzero(is_prefill)
    r_last = np.r_[r_first[1:], len(t)] - 1
    r_end = np.maximum(run_end[nxt[r_last] - 1], call_end[r_last])
    names = np.where(is_prefill, PREFILL, DECODE)
    return pd.DataFrame({
        "name": np.r_[np.full(len(t), FORWARD, dtype=object), names.astype(object),
                      np.full(len(r_first), REQUEST, dtype=object)],
        "start_ns": np.r_[t, t, t[r_first]],
        "end_ns": np.r_[call_end, call_end, r_end]})
