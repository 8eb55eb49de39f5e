"""Label columns (range paths, kernel and call names) as codes, not as a million strings.

pandas 3 turns ``astype(str)`` into Arrow-backed strings: on a million-row categorical column that costs
0.1-0.2 s each time (measured on the 1M-kernel nsys benchmark, where a dozen such calls were 1.3 s of 4 s
of analysis). Label columns are categoricals; these helpers do string work once per category and map
the result back through the codes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def as_categorical(values) -> pd.Series:
    """``values`` as a categorical Series of strings (NaN/None -> '')."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(s.dtype, pd.CategoricalDtype):
        if s.hasnans:
            s = (s.cat.add_categories([""]) if "" not in s.cat.categories else s).fillna("")
        return s
    return pd.Series(pd.Categorical(pd.Series(s, dtype=object).fillna("").astype(str).to_numpy(dtype=object)),
                     index=s.index)


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
