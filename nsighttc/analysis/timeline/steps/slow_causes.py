"""Why the slow steps at known input shapes were slow: what they held beyond as many typical steps.

``slow.account`` finds the steady steps over ``SLOW_FACTOR`` x the typical one and tells those at new input shapes
(explained by the shapes, ``shape_churn``) from the others. Those others were only counted ("12 slow steps ... 4.03 s
beyond it") and left the reader to guess: a data stall, a checkpoint, an evaluation, allocator growth. Here their time
is set against the same number of typical steps, cause by cause: the GPU's idle time by what the host was doing
(``idle.causes``: a range such as the DataLoader's fetch, code outside any range, synchronising calls, launch gaps),
and the GPU's own extra work. Beside the causes, what the slow steps did that typical ones do not, for a reader to
name the event: device-to-host copies (a checkpoint's ``state_dict`` reaches the host one tensor at a time) and the
CUDA allocator's growth. param's ``resnet_kineto`` (RTX 2080 Ti, 4 DataLoader workers that cannot keep up): 12 of 29
steps slow, 4.03 s beyond the typical step, almost all of it in ``enumerate(DataLoader)#...``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import intervals
from .. import idle
from ..base import device_to_host
from .find import DATALOADER_OP
from .steady import ALLOCATOR_GROWTH

MIN_TYPICAL = 2        # typical steps to hold the slow ones against
OTHER = "other"        # what the causes measured do not hold of the excess
DATA_WORDS = ("data", "load", "batch", "fetch", "collate", DATALOADER_OP)
# Device-to-host bytes a slow step copies from which it is read as a checkpoint: the model's state brought to the host.
# A checkpoint of a 100 M parameter MLP and its AdamW state is 1.2 GB in 42 copies (H200, wrappers/checkpoint_loop.py);
# a metric or a loss read back is bytes to kilobytes, an evaluation's predictions megabytes.
STATE_BYTES = 64e6
# ... and whose GPU computed less beyond a typical step than this share of the step's time beyond it: a checkpoint
# copies and writes, it does not compute (the checkpoint steps of wrappers/checkpoint_loop.py: under 1% of their
# excess), where an evaluation that reads its outputs back runs forward passes too.
COMPUTE_SHARE = 0.5


def checkpoint_steps(fam: dict, copies: tuple | None, u: intervals.Union | None = None) -> np.ndarray | None:
    """Which of the family's steady steps (``fam["_iterations"]``) are checkpoints: slow steps at known shapes
    (``slow.account``'s ``_slow_known``) that each copied ``STATE_BYTES`` or more to the host, as ``torch.save`` of a
    ``state_dict()`` does tensor by tensor, and whose GPU did little other work beyond a typical step's
    (``COMPUTE_SHARE``; ``u``: the GPU's busy time). None where there are none. Such steps are the program saving its
    state, not its step: ``timeline._account_steps`` judges the steady steps without them, and the checkpoint gets an
    account of its own (``explain``'s ``checkpoint``) and a finding with its gain on the loop's whole time.
    ``copies``: the recording's copies to the host (``host_copies``)."""
    known = fam.get("_slow_known")
    if known is None or not known.any() or copies is None:
        return None
    t, e, b = copies
    starts, ends = fam["_iterations"]
    per = _bytes_within(t, b, starts, ends)
    typical = fam.get("_typical")
    # beyond what a typical step copies: a loop that saves every step copies its state in each of them, and its slow
    # steps are no checkpoints of their own (a small model saved every step, H200: one slow step of 520 us beyond the
    # typical one read "Checkpoints hold 0%"; its typical steps' saving is the host's `save` frames, ``host_topics``)
    usual = float(np.median(per[typical])) if typical is not None and typical.any() else 0.0
    mask = known & (per - usual >= STATE_BYTES)
    if u is not None and mask.any() and typical is not None and typical.any():
        cu = intervals.union(t, e)
        work = intervals.busy_within(u, starts, ends) - intervals.busy_within(cu, starts, ends)
        base = float((fam.get("time_accounting") or {}).get("base_ns") or np.median((ends - starts)[typical]))
        extra = work - float(np.median(work[typical]))
        mask &= extra < COMPUTE_SHARE * np.clip((ends - starts) - base, 0.0, None)
    return mask if mask.any() else None


def copies_per_step(fam: dict, copies: tuple | None) -> float | None:
    """The bytes the GPU copied to the host in the family's median steady step (``fam["_iterations"]``), where that
    is ``STATE_BYTES`` or more: a step that brings the model's state (or other tensors that large) to the host every
    time, as a checkpoint saved every step does. A small model saved every step (H200, wrappers/checkpoint_loop.py
    --dim 1024 --save-every 1, 75 MB a step), recorded by hand without host samples, read "host busy outside any
    range" and "overlap this host work": the trace names no Python call, the copies name the work. ``copies``: the
    recording's copies to the host (``host_copies``)."""
    if copies is None or fam.get("_iterations") is None:
        return None
    t, _, b = copies
    starts, ends = fam["_iterations"]
    if not len(starts):
        return None
    per = float(np.median(_bytes_within(t, b, starts, ends)))
    return per if per >= STATE_BYTES else None


def host_copies(ops: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(start, end, bytes) of the GPU's copies to the host, by start; None where there are none or no byte counts."""
    dtoh = device_to_host(ops)
    if not dtoh.any() or "bytes" not in ops:
        return None
    t = ops["start_ns"].to_numpy(dtype="float64")[dtoh]
    order = np.argsort(t, kind="stable")
    return (t[order], ops["end_ns"].to_numpy(dtype="float64")[dtoh][order],
            np.nan_to_num(ops["bytes"].to_numpy(dtype="float64")[dtoh][order]))


def _bytes_within(t: np.ndarray, b: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The bytes of the copies (sorted by start ``t``) that began in each of the steps ``[starts, ends)``."""
    cum = np.concatenate([[0.0], np.cumsum(b)])
    return cum[np.searchsorted(t, ends, side="left")] - cum[np.searchsorted(t, starts, side="left")]


def explain(fam: dict, pieces, u: intervals.Union, paths: np.ndarray, rinfo: dict, ops: pd.DataFrame,
            api: pd.DataFrame) -> dict | None:
    """``{"steps", "excess_ns", "causes": [{"kind", "name", "words", "ns", "share"}], "copies_to_host",
    "allocator_growth", "checkpoint"}`` for the family's slow steps at known shapes (``fam["_slow_known"]``, set by
    ``slow.account`` through ``_account_steps``), or None where there are none or too few typical steps to hold them
    against. Each cause is what the slow steps held of it beyond as many typical steps (their mean); the rows are scaled
    to add up to ``excess_ns``, the slow steps' time beyond the typical step (``time_accounting.base_ns``): the time the
    loop's line says they took beyond it. ``checkpoint``: the same for the steps among them that copied the model's
    state to the host (``checkpoint_steps``, ``fam["_checkpoint"]``), with ``cost_ns``, their time beyond the typical
    step less their data loading: what saving less often, or off the loop, removes."""
    known, typical = fam.get("_slow_known"), fam.get("_typical")
    if known is None or typical is None or not known.any() or typical.sum() < MIN_TYPICAL:
        return None
    starts, ends = fam["_iterations"]
    base = float((fam.get("time_accounting") or {}).get("base_ns") or np.median((ends - starts)[typical]))
    dtoh = device_to_host(ops)  # (the GPU's time in copies to the host apart from its other work: a checkpoint's copies)
    cu = intervals.union(ops["start_ns"].to_numpy(dtype="float64")[dtoh],
                         ops["end_ns"].to_numpy(dtype="float64")[dtoh]) if dtoh.any() else None
    ctx = (pieces, u, paths, rinfo, cu)
    out = _account(known, typical, starts, ends, base, ctx)
    if out is None:
        return None
    sk, ek, st, et = starts[known], ends[known], starts[typical], ends[typical]
    scale = known.sum() / typical.sum()
    copies = _count(ops, dtoh, sk, ek, st, et, scale)
    if copies:
        out["copies_to_host"] = copies
    growth = _growth(api, sk, ek, st, et, scale)
    if growth:
        out["allocator_growth"] = growth
    ck = fam.get("_checkpoint")
    if ck is not None and ck.any():
        acc = _account(ck, typical, starts, ends, base, ctx)
        if acc is not None:
            data = sum(r["ns"] for r in acc["causes"] if r["kind"] == "host-range" and _is_data(r["name"]))
            t, _, b = host_copies(ops)
            n = int(intervals.inside(t, starts[ck], ends[ck]).sum())
            held = float(_bytes_within(t, b, starts[ck], ends[ck]).sum())
            acc.update(cost_ns=max(acc["excess_ns"] - data, 0.0), copies=n, bytes=held,
                       per_step_bytes=held / int(ck.sum()), base_ns=base, every_steps=_every(ck))
            out["checkpoint"] = acc
    return out


def _every(mask: np.ndarray) -> int | None:
    """The steps between checkpoints where the recording holds two or more of them at a steady interval."""
    at = np.flatnonzero(mask)
    if len(at) < 2:
        return None
    d = np.diff(at)
    return int(d[0]) if (d == d[0]).all() else None


def _account(slow: np.ndarray, typical: np.ndarray, starts: np.ndarray, ends: np.ndarray, base: float,
             ctx: tuple) -> dict | None:
    """``{"steps", "excess_ns", "causes"}`` of the steps ``slow`` against as many ``typical`` ones (``explain``)."""
    pieces, u, paths, rinfo, cu = ctx
    it = ends - starts
    scale = slow.sum() / typical.sum()
    excess = float(np.clip(it[slow] - base, 0.0, None).sum())
    if excess <= 0:
        return None
    sk, ek, st, et = starts[slow], ends[slow], starts[typical], ends[typical]
    busy_k = float(intervals.busy_within(u, sk, ek).sum())
    busy_t = float(intervals.busy_within(u, st, et).sum())
    slow_c = idle.causes(idle.time_scope(pieces, sk, ek), busy_k, paths, rinfo)
    typ_c = {(c["kind"], c["name"]): c["idle_ns"] for c in idle.causes(idle.time_scope(pieces, st, et), busy_t, paths,
                                                                        rinfo)}
    rows = [{"kind": c["kind"], "name": c["name"], "ns": c["idle_ns"] - scale * typ_c.get((c["kind"], c["name"]), 0.0)}
            for c in slow_c]
    if cu is not None:
        copy_k = float(intervals.busy_within(cu, sk, ek).sum())
        copy_t = float(intervals.busy_within(cu, st, et).sum())
        rows.append({"kind": "copies-to-host", "name": "device-to-host copies", "ns": copy_k - scale * copy_t})
        busy_k, busy_t = busy_k - copy_k, busy_t - copy_t
    rows.append({"kind": "gpu-work", "name": "GPU work", "ns": busy_k - scale * busy_t})
    rows = [r for r in rows if r["ns"] > 0]
    beyond = float(it[slow].sum() - scale * it[typical].sum())  # (what the rows measure: beyond the typical mean)
    held = sum(r["ns"] for r in rows)
    if beyond > held:  # (what no cause measured holds)
        rows.append({"kind": OTHER, "name": OTHER, "ns": beyond - held})
        held = beyond
    for r in rows:  # (scaled to the excess beyond the typical step)
        r["ns"] *= excess / held if held > 0 else 0.0
    rows.sort(key=lambda r: -r["ns"])
    for r in rows:
        r["share"] = r["ns"] / excess
        r["words"] = _words(r)
    return {"steps": int(slow.sum()), "excess_ns": excess, "causes": rows}


def _words(r: dict) -> str:
    kind, name = r["kind"], r["name"]
    if kind == "host-range":
        if name == idle.NO_RANGE:
            return "host work outside any range"
        return f"data loading (`{name}`)" if _is_data(name) else f"the host in `{name}`"
    return {"sync": f"synchronising calls ({name})", "launch-overhead": "launch gaps",
            "pageable-copy": "pageable copies", "gpu-wait": "launched work waiting", "gpu-work": "more GPU work",
            "copies-to-host": "the GPU copying to the host", OTHER: "not attributed"}.get(kind, name)


def _is_data(range_path: str) -> bool:
    """Whether a range is data loading, by its innermost name (``DATA_WORDS``)."""
    leaf = range_path.rsplit("/", 1)[-1]
    return any(w in leaf for w in DATA_WORDS)


def _count(ops: pd.DataFrame, mask: np.ndarray, sk, ek, st, et, scale: float) -> dict | None:
    """The device-to-host copies in the slow steps and in as many typical ones: a checkpoint brings the model's state to
    the host one tensor at a time."""
    if not mask.any():
        return None
    t = ops["start_ns"].to_numpy(dtype="float64")[mask]
    b = np.nan_to_num(ops["bytes"].to_numpy(dtype="float64")[mask]) if "bytes" in ops else np.zeros(mask.sum())
    ink, int_ = intervals.inside(t, sk, ek), intervals.inside(t, st, et)
    n_k, n_t = int(ink.sum()), int(int_.sum())
    if n_k <= scale * n_t * 2 and b[ink].sum() <= scale * b[int_].sum() * 2 + 1e6:
        return None  # (no more than typical steps copy: nothing to tell)
    return {"copies": n_k, "bytes": float(b[ink].sum()), "typical_copies": round(scale * n_t, 1),
            "typical_bytes": float(scale * b[int_].sum()), "per_step_bytes": float(b[ink].sum()) / max(len(sk), 1)}


def _growth(api: pd.DataFrame, sk, ek, st, et, scale: float) -> dict | None:
    """The CUDA caching allocator's growth calls in the slow steps, against as many typical ones."""
    if api is None or api.empty or "name" not in api:
        return None
    hit = api["name"].isin(ALLOCATOR_GROWTH).to_numpy()
    if not hit.any():
        return None
    t = api.loc[hit, "start_ns"].to_numpy(dtype="float64")
    d = api.loc[hit, "end_ns"].to_numpy(dtype="float64") - t
    ink, int_ = intervals.inside(t, sk, ek), intervals.inside(t, st, et)
    if int(ink.sum()) <= scale * int(int_.sum()):
        return None
    return {"calls": int(ink.sum()), "ns": float(d[ink].sum()), "typical_calls": round(scale * int(int_.sum()), 1)}
