"""The verdict: what ``analyze`` concludes, as DataFrames for Python users and as the JSON document
(schema ``nsighttc.verdict/1``) that renderers, ``report`` and ``diff`` read back.

The JSON is the saved intermediate: renderers take the JSON dict, never the DataFrames, so a report
re-rendered from ``verdict.json`` is identical to the one written at analysis time.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import InputError
from .model import SCHEMA_ID, Finding
from .parse.textio import GZIP_MAGIC, XZ_MAGIC


def _num(v: Any) -> Any:
    """JSON-safe number: NaN/inf -> None, numpy scalars -> Python."""
    if v is None:
        return None
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@dataclass
class Verdict:
    inputs: list[dict]
    device: dict | None
    tensor_cores: dict
    kernels: pd.DataFrame
    ranges: pd.DataFrame
    findings: list[Finding]
    launches: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    timeline: dict | None = None
    provenance: dict | None = None
    ranks: list[dict] | None = None        # several ranks: one row per rank (analysis.ranks)
    distributed: dict | None = None        # several ranks: straggler, step skew, communication
    host_collapsed: str = ""               # the host's stacks while the GPU idled, collapsed (not in the JSON)

    # -- views ----------------------------------------------------------------------------------
    def kernel_records(self) -> list[dict]:
        recs = []
        for r in self.kernels.itertuples(index=False):  # aggregated rows: one per kernel, not per launch
            recs.append({
                "name": r.name, "calls": int(r.calls), "total_time_ns": _num(r.total_time_ns),
                "time_share": _num(r.time_share), "tensor_core": r.tensor_core, "evidence": r.evidence,
                "evidence_detail": r.evidence_detail, "dtype": _num(r.dtype), "nvtx": list(r.nvtx),
                "tc_flop": _num(r.tc_flop), "tflops": _num(r.tflops),
                "pct_of_peak": _num(getattr(r, "pct_of_peak", None)), "tensor_pipe_pct": _num(r.tensor_pipe_pct),
                "name_says": _num(r.name_tc), "name_rule": _num(r.name_rule), "matrix_work": bool(r.matrix_work),
                "variant": int(r.variant),
            })
        return recs

    def range_records(self) -> list[dict]:
        recs = []
        for r in self.ranges.to_dict("records"):
            recs.append({k: (_num(v) if not isinstance(v, (dict, list)) else v) for k, v in r.items()})
        return recs

    def to_json(self) -> dict:
        doc = {
            "schema": SCHEMA_ID,
            "inputs": self.inputs,
            "device": self.device,
            "tensor_cores": {k: _num(v) if not isinstance(v, (dict, list)) else v for k, v in self.tensor_cores.items()},
            "kernels": self.kernel_records(),
            "ranges": self.range_records(),
            "findings": [f.to_dict() for f in self.findings],
            "warnings": list(self.warnings),
        }
        # the headline every output shows (Markdown, terminal, the GitHub Action), beside the verdict it words
        from .render.markdown import tc_headline
        doc["tensor_cores"]["headline"] = tc_headline(doc["tensor_cores"])
        vendor = (self.device or {}).get("vendor")
        if vendor:  # Tensor Cores are NVIDIA's: say what the verdict means on another vendor's GPU
            doc["tensor_cores"]["headline"] += (f" ({vendor} GPU: its matrix cores judged by kernel names alone, no "
                                                "counters; Tensor Core measurements are NVIDIA's)")
        if self.timeline is not None:
            doc["timeline"] = self.timeline
        if self.ranks is not None:
            doc["ranks"] = [{k: _num(v) if not isinstance(v, (list, dict)) else v for k, v in r.items()}
                            for r in self.ranks]
            doc["distributed"] = self.distributed
        if self.provenance is not None:
            doc["provenance"] = self.provenance
        return doc

    def _repr_markdown_(self) -> str:
        """Jupyter shows a cell that evaluates to a Verdict as the rendered report (headlines, tables, findings)."""
        from .render.markdown import render
        return render(self.to_json())

    def __repr__(self) -> str:
        tc = self.tensor_cores
        tl = f", timeline {self.timeline.get('verdict')}" if self.timeline else ""
        return (f"<nsighttc.Verdict: Tensor Cores {tc.get('verdict')} ({tc.get('evidence')}), "
                f"{tc.get('launches', 0):,} launches, {len(self.findings)} findings{tl}>")

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, allow_nan=False)


def _not_json(word: str):
    """Python's reader takes NaN and Infinity, which JSON has not (a verdict holding them was not written by us)."""
    raise ValueError(f"{word} is not a JSON value")


