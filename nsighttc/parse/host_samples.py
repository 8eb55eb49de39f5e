"""Host stack samples -> one table on the recording's clock.

The launcher's sampler (``runtime.host_samples``) writes ``host_samples.json`` beside the trace it ran with. Its
times are the launcher's clock; the ``nsighttc.clock#<n>`` marks the recording holds (NVTX in nsys,
``record_function`` in torch.profiler) give the offset to the recording's clock: the median over the marks found, so
one late mark moves nothing. (Stacks a recording made elsewhere carries, torch.profiler's ``with_stack=True``
``python_function`` events or nsys's Python sampling, are not read yet.)
"""
from __future__ import annotations

import json
import lzma
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..record_format import CLOCK_MARK, HOST_SAMPLES_SCHEMA as SCHEMA, LIBRARY, OWN, STDLIB, TOOL

FILE_NAME = "host_samples.json"  # beside the trace, in the run directory (per rank: rank<R>/)


@dataclass
class HostSamples:
    source: str                  # "nsighttc sampler"
    frames: pd.DataFrame         # file, function, line, kind, source (one row per frame id)
    stacks: list[np.ndarray]     # frame ids, innermost first
    samples: pd.DataFrame        # t_ns (the recording's clock once placed), tid, stack
    main_tid: int | None = None
    interval_ns: float = 0.0
    cost_ns: float = 0.0
    span_ns: float = 0.0         # from the first sample to the last (the cost's denominator)
    placed: bool = False         # t_ns is on the recording's clock
    host: dict = field(default_factory=dict)  # the process's host facts (runtime.host_samples.host_facts)
    anchors: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))  # (number, launcher ns) of each clock mark
    calls: pd.DataFrame | None = None  # recorded Python calls (parse.python_calls), read at moments by stacks_at
    notes: list[str] = field(default_factory=list)


def read(path: Path) -> HostSamples:
    """The launcher's samples file; a one-line InputError naming the file when it is not one."""
    try:
        from . import textio
        with textio.open_binary(Path(path)) as fh:  # (a run directory kept compressed: host_samples.json.gz)
            raw = fh.read()
        doc = json.loads(raw)
    except (OSError, UnicodeDecodeError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:  # (JSONDecodeError: a ValueError)
        raise InputError(f"not a readable host samples file ({type(exc).__name__}: {exc})", path) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputError(f"not a host samples file (expected schema {SCHEMA!r})", path)
    try:
        frames = pd.DataFrame(doc["frames"], columns=["file", "function", "line", "kind", "source"])
        stacks = [np.asarray(s, dtype=np.int64) for s in doc["stacks"]]
        t = np.asarray(doc["t"], dtype="float64")
        samples = pd.DataFrame({"t_ns": t, "tid": np.asarray(doc["tid"], dtype=np.int64),
                                "stack": np.asarray(doc["stack"], dtype=np.int64)})
        anchors = np.asarray(doc.get("anchors") or [], dtype="float64").reshape(-1, 2)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"a damaged host samples file ({type(exc).__name__}: {exc})", path) from None
    if len(samples) and (samples["stack"].max() >= len(stacks) or samples["stack"].min() < 0):
        raise InputError("a damaged host samples file (a sample names a stack it does not hold)", path)
    samples["dt_ns"] = tick_spans(t)
    return HostSamples("nsighttc sampler", frames, stacks, samples, doc.get("main_tid"),
                       float(doc.get("interval_ns") or 0), float(doc.get("cost_ns") or 0),
                       float(t.max() - t.min()) if len(t) > 1 else 0.0,
                       host=doc.get("host") if isinstance(doc.get("host"), dict) else {}, anchors=anchors)


# A sample stands for the time since the sampler's previous tick, at most this long (a process stopped meanwhile).
MAX_TICK_NS = 1e9


def tick_spans(t: np.ndarray) -> np.ndarray:
    """Per sample, the time it stands for: since the sampler's previous tick (every thread sampled at one tick shares
    its time), the first tick the median span. Why not one sample, one share: the sampler needs the interpreter's lock,
    which a pure-Python loop gives up only every switch interval (5 ms) while a C call that releases it gives it at
    once, so ticks come further apart in Python code. A CPU loop alternating a list comprehension with matrix products
    (50% of its time in Python by its own clock, 48% by py-spy) had 25% of the samples in Python, 50% of their time
    (benchmarks/host_frames_check.py bias)."""
    if not len(t):
        return np.zeros(0)
    ticks, inverse = np.unique(t, return_inverse=True)
    span = np.diff(ticks)
    first = float(np.median(span)) if len(span) else 0.0
    span = np.minimum(np.concatenate([[first], span]), MAX_TICK_NS)
    return span[inverse]


def beside(trace: Path) -> Path | None:
    """The launcher's samples file of a trace: ``host_samples.json`` in the trace's directory (or compressed)."""
    for name in (FILE_NAME, FILE_NAME + ".gz", FILE_NAME + ".xz"):
        p = Path(trace).parent / name
        if p.is_file():
            return p
    return None


def place(hs: HostSamples, marks: pd.DataFrame) -> HostSamples:
    """Put the samples on the recording's clock with its ``nsighttc.clock#<n>`` marks (``marks``: the Timeline's
    marks table). Without a matching mark the samples stay unplaced, with a note that says why."""
    anchors = hs.anchors
    names = marks["name"].astype(str) if marks is not None and not marks.empty else pd.Series(dtype=object)
    m = names.str.startswith(CLOCK_MARK).to_numpy()
    if not m.any() or not len(anchors):
        hs.notes.append("host samples not used: the recording holds no clock mark of the sampler "
                        "(nsighttc.clock#...), so they cannot be placed on its clock")
        return hs
    rec = pd.DataFrame({"n": pd.to_numeric(names[m].str[len(CLOCK_MARK):], errors="coerce").to_numpy(),
                        "trace_ns": marks["start_ns"].to_numpy(dtype="float64")[m]}).dropna()
    ours = pd.DataFrame({"n": anchors[:, 0], "ns": anchors[:, 1]})
    both = rec.merge(ours, on="n")
    if both.empty:
        hs.notes.append("host samples not used: none of the recording's clock marks is one this sampler drew")
        return hs
    offset = float(np.median(both["trace_ns"] - both["ns"]))
    hs.samples = hs.samples.assign(t_ns=hs.samples["t_ns"] + offset)
    hs.placed = True
    return hs


def without_clock_marks(marks: pd.DataFrame) -> pd.DataFrame:
    """The marks that are not the sampler's clock marks (the step finder never sees those)."""
    if marks is None or marks.empty:
        return marks
    keep = ~marks["name"].astype(str).str.startswith(CLOCK_MARK).to_numpy()
    return marks if keep.all() else marks[keep].reset_index(drop=True)


def sampler_cost_share(hs: HostSamples) -> float | None:
    """The sampler's CPU time over the time it sampled (what it took from the program at most)."""
    return hs.cost_ns / hs.span_ns if hs.span_ns > 0 and hs.cost_ns else None


__all__ = ["FILE_NAME", "HostSamples", "beside", "place", "read", "sampler_cost_share", "without_clock_marks", "OWN",
           "LIBRARY", "STDLIB", "TOOL"]
