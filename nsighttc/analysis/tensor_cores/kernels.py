"""The per-kernel table: launches rolled up by kernel (time, calls, Tensor Core state, dtype, evidence), several
tables combined (ranks, passes), the compact form a worker returns, and the kernels still unknown, with why."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import labels
from .. import name_rules
from .groups import _count_by, _first_by, _group_sums, _min_by, _sum_by, packed_groups
from .ladder import tc_states


def aggregate_kernels(launches: pd.DataFrame) -> pd.DataFrame:
    """One row per (name, verdict, dtype, evidence): launches whose evidence disagrees never merge.

    Triton specialisations of one function share a name and may differ (one fp16 tl.dot, one not):
    they stay separate rows with a ``variant`` number.
    """
    if launches.empty:
        return pd.DataFrame(columns=["name", "calls", "total_time_ns", "tensor_core", "evidence", "dtype",
                                     "nvtx", "tc_flop", "tflops", "tensor_pipe_pct", "name_tc", "name_rule",
                                     "matrix_work", "time_share", "variant", "evidence_detail"])
    df = pd.DataFrame({"name": labels.as_categorical(launches["name"]).array, "_state": tc_states(launches).array,
                       "_dtype": labels.as_categorical(launches["dtype"]).array, "evidence": pd.Categorical(launches["evidence"]),
                       "time_ns": launches["time_ns"], "tc_flop": launches["tc_flop"],
                       "tensor_pipe_pct": launches["tensor_pipe_pct"], "matrix_work": launches["matrix_work"],
                       "name_rule": launches["name_rule"], "evidence_detail": launches["evidence_detail"],
                       "launch_id": launches["launch_id"], "nvtx": labels.as_categorical(launches["nvtx"]).array},
                      copy=False)
    keys = ["name", "_state", "_dtype", "evidence"]
    gid, out = packed_groups(df, keys, dropna=False)  # every launch has a group: no key is dropped
    m = len(out)
    time_ns = df["time_ns"].to_numpy(dtype="float64")
    tc_flop = df["tc_flop"].to_numpy(dtype="float64")
    pipe = df["tensor_pipe_pct"].to_numpy(dtype="float64")
    out["calls"] = np.bincount(gid, minlength=m)
    out["total_time_ns"] = _sum_by(gid, time_ns, m)
    out["tc_flop"] = _sum_by(gid, tc_flop, m)
    out["_pipe_w"] = _sum_by(gid, pipe * time_ns, m)
    out["_pipe_t"] = _count_by(gid, ~np.isnan(pipe), m)
    out["matrix_work"] = _count_by(gid, df["matrix_work"].to_numpy(dtype=bool), m) > 0
    for c in ("name_rule", "evidence_detail"):
        col = df[c] if isinstance(df[c].dtype, pd.CategoricalDtype) else df[c].astype("category")
        out[c] = np.asarray(_first_by(gid, col, m), dtype=object)
    out["first_launch"] = _min_by(gid, df["launch_id"].to_numpy(dtype="float64", na_value=np.nan), m)
    # the ranges each group ran in: distinct (group, range) pairs, not a pass per group
    nv_codes = df["nvtx"].cat.codes.to_numpy().astype(np.int64)
    n_nv = len(df["nvtx"].cat.categories)
    pairs = pd.unique((gid.astype(np.int64) * (n_nv + 1)) + nv_codes + 1)
    pg, pn = pairs // (n_nv + 1), pairs % (n_nv + 1) - 1
    names = np.append(np.asarray(df["nvtx"].cat.categories, dtype=object), None)[pn]
    real = pd.notna(names) & (names != "")
    lists = pd.Series(names[real]).groupby(pg[real]).agg(lambda v: sorted(set(v)))
    out["nvtx"] = [lists.get(i, []) for i in range(m)]
    out["_state"] = out["_state"].astype(str)
    out["_dtype"] = out["_dtype"].astype(str)
    out["evidence"] = out["evidence"].astype(str).astype(object)
    out["tensor_core"] = out["_state"].map({"yes": True, "no": False, "unknown": None}).astype(object)
    out["dtype"] = out["_dtype"].replace("", None)
    out["name"] = out["name"].astype(str)
    out["tensor_pipe_pct"] = np.where(out["_pipe_t"] > 0, out["_pipe_w"] / out["total_time_ns"], np.nan)
    has_flop = _count_by(gid, ~np.isnan(tc_flop), m) > 0
    out["tc_flop"] = np.where(has_flop, out["tc_flop"], np.nan)
    # Achieved TFLOP/s = FLOPs / kernel time (ns) / 1e3.
    out["tflops"] = out["tc_flop"] / out["total_time_ns"] / 1e3
    out["name_tc"] = out["name"].map(lambda n: name_rules.match(n)[0])
    return _shares_and_variants(out).drop(columns=["_state", "_dtype", "_pipe_w", "_pipe_t"])


def _shares_and_variants(out: pd.DataFrame) -> pd.DataFrame:
    """Per-kernel rows: time shares, largest first, and a ``variant`` number where one name has several rows
    (verdicts, dtypes or evidence that disagree), 0 where it has one."""
    total = out["total_time_ns"].sum()
    out["time_share"] = out["total_time_ns"] / total if total else 0.0
    out = out.sort_values(["total_time_ns", "first_launch"], ascending=[False, True], kind="stable")
    out["variant"] = out.groupby("name").cumcount() + 1
    out["variant"] = np.where(out.groupby("name")["name"].transform("size") > 1, out["variant"], 0)
    return out.reset_index(drop=True)


def combine_kernel_rows(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-kernel rows of several ranks (``aggregate_kernels`` each) -> one table: rows of one kernel with
    the same verdict, dtype and evidence add up; shares, TFLOP/s and variants are recomputed."""
    tables = [t for t in tables if not t.empty]
    if not tables:
        return aggregate_kernels(pd.DataFrame())
    df = pd.concat(tables, ignore_index=True)
    df["_tc"] = df["tensor_core"].astype(str)
    df["_dtype"] = df["dtype"].fillna("").astype(str)
    df["_pipe_w"] = df["tensor_pipe_pct"] * df["total_time_ns"]
    keys = ["name", "_tc", "_dtype", "evidence"]
    g = df.groupby(keys, sort=False, dropna=False)
    out = g.agg(calls=("calls", "sum"), total_time_ns=("total_time_ns", "sum"),
                tc_flop=("tc_flop", lambda x: x.sum(min_count=1)), _pipe_w=("_pipe_w", "sum"),
                _pipe_n=("tensor_pipe_pct", "count"), tensor_core=("tensor_core", "first"), dtype=("dtype", "first"),
                matrix_work=("matrix_work", "any"), name_rule=("name_rule", "first"), name_tc=("name_tc", "first"),
                evidence_detail=("evidence_detail", "first"), first_launch=("first_launch", "min"),
                nvtx=("nvtx", lambda x: sorted({n for lst in x for n in lst}))).reset_index()
    out["tensor_pipe_pct"] = np.where(out["_pipe_n"] > 0, out["_pipe_w"] / out["total_time_ns"], np.nan)
    out["tflops"] = out["tc_flop"] / out["total_time_ns"] / 1e3
    return _shares_and_variants(out).drop(columns=["_tc", "_dtype", "_pipe_w", "_pipe_n"])


