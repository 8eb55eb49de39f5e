"""Several ranks of one distributed job: which input is which rank, each rank judged on its own, and the
job's distributed verdict (straggler, step skew, communication).

Why per rank: ranks of a data-parallel job wait for each other in every collective, so one slow rank (a
data loader, a host sync, a throttled GPU) makes every other rank's GPU sit in NCCL kernels that count
as "busy". Merging all ranks into one kernel table hides that. Here every rank is analysed alone
(``api.analyze`` on its own files plus the run's Nsight Compute evidence, which is per kernel and holds
for every rank), in parallel processes whose memory is bounded by the files analysed at once, and the
job's verdict is built from the per-rank results.

Rank of an input, first found wins: the file's own metadata (torch.profiler's ``distributedInfo.rank``,
written when ``torch.distributed`` was initialised), else ``rank<N>`` in the file's name or the nearest
directory's (``runs/job/rank3/nsys.sqlite``: what ``nsighttc profile`` writes for torchrun and srun), else
for nsys exports, which record no rank: one export holding several processes is a whole job, one rank per
process in GPU order; exports of one process each take their GPU's index when the GPUs differ.

The straggler rule (``straggler``): a rank's *own* step time is its median step minus the communication
it waited in per step (``timeline.comm``). Ranks that run in lock-step have equal step times, so step
times alone never show a straggler; own times do. The rank whose own time exceeds the others' median by at
least ``STRAGGLER_MIN_SHARE`` of the step (and ``STRAGGLER_MIN_NS``) is a candidate, and its *distinguishing
causes* are compared per step with the other ranks' (host ranges, syncs, copies, GPU compute time):
- a cause that explains at least half of the excess names the straggler and why;
- an excess made of launch overhead alone is reported as ``launch_imbalance``, not as a straggler: a
  tracing profiler sits in every launch call and slows the ranks' hosts unevenly. Measured on 2 H200s, DDP
  ResNet-50 AMP, no delay on any rank (plain runs 27.8 and 28.2 ms/step on both ranks): under nsys one
  rank's own step was 58.1 ms against 35.0 ms, 20.5 ms of it launch overhead (reports/ddp); with a 30 ms
  host delay on rank 1 its excess was 23 ms of host range + 8.6 ms of syncs (nsys) and 21 + 11.5 ms (torch).
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..model import Finding

STRAGGLER_MIN_SHARE = 0.10   # of the slowest rank's median step
EXPLAINED_SHARE = 0.5        # distinguishing causes (launch overhead aside) must explain this much of the excess
LAUNCH = "launch-overhead"
COMPUTE = "gpu-compute"      # the rank's own GPU compute time per step, compared like a cause
STRAGGLER_MIN_NS = 1e6       # and at least 1 ms: timer noise and launch jitter stay below this
TC_SHARE_DIFF = 0.20         # ranks whose Tensor Core shares differ by more than this run different code
EXPOSED_COMM_FINDING = 0.15  # exposed communication (mean over ranks) worth a finding

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_\-.]?(\d+)(?![0-9])", re.IGNORECASE)
_DIST_INFO = re.compile(rb'"distributedInfo"\s*:\s*\{(.{0,4000}?)\}', re.DOTALL)
_FIELD = {k: re.compile(rb'"%s"\s*:\s*(\d+)' % k.encode()) for k in ("rank", "world_size")}
# Files in a directory that are inputs (profiler outputs); nsighttc's own outputs are not.
_INPUT_SUFFIXES = (".sqlite", ".sqlite.gz", ".json", ".json.gz", ".ncu-rep", ".nsys-rep", ".csv", ".csv.gz")
_OWN_OUTPUTS = {"verdict.json", "run.json", "summary.json", "results.json", "try.json"}


@dataclass
class RankInfo:
    rank: int | None
    world_size: int | None
    source: str  # "distributedInfo" | "path" | "none"


def rank_of(path: str | Path) -> RankInfo:
    """The rank an input belongs to (see the module docstring for where it is read)."""
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
    """The first MB of a JSON trace (gzip or not): torch writes ``distributedInfo`` before the events."""
    name = p.name.lower()
    if not (name.endswith(".json") or name.endswith(".json.gz") or name.endswith(".gz")):
        return b""
    try:
        from ..parse import textio
        if textio.is_gzip(p):
            import gzip
            with gzip.open(p, "rb") as fh:
                return fh.read(n)
        with p.open("rb") as fh:
            return fh.read(n)
    except (OSError, EOFError, ValueError):
        return b""


@dataclass(frozen=True)
class ProcessInput:
    """One process of a recording that holds several (``nsys profile torchrun ...``: one report, every rank)."""
    path: Path
    pid: int
    device: int

    def __str__(self) -> str:
        return f"{self.path} (process {self.pid}, GPU {self.device})"


def processes(path: Path, only_if_several: bool = False) -> list[tuple[int, int]]:
    """(device, pid) of every host process that launched kernels in an nsys SQLite export, device order;
    [] when the file cannot be read this way (the single-run path then reports it as usual).

    ``only_if_several``: the caller only needs the answer when there are two processes or more. nsys lists
    the processes that opened CUDA devices in ``TARGET_INFO_CUDA_DEVICE`` (a few rows; the DDP recording of
    tests/fixtures/ddp lists torchrun's parent too); with at most one there, the scan of the kernel table
    (0.5 s at 1M kernels) is skipped and [] returned."""
    import sqlite3
    from ..errors import NsighttcError
    from ..parse.nsys_sqlite import plain_database
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
                rows = con.execute("SELECT MIN(deviceId), (globalPid >> 24) & 16777215 FROM "
                                   "CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 2").fetchall()
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
    out: list = []
    for p in paths:
        if not isinstance(p, (str, Path)) or not Path(p).is_dir():
            out.append(p)
            continue
        found = []
        for f in sorted(Path(p).rglob("*")):
            n = f.name.lower()
            if not f.is_file() or n in _OWN_OUTPUTS or n.startswith(".") or not n.endswith(_INPUT_SUFFIXES):
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
    from ..parse.sniff import Kind
    by_rank: dict[int, list] = {}
    infos: dict[int, RankInfo] = {}
    timelines = [p for p in paths if kinds[p] not in (Kind.NCU_CSV, Kind.NCU_REP)]
    counters = [p for p in paths if kinds[p] in (Kind.NCU_CSV, Kind.NCU_REP)]
    found = {p: rank_of(p) for p in timelines}
    # nsys files name no rank: one file of several processes is a whole job (one rank per process, device
    # order); files of one process each take their GPU as the rank when the GPUs differ (one node)
    unranked = [p for p in timelines if found[p].rank is None and kinds[p] is Kind.NSYS_SQLITE]
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


# --- per-rank analysis (in worker processes) -------------------------------------------------------
def _rank_job(rank: int, paths: list, kwargs: dict, keep_launches: bool):
    """One rank's verdict, small enough to send back: its launch table only when asked (one rank's)."""
    from ..api import analyze
    from ..parse import load
    from ..parse.timeline import only_process
    from . import tensor_cores
    inputs = [only_process(load(p.path), p.pid) if isinstance(p, ProcessInput) else p for p in paths]
    v = analyze(inputs, **kwargs)
    for i, p in zip(v.inputs, paths):
        if isinstance(p, ProcessInput):
            i["path"] = str(p)
    compacted = tensor_cores.compact(v.launches)
    if not keep_launches:
        v.launches = v.launches.iloc[0:0].copy()  # a view would keep the whole table alive in-process
    return rank, v, compacted


def analyze_ranks(by_rank: dict[int, list], counters: list, jobs: int | None, kwargs: dict):
    """Analyse every rank (in ``jobs`` processes; 1 = here, one rank at a time). Returns
    {rank: (verdict, compacted launches)}; the lowest rank keeps its launch table."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    low = min(by_rank)
    work = [(r, [*by_rank[r], *counters], kwargs, r == low) for r in sorted(by_rank)]
    results = {}
    if jobs == 1 or len(work) == 1:
        import gc
        for w in work:
            r, v, c = _rank_job(*w)
            results[r] = (v, c)
            gc.collect()  # analysis runs with the cyclic collector paused: free each rank's cycles before the next
        return results
    import multiprocessing as mp
    ctx = mp.get_context("spawn")  # no fork: the caller may hold threads (profile's progress, pools)
    with ProcessPoolExecutor(max_workers=min(jobs, len(work)), mp_context=ctx) as pool:
        futures = [pool.submit(_rank_job, *w) for w in work]
        for f in futures:
            r, v, c = f.result()
            results[r] = (v, c)
    return results


