"""Read the NVTX context columns of ncu's CSV into a range path.

ncu writes the ranges a kernel ran inside as one cell per thread, e.g. (``--nvtx``, push/pop ranges)::

    4752  "<default domain>:vgg16_fp16:none:none:none:none:none:none"

one quoted ``domain:range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg`` entry per open range, outermost
first. Start/end ranges come in a second column in the same shape. We turn them into ``outer/inner``
(``domain@range`` for non-default domains, as ncu's ``--nvtx-include`` spells them).
Cells repeat a lot (every kernel of a range carries the same text), so callers parse the unique values
only and map them back.
"""
from __future__ import annotations

import re

import pandas as pd

from ..record_format import MARK_NAMES

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_DEFAULT_DOMAIN = "<default domain>"
# The six trailing fields after the range name: PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg
_TRAILING = 6


def parse_cell(cell: object) -> list[str]:
    """One NVTX cell -> the list of range names, outermost first."""
    if not isinstance(cell, str) or not cell.strip():
        return []
    names = []
    for entry in _QUOTED.findall(cell):
        entry = entry.replace('""', '"')
        fields = entry.split(":")
        if len(fields) < 2 + _TRAILING:
            name, domain = entry, _DEFAULT_DOMAIN
        else:
            domain = fields[0]
            name = ":".join(fields[1:len(fields) - _TRAILING])
        if not name or name == "none" or name in MARK_NAMES:  # nsighttc's step marks: not the program's ranges
            continue
        names.append(name if domain in (_DEFAULT_DOMAIN, "") else f"{domain}@{name}")
    return names


def paths(pushpop: pd.Series | None, startend: pd.Series | None, index: pd.Index) -> pd.Series:
    """Vectorised: NVTX path string per row ('' when the kernel ran outside any range)."""
    out = pd.Series("", index=index, dtype="string")
    for col in (pushpop, startend):
        if col is None:
            continue
        uniq = col.dropna().unique()
        mapping = {u: "/".join(parse_cell(u)) for u in uniq}
        part = col.map(mapping).astype("object").fillna("").astype("string")
        sep = ((out != "") & (part != "")).map({True: "/", False: ""}).astype("string")
        out = out + sep + part
    return out
