"""Did the Tensor Cores fire? The per-launch evidence ladder and its roll-ups.

Ladder, per kernel launch (first rung that decides wins):

1. ``hardware`` (ops): any ``tc_ops_<dtype>`` > 0 -> yes; the largest names the dtype, the sum is FLOPs.
   All ops counters collected for every common dtype and all zero -> no (the counters are exact).
2. ``hardware`` (instructions): (hmma - hfma2) + imma + dmma + gmma (+ tcgen05) > 0 -> yes.
   A non-zero hmma alone is *not* evidence: HFMA2.MMA register moves land on the tensor pipe in plain
   elementwise kernels (measured on H200: hmma == hfma2 in every such kernel). All of them zero, with
   hmma's HFMA2 part accounted for -> no.
3. ``kernel-name``: the rule table in ``name_rules``; ``None`` (unknown) when the name carries no signal.

Everything is column arithmetic over the launch table: no per-kernel Python loops.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..model import TC_DTYPES
from .. import labels
from . import known_kernels, name_rules

# The dtypes whose ops counters must all be present for "all zero" to mean "no Tensor Core math".
OPS_REQUIRED_FOR_NO = ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")

STATES = ["yes", "no", "unknown"]


def state_categorical(tc) -> pd.Categorical:
    """True/False/None per launch -> categorical 'yes'/'no'/'unknown' (built from integer codes)."""
    tc = np.asarray(tc, dtype=object)
    return pd.Categorical.from_codes(np.where(tc == True, 0, np.where(tc == False, 1, 2)),  # noqa: E712
                                     categories=STATES)


def path_prefixes(paths) -> pd.DataFrame:
    """Every range path with each of its prefixes: 'a/b' -> ('a/b', 'a'), ('a/b', 'a/b'). A kernel in a/b
    counts for the range a and for a/b (used by every per-range roll-up)."""
    return pd.DataFrame([(p, "/".join(p.split("/")[:i + 1])) for p in paths for i in range(p.count("/") + 1)],
                        columns=["nvtx", "range"])


# Tensor Core math measured by instruction counts (the default run's one-pass ncu set), dtype from the name
DETAIL_INST_NAMED_DTYPE = "tensor instruction counts; dtype from the kernel name"
EVIDENCE_HARDWARE = "hardware"
EVIDENCE_NAME = "kernel-name"
EVIDENCE_NONE = "none"
NO_SIGNAL = "no signal"


COUNTER_COLUMNS = [f"tc_ops_{d}" for d in TC_DTYPES] + [f"inst_{i}" for i in ("hmma", "hfma2", "imma", "dmma", "gmma", "tc")]
_PER_NAME = ["tensor_core", "tc_state", "evidence", "evidence_detail", "dtype", "dtype_named", "name_tc", "name_rule",
             "matrix_work"]


def classify_launches(k: pd.DataFrame) -> pd.DataFrame:
    """Add ``tensor_core`` (object: True/False/None), ``evidence``, ``evidence_detail``, ``dtype``,
    ``tc_flop``, ``name_tc``/``name_rule`` (what the name alone would have said) to a kernel table.

    Without any counter (timeline sources) every answer is the name's: computed once per distinct name and
    spread by the name codes (1M-kernel nsys export: 0.43 s -> 0.05 s)."""
    if len(k) > 10_000 and not any(_has_values(k[c]) for c in COUNTER_COLUMNS if c in k):
        return _classify_per_name(k)
    return _classify_rows(k)


def _has_values(col: pd.Series) -> bool:
    """Any non-NaN value (counter columns are float64: one vectorised scan, no nullable machinery)."""
    a = col.to_numpy()
    return bool(not np.isnan(a).all()) if a.dtype.kind == "f" else bool(col.notna().any())


def _classify_per_name(k: pd.DataFrame) -> pd.DataFrame:
    names = labels.as_categorical(k["name"])
    codes = names.cat.codes.to_numpy()
    uniq = k.iloc[0:0].reindex(range(len(names.cat.categories)))  # one row per distinct name, no counters
    uniq["name"] = pd.Series(list(names.cat.categories), dtype=object)
    if "cc" in k:  # the recording's architecture, for the known-kernel table (one GPU model per recording)
        ccs = k["cc"].dropna()
        uniq["cc"] = pd.Series(ccs.mode().iloc[0] if len(ccs) else None, index=uniq.index, dtype=object)
    small = _classify_rows(uniq)
    out = k.copy(deep=False)
    for col in _PER_NAME:
        v = small[col]
        if isinstance(v.dtype, pd.CategoricalDtype):
            out[col] = pd.Categorical.from_codes(v.cat.codes.to_numpy()[codes], dtype=v.dtype)
        else:
            out[col] = pd.Series(v.to_numpy()[codes], index=k.index, dtype=v.dtype)
    out["tc_flop"] = np.full(len(k), np.nan)
    dur = k["duration_ns"].astype("float64")
    out["time_ns"] = dur if dur.notna().any() else pd.Series(1.0, index=k.index)
    return out


def _classify_rows(k: pd.DataFrame) -> pd.DataFrame:
    k = k.copy(deep=False)
    ops_cols = [f"tc_ops_{d}" for d in TC_DTYPES]
    if k[ops_cols].notna().any().any():
        ops = k[ops_cols].to_numpy(dtype="float64")
        ops_total = np.where(np.isnan(ops).all(axis=1), np.nan, np.nansum(ops, axis=1))
        top = np.argmax(np.where(np.isnan(ops), -1.0, ops), axis=1)
        ops_dtype = np.array(TC_DTYPES, dtype=object)[top]
    else:  # timeline sources: no counters at all
        ops_total = np.full(len(k), np.nan)
        ops_dtype = np.full(len(k), None, dtype=object)
    ops_pos = np.nan_to_num(ops_total, nan=0.0) > 0
    required = k[[f"tc_ops_{d}" for d in OPS_REQUIRED_FOR_NO]]
    ops_all_zero = required.notna().all(axis=1).to_numpy() & (np.nan_to_num(ops_total, nan=1.0) == 0)

    hmma, hfma2 = k["inst_hmma"].to_numpy(), k["inst_hfma2"].to_numpy()
    imma, dmma = k["inst_imma"].to_numpy(), k["inst_dmma"].to_numpy()
    gmma, tcgen = k["inst_gmma"].to_numpy(), k["inst_tc"].to_numpy()
    real_hmma = hmma - hfma2  # NaN when either is missing: then hmma proves nothing
    with np.errstate(invalid="ignore"):
        inst_pos = (real_hmma > 0) | (imma > 0) | (dmma > 0) | (gmma > 0) | (tcgen > 0)
        hmma_zero = (hmma == 0) | (real_hmma <= 0)
        cc_codes, cc_uniques = pd.factorize(k["cc"])
        cc_major = np.array([float(str(c).split(".")[0]) if str(c)[:1].isdigit() else np.nan for c in cc_uniques]
                            + [np.nan])
        major = cc_major[cc_codes]
        tcgen_ok = (tcgen == 0) | ~(major >= 10)
        inst_neg = hmma_zero & (imma == 0) & (dmma == 0) & ~(gmma > 0) & tcgen_ok
    inst_dtype = np.where(imma > 0, "int8", np.where(dmma > 0, "fp64", None))

    names = name_rules.classify_names(k["name"])
    name_tc = names["name_tc"].to_numpy(dtype=object)
    name_dtype = names["name_dtype"].to_numpy(dtype=object)
    name_rule = names["name_rule"]
    # a name measured with ncu on this architecture answers before the rules guess (known_kernels)
    known = known_kernels.lookup(k["name"], k["cc"] if "cc" in k else None)
    measured = pd.notna(known["known_tc"]).to_numpy()
    known_details: list[str] = []
    if measured.any():
        name_tc = np.where(measured, known["known_tc"].to_numpy(dtype=object), name_tc)
        name_dtype = np.where(measured, known["known_dtype"].to_numpy(dtype=object), name_dtype)
        rules = np.where(measured, known["known_rule"].to_numpy(dtype=object),
                         np.asarray(name_rule.astype(object), dtype=object))
        name_rule = pd.Series(pd.Categorical(rules), index=k.index)
        known_details = sorted(set(known["known_detail"][measured]))

    # instruction counts say "Tensor Core math" but only imma/dmma name a dtype: the rest is the name's word
    inst_named = inst_pos & ~ops_pos & pd.isna(pd.Series(inst_dtype, dtype=object)).to_numpy()
    conds = [ops_pos, ops_all_zero, inst_pos & ~inst_named, inst_named, inst_neg]
    decided_hw = ops_pos | ops_all_zero | inst_pos | inst_neg
    tc = np.where(ops_pos | inst_pos, True, np.where(ops_all_zero | inst_neg, False, None)).astype(object)
    tc = np.where(decided_hw, tc, name_tc)
    name_known = pd.notna(pd.Series(name_tc, dtype=object)).to_numpy()
    # small categoricals built from integer codes: no million-string arrays
    ev_code = np.where(decided_hw, 0, np.where(name_known, 1, 2))
    evidence = pd.Categorical.from_codes(ev_code, categories=[EVIDENCE_HARDWARE, EVIDENCE_NAME, EVIDENCE_NONE])
    detail_code = np.select(conds, [0, 1, 2, 6, 3], default=np.where(name_known, 4, 5))
    if known_details:  # answers of the known-kernel table: "measured on H100 ... for this kernel name"
        by_text = {t: 7 + i for i, t in enumerate(known_details)}
        kd = known["known_detail"].map(by_text).fillna(-1).to_numpy(dtype=np.int64)
        detail_code = np.where(~decided_hw & measured, kd, detail_code)
    detail = pd.Categorical.from_codes(detail_code, categories=[
        "tensor ops counters", "tensor ops counters all zero", "tensor instruction counts",
        "no tensor math instructions", "kernel name rule", NO_SIGNAL, DETAIL_INST_NAMED_DTYPE] + known_details)
    # dtype: exact from ops; from instructions where they tell (imma/dmma); else what the name says.
    hw_inst_dtype = np.where(pd.isna(pd.Series(inst_dtype, dtype=object)).to_numpy(), name_dtype, inst_dtype)
    dtype = np.where(ops_pos, ops_dtype,
                     np.where(inst_pos & ~ops_all_zero, hw_inst_dtype,
                              np.where(~decided_hw & (name_tc == True), name_dtype, None)))  # noqa: E712
    dtype = np.where(tc == True, dtype, None)  # noqa: E712

    k["tensor_core"] = pd.Series(tc, index=k.index, dtype=object)
    k["tc_state"] = state_categorical(tc)
    k["evidence"] = evidence
    k["evidence_detail"] = detail
    dtype_s = pd.Series(dtype, index=k.index, dtype=object)
    k["dtype"] = dtype_s.where(dtype_s.notna(), None)
    # the dtype is the kernel name's word (not a counter's) where instruction counts or the name decided
    k["dtype_named"] = (tc == True) & (inst_named | ~decided_hw)  # noqa: E712
    k["tc_flop"] = np.where(ops_pos, ops_total, np.nan)
    k["name_tc"] = pd.Series(name_tc, index=k.index, dtype=object)
    k["name_rule"] = name_rule
    k["matrix_work"] = name_rules.is_matrix_work(k["name"]).to_numpy() | (k["tensor_core"] == True).to_numpy()  # noqa: E712
    dur = k["duration_ns"].astype("float64")
    k["time_ns"] = dur if dur.notna().any() else pd.Series(1.0, index=k.index)
    return k


def tc_states(launches: pd.DataFrame) -> pd.Series:
    """'yes'/'no'/'unknown' per launch (categorical: groups and compares fast)."""
    if "tc_state" in launches.columns:
        return launches["tc_state"]
    return pd.Series(state_categorical(launches["tensor_core"].to_numpy()), index=launches.index)


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


def packed_groups(df: pd.DataFrame, keys: list[str], dropna: bool = True) -> tuple[np.ndarray, pd.DataFrame]:
    """Group ids of a launch table by ``keys`` (categoricals and booleans, a few values each): per row its
    group (-1: a missing key with ``dropna``), and one row of key values per group, groups numbered in order
    of first appearance like ``groupby(sort=False)``. With ``dropna=False`` a missing key is a value of its own.

    The keys are packed into one integer per row and factorised once: a four- or six-key ``groupby`` over
    4M launches built ~230-250 MB of per-key codes and indexers beside the timeline analysis (the peak of a
    4M-kernel analysis); sums over the ids are then ``bincount``s."""
    combined = np.zeros(len(df), dtype=np.int64)
    levels, valid = [], np.ones(len(df), dtype=bool)
    for k in keys:
        col = df[k]
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes, n, dtype = col.cat.codes.to_numpy(), len(col.cat.categories), col.dtype
        else:
            codes, n, dtype = col.to_numpy(dtype=bool).astype(np.int8), 2, None
        if dropna:
            valid &= codes >= 0
        combined *= n + 1
        np.add(combined, codes, out=combined)  # codes from 0 (missing: -1) ...
        combined += 1                           # ... shifted so that 0 is missing
        levels.append((k, n, dtype))
    if not valid.all():
        combined[~valid] = -1
    gid, uniq = pd.factorize(combined)  # first-appearance order
    del combined
    if not valid.all():
        keep = uniq >= 0
        remap = np.cumsum(keep) - 1
        gid = np.where(gid >= 0, remap[gid], -1)  # the dropped rows' group was the only one with key -1
        gid[~valid] = -1
        uniq = uniq[keep]
    out = {}
    rest = uniq.astype(np.int64)
    for k, n, dtype in reversed(levels):  # unpack the keys, last packed first
        codes = rest % (n + 1) - 1
        rest = rest // (n + 1)
        out[k] = pd.Categorical.from_codes(codes, dtype=dtype) if dtype is not None else codes.astype(bool)
    return gid, pd.DataFrame({k: out[k] for k in keys})


def _in_groups(gid: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``gid`` and ``arrays`` without the rows of group -1 (no copies when every row has a group)."""
    rows = gid >= 0
    return (gid, *arrays) if rows.all() else (gid[rows], *(a[rows] for a in arrays))