# --- the job's verdict ------------------------------------------------------------------------------
def rank_row(rank: int, v) -> dict:
    """One line of the rank table from a rank's verdict."""
    tl = v.timeline or {}
    comm = tl.get("communication") or {}
    steps = tl.get("steps") or {}
    fams = tl.get("step_families") or []
    dom = next((f for f in fams if f.get("name") == steps.get("name")), fams[0] if fams else {})
    gpu_busy = dom.get("steady_gpu_busy_share", tl.get("window", {}).get("gpu_busy_share")) if tl else None
    compute = comm.get("compute_busy_share", gpu_busy) if tl else None
    med = steps.get("median_iteration_ns") or None
    per_step_wait = comm.get("exposed_comm_per_step_ns", 0.0) if med else None
    warm = int(dom.get("warmup_steps", 0)) if dom else 0
    n_steady = max(int(dom.get("count", 0)) - warm, 1) if dom else 1
    per_step = {}
    if dom:
        for c in dom.get("causes") or []:
            if c["kind"] != "communication":
                key = (c["kind"], c["name"])
                per_step[key] = per_step.get(key, 0.0) + c["idle_ns"] / n_steady
        if comm or dom.get("compute_busy_share") is not None:
            share = dom.get("compute_busy_share", dom.get("steady_gpu_busy_share", 0.0))
            per_step[(COMPUTE, "GPU compute")] = share * dom.get("steady_wall_ns", 0.0) / n_steady
    return {
        "rank": rank if rank >= 0 else None,
        "inputs": [str(i["path"]) for i in v.inputs],
        "tc_time_share": v.tensor_cores.get("tc_time_share"), "tc_verdict": v.tensor_cores.get("verdict"),
        "gpu_busy_share": gpu_busy, "compute_busy_share": compute,
        "median_step_ns": med, "own_step_ns": (med - per_step_wait) if med else None,
        "exposed_comm_share": comm.get("exposed_comm_share", 0.0) if tl else None,
        "exposed_comm_per_step_ns": per_step_wait,
        "communication_kernel_ns": comm.get("communication_kernel_ns", 0.0),
        # Tensor Core share of the compute kernels' time: a waiting rank's long NCCL kernels must not make its
        # share look smaller than an identical rank's (H200 x2 straggler run: 10% vs 30% of all kernel time)
        "tc_compute_share": _tc_compute_share(v.tensor_cores, comm.get("communication_kernel_ns", 0.0)),
        "kernel_time_ns": v.tensor_cores.get("kernel_time_ns", 0.0),
        "verdict": tl.get("verdict") if tl else None, "headline_cause": tl.get("headline_cause") if tl else None,
        "step_family": steps.get("name"), "_iterations": list(dom.get("iteration_ns", []))[warm:] if dom else [],
        "_warmup": warm, "_all_iterations": list(dom.get("iteration_ns", [])) if dom else [],
        "_per_step": per_step,
    }


