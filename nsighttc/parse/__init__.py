"""Parse layer: profiler files -> one kernel table (plus, for timeline sources, ranges and API calls).

``load(path)`` sniffs the file and dispatches to one module per format. Every module returns a
``Parsed``: the kernel table declared in ``nsighttc.model`` and, where the source has a timeline,
the range/runtime tables the timeline analysis needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .sniff import Kind, sniff


@dataclass
class Parsed:
    path: Path
    kind: Kind
    kernels: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    timeline: object | None = None  # a parse.timeline.Timeline for nsys/torch sources


def load(path: str | Path) -> Parsed:
    path = Path(path)
    kind = sniff(path)
    if kind is Kind.NCU_CSV:
        from . import ncu_csv
        kernels, warnings = ncu_csv.read(path)
        return Parsed(path, kind, kernels, warnings)
    if kind is Kind.NCU_REP:
        from . import ncu_rep
        kernels, warnings = ncu_rep.read(path)
        return Parsed(path, kind, kernels, warnings)
    if kind is Kind.NSYS_SQLITE:
        from . import nsys_sqlite
        return nsys_sqlite.read(path)
    if kind is Kind.NSYS_REP:
        from . import nsys_rep
        return nsys_rep.read(path)
    from . import kineto
    return kineto.read(path)


__all__ = ["Kind", "Parsed", "load", "sniff"]