def compact(launches: pd.DataFrame) -> pd.DataFrame:
    """Launches -> one row per (range path, verdict, dtype, matrix work, evidence) with summed time,
    launch count and FLOPs: roll-ups over a million launches become roll-ups over a few dozen rows."""
    if "n" in launches.columns:
        return launches
    # group keys stay categorical (codes): object or Arrow strings over a million rows cost seconds
    df = pd.DataFrame({
        "nvtx": labels.as_categorical(launches["nvtx"]).array,
        "state": tc_states(launches).array,
        "dtype": labels.as_categorical(launches["dtype"]).array,
        "matrix_work": launches["matrix_work"].astype(bool).to_numpy(),
        "evidence": pd.Categorical(launches["evidence"]),
        "dtype_named": dtype_named(launches),
        "time_ns": launches["time_ns"].to_numpy(),
        "tc_flop": launches["tc_flop"].to_numpy(),
        "flop_time_ns": np.where(launches["tc_flop"].notna(), launches["time_ns"], 0.0),
        "launch_id": pd.to_numeric(launches["launch_id"], errors="coerce").to_numpy(dtype="float64"),
        "comm": _communication(launches),
    }, copy=False)
    out = _group_sums(df, ["nvtx", "state", "dtype", "matrix_work", "evidence", "dtype_named", "comm"])
    out["tc_flop"] = out["tc_flop"].where(out["has_flop"])
    out["nvtx"] = out["nvtx"].astype(str).astype(object)
    out["state"] = out["state"].astype(str).astype(object)
    out["dtype"] = out["dtype"].astype(str).astype(object)
    out["evidence"] = out["evidence"].astype(str).astype(object)
    out["tensor_core"] = out["state"].map({"yes": True, "no": False, "unknown": None}).astype(object)
    out["dtype"] = out["dtype"].replace("", None)
    return out


