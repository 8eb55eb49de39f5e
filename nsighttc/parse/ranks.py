"""Which input is which rank of a distributed job, before anything is analysed.

Rank of an input, first found wins: the file's own metadata (torch.profiler's ``distributedInfo.rank``,
written when ``torch.distributed`` was initialised), else ``rank<N>`` in the file's name or the nearest
directory's (``runs/job/rank3/nsys.sqlite``: what ``nsighttc profile`` writes for torchrun and srun), else
for nsys exports, which record no rank: one export holding several processes is a whole job, one rank per
process in GPU order; exports of one process each take their GPU's index when the GPUs differ.

``api.analyze`` groups its inputs with ``group`` and analyses each rank in a worker (``rank_map.analyze_ranks``);
``analysis.ranks`` reduces the per-rank verdicts to the job's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_\-.]?(\d+)(?![0-9])", re.IGNORECASE)
_DIST_INFO = re.compile(rb'"distributedInfo"\s*:\s*\{(.{0,4000}?)\}', re.DOTALL)
_FIELD = {k: re.compile(rb'"%s"\s*:\s*(\d+)' % k.encode()) for k in ("rank", "world_size")}
# Files in a directory that are inputs (profiler outputs); nsighttc's own outputs are not.
_INPUT_SUFFIXES = (".sqlite", ".sqlite.gz", ".sqlite.xz", ".json", ".json.gz", ".json.xz", ".ncu-rep", ".nsys-rep",
                   ".csv", ".csv.gz", ".csv.xz")
# nsighttc's own files in a run directory, which are no profiler's recording of the program: its reports, and what the
# default run's launcher and replay write beside the timeline (profile.passes.KERNEL_OPS_FILE and OPS_TRACE_FILE: a
# first run's operators until its window, which the timeline's own trace follows; profile.replay_pass.OPS_FILE)
_OWN_OUTPUTS = {"verdict.json", "run.json", "summary.json", "results.json", "try.json",
                "kernel_ops.json", "torch_ops_trace.json", "replay_ops.json", "host_samples.json"}


@dataclass
class RankInfo:
    rank: int | None
    world_size: int | None
    source: str  # "distributedInfo" | "path" | "none"


def rank_of(path) -> RankInfo:
    """The rank an input belongs to (see the module docstring for where it is read). ``path``: a local path, or an
    input named by a URL (``remote_inputs.RemoteInput``: its start is read through fsspec)."""
    if hasattr(path, "url"):
        from ..remote_inputs import head as remote_head
        p = path
        head = remote_head(path, 1 << 20) if p.name.lower().endswith((".json", ".gz", ".xz")) else b""
    else:
        p = Path(path)
        head = _head(p)
    m = _DIST_INFO.search(head) if head else None
    if m:
        got = {k: rx.search(m.group(1)) for k, rx in _FIELD.items()}
        if got["rank"]:
            ws = got["world_size"]
            return RankInfo(int(got["rank"].group(1)), int(ws.group(1)) if ws else None, "distributedInfo")
    for part in [p.name, *[q.name for q in p.parents][:4]]:
        m2 = _RANK_IN_NAME.search(part)
        if m2:
            return RankInfo(int(m2.group(1)), None, "path")
    return RankInfo(None, None, "none")


def _head(p: Path, n: int = 1 << 20) -> bytes:
    """The first MB of a JSON trace (compressed or not): torch writes ``distributedInfo`` before the events."""
    name = p.name.lower()
    if not (name.endswith(".json") or name.endswith((".gz", ".xz"))):
        return b""
    try:
        from . import textio
        with textio.open_binary(p) as fh:
            return fh.read(n)
    except (*textio.DECODE_ERRORS, ValueError):
        return b""


@dataclass(frozen=True)
class ProcessInput:
    """One process of a recording that holds several (``nsys profile torchrun ...``: one report, every rank)."""
    path: Path
    pid: int
    device: int

    def __str__(self) -> str:
        return f"{self.path} (process {self.pid}, GPU {self.device})"


# the process id in bits 24-47 of nsys' globalPid (``nsys_sqlite._pid``)
_PID_SQL = "((globalPid >> 24) & 16777215)"


def processes(path: Path, only_if_several: bool = False) -> list[tuple[int, int]]:
    """(device, pid) of every host process that launched kernels in an nsys SQLite export, device order;
    [] when the file cannot be read this way (the single-run path then reports it as usual).

    ``only_if_several``: the caller only needs the answer when there are two processes or more. nsys lists
    the processes that opened CUDA devices in ``TARGET_INFO_CUDA_DEVICE`` (a few rows; the DDP recording of
    tests/fixtures/ddp lists torchrun's parent too); with at most one there, the scan of the kernel table
    (0.5 s at 1M kernels) is skipped and [] returned."""
    import sqlite3
    from ..errors import NsighttcError
    from .nsys_sqlite import plain_database
    try:
        with plain_database(path) as db:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if only_if_several:
                    try:
                        n = con.execute("SELECT COUNT(DISTINCT pid) FROM TARGET_INFO_CUDA_DEVICE").fetchone()[0]
                    except sqlite3.Error:  # an export without the table: scan
                        n = None
                    if n is not None and 0 < n <= 1:
                        return []
                    # an export whose device table lists no process (gen_big_sqlite's, a trimmed one): is there a
                    # second process at all? One pass that stops at the first other globalPid (1M kernels of one
                    # process: 0.09 s) instead of grouping every row (0.35 s)
                    first = con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
                    if first is None or con.execute("SELECT 1 FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE globalPid != ? "
                                                    "LIMIT 1", first).fetchone() is None:
                        return []
                rows = con.execute(f"SELECT MIN(deviceId), {_PID_SQL} FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 2").fetchall()
            finally:
                con.close()
    except (sqlite3.Error, OSError, EOFError, NsighttcError):
        return []
    return sorted((int(d), int(p)) for d, p in rows if d is not None and p is not None)


def expand(paths: list) -> list:
    """Directories become the profiler outputs inside them (any depth, sorted); files stay as given.
    A ``.nsys-rep`` beside its ``.sqlite`` export is left out (same recording), as are nsighttc's own
    outputs (verdict.json, run.json)."""
    from ..errors import UsageError
    from ..remote_inputs import expand as expand_url, is_url
    out: list = []
    for p in paths:
        if is_url(p):  # a file, a folder or a glob where the recordings lie (s3://, gs://, file://)
            out.extend(expand_url(p, _INPUT_SUFFIXES, _OWN_OUTPUTS))
            continue
        if not isinstance(p, (str, Path)) or not Path(p).is_dir():
            out.append(p)
            continue
        found = []
        for f in sorted(Path(p).rglob("*")):
            n = f.name.lower()
            if not f.is_file() or n in _OWN_OUTPUTS or n.removesuffix(".gz").removesuffix(".xz") in _OWN_OUTPUTS \
                    or n.startswith(".") or not n.endswith(_INPUT_SUFFIXES):  # (a run directory kept compressed)
                continue
            if n.endswith(".nsys-rep") and f.with_suffix(".sqlite").exists():
                continue
            if n.endswith(".ncu-rep") and (f.parent / "ncu_raw.csv").exists():
                continue
            found.append(f)
        if not found:
            raise UsageError(f"{p}: no profiler outputs in this directory (looked for .sqlite, .json(.gz), "
                             ".ncu-rep, .nsys-rep, ncu .csv)")
        out.extend(found)
    return out


def group(paths: list, kinds: dict) -> tuple[dict[int, list], list, dict[int, RankInfo]]:
    """(timeline inputs by rank, counter inputs shared by every rank, rank info). ``kinds``: path -> Kind."""
    from .sniff import Kind
    by_rank: dict[int, list] = {}
    infos: dict[int, RankInfo] = {}
    timelines = [p for p in paths if kinds[p] not in (Kind.NCU_CSV, Kind.NCU_REP)]
    counters = [p for p in paths if kinds[p] in (Kind.NCU_CSV, Kind.NCU_REP)]
    found = {p: rank_of(p) for p in timelines}
    # nsys files name no rank: one file of several processes is a whole job (one rank per process, device
    # order); files of one process each take their GPU as the rank when the GPUs differ (one node)
    unranked = [p for p in timelines if found[p].rank is None and kinds[p] is Kind.NSYS_SQLITE
                and not hasattr(p, "url")]  # (a URL's processes are not listed here: name its rank in its path)
    procs = {p: processes(p, only_if_several=len(timelines) == 1) for p in unranked}
    if len(timelines) == 1 and len(procs.get(timelines[0], [])) >= 2:
        p = timelines[0]
        for r, (dev, pid) in enumerate(procs[p]):
            by_rank[r] = [ProcessInput(Path(p), pid, dev)]
            infos[r] = RankInfo(r, len(procs[p]), f"nsys process {pid} on GPU {dev}")
        return by_rank, counters, infos
    single = {p: v[0][0] for p, v in procs.items() if len(v) == 1}
    if single and len(set(single.values())) == len(single):
        for p, dev in single.items():
            found[p] = RankInfo(dev, None, f"nsys GPU {dev}")
    for p in timelines:
        info = found[p]
        r = info.rank if info.rank is not None else -1
        by_rank.setdefault(r, []).append(p)
        if r not in infos or infos[r].source != "distributedInfo":
            infos[r] = info
    return by_rank, counters, infos
