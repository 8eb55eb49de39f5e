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


def explain(fam: dict, pieces, u: intervals.Union, paths: np.ndarray, rinfo: dict, ops: pd.DataFrame,
            api: pd.DataFrame) -> dict | None:
    """``{"steps", "excess_ns", "causes": [{"kind", "name", "words", "ns", "share"}], "copies_to_host",
    "allocator_growth"}`` for the family's slow steps at known shapes (``fam["_slow_known"]``, set by ``slow.account``
    through ``_account_steps``), or None where there are none or too few typical steps to hold them against. Each cause
    is what the slow steps held of it beyond as many typical steps (their mean); the rows are scaled to add up to
    ``excess_ns``, the slow steps' time beyond the typical step (``time_accounting.base_ns``): the time the loop's line
    says they took beyond it."""
    known, typical = fam.get("_slow_known"), fam.get("_typical")
    if known is None or typical is None or not known.any() or typical.sum() < MIN_TYPICAL:
        return None
    starts, ends = fam["_iterations"]
    it = ends - starts
    scale = known.sum() / typical.sum()
    base = float((fam.get("time_accounting") or {}).get("base_ns") or np.median(it[typical]))
    excess = float(np.clip(it[known] - base, 0.0, None).sum())
    if excess <= 0:
        return None
    sk, ek, st, et = starts[known], ends[known], starts[typical], ends[typical]
    busy_k = float(intervals.busy_within(u, sk, ek).sum())
    busy_t = float(intervals.busy_within(u, st, et).sum())
    slow_c = idle.causes(idle.time_scope(pieces, sk, ek), busy_k, paths, rinfo)
    typ_c = {(c["kind"], c["name"]): c["idle_ns"] for c in idle.causes(idle.time_scope(pieces, st, et), busy_t, paths,
                                                                        rinfo)}
    rows = [{"kind": c["kind"], "name": c["name"], "ns": c["idle_ns"] - scale * typ_c.get((c["kind"], c["name"]), 0.0)}
            for c in slow_c]
    dtoh = device_to_host(ops)  # (the GPU's time in copies to the host apart from its other work: a checkpoint's copies)
    if dtoh.any():
        cu = intervals.union(ops["start_ns"].to_numpy(dtype="float64")[dtoh], ops["end_ns"].to_numpy(dtype="float64")[dtoh])
        copy_k = float(intervals.busy_within(cu, sk, ek).sum())
        copy_t = float(intervals.busy_within(cu, st, et).sum())
        rows.append({"kind": "copies-to-host", "name": "device-to-host copies", "ns": copy_k - scale * copy_t})
        busy_k, busy_t = busy_k - copy_k, busy_t - copy_t
    rows.append({"kind": "gpu-work", "name": "GPU work", "ns": busy_k - scale * busy_t})
    rows = [r for r in rows if r["ns"] > 0]
    beyond = float(it[known].sum() - scale * it[typical].sum())  # (what the rows measure: beyond the typical mean)
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
    out = {"steps": int(known.sum()), "excess_ns": excess, "causes": rows}
    copies = _count(ops, dtoh, sk, ek, st, et, scale)
    if copies:
        out["copies_to_host"] = copies
    growth = _growth(api, sk, ek, st, et, scale)
    if growth:
        out["allocator_growth"] = growth
    return out


def _words(r: dict) -> str:
    kind, name = r["kind"], r["name"]
    if kind == "host-range":
        if name == idle.NO_RANGE:
            return "host work outside any range"
        leaf = name.rsplit("/", 1)[-1]
        return f"data loading (`{name}`)" if any(w in leaf for w in DATA_WORDS) else f"the host in `{name}`"
    return {"sync": f"synchronising calls ({name})", "launch-overhead": "launch gaps",
            "pageable-copy": "pageable copies", "gpu-wait": "launched work waiting", "gpu-work": "more GPU work",
            "copies-to-host": "the GPU copying to the host", OTHER: "not attributed"}.get(kind, name)


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
