"""``.ncu-rep`` binary reports -> the kernel table.

Reader: NVIDIA's ``ncu_report`` Python module (PyPI ``ncu-report``, or the copy in
``<nsight-compute>/extras/python``), which reads the report on any CPU. Without it, ``NeedsExport``: the caller
(``collect.readable``) exports the report with ``ncu --import ... --csv --page raw --print-units base`` when ncu is
installed and reads that CSV; with neither, the error says which one to install.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .. import ncu_metrics
from ..errors import NeedsExport, ParseError
from ..model import INST_KINDS, TC_DTYPES, conform
from . import ncu_csv

def _import_ncu_report():
    try:
        import ncu_report  # type: ignore
        return ncu_report
    except ImportError:
        pass
    for extras in sorted(Path("/opt/nvidia/nsight-compute").glob("*/extras/python"), reverse=True):
        sys.path.append(str(extras))
        try:
            import ncu_report  # type: ignore
            return ncu_report
        except ImportError:
            sys.path.remove(str(extras))
    return None


def read(path: Path) -> tuple[pd.DataFrame, list[str]]:
    module = _import_ncu_report()
    if module is not None:
        from .textio import plain_copy
        with plain_copy(path, "report.ncu-rep") as plain:  # (a report kept xz- or gzip-compressed: ~15x smaller)
            return _read_with_module(module, plain, shown=path), []
    raise NeedsExport("reading .ncu-rep needs the ncu-report Python package (pip install 'nsighttc[ncu]') or "
                      "Nsight Compute's ncu on PATH; neither was found", path, tool="ncu")


def _value(action, name):
    m = action.metric_by_name(name)
    if m is None:
        return None
    try:
        return m.value()
    except Exception:  # a metric the SWIG layer cannot convert: treat as absent
        return None


def _nvtx_path(action) -> str:
    try:
        state = action.nvtx_state()
        names = []
        for dom_id in state.domains():
            dom = state.domain_by_id(dom_id)
            dname = dom.name()
            for r in list(dom.push_pop_ranges()) + list(dom.start_end_ranges()):
                names.append(r if dname in ("<default domain>", "") else f"{dname}@{r}")
        return "/".join(names)
    except Exception:  # reports recorded without --nvtx have no usable state
        return ""


def _read_with_module(module, path: Path, shown: Path | None = None) -> pd.DataFrame:
    """The report's kernels; ``shown``: how errors and the table name the file (the user's, where ``path`` is its
    decompressed copy)."""
    shown = path if shown is None else shown
    try:
        ctx = module.load_report(str(path))
    except Exception as exc:
        raise ParseError(f"not a readable .ncu-rep report ({exc})", shown) from None
    if ctx is None or ctx.num_ranges() == 0:
        raise ParseError("report holds no profiled kernels", shown)
    rows = []
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            names = list(a.metric_names())
            row = {"name": a.name(module.IAction.NameBase_DEMANGLED), "launch_id": len(rows)}
            dur = next((n for n in ncu_metrics.DURATION_ALIASES if n in names), None)
            row["duration_ns"] = _value(a, dur) if dur else None
            dims = [_value(a, f"launch__{k}_dim_{x}") for k in ("grid", "block") for x in "xyz"]
            if None not in dims:
                row["grid"] = f"({dims[0]}, {dims[1]}, {dims[2]})"
                row["block"] = f"({dims[3]}, {dims[4]}, {dims[5]})"
            stream = _value(a, "launch__stream_id")
            row["stream"] = None if stream is None else str(stream)
            row["device"] = _value(a, "device__attribute_device_index")
            row["device_name"] = _value(a, "device__attribute_display_name")
            major = _value(a, "device__attribute_compute_capability_major")
            minor = _value(a, "device__attribute_compute_capability_minor")
            row["cc"] = f"{major}.{minor}" if major is not None else None
            row["nvtx"] = _nvtx_path(a)
            for dtype, cols in ncu_metrics.choose_ops_columns(names).items():
                vals = [v for v in (_value(a, c) for c in cols) if v is not None]
                if dtype in TC_DTYPES and vals:
                    row[f"tc_ops_{dtype}"] = float(sum(vals))
            for kind in INST_KINDS:
                col = next((c for c in ncu_metrics.INST_ALIASES[kind] if c in names), None)
                if col is not None:
                    row[f"inst_{kind}"] = _value(a, col)
            pct = next((c for c in ncu_metrics.PIPE_PCT_ALIASES if c in names), None)
            if pct is not None:
                row["tensor_pipe_pct"] = _value(a, pct)
            rows.append(row)
    df = pd.DataFrame(rows)
    df["source"] = "ncu"
    df["input"] = str(shown)
    for col in df.columns:
        if col.startswith(("tc_ops_", "inst_")) or col in ("duration_ns", "tensor_pipe_pct"):
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return conform(df)