def load_json(path: str | Path) -> dict:
    """Read a saved verdict.json (or a run directory holding one; gzip- or xz-compressed or not), checking the schema
    id."""
    p = Path(path)
    if p.is_dir():
        p = next((q for q in (p / "verdict.json", p / "verdict.json.gz", p / "verdict.json.xz") if q.exists()),
                 p / "verdict.json")
    if not p.exists():
        raise InputError("no such file", p)
    try:
        raw = p.read_bytes()
        if raw[:2] == GZIP_MAGIC:  # a verdict kept gzipped (a CI artifact) is read as it is
            import gzip
            import zlib
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"corrupt or truncated gzip data ({exc})", p) from None
        elif raw[:6] == XZ_MAGIC:  # (or xz-compressed, as reports/ keeps some)
            import lzma
            try:
                raw = lzma.decompress(raw)
            except lzma.LZMAError as exc:
                raise InputError(f"corrupt or truncated xz data ({exc})", p) from None
        doc = json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot be read ({getattr(exc, 'strerror', None) or exc})", p) from None
    except UnicodeDecodeError:
        raise InputError("not a verdict JSON file (binary content, not UTF-8 text)", p) from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise InputError(f"not a verdict JSON file ({exc})", p) from None
    except RecursionError:
        raise InputError("not a verdict JSON file (nested too deeply)", p) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith("nsighttc.verdict/"):
        raise InputError(f"not an nsighttc verdict (schema is {schema!r}, expected {SCHEMA_ID!r})", p)
    if schema != SCHEMA_ID:
        raise InputError(f"verdict schema {schema} is not supported by this version (reads {SCHEMA_ID})", p)
    problem = schema_problem(doc)
    if problem:
        raise InputError(f"not a valid {SCHEMA_ID} document: {problem}", p)
    return doc


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    from importlib.resources import files
    schema = json.loads(files("nsighttc").joinpath("schema/verdict-1.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def schema_problem(doc: dict) -> str | None:
    """The first schema violation as 'at $.path.to.field: what is wrong' (the shallowest path first, so a
    wrong type high up is named instead of its consequences), or None for a valid document."""
    errors = list(_validator().iter_errors(doc))
    if not errors:
        return None
    first = min(errors, key=lambda e: (len(e.absolute_path), [str(x) for x in e.absolute_path]))
    msg = first.message if len(first.message) <= 160 else first.message[:157] + "..."
    return f"at {first.json_path}: {msg}"


def with_gains(v: Verdict) -> Verdict:
    """Each finding's estimated speed-up (``analysis.gain``), and the findings ordered by it; again after the profile
    run adds what the analysis could not know (the program's unrecorded step: ``profile.window.unrecorded_speed``)."""
    total = float(v.kernels["total_time_ns"].sum()) if "total_time_ns" in v.kernels else 0.0
    doc = {"timeline": v.timeline, "device": v.device, "distributed": v.distributed,
           "kernels": [{"total_time_ns": total}], "findings": [f.to_dict() for f in v.findings]}
    from .analysis import gain
    ss = gain.scopes(doc)
    for f, d in zip(v.findings, doc["findings"]):
        f.gain = d["gain"] = gain.estimate(d, doc, ss)
    rank = {id(d): i for i, d in enumerate(gain.order(doc["findings"]))}
    v.findings = [f for _, f in sorted(zip([rank[id(d)] for d in doc["findings"]], v.findings), key=lambda x: x[0])]
    return v
