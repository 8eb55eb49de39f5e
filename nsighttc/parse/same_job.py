"""Whether the inputs given together can be one run, or one distributed job: a verdict is never made of recordings
that are not.

Seen with other projects' published traces (HolisticTraceAnalysis's test data): the same rank's trace given
twice (two byte-identical files) was merged without a word (kernel time doubled, exposed communication per step
halved); rank 3 of an 8-rank job on an A100 and rank 1 of a 2-rank job on a V100, recorded 8.5 days apart, were
analysed as one job and one of them named the straggler. What tells them apart is read from each file's start (its
``distributedInfo`` and ``deviceProperties``, or an nsys export's GPU table and session start), before any analysis:

- the same content twice (``duplicates``): an error naming both files;
- files that cannot be one job (``job_groups``): different world sizes, GPU models or process-group backends, or
  recordings started more than ``APART_S`` apart. An error that says why, or with ``--no-same-job-check`` one verdict
  per job (``api.analyze_jobs``).
The same process recorded twice with overlapping times (two exports of one run) is found once parsed
(``api._same_process_twice``).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

# Ranks of one job start within minutes of each other; a day apart they are two runs (trace_diff's control and test
# traces of HolisticTraceAnalysis's data: 8.5 days).
APART_S = 24 * 3600.0
_HEAD = 1 << 20
_DIST = re.compile(rb'"distributedInfo"\s*:\s*(\{.{0,4000}?\})', re.DOTALL)
_PROPS = re.compile(rb'"deviceProperties"\s*:\s*(\[.{0,20000}?\])', re.DOTALL)
_BASE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
_TS = re.compile(rb'"ts"\s*:\s*(-?[\d.]+(?:[eE][-+]?\d+)?)')


@dataclass(frozen=True)
class JobFacts:
    """What a recording says of the job it belongs to (None: it does not say)."""
    world_size: int | None = None
    backend: str | None = None
    gpu: str | None = None
    started_s: float | None = None     # the recording's start, seconds since the epoch


def fingerprint(path) -> tuple | None:
    """(size, digest of the first and last MB): equal for byte-identical files, and for practically nothing else."""
    try:
        p = Path(path)
        size = p.stat().st_size
        h = hashlib.sha1()
        with p.open("rb") as fh:
            h.update(fh.read(_HEAD))
            if size > 2 * _HEAD:
                fh.seek(size - _HEAD)
                h.update(fh.read(_HEAD))
        return size, h.hexdigest()
    except (OSError, TypeError, ValueError):
        return None


def _digest(path) -> str | None:
    """The whole file's digest: asked only where two files' quick fingerprints agree."""
    h = hashlib.sha1()
    try:
        with Path(path).open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def duplicates(paths: list) -> list[tuple]:
    """Pairs of inputs with the same content (the first file of each content, and the repeat): files whose size, first
    and last MB agree are compared whole, so two recordings that differ only in their middle are never taken for one."""
    seen: dict = {}
    out = []
    for p in paths:
        if hasattr(p, "url") or not isinstance(p, (str, Path)):
            continue
        fp = fingerprint(p)
        if fp is None:
            continue
        twin = next((q for q in seen.get(fp, []) if _digest(q) == _digest(p)), None)
        if twin is not None:
            out.append((twin, p))
        else:
            seen.setdefault(fp, []).append(p)
    return out


def facts(path, head: bytes | None = None, kind=None) -> JobFacts:
    """The job facts a file's start holds: a torch.profiler trace's ``distributedInfo``, ``deviceProperties`` and
    first timestamp; an nsys export's GPU and session start."""
    from .sniff import Kind
    if kind is Kind.NSYS_SQLITE:
        return _nsys_facts(path)
    if head is None:
        return JobFacts()
    dist = _json_at(_DIST, head) or {}
    props = _json_at(_PROPS, head) or []
    gpu = next((p.get("name") for p in props if isinstance(p, dict) and p.get("name")), None)
    started = None
    ts = [float(m.group(1)) for m in _TS.finditer(head[:_HEAD])][:200]
    base = _BASE.search(head)
    if ts:
        first_us = min(ts)
        started = (int(base.group(1)) / 1e9 + first_us / 1e6) if base else (first_us / 1e6 if first_us > 1e14 else None)
    ws = dist.get("world_size")
    return JobFacts(int(ws) if isinstance(ws, (int, float)) else None, dist.get("backend"), gpu, started)


def _json_at(rx: re.Pattern, head: bytes):
    m = rx.search(head)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def _nsys_facts(path) -> JobFacts:
    import sqlite3
    from ..errors import NsighttcError
    from .nsys_sqlite import plain_database
    try:
        with plain_database(Path(path)) as db:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                gpu = con.execute("SELECT name FROM TARGET_INFO_GPU LIMIT 1").fetchone() \
                    if "TARGET_INFO_GPU" in tables else None
                start = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone() \
                    if "TARGET_INFO_SESSION_START_TIME" in tables else None
            finally:
                con.close()
    except (sqlite3.Error, OSError, EOFError, NsighttcError):
        return JobFacts()
    return JobFacts(gpu=gpu[0] if gpu else None, started_s=(start[0] / 1e9) if start and start[0] else None)


def job_groups(items: list[tuple[object, JobFacts]]) -> tuple[list[list], str | None]:
    """The inputs in groups that can each be one job, and why there is more than one (None: one job)."""
    groups: list[tuple[JobFacts, list]] = []
    reasons: list[str] = []
    for path, f in items:
        for g_facts, members in groups:
            why = _apart(g_facts, f)
            if why is None:
                members.append(path)
                break
        else:
            if groups:
                reasons.append(_apart(groups[0][0], f) or "")
            groups.append((f, [path]))
    if len(groups) < 2:
        return [m for _, m in groups], None
    first, second = groups[0][1][0], groups[1][1][0]
    return [m for _, m in groups], f"{first} and {second} cannot be one job: {reasons[0]}"


def _apart(a: JobFacts, b: JobFacts) -> str | None:
    """Why two recordings cannot be ranks of one job, or None."""
    if a.world_size and b.world_size and a.world_size != b.world_size:
        return f"world sizes {a.world_size} and {b.world_size}"
    if a.backend and b.backend and a.backend != b.backend:
        return f"process-group backends {a.backend} and {b.backend}"
    if a.gpu and b.gpu and a.gpu != b.gpu:
        return f"GPUs {a.gpu} and {b.gpu}"
    if a.started_s and b.started_s and abs(a.started_s - b.started_s) > APART_S:
        days = abs(a.started_s - b.started_s) / 86400
        return f"recorded {days:.1f} days apart"
    return None