def dtype_named(launches: pd.DataFrame) -> np.ndarray:
    """Per launch: its dtype is the kernel name's word (instruction-count or name evidence), not a counter's."""
    if "dtype_named" in launches.columns:
        return launches["dtype_named"].fillna(False).to_numpy(dtype=bool)
    return np.zeros(len(launches), dtype=bool)


def off_tc_dtypes(kernel_rows: pd.DataFrame) -> list[str]:
    """The dtypes the names of the matrix kernels on CUDA cores state (``cutlass_80_simt_sgemm``: fp32), by time:
    what the headline says of the matrix work that missed the Tensor Cores. One look per distinct name."""
    from ..name_rules import _cuda_core_dtype, is_communication, is_matrix_work
    if kernel_rows.empty:
        return []
    k = kernel_rows[(kernel_rows["tensor_core"] == False) & is_matrix_work(kernel_rows["name"]).to_numpy()  # noqa: E712
                    & ~is_communication(kernel_rows["name"]).to_numpy()]
    by = {}
    for name, t in zip(k["name"], k["total_time_ns"]):
        d = _cuda_core_dtype(str(name))
        if d:
            by[d] = by.get(d, 0.0) + float(t)
    return [d for d, _ in sorted(by.items(), key=lambda x: -x[1])]


UNKNOWN_LISTED = 20  # unknown kernels listed by name in the verdict (the rest are counted)


def unknown_kernels(kernel_rows: pd.DataFrame) -> list[dict]:
    """Every kernel whose Tensor Core use is unknown, largest first, with why (``name_rules.unknown_why``): a
    reviewer sees what the verdict could not tell and what would tell it. At most ``UNKNOWN_LISTED``."""
    if kernel_rows.empty:
        return []
    unk = kernel_rows[kernel_rows["tensor_core"].isna().to_numpy()]
    unk = unk[~name_rules.is_communication(unk["name"]).to_numpy()] if not unk.empty else unk
    return [{"name": str(r.name), "time_share": float(r.time_share), "calls": int(r.calls),
             "matrix_work": bool(r.matrix_work), "why": name_rules.unknown_why(None if pd.isna(r.name_rule) else str(r.name_rule))}
            for r in unk.head(UNKNOWN_LISTED).itertuples(index=False)]


def _communication(launches: pd.DataFrame) -> np.ndarray:
    """Communication kernels (NCCL collectives, ``name_rules.COMMUNICATION``): left out of the Tensor Core shares.
    A DDP ResNet-50 AMP job's headline said "YES — 13% of GPU kernel time" over a denominator of NCCL kernels that
    spend most of their time waiting for the other ranks."""
    if "name" not in launches or launches.empty:
        return np.zeros(len(launches), dtype=bool)
    from ..name_rules import is_communication
    return is_communication(launches["name"]).to_numpy(dtype=bool)