def _sum_by(gid: np.ndarray, values, m: int) -> np.ndarray:
    """Per group the sum of ``values`` (missing values count 0, as in ``groupby().sum()``)."""
    g, v = _in_groups(gid, np.asarray(values, dtype="float64"))
    return np.bincount(g, weights=np.where(np.isnan(v), 0.0, v), minlength=m)


def _count_by(gid: np.ndarray, mask, m: int) -> np.ndarray:
    """Per group the number of rows where ``mask`` holds."""
    g, mk = _in_groups(gid, np.asarray(mask, dtype=bool))
    return np.bincount(g, weights=mk, minlength=m).astype(np.int64)


def _min_by(gid: np.ndarray, values, m: int) -> np.ndarray:
    """Per group the smallest of ``values`` ignoring NaN (NaN where a group has none): ``fmin.at`` in place,
    no group-by machinery over millions of rows."""
    g, v = _in_groups(gid, np.asarray(values, dtype="float64"))
    out = np.full(m, np.inf)
    np.fmin.at(out, g, v)
    out[np.isinf(out)] = np.nan
    return out


def _first_by(gid: np.ndarray, col: pd.Series, m: int) -> pd.Categorical:
    """Per group the first non-missing value of a categorical column (like ``groupby().first()``)."""
    codes = col.cat.codes.to_numpy()
    idx = np.flatnonzero((codes >= 0) & (gid >= 0))
    first = np.full(m, len(codes), dtype=np.int64)
    np.minimum.at(first, gid[idx], idx)
    got = first < len(codes)
    out = np.full(m, -1, dtype=np.int64)
    out[got] = codes[first[got]]
    return pd.Categorical.from_codes(out, dtype=col.dtype)