def _tc_compute_share(tc: dict, comm_ns: float) -> float | None:
    compute = (tc.get("kernel_time_ns") or 0.0) - (comm_ns or 0.0)
    return (tc.get("tc_time_ns") or 0.0) / compute if compute > 0 else None


def step_skew(rows: list[dict]) -> dict | None:
    """Per step index (steps counted from each rank's first), slowest / fastest iteration across ranks:
    median and max over the steps every rank has, warm-up of any rank left out."""
    its = [r["_all_iterations"] for r in rows if r["_all_iterations"]]
    if len(its) < 2:
        return None
    first = max(r["_warmup"] for r in rows if r["_all_iterations"])
    n = min(len(x) for x in its)
    if n <= first:
        return None
    m = np.array([x[first:n] for x in its], dtype="float64")
    lo = m.min(axis=0)
    ratio = np.where(lo > 0, m.max(axis=0) / np.where(lo > 0, lo, 1), np.nan)
    return {"steps": int(n - first), "median": float(np.nanmedian(ratio)), "max": float(np.nanmax(ratio))}


def _excess(slow: dict, others: list[dict]) -> list[tuple[tuple[str, str], float]]:
    """Per cause, how much more time per step the slow rank spends in it than the other ranks' median,
    largest first (positive only)."""
    keys = set(slow["_per_step"]).union(*[o["_per_step"] for o in others])
    out = []
    for k in keys:
        d = slow["_per_step"].get(k, 0.0) - float(np.median([o["_per_step"].get(k, 0.0) for o in others]))
        if d > 0:
            out.append((k, d))
    return sorted(out, key=lambda x: -x[1])


