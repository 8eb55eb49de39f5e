"""Merge Nsight Compute hardware evidence into a timeline's kernels (same run, different tools).

A timeline (nsys / torch.profiler) knows when kernels ran but not whether they used Tensor Cores; an
ncu export of the same workload knows that per kernel name. We copy the ncu verdict onto timeline
launches by kernel name when every ncu launch of that name agrees (a name whose launches disagree --
Triton specialisations -- cannot be mapped and keeps its own evidence). torch.profiler demangles names
differently from NVIDIA's tools (``{lambda(float)#1}`` vs ``[lambda(float) (instance 1)]``), so a second
pass matches on the short family name when that is unambiguous on both sides.
"""
from __future__ import annotations

import numpy as np

import pandas as pd

from .grouping import aggregate
from .kernel_keys import merge_key
from ..render.names import short_name
from .tensor_cores import EVIDENCE_HARDWARE, state_categorical

_COLS = ["tensor_core", "dtype", "tc_flop_per_call", "tensor_pipe_pct"]
# evidence rows taken from the cache of earlier ncu measurements (collect.evidence_cache) keep saying so
CACHE_DETAIL = "ncu counters from the evidence cache"
MERGED_DETAIL = "ncu counters merged by kernel name"
NAMED_DTYPE = "dtype from the kernel name"  # instruction counts decided yes/no; they carry no dtype


def _verdicts(hw: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
    detail = hw["evidence_detail"].astype(str) if "evidence_detail" in hw else pd.Series("", index=hw.index)
    named = hw["dtype_named"].fillna(False).astype(bool) if "dtype_named" in hw else pd.Series(False, index=hw.index)
    detail = detail.where(detail.str.startswith(CACHE_DETAIL),
                          np.where(named, f"{MERGED_DETAIL}; {NAMED_DTYPE}", MERGED_DETAIL))
    hard = hw[hw["evidence"] == EVIDENCE_HARDWARE].assign(_key=key, tc_flop_per_call=hw["tc_flop"], _detail=detail,
                                                          _named=named)
    state = hard["tensor_core"].map(repr) + "|" + hard["dtype"].map(repr)
    agree = state.groupby(hard["_key"]).nunique() == 1
    first = aggregate(hard.groupby("_key"), tensor_core=("tensor_core", "first"), dtype=("dtype", "first"),
                      tc_flop_per_call=("tc_flop_per_call", "median"),
                      tensor_pipe_pct=("tensor_pipe_pct", "median"), detail=("_detail", "first"),
                      dtype_named=("_named", "first"))
    return first[agree.reindex(first.index).fillna(False)]


def apply_hardware_evidence(timeline: pd.DataFrame, hw: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    out = timeline.copy()
    todo = (out["evidence"] != EVIDENCE_HARDWARE).to_numpy()
    hw_key, tl_key = merge_key(hw["name"]), merge_key(out["name"])
    by_name = _verdicts(hw, hw_key)
    hit = todo & tl_key.isin(by_name.index).to_numpy()
    short_hw = hw["name"].map(short_name)
    by_short = _verdicts(hw, short_hw)
    # a short name is usable only if it stands for one full name on the ncu side
    unique_short = short_hw.groupby(short_hw).transform(lambda s: hw.loc[s.index, "name"].nunique()) == 1
    by_short = by_short[by_short.index.isin(short_hw[unique_short].unique())]
    short_tl = out["name"].map(short_name)
    hit2 = todo & ~hit & short_tl.isin(by_short.index).to_numpy()
    if isinstance(out["evidence_detail"].dtype, pd.CategoricalDtype):  # categories must exist before .loc
        new = set(by_name["detail"]) | set(by_short["detail"]) if len(by_name) + len(by_short) else set()
        new -= set(out["evidence_detail"].cat.categories)
        if new:
            out["evidence_detail"] = out["evidence_detail"].cat.add_categories(sorted(new))
    for mask, table, key in ((hit, by_name, tl_key), (hit2, by_short, short_tl)):
        if not mask.any():
            continue
        src = table.reindex(key[mask].to_numpy())
        assert src["tensor_core"].notna().all(), "merge looked up a key it had not matched"
        out.loc[mask, "tensor_core"] = pd.Series(src["tensor_core"].to_numpy(), index=out.index[mask], dtype=object)
        out.loc[mask, "dtype"] = pd.Series(src["dtype"].to_numpy(), index=out.index[mask], dtype=object)
        out.loc[mask, "tc_flop"] = src["tc_flop_per_call"].to_numpy()
        out.loc[mask, "tensor_pipe_pct"] = src["tensor_pipe_pct"].to_numpy()
        out.loc[mask, "evidence"] = EVIDENCE_HARDWARE
        if "dtype_named" in out:
            out.loc[mask, "dtype_named"] = src["dtype_named"].fillna(False).astype(bool).to_numpy()
        out.loc[mask, "evidence_detail"] = src["detail"].to_numpy()
    out["matrix_work"] = out["matrix_work"] | (out["tensor_core"] == True)  # noqa: E712
    out["tc_state"] = state_categorical(out["tensor_core"].to_numpy())
    merged = hit | hit2
    t = out["time_ns"]
    share = t[merged].sum() / t.sum() if t.sum() else 0.0
    note = (f"merged ncu hardware evidence into {int(merged.sum()):,} of {len(out):,} timeline launches "
            f"({100 * share:.0f}% of kernel time) by kernel name; {int((out['evidence'] == EVIDENCE_HARDWARE).sum()):,} "
            "launches now have hardware evidence")
    return out, note
