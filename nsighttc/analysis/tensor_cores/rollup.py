"""The Tensor Core answer of a whole recording and of each range: shares of matrix-work time on Tensor Cores,
the one verdict (yes / partial / no / unknown) and the per-range table."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .kernels import compact
from .ladder import EVIDENCE_NONE


def path_prefixes(paths) -> pd.DataFrame:
    """Every range path with each of its prefixes: 'a/b' -> ('a/b', 'a'), ('a/b', 'a/b'). A kernel in a/b
    counts for the range a and for a/b (used by every per-range roll-up)."""
    return pd.DataFrame([(p, "/".join(p.split("/")[:i + 1])) for p in paths for i in range(p.count("/") + 1)],
                        columns=["nvtx", "range"])


def rollup(launches: pd.DataFrame, yes_threshold: float = 0.9) -> dict:
    """Overall Tensor Core summary of a set of launches (the whole run, or one NVTX range). Every share is of the
    *compute* kernel time: communication kernels are counted apart (``denominator``)."""
    c = compact(launches)
    # sums over numpy arrays: the compacted table has a few dozen rows, and this runs once per range, where
    # pandas' masking per sum cost more than the sums (np.nansum: pandas' own skipna sum, the same numbers)
    comm_rows = c["comm"].to_numpy(dtype=bool) if "comm" in c else np.zeros(len(c), dtype=bool)
    time_all = c["time_ns"].to_numpy(dtype="float64")
    all_time = float(np.nansum(time_all))
    comm_time = float(np.nansum(time_all[comm_rows]))
    comm_n = int(c["n"].to_numpy()[comm_rows].sum())
    c = c[~comm_rows]
    t = time_all[~comm_rows]
    total = float(np.nansum(t))
    state = c["state"].to_numpy()
    is_yes, is_no, is_unk = state == "yes", state == "no", state == "unknown"
    tc_time = float(np.nansum(t[is_yes]))
    unknown_time = float(np.nansum(t[is_unk]))
    matrix = c["matrix_work"].to_numpy(dtype=bool)
    matrix_time = float(np.nansum(t[matrix]))
    matrix_cuda_core = float(np.nansum(t[matrix & is_no]))
    matrix_unknown = float(np.nansum(t[matrix & is_unk]))
    yes_rows = c[is_yes]
    by_dtype = (yes_rows.assign(d=yes_rows["dtype"].fillna("unknown")).groupby("d")["time_ns"].sum() / total
                if total and not yes_rows.empty else pd.Series(dtype=float))
    named_dtype_time = float(np.nansum(t[is_yes & c["dtype_named"].to_numpy(dtype=bool)])) \
        if "dtype_named" in c else 0.0
    has_flop = is_yes & c["tc_flop"].notna().to_numpy()
    flop = float(np.nansum(c["tc_flop"].to_numpy(dtype="float64")[has_flop])) if has_flop.any() else None
    flop_time = float(np.nansum(c["flop_time_ns"].to_numpy(dtype="float64")[has_flop]))
    n = int(c["n"].sum()) + comm_n
    verdict = verdict_of(n - comm_n, tc_time, matrix_time, matrix_cuda_core, matrix_unknown, unknown_time,
                         yes_threshold)
    deciding = c[is_yes | matrix]
    evs = set((deciding if not deciding.empty else c)["evidence"]) - {EVIDENCE_NONE}
    evidence = EVIDENCE_NONE if not evs else evs.pop() if len(evs) == 1 else "mixed"
    return {
        "verdict": verdict,
        "evidence": evidence,
        "tc_time_share": tc_time / total if total else 0.0,
        "unknown_time_share": unknown_time / total if total else 0.0,
        "matrix_time_share": matrix_time / total if total else 0.0,
        "matrix_on_tc_share": tc_time / matrix_time if matrix_time else 0.0,
        "by_dtype": {str(k): float(v) for k, v in by_dtype.sort_values(ascending=False).items() if v > 0},
        "dtype_from_names_share": named_dtype_time / tc_time if tc_time else 0.0,
        "matrix_off_tc_share": matrix_cuda_core / matrix_time if matrix_time else 0.0,
        "matrix_unknown_share": matrix_unknown / matrix_time if matrix_time else 0.0,
        "denominator": {"kind": "compute kernel time", "compute_time_ns": total,
                        "communication_time_ns": comm_time, "communication_launches": comm_n,
                        "communication_share": comm_time / all_time if all_time else 0.0},
        "kernel_time_ns": all_time,
        "tc_time_ns": tc_time,
        "flop": flop,
        "tflops": flop / flop_time / 1e3 if flop and flop_time else None,
        "launches": n,
    }


def verdict_of(launches: int, tc_time: float, matrix_time: float, matrix_cuda_core: float, matrix_unknown: float,
               unknown_time: float, yes_threshold: float = 0.9) -> str:
    """The one Tensor Core answer every output gives (the JSON's ``verdict``, the headline's first word, ``diff``,
    the GitHub Action, the terminal):

    - ``yes``: Tensor Cores ran and at most ``1 - yes_threshold`` of the matrix work missed them (or is unknown);
    - ``partial``: they ran, and more of the matrix work did not or cannot be told;
    - ``no``: no kernel is known to have used them, and the matrix work that is known (most of it) ran on CUDA
      cores, or there is no matrix work and nothing unknown;
    - ``unknown``: no compute kernels, or the Tensor Cores' use cannot be told for most of the matrix work (or for
      any of the kernels, where there is no matrix work).
    An fp32 Trainer's headline said "NO for 89% of the matrix work" while its JSON said "unknown"."""
    if launches <= 0:
        return "unknown"
    if tc_time > 0:
        off_tc = matrix_cuda_core + matrix_unknown
        return "yes" if matrix_time and off_tc <= (1 - yes_threshold) * matrix_time else "partial"
    if matrix_cuda_core > 0 and matrix_cuda_core >= matrix_unknown:
        return "no"
    return "unknown" if unknown_time > 0 else "no"