def _describe(key: tuple[str, str]) -> str:
    kind, name = key
    return {"host-range": f"host busy in `{name}`", LAUNCH: "launch overhead (the host launched kernels slower)",
            "sync": f"synchronising calls ({name})", "pageable-copy": "pageable host-to-device copies",
            "gpu-wait": "launched work waiting on the GPU", COMPUTE: "longer GPU compute (a slower or throttled GPU, "
            "or more work on this rank)"}.get(kind, f"{kind} ({name})")


def imbalance(rows: list[dict]) -> tuple[dict | None, dict | None]:
    """(straggler, launch_imbalance): see the module docstring. Both None when the ranks' own step times
    agree within the margin (a balanced job gets no invented straggler)."""
    cand = [r for r in rows if r["own_step_ns"] is not None and r["rank"] is not None]
    if len(cand) < 2:
        return None, None
    slow = max(cand, key=lambda r: r["own_step_ns"])
    rest = [r for r in cand if r is not slow]
    gap = slow["own_step_ns"] - float(np.median([r["own_step_ns"] for r in rest]))
    if gap < max(STRAGGLER_MIN_SHARE * slow["median_step_ns"], STRAGGLER_MIN_NS):
        return None, None
    wait = float(np.median([r["exposed_comm_per_step_ns"] or 0.0 for r in rest]))
    excess = _excess(slow, rest)
    causes = [(k, d) for k, d in excess if k[0] != LAUNCH]
    launch = sum(d for k, d in excess if k[0] == LAUNCH)
    base = {"rank": slow["rank"], "own_step_ns": slow["own_step_ns"],
            "others_own_step_ns": slow["own_step_ns"] - gap, "excess_ns": gap, "others_wait_per_step_ns": wait,
            "verdict": slow["verdict"],
            "excess_by_cause": [{"cause": _describe(k), "kind": k[0], "name": k[1], "per_step_ns": d}
                                for k, d in excess[:5]]}
    if causes and sum(d for _, d in causes) >= EXPLAINED_SHARE * gap:
        top = causes[0]
        cause = f"{_describe(top[0])}: {top[1] / 1e6:.1f} ms per step more than the other ranks"
        return {**base, "cause": cause,
                "why": (f"rank {slow['rank']} spends {gap / 1e6:.1f} ms more per step on its own work than the median "
                        f"rank, which waits {wait / 1e6:.1f} ms per step in communication; the difference: "
                        + "; ".join(f"{_describe(k)} +{d / 1e6:.1f} ms" for k, d in causes[:3]))}, None
    return None, {**base, "launch_overhead_excess_ns": launch,
                  "note": (f"rank {slow['rank']}'s own step is {gap / 1e6:.1f} ms longer than the other ranks', mostly "
                           f"launch overhead (+{launch / 1e6:.1f} ms per step): its host launched kernels slower. A "
                           "tracing profiler slows every launch call and the ranks unevenly, so this is not named a "
                           "straggler; compare the ranks' step times in a plain run")}


