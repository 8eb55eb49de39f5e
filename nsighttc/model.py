"""The data that flows through nsighttc: the kernel table and the verdict.

Every parser (ncu CSV raw/details page, ``.ncu-rep``, nsys SQLite, torch.profiler traces) produces the
same **kernel table**: a pandas DataFrame with one row per kernel *launch* and the columns declared in
``KERNEL_COLUMNS`` below. Columns a source cannot fill are present and NaN/empty, so the analysis never
has to ask which parser ran. Units are in the column names where they matter (``_ns``, ``_flop``).

Tensor-Core metric columns are normalised away from ncu's per-architecture names:
``tc_ops_<dtype>`` (FLOPs the tensor path did per source dtype, from ``sm__ops_path_tensor_*``),
``inst_<kind>`` (instruction counts per tensor op kind) and ``tensor_pipe_pct`` (pipe utilisation).
NaN always means "not collected"; 0 means "collected and zero". The classifier relies on that difference.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

SCHEMA_ID = "nsighttc.verdict/1"

# Source dtypes of the tensor path, in the order reports list them.
TC_DTYPES = ("fp16", "bf16", "tf32", "fp8", "fp6", "fp4", "int8", "int4", "int1", "fp64")

# Instruction-count kinds (see analyze/metric_names.py for the ncu names behind each).
INST_KINDS = ("hmma", "hfma2", "imma", "dmma", "gmma", "tc")

# name -> (pandas dtype, meaning)
KERNEL_COLUMNS: dict[str, tuple[str, str]] = {
    "source": ("string", "which profiler produced the row: ncu | nsys | torch"),
    "input": ("string", "the file the row came from"),
    "launch_id": ("int64", "launch index as the profiler numbered it (ncu ID, nsys/torch correlation)"),
    "name": ("string", "kernel name exactly as the input spelled it (demangled where the tool demangles)"),
    "duration_ns": ("float64", "GPU duration of this launch in ns (ncu: under replay, gpu__time_duration)"),
    "start_ns": ("float64", "GPU start timestamp in ns (timeline sources only; NaN for ncu)"),
    "grid": ("string", "grid size '(x, y, z)'"),
    "block": ("string", "block size '(x, y, z)'"),
    "stream": ("string", "stream id"),
    "device": ("Int64", "device index"),
    "device_name": ("string", "GPU name where the input names it"),
    "cc": ("string", "compute capability 'major.minor'"),
    "nvtx": ("string", "NVTX path 'outer/inner' the launch ran in ('' when none); timeline sources: where "
                       "the launch call was made"),
    "pid": ("Int64", "host process that launched the kernel (timeline sources)"),
    "launch_ns": ("float64", "host time the launch call started, ns (timeline sources; NaN where the call was not "
                             "traced): found once by the reader, read by every later step"),
    **{f"tc_ops_{d}": ("float64", f"FLOPs on the tensor path with source dtype {d}") for d in TC_DTYPES},
    **{f"inst_{k}": ("float64", f"tensor-pipe instructions of kind {k} (sum over SMs)") for k in INST_KINDS},
    "tensor_pipe_pct": ("float64", "tensor pipe cycles active, % of peak sustained (utilisation, not a yes/no)"),
}


def empty_kernel_table() -> pd.DataFrame:
    """A kernel table with every declared column and no rows."""
    return conform(pd.DataFrame())


def conform(df: pd.DataFrame) -> pd.DataFrame:
    """Add missing declared columns (as NaN/empty), cast declared ones, keep column order stable."""
    n = len(df)
    out = {}
    missing = None  # one NaN array shared by every absent counter column (copy-on-write keeps it intact):
    # timeline sources have none of the 17, which were 136 MB of NaN per million launches
    for col, (dtype, _) in KERNEL_COLUMNS.items():
        if col in df.columns:
            s = df[col]
        elif dtype == "string":
            s = pd.Series([pd.NA] * n, index=df.index, dtype="string")
        elif dtype in ("int64", "Int64"):
            s = pd.Series([pd.NA] * n, index=df.index, dtype="Int64")
        else:
            missing = np.full(n, np.nan) if missing is None else missing
            s = pd.Series(missing, index=df.index, copy=False)
        if dtype == "int64":
            dtype = "Int64"  # nullable: a parser may not know the launch id
        if dtype == "string" and isinstance(s.dtype, pd.CategoricalDtype):
            out[col] = s  # timeline sources: a million launches share a few hundred names; keep them shared
            continue
        if dtype == "string" and n > 50_000:
            # long tables (timelines): low-cardinality text as categories, not a million string objects
            out[col] = s.astype("category")
            continue
        out[col] = s.astype(dtype)
    # copy=False: no consolidation of a million-row table into 2-D blocks (a copy of every column)
    table = pd.DataFrame(out, index=df.index, copy=False).reset_index(drop=True)
    if isinstance(table["nvtx"].dtype, pd.CategoricalDtype):
        if "" not in table["nvtx"].cat.categories:
            table["nvtx"] = table["nvtx"].cat.add_categories([""])
    table["nvtx"] = table["nvtx"].fillna("")
    return table


@dataclass
class Finding:
    """One thing worth telling the user, with the evidence and what to do about it."""

    id: str
    severity: str  # "high" | "medium" | "low" | "info"
    title: str
    evidence: str
    advice: str
    time_ns: float = 0.0  # GPU time the finding concerns, to order findings by cost
    kernels: list[str] = field(default_factory=list)
    # what it costs each steady step, per phase (step family name -> ns): the GPU work a kernel finding is about,
    # or the GPU idle time a host cause makes; what ``analysis.gain`` turns into an estimated speed-up
    per_step_ns: dict[str, float] | None = None
    gain: dict | None = None  # analysis.gain: {low, high, basis, ...}
    rows: Any = field(default=None, repr=False, compare=False)  # the launches it is about (bool mask), not saved

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "severity": self.severity, "title": self.title, "evidence": self.evidence,
               "advice": self.advice, "time_ns": float(self.time_ns), "kernels": list(self.kernels)}
        if self.per_step_ns is not None:
            out["per_step_ns"] = {k: float(v) for k, v in self.per_step_ns.items()}
        if self.gain is not None:
            out["gain"] = self.gain
        return out
