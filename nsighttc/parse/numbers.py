"""Turn the numbers ncu writes into floats, vectorised.

ncu's CSV writes every value as a quoted string formatted for the machine's locale: ``"17,179,869,184"``
(``,`` groups thousands, ``.`` marks decimals) on an English locale and ``"17.179.869.184"`` /
``"1,27"`` on others. A file is written in one locale, so we decide the separators once per file
(``detect_separators``) from the values themselves and then convert whole columns with pandas string
methods. Values that are not numbers (``n/a``, empty, text) become NaN: "not collected".
Instanced metrics (``"1;2;3"``: one value per instance) are summed for ``.sum`` metrics and averaged
otherwise.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

# Values that settle the locale. English: a dot followed by other than exactly three digits ("62.50",
# "1.27") or two commas as groups. Other: the reverse.
_EN_DECIMAL = re.compile(r"^-?\d+\.(\d{1,2}|\d{4,})$")
_EN_GROUPS = re.compile(r"^-?\d{1,3}(,\d{3}){2,}(\.\d+)?$")
_XX_DECIMAL = re.compile(r"^-?\d+,(\d{1,2}|\d{4,})$")
_XX_GROUPS = re.compile(r"^-?\d{1,3}(\.\d{3}){2,}(,\d+)?$")

# Unit -> factor to the base unit we store. Time goes to ns; SI prefixes on counters are expanded.
_TIME_TO_NS = {"ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3,
               "ms": 1e6, "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}
_PREFIX = {"K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_COUNTED = {"inst", "byte", "cycle", "warp", "thread", "flop", "op", "sector", "request", "block"}


def detect_separators(samples: pd.Series) -> tuple[str, str]:
    """Return (thousands, decimal) for a file, judged from a sample of its numeric-looking values."""
    s = samples.dropna().astype(str).str.strip()
    s = s[s.str.match(r"^-?[\d.,]+$")]
    if s.empty:
        return ",", "."
    en = int(s.str.match(_EN_DECIMAL).sum() + s.str.match(_EN_GROUPS).sum())
    xx = int(s.str.match(_XX_DECIMAL).sum() + s.str.match(_XX_GROUPS).sum())
    return (".", ",") if xx > en else (",", ".")


def unit_factor(unit: str | None) -> float:
    """Factor that converts a value in ``unit`` to our base unit (ns for time, 1 for counts)."""
    if unit is None or (isinstance(unit, float) and np.isnan(unit)):
        return 1.0
    u = str(unit).strip()
    if u in _TIME_TO_NS:
        return _TIME_TO_NS[u]
    if len(u) > 1 and u[0] in _PREFIX and u[1:].split("/")[0] in _COUNTED:
        return _PREFIX[u[0]]
    return 1.0


def to_float(values: pd.Series, thousands: str = ",", decimal: str = ".", sum_instances: bool = True) -> pd.Series:
    """Vectorised conversion of ncu value strings to float64 (NaN where not a number)."""
    if values.dtype.kind in "fiu":
        return values.astype("float64")
    s = values.astype("string").str.strip()
    inst = s.str.contains(";", regex=False, na=False)
    clean = s.str.replace(thousands, "", regex=False)
    if decimal != ".":
        clean = clean.str.replace(decimal, ".", regex=False)
    out = pd.to_numeric(clean, errors="coerce").astype("float64")
    if inst.any():
        out[inst] = _instanced(s[inst], thousands, decimal, sum_instances)
    return out


def _instanced(s: pd.Series, thousands: str, decimal: str, sum_instances: bool) -> pd.Series:
    """'(0) 1;(1) 2' or '1;2': per-instance values -> their sum (or mean)."""
    parts = s.str.split(";").explode().str.replace(r"^\s*\([^)]*\)\s*", "", regex=True).str.strip()
    parts = parts.str.replace(thousands, "", regex=False)
    if decimal != ".":
        parts = parts.str.replace(decimal, ".", regex=False)
    nums = pd.to_numeric(parts, errors="coerce")
    grouped = nums.groupby(level=0)
    return grouped.sum(min_count=1) if sum_instances else grouped.mean()
