"""Inference as a workload of its own: a generation loop's prefill and decode, and what a serving benchmark reports
(requests, tokens/s, time to first token, time per output token), from the hooks' marks (``runtime.steps``:
``nsighttc.prefill``, ``nsighttc.decode``, ``nsighttc.request``).

Each model call's *iteration* runs from its start to the next call's start (the sampling, the stopping check and the
host's next launch belong to it); a request's last call runs to the request's end. Per phase: the calls' iterations
over the steady steps (after the launcher's window mark, where there is one), their GPU busy share, the Tensor Core
share of the kernels launched inside the calls, and the first cause of their idle time (``idle``), so a decode loop
that leaves the GPU idle 92% of the time in launch gaps says so apart from its prefills.

- time to first token (TTFT): from a request's start (or its prefill's, without request marks) to the first token on
  the host: the end of the last device-to-host copy before its first decode call (``generate`` reads the token there,
  for its streamer and its stopping check), else that call's start. Not the call's start alone: a decoding step
  compiled and replayed as a CUDA graph runs its guards and copies its inputs between the two (H200, a static cache:
  "TTFT 21.4 ms" from an nsys recording whose program timed 13.9 ms to its first token, reports/steps_time);
- time per output token (TPOT): the median of a request's decode iterations (each decode call's start to the next's,
  the last to the request's end; without request marks, to its last call's end), the median over requests: the rate
  a streamer measures between the first and the last token, without a profiler's occasional long step;
- tokens/s: generated tokens per second of the requests' wall time, per sequence (a batch of B generates B times as
  many).
A generation loop is one with decode calls; a program whose token-id calls are all prefills (a classifier) gets no
``inference`` section. Loops over arrays of a few thousand calls: no per-kernel Python.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...record_format import DECODE, FORWARD, PREFILL, REQUEST
from .. import intervals
from . import idle as idle_mod
from .base import Thresholds, classify


def _named(marks: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    m = marks[(marks["name"] == name).to_numpy()]
    order = np.argsort(m["start_ns"].to_numpy(dtype="float64"), kind="stable")
    return m["start_ns"].to_numpy(dtype="float64")[order], m["end_ns"].to_numpy(dtype="float64")[order]


def _median(x) -> float | None:
    x = np.asarray(x, dtype="float64")
    x = x[np.isfinite(x)]
    return float(np.median(x)) if len(x) else None


def summarize(marks: pd.DataFrame, u: intervals.Union, launches: pd.DataFrame, launch_start: np.ndarray,
              pieces: idle_mod.Idle, paths: np.ndarray, rinfo: dict, th: Thresholds,
              steady_from: float = -np.inf, found_by: str | None = None) -> dict | None:
    """``timeline.inference`` of a recording with the hooks' marks, or None (no decode calls). ``steady_from``: where
    the steady steps begin (the window's start or the first steady step): calls before it are warm-up.
    ``found_by``: how the marks were found where the hooks did not draw them (``steps.generation``)."""
    if marks is None or marks.empty:
        return None
    d_start, d_end = _named(marks, DECODE)
    if len(d_start) == 0:
        return None
    p_start, p_end = _named(marks, PREFILL)
    f_start, f_end = _named(marks, FORWARD)
    r_start, r_end = _named(marks, REQUEST)
    # each call's iteration: to the next call's start, or to its request's end (the last call of a request)
    nxt = np.r_[f_start[1:], np.inf]
    if len(r_start):
        ri = np.searchsorted(r_start, f_start, side="right") - 1
        req_end = np.where(ri >= 0, r_end[np.clip(ri, 0, None)], np.inf)
        req_end = np.where(f_start <= req_end, req_end, np.inf)  # a call outside every request
        it_end = np.minimum(nxt, req_end)
    else:
        it_end = nxt
    it_end = np.where(np.isfinite(it_end), it_end, f_end)

    def iterations(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.clip(np.searchsorted(f_start, starts, side="right") - 1, 0, None)  # the call holding each mark
        s = f_start[idx]
        return s, np.maximum(it_end[idx], s)

    tc = _tc_per_launch(launches)
    # when each kernel was launched (its launch call's time, else its start): which call launched it
    t = launch_start if len(launch_start) == len(launches) else np.full(len(launches), np.nan)
    if "start_ns" in launches:
        t = np.where(np.isnan(t), launches["start_ns"].to_numpy(dtype="float64"), t)
    dur = launches["duration_ns"].to_numpy(dtype="float64") if "duration_ns" in launches else np.zeros(len(launches))
    phases = {}
    for name, (ps, pe) in (("prefill", (p_start, p_end)), ("decode", (d_start, d_end))):
        keep = ps >= steady_from
        if not keep.any():
            keep = np.ones(len(ps), dtype=bool)  # all of them warm-up: judged anyway, and said so
            warm_only = True
        else:
            warm_only = False
        s, e = iterations(ps[keep])
        phases[name] = _phase(s, e, ps[keep], pe[keep], u, t, dur, tc, pieces, paths, rinfo, th)
        phases[name]["warmup_only"] = warm_only
    if len(r_start):  # a request the window's stop cut at its very start holds no model call: no request
        held = np.searchsorted(f_start, r_end, side="right") > np.searchsorted(f_start, r_start, side="left")
        r_start, r_end = r_start[held], r_end[held]
    reqs = _requests(r_start, r_end, p_start, d_start, f_start, f_end, steady_from, *_copies_to_host(pieces.calls.dtoh))
    out = {"kind": "generation", "requests": reqs["count"], "requests_recorded": int(max(len(r_start), len(p_start))),
           "request_source": "prefill calls found from the kernels" if found_by else
           "generate() calls" if len(r_start) else "prefill calls (no generate() calls seen)",
           "model_calls": int(len(f_start)), "prefill": phases["prefill"], "decode": phases["decode"],
           "ttft_ns": reqs["ttft_ns"], "tpot_ns": reqs["tpot_ns"], "tokens_per_s": reqs["tokens_per_s"],
           "tokens_per_s_basis": "generated tokens per second of the requests' wall time, per sequence"}
    if found_by:
        out["found_by"] = found_by
    return out


def _tc_per_launch(launches: pd.DataFrame) -> np.ndarray:
    """1 where a launch ran on Tensor Cores, 0 where not or unknown (shares of kernel time, as the headline's)."""
    if "tensor_core" not in launches:
        return np.zeros(len(launches))
    return (launches["tensor_core"] == True).to_numpy(dtype=float)  # noqa: E712


def _phase(s, e, ms, me, u, t, dur, tc, pieces, paths, rinfo, th) -> dict:
    """One phase's calls: their iterations [s, e) and the calls themselves [ms, me); ``t``, ``dur``, ``tc``: each
    kernel's launch time, duration and Tensor Core use (the kernels launched inside the calls are the phase's)."""
    n = len(s)
    if n == 0:
        return {"calls": 0}
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    e = np.minimum(e, np.r_[s[1:], np.inf])  # disjoint, for the idle scope
    wall = e - s
    busy = intervals.busy_within(u, s, e)
    total, busy_ns = float(wall.sum()), float(busy.sum())
    share = busy_ns / total if total > 0 else 0.0
    mo = np.argsort(ms, kind="stable")
    ms_s, me_s = ms[mo], np.minimum(me[mo], np.r_[ms[mo][1:], np.inf])
    inside = intervals.inside(t, ms_s, me_s) if len(t) else np.zeros(0, dtype=bool)
    k_time = float(np.nansum(dur[inside])) if len(dur) else 0.0
    tc_time = float(np.nansum((dur * tc)[inside])) if len(dur) else 0.0
    kernels = int(inside.sum())
    verdict = classify(share, total, kernels, th)
    causes = idle_mod.causes(idle_mod.time_scope(pieces, s, e), busy_ns, paths, rinfo)
    return {"calls": int(n), "median_ns": _median(wall), "mean_ns": total / n, "wall_ns": total,
            "gpu_busy_share": share, "gpu_ns_per_call": busy_ns / n, "kernels_per_call": kernels / n,
            "tc_time_share": tc_time / k_time if k_time > 0 else 0.0, "verdict": verdict,
            "headline_cause": idle_mod.headline(causes, verdict), "causes": causes[:3]}


def _copies_to_host(dtoh: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The device-to-host copies' launch times, in order, and their ends on the GPU (when their data was on the host)."""
    t, end = dtoh["t"].to_numpy(dtype="float64"), dtoh["end"].to_numpy(dtype="float64")
    order = np.argsort(t, kind="stable")
    return t[order], end[order]


def _token_on_host(a: float, first: float, copy_t: np.ndarray, copy_end: np.ndarray) -> float:
    """When a request's first token was on the host: the end of the last device-to-host copy launched from its start
    ``a`` to its first decode call's start ``first`` (no later than that call), else ``first``."""
    i = int(np.searchsorted(copy_t, first, side="left")) - 1
    if i < 0 or copy_t[i] < a or not np.isfinite(copy_end[i]):
        return first
    return min(first, max(float(copy_end[i]), a))


def _requests(r_start, r_end, p_start, d_start, f_start, f_end, steady_from, copy_t, copy_end) -> dict:
    """Requests (``generate()`` calls, else prefills) with their TTFT and TPOT, over the steady ones. ``copy_t``,
    ``copy_end``: the device-to-host copies' launches and ends (``_copies_to_host``), for the first token's arrival."""
    if len(r_start):
        starts, ends = r_start, r_end
    else:  # a loop of its own: a request runs from its prefill to the next prefill's start (or the last call's end)
        starts = p_start
        ends = np.r_[p_start[1:], f_end[-1] if len(f_end) else np.nan] if len(p_start) else p_start
        if len(p_start):  # the last call before the next prefill ends the request
            last = np.searchsorted(f_start, ends, side="left") - 1
            ends = np.where(last >= 0, f_end[np.clip(last, 0, None)], ends)
    # a request is steady when its first model call is (generate() starts a little before it, and the window with it)
    first_call = f_start[np.clip(np.searchsorted(f_start, starts, side="left"), 0, max(len(f_start) - 1, 0))] \
        if len(f_start) else starts
    keep = first_call >= steady_from
    if not keep.any():
        keep = np.ones(len(starts), dtype=bool)
    ttft, tpot, tokens, walls, n = [], [], 0, 0.0, 0
    for a, b in zip(starts[keep], ends[keep]):  # requests: a handful to a few thousand
        lo, hi = np.searchsorted(d_start, a, side="left"), np.searchsorted(d_start, b, side="right")
        n_dec = int(hi - lo)
        if n_dec == 0:
            continue  # one token only (max_new_tokens=1), or cut by the window's stop: no decode rate
        n += 1
        first = d_start[lo]
        ttft.append(_token_on_host(a, first, copy_t, copy_end) - a)
        # the decode calls' iterations (call start to the next call's start): their median, so a profiler's
        # occasional buffer flush does not stand for the rate (a streamer's mean over a plain run is the same rate)
        steps = np.diff(np.r_[d_start[lo:hi], b])
        tpot.append(float(np.median(steps)))
        tokens += n_dec + 1  # the prefill's token, then one per decode call
        walls += b - a
    return {"count": n, "ttft_ns": _median(ttft), "tpot_ns": _median(tpot),
            "tokens_per_s": float(tokens / (walls / 1e9)) if walls > 0 else None}
