"""Label columns (range paths, kernel and call names) as codes, not as a million strings.

pandas 3 turns ``astype(str)`` into Arrow-backed strings: on a million-row categorical column that costs
0.1-0.2 s each time (measured on the 1M-kernel nsys benchmark, where a dozen such calls were 1.3 s of 4 s
of analysis). Label columns are categoricals; these helpers do string work once per category and map
the result back through the codes. Parsers build their label columns with ``categorical``; the analysis
works on them with the rest.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def categorical(codes: np.ndarray, names) -> pd.Categorical:
    """Integer codes into ``names`` (-1 = missing) as a categorical; equal names are merged (two string ids
    of one text, a name that spells another path)."""
    names = list(names)
    if len(set(names)) == len(names):
        return pd.Categorical.from_codes(codes, categories=names)
    return pd.Categorical(np.asarray(names + [None], dtype=object)[codes])


def constant(value: str, n: int) -> pd.Categorical:
    """One label for every row (the source tool, the input file): one string, n small codes, where a scalar
    broadcast makes n Arrow strings (0.2 s per million rows) that every later row selection copies."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[value])


def mapped(keys: np.ndarray, table: dict) -> pd.Categorical:
    """``table[key]`` per row as a categorical (missing key -> NaN), looked up once per distinct key."""
    codes, uniq = _small_int_factorize(np.asarray(keys))
    values = [table.get(k.item() if hasattr(k, "item") else k) for k in uniq]
    names = list(dict.fromkeys(v for v in values if v is not None))
    lookup = np.array([names.index(v) if v is not None else -1 for v in values] + [-1], dtype=np.int64)
    return pd.Categorical.from_codes(lookup[codes], categories=names)


def _small_int_factorize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` for the small integer keys of device ids, copy kinds and the like: a count and a gather
    instead of a hash table (1M launches: ~2 ms against ~25 ms); the order of the distinct keys does not matter
    to the callers. Other keys go through pandas."""
    if a.dtype.kind in "iu" and len(a):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < 1 << 16:
            present = np.flatnonzero(np.bincount(a - lo if lo else a, minlength=hi - lo + 1))
            index = np.full(hi - lo + 1, -1, dtype=np.int64)
            index[present] = np.arange(len(present))
            return index[a - lo if lo else a], (present + lo).astype(a.dtype)
    return pd.factorize(a)


def as_categorical(values) -> pd.Series:
    """``values`` as a categorical Series of strings (NaN/None -> '')."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        if s.hasnans:
            s = (s.cat.add_categories([""]) if "" not in s.cat.categories else s).fillna("")
        return s
    codes, uniq = pd.factorize(s.to_numpy(dtype=object), use_na_sentinel=True)
    names = [str(u) for u in uniq]
    if (codes < 0).any():
        codes = np.where(codes < 0, len(names), codes)
        names.append("")
    return pd.Series(categorical(codes, names), index=s.index)


def per_category(values, func, dtype=object) -> np.ndarray:
    """``func(label)`` for every row, computed once per distinct label."""
    s = as_categorical(values)
    cats = [func(str(c)) for c in s.cat.categories]
    table = np.asarray(cats + [func("")], dtype=dtype)
    return table[s.cat.codes.to_numpy()]  # code -1 -> the trailing func('')


def strings(values) -> np.ndarray:
    """Row labels as an object array of Python strings (shared per category)."""
    return per_category(values, str)


def codes_in(values, lookup: np.ndarray) -> np.ndarray:
    """Position of each row's label in ``lookup`` (-1 where absent or empty)."""
    index = pd.Index(np.asarray(lookup, dtype=object))
    return per_category(values, lambda c: index.get_loc(c) if c and c in index else -1, dtype=np.int64)
