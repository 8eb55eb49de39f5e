"""Whether a job's ranks did the same work per step, and how far their steps drift apart."""
from __future__ import annotations

import numpy as np

from ..rank_rows import COMPUTE

SAME_WORK_GPU = 0.05         # ranks run the same work: the same compute kernels, GPU compute per step within 5%
SAME_WORK_LAUNCHES = 0.05    # ... or, where launches are known: launches per step by kernel and grid within 5%


def work_difference(a: dict, b: dict) -> float:
    """How different two ranks' work per step is (``rank_rows.work_per_step``): the launches per step that differ by
    kernel and grid, over the launches per step of the larger."""
    keys = set(a) | set(b)
    diff = sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)
    return diff / max(sum(a.values()), sum(b.values()), 1e-9)


def same_work(rows: list[dict]) -> bool | None:
    """Whether every rank ran the same work per steady step: the same compute kernels, with the same grids, launched
    as often (within ``SAME_WORK_LAUNCHES`` of the launches), each rank against the first. What ran, not how long it
    took: contention (NCCL kernels beside compute, a throttled GPU) changes time, not work. Recordings
    without the launches' times fall back to the kernel names and GPU compute per step within ``SAME_WORK_GPU``.
    None where the ranks' verdicts do not say."""
    if len(rows) < 2:
        return None
    work = [r.get("_work") for r in rows]
    if all(work):
        return all(work_difference(work[0], w) <= SAME_WORK_LAUNCHES for w in work[1:])
    kernels = [r["_compute_kernels"] for r in rows]
    gpu = [r["_per_step"].get((COMPUTE, "GPU compute")) for r in rows]
    if not all(kernels) or any(g is None for g in gpu):
        return None
    med = float(np.median(gpu))
    return len(set(kernels)) == 1 and med > 0 and all(abs(g - med) <= SAME_WORK_GPU * med for g in gpu)


def step_skew(rows: list[dict]) -> dict | None:
    """Per step index (steps counted from each rank's first), slowest / fastest iteration across ranks:
    median and max over the steps every rank has, warm-up of any rank left out."""
    its = [r["_all_iterations"] for r in rows if r["_all_iterations"]]
    if len(its) < 2:
        return None
    first = max(r["_warmup"] for r in rows if r["_all_iterations"])
    n = min(len(x) for x in its)
    if n <= first:
        return None
    m = np.array([x[first:n] for x in its], dtype="float64")
    lo = m.min(axis=0)
    ratio = np.where(lo > 0, m.max(axis=0) / np.where(lo > 0, lo, 1), np.nan)
    return {"steps": int(n - first), "median": float(np.nanmedian(ratio)), "max": float(np.nanmax(ratio))}