def _group_sums(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``compact``'s roll-up per key combination (``packed_groups``): summed ``time_ns``, ``tc_flop``
    (``has_flop``: any FLOP count), ``flop_time_ns``, the launch count ``n`` and the smallest ``launch_id``."""
    gid, table = packed_groups(df, keys)
    m = len(table)
    tc = df["tc_flop"].to_numpy(dtype="float64")
    table["time_ns"] = _sum_by(gid, df["time_ns"].to_numpy(dtype="float64"), m)
    table["n"] = _count_by(gid, np.ones(len(gid), dtype=bool), m)
    table["tc_flop"] = _sum_by(gid, tc, m)
    table["has_flop"] = _count_by(gid, ~np.isnan(tc), m) > 0
    table["flop_time_ns"] = _sum_by(gid, df["flop_time_ns"].to_numpy(dtype="float64"), m)
    table["first"] = _min_by(gid, df["launch_id"].to_numpy(dtype="float64"), m)
    return table


def dtype_named(launches: pd.DataFrame) -> np.ndarray:
    """Per launch: its dtype is the kernel name's word (instruction-count or name evidence), not a counter's."""
    if "dtype_named" in launches.columns:
        return launches["dtype_named"].fillna(False).to_numpy(dtype=bool)
    return np.zeros(len(launches), dtype=bool)


def _communication(launches: pd.DataFrame) -> np.ndarray:
    """Communication kernels (NCCL collectives, ``name_rules.COMMUNICATION``): left out of the Tensor Core shares.
    A DDP ResNet-50 AMP job's headline said "YES — 13% of GPU kernel time" over a denominator of NCCL kernels that
    spend most of their time waiting for the other ranks (issue 31)."""
    if "name" not in launches or launches.empty:
        return np.zeros(len(launches), dtype=bool)
    from .name_rules import is_communication
    return is_communication(launches["name"]).to_numpy(dtype=bool)


def off_tc_dtypes(kernel_rows: pd.DataFrame) -> list[str]:
    """The dtypes the names of the matrix kernels on CUDA cores state (``cutlass_80_simt_sgemm``: fp32), by time:
    what the headline says of the matrix work that missed the Tensor Cores. One look per distinct name."""
    from .name_rules import _cuda_core_dtype, is_communication, is_matrix_work
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
    An fp32 Trainer's headline said "NO for 89% of the matrix work" while its JSON said "unknown" (issue 47)."""
    if launches <= 0:
        return "unknown"
    if tc_time > 0:
        off_tc = matrix_cuda_core + matrix_unknown
        return "yes" if matrix_time and off_tc <= (1 - yes_threshold) * matrix_time else "partial"
    if matrix_cuda_core > 0 and matrix_cuda_core >= matrix_unknown:
        return "no"
    return "unknown" if unknown_time > 0 else "no"


def range_table(launches: pd.DataFrame) -> pd.DataFrame:
    """Per NVTX range path (every prefix: a kernel in ``a/b`` counts for ``a`` and ``a/b``)."""
    cols = ["name", "kernel_time_ns", "tc_time_share", "tc_verdict", "tc_evidence", "by_dtype", "launches",
            "unknown_time_share"]
    c = compact(launches)
    c = c[c["nvtx"] != ""]
    if c.empty:
        return pd.DataFrame(columns=cols)
    joined = c.merge(path_prefixes(pd.unique(c["nvtx"])), on="nvtx")
    rows = []
    for rng, grp in joined.groupby("range", sort=False):  # compacted rows: cheap
        r = rollup(grp)
        rows.append({"name": rng, "kernel_time_ns": r["kernel_time_ns"], "tc_time_share": r["tc_time_share"],
                     "tc_verdict": r["verdict"], "tc_evidence": r["evidence"], "by_dtype": r["by_dtype"],
                     "launches": r["launches"], "unknown_time_share": r["unknown_time_share"]})
    out = pd.DataFrame(rows, columns=cols)
    first_seen = joined.groupby("range")["first"].min()
    out["_first"] = out["name"].map(first_seen)
    return out.sort_values(["_first", "name"]).drop(columns="_first").reset_index(drop=True)
