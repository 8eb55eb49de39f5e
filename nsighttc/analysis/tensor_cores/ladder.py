"""The per-launch evidence ladder (``classify_launches``): hardware counters, then instruction counts, then the
kernel name; each launch's Tensor Core state, evidence and dtype. Decided once per distinct kernel and counter
values, then spread to the launches."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...model import TC_DTYPES
from ... import labels
from .. import known_kernels, name_rules


# The dtypes whose ops counters must all be present for "all zero" to mean "no Tensor Core math".
OPS_REQUIRED_FOR_NO = ("fp16", "bf16", "tf32", "fp8", "int8", "fp64")


STATES = ["yes", "no", "unknown"]


def state_categorical(tc) -> pd.Categorical:
    """True/False/None per launch -> categorical 'yes'/'no'/'unknown' (built from integer codes)."""
    tc = np.asarray(tc, dtype=object)
    return pd.Categorical.from_codes(np.where(tc == True, 0, np.where(tc == False, 1, 2)),  # noqa: E712
                                     categories=STATES)


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

    # a GPU before compute capability 8.0 has no TF32 or fp64 Tensor Core math: a kernel whose name states fp32/fp64
    # data ran on CUDA cores there, whatever else the name says (name_rules.PRE_AMPERE_FP32)
    pre_ampere = major < 8
    if pre_ampere.any():
        stated = np.asarray(labels.per_category(k["name"], name_rules.stated_dtype), dtype=object)
        off = pre_ampere & np.isin(stated, ["fp32", "fp64"]) & ~measured & (name_tc != False)  # noqa: E712
        if off.any():
            name_tc = np.where(off, False, name_tc)
            name_dtype = np.where(off, None, name_dtype)
            name_rule = pd.Series(pd.Categorical(np.where(off, name_rules.PRE_AMPERE_FP32.id,
                                                          np.asarray(name_rule.astype(object), dtype=object))),
                                  index=k.index)

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