def range_table(launches: pd.DataFrame) -> pd.DataFrame:
    """Per NVTX range path (every prefix: a kernel in ``a/b`` counts for ``a`` and ``a/b``): what ``rollup`` says of
    the range's launches, for every range at once. (One ``rollup`` per range took a fifth of an FSDP2 rank's analysis
    on this repository's CPU machine: ~150 ranges; the same sums as bin counts over the joined rows.)"""
    cols = ["name", "kernel_time_ns", "tc_time_share", "tc_verdict", "tc_evidence", "by_dtype", "launches",
            "unknown_time_share"]
    c = compact(launches)
    c = c[c["nvtx"] != ""]
    if c.empty:
        return pd.DataFrame(columns=cols)
    joined = c.merge(path_prefixes(pd.unique(c["nvtx"])), on="nvtx")
    codes, names = pd.factorize(joined["range"])  # (each range in the order it first appears, as groupby(sort=False))
    k = len(names)
    t = np.nan_to_num(joined["time_ns"].to_numpy(dtype="float64"))  # (nansum, as rollup's)
    comm = joined["comm"].to_numpy(dtype=bool) if "comm" in joined else np.zeros(len(joined), dtype=bool)
    state = joined["state"].to_numpy()
    yes, no, unk = state == "yes", state == "no", state == "unknown"
    matrix = joined["matrix_work"].to_numpy(dtype=bool)
    n = joined["n"].to_numpy(dtype="float64")
    compute = ~comm

    def per_range(mask: np.ndarray, w: np.ndarray = t) -> np.ndarray:
        return np.bincount(codes[mask], weights=w[mask], minlength=k)
    all_time = np.bincount(codes, weights=t, minlength=k)
    total, tc_time, unknown_time = per_range(compute), per_range(compute & yes), per_range(compute & unk)
    matrix_time = per_range(compute & matrix)
    matrix_cuda_core, matrix_unknown = per_range(compute & matrix & no), per_range(compute & matrix & unk)
    launches_n = np.bincount(codes, weights=n, minlength=k).astype(np.int64)
    compute_n = per_range(compute, n).astype(np.int64)
    # by dtype: the Tensor Core rows' time per dtype, a share of the range's compute time
    on_tc = compute & yes
    dt = pd.DataFrame({"r": codes[on_tc], "d": joined["dtype"].to_numpy()[on_tc], "t": t[on_tc]})
    dt["d"] = dt["d"].fillna("unknown").astype(str)
    by_dtype: list[dict] = [{} for _ in range(k)]
    for (r, d), v in dt.groupby(["r", "d"])["t"].sum().items():
        if total[r] and v / total[r] > 0:
            by_dtype[r][str(d)] = float(v / total[r])
    by_dtype = [dict(sorted(b.items(), key=lambda kv: -kv[1])) for b in by_dtype]
    # evidence: of the rows that decide (on Tensor Cores, or matrix work), else of every compute row
    deciding = compute & (yes | matrix)
    has_deciding = np.bincount(codes[deciding], minlength=k) > 0
    chosen = deciding | (compute & ~has_deciding[codes])
    ev = pd.DataFrame({"r": codes[chosen], "e": joined["evidence"].to_numpy()[chosen]})
    ev = ev[ev["e"] != EVIDENCE_NONE].drop_duplicates()
    evidence = [EVIDENCE_NONE] * k
    for r, es in ev.groupby("r")["e"]:
        evidence[r] = es.iloc[0] if len(es) == 1 else "mixed"
    out = pd.DataFrame({
        "name": np.asarray(names, dtype=object),
        "kernel_time_ns": all_time,
        "tc_time_share": np.divide(tc_time, total, out=np.zeros(k), where=total != 0),
        "tc_verdict": [verdict_of(int(compute_n[r]), tc_time[r], matrix_time[r], matrix_cuda_core[r],
                                  matrix_unknown[r], unknown_time[r]) for r in range(k)],
        "tc_evidence": evidence,
        "by_dtype": by_dtype,
        "launches": launches_n,
        "unknown_time_share": np.divide(unknown_time, total, out=np.zeros(k), where=total != 0),
    }, columns=cols)
    first_seen = joined.groupby("range")["first"].min()
    out["_first"] = out["name"].map(first_seen)
    return out.sort_values(["_first", "name"]).drop(columns="_first").reset_index(drop=True)
