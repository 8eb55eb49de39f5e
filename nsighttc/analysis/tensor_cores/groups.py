"""Group-by over the launch table as arrays: the groups' ids once (``packed_groups``), then sums, counts, minima
and firsts per group with bincount-style passes (a million launches, a few hundred groups)."""
from __future__ import annotations

import numpy as np
import pandas as pd


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