def distributed(rows: list[dict], world_size: int | None) -> dict:
    comm_ns = sum(r["communication_kernel_ns"] or 0.0 for r in rows)
    kern_ns = sum(r["kernel_time_ns"] or 0.0 for r in rows)
    exposed = [r["exposed_comm_share"] for r in rows if r["exposed_comm_share"] is not None]
    steps = [r["median_step_ns"] for r in rows if r["median_step_ns"]]
    slowest = max((r for r in rows if r["median_step_ns"]), key=lambda r: r["median_step_ns"], default=None)
    strag, launch = imbalance(rows)
    return {"ranks": len(rows), "world_size": world_size, "straggler": strag, "launch_imbalance": launch,
            "step_skew": step_skew(rows),
            "nccl_time_share": comm_ns / kern_ns if kern_ns else 0.0,
            "exposed_comm_share": float(np.mean(exposed)) if exposed else None,
            "exposed_comm_share_max": float(np.max(exposed)) if exposed else None,
            "slowest_rank": slowest["rank"] if slowest else None,
            "slowest_rank_step_ns": slowest["median_step_ns"] if slowest else None,
            "median_step_ns_spread": (max(steps) / min(steps)) if steps and min(steps) > 0 else None}


def findings(rows: list[dict], dist: dict) -> list[Finding]:
    out: list[Finding] = []
    s = dist.get("straggler")
    total_step = sum(r["median_step_ns"] or 0.0 for r in rows)
    if s:
        out.append(Finding(
            "straggler-rank", "high", f"Rank {s['rank']} is the straggler: the other ranks wait for it",
            s["why"],
            f"Fix rank {s['rank']}'s own cause first ({s['cause'] or s['verdict']}); every rank's step waits for the "
            "slowest. Host-side causes: give its data loader workers and pinned memory, remove its syncs "
            "(`.item()`, prints) from the step, check its CPU affinity and what else runs on its host; GPU-side: "
            "`nvidia-smi -q -d CLOCK,PERFORMANCE` for throttling.",
            time_ns=s["excess_ns"] * len(rows), kernels=[]))
    ex = dist.get("exposed_comm_share")
    if ex is not None and ex >= EXPOSED_COMM_FINDING and not s:
        out.append(Finding(
            "exposed-communication", "medium", "Communication is not overlapped with compute",
            f"the ranks spend {100 * ex:.0f}% of their step time (mean over ranks, max "
            f"{100 * dist['exposed_comm_share_max']:.0f}%) in communication kernels with no compute beside them; "
            f"NCCL kernels are {100 * dist['nccl_time_share']:.0f}% of all kernel time",
            "Let DDP overlap the all-reduce with backward: smaller buckets start it earlier "
            "(`DistributedDataParallel(..., bucket_cap_mb=...)`), `gradient_as_bucket_view=True` saves a copy, "
            "`static_graph=True` for fixed graphs; with gradient accumulation use `no_sync()` on all but the last "
            "micro-batch; for FSDP check prefetching (`forward_prefetch`, `backward_prefetch`).",
            time_ns=ex * total_step, kernels=[]))
    tcs = [(r["rank"], r["tc_compute_share"]) for r in rows if r["tc_compute_share"] is not None]
    if len(tcs) >= 2:
        lo, hi = min(tcs, key=lambda x: x[1]), max(tcs, key=lambda x: x[1])
        if hi[1] - lo[1] > TC_SHARE_DIFF:
            out.append(Finding(
                "ranks-differ-in-tensor-cores", "medium", "Ranks differ in Tensor Core use",
                f"rank {hi[0]}: {100 * hi[1]:.0f}% of its compute kernels' time on Tensor Cores, rank {lo[0]}: "
                f"{100 * lo[1]:.0f}% (communication kernels left out of both)",
                "The ranks do not run the same code: check per-rank settings (autocast, TF32 flags, dtype, model "
                "placement) and whether some ranks do extra work (evaluation, logging, checkpointing on rank 0).",
                time_ns=0.0))
    return out


def public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}
