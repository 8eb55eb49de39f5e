"""Parse layer: profiler files -> one kernel table (plus, for timeline sources, ranges and API calls).

``load(path)`` sniffs the file and dispatches to one module per format. Every module returns a
``Parsed``: the kernel table declared in ``nsighttc.model`` and, where the source has a timeline,
the range/runtime tables the timeline analysis needs.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .parsed import Parsed
from .sniff import Kind, sniff


def load(path: str | Path) -> Parsed:
    """Parse one file into a kernel table (plus timeline tables), checked by ``_usable``."""
    return _usable(_read(Path(path)))


def load_while_written(path: str | Path, fh) -> Parsed:
    """A torch.profiler trace parsed from ``fh`` as its writer writes it (``textio.GrowingFile``), checked by
    ``_usable`` like ``load``'s. Raises when the block reader cannot read it: the caller then ``load``s the
    finished file."""
    from . import kineto
    return _usable(kineto.read_stream(Path(path), fh))


def _usable(p: Parsed) -> Parsed:
    """What no reader may pass on, whatever the format. A launch without a kernel name (a damaged report
    record, seen in fuzzed .ncu-rep files) cannot be judged or attributed: dropped with a note (a timeline
    keeps it as '(unnamed kernel)': its rows line up with its GPU-op table). Infinite counter values
    (`1e400` in a CSV cell) cannot be true: they become "not collected" (NaN), with a note."""
    k = p.kernels
    infinite = 0
    for c in [c for c in k.columns if k[c].dtype == "float64"]:  # column by column: no copy of the table
        col = k[c].to_numpy()
        bad = np.isinf(col)
        if bad.any():
            infinite += int(bad.sum())
            k[c] = np.where(bad, np.nan, col)
    if infinite:
        p.warnings.append(f"{p.path}: {infinite:,} infinite value(s) treated as not collected")
    if not k.empty and k["name"].isna().any():
        n = int(k["name"].isna().sum())
        if p.timeline is None:
            p.kernels = k[k["name"].notna().to_numpy()].reset_index(drop=True)
            p.warnings.append(f"{p.path}: {n:,} kernel launch(es) without a name were left out")
        else:
            names = k["name"]
            if isinstance(names.dtype, pd.CategoricalDtype) and "(unnamed kernel)" not in names.cat.categories:
                names = names.cat.add_categories(["(unnamed kernel)"])
            k["name"] = names.fillna("(unnamed kernel)")
            p.warnings.append(f"{p.path}: {n:,} kernel launch(es) without a name are shown as '(unnamed kernel)'")
    return p


def _without_warm_up(kernels: pd.DataFrame) -> pd.DataFrame:
    """An ncu report of nsighttc's replay holds one profile made in its warm-up (``nsighttc.runtime.replay.WARM_RANGE``:
    it pays ncu's one-time set-up before the calls); it measured no kernel of the program, so no reader
    passes it on."""
    from ..record_format import WARM_RANGE
    if kernels.empty or "nvtx" not in kernels:
        return kernels
    warm = kernels["nvtx"].astype(str).str.split("/").str[0].eq(WARM_RANGE).to_numpy()
    return kernels[~warm].reset_index(drop=True) if warm.any() else kernels


def _read(path: Path) -> Parsed:
    kind = sniff(path)
    if kind is Kind.NCU_CSV:
        from . import ncu_csv
        kernels, warnings = ncu_csv.read(path)
        return Parsed(path, kind, _without_warm_up(kernels), warnings)
    if kind is Kind.NCU_REP:
        from . import ncu_rep
        kernels, warnings = ncu_rep.read(path)
        return Parsed(path, kind, _without_warm_up(kernels), warnings)
    if kind is Kind.NSYS_SQLITE:
        from . import nsys_sqlite
        return nsys_sqlite.read(path)
    if kind is Kind.NSYS_REP:
        from ..errors import NeedsExport
        raise NeedsExport("reading .nsys-rep needs Nsight Systems' nsys to export it (not found on PATH or in "
                          "/opt/nvidia/nsight-systems); or pass the SQLite export: "
                          "`nsys export --type sqlite -o run.sqlite run.nsys-rep`", path, tool="nsys")
    from . import kineto
    return kineto.read(path)


__all__ = ["Kind", "Parsed", "load", "sniff"]
