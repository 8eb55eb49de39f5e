"""Several ranks of one distributed job: the job's distributed verdict (straggler, step skew, communication)
from the verdicts of its ranks.

Why per rank: ranks of a data-parallel job wait for each other in every collective, so one slow rank (a
data loader, a host sync, a throttled GPU) makes every other rank's GPU sit in NCCL kernels that count
as "busy". Merging all ranks into one kernel table hides that. So every rank is analysed alone
(``rank_map.analyze_ranks``: ``api.analyze`` on its own files plus the run's Nsight Compute evidence, which is per
kernel and holds for every rank, in parallel processes whose memory is bounded by the files analysed at
once; which input is which rank: ``parse.ranks``), and this module reduces the per-rank verdicts: a pure
function of them, testable without any trace.

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

import numpy as np

from ..durations import duration
from ..model import Finding
from .rank_rows import COMPUTE, failed_row, rank_row  # noqa: F401 - (a rank's row: what the reduce reads)

STRAGGLER_MIN_SHARE = 0.10   # of the slowest rank's median step
EXPLAINED_SHARE = 0.5        # distinguishing causes (launch overhead aside) must explain this much of the excess
LAUNCH = "launch-overhead"
STRAGGLER_MIN_NS = 1e6       # and at least 1 ms: timer noise and launch jitter stay below this
TC_SHARE_DIFF = 0.20         # ranks whose Tensor Core shares differ by more than this run different code
MOST_STEPS = 0.6             # a straggler lags in at least this share of the steady steps (issue 46)
SAME_WORK_GPU = 0.05         # ranks run the same work: the same compute kernels, GPU compute per step within 5%
SAME_WORK_LAUNCHES = 0.05    # ... or, where launches are known: launches per step by kernel and grid within 5%
# What kind of lag a straggler's first distinguishing cause is (issue 46): its host, its GPU, or its communication
STRAGGLER_KIND = {COMPUTE: "gpu", "communication": "communication"}  # every other cause is the host's
# The causes that are a rank's own work, not its waiting: what a straggler's fix can remove (``own_excess``). Launch
# overhead is left out (a tracing profiler slows the ranks' launches unevenly: ``launch_imbalance``), and so are
# syncs and launched work waiting on the GPU (waits: a rank that runs behind waits less, not more).
OWN_WORK_KINDS = ("host-range", "pageable-copy", COMPUTE)
BY_CAUSES = ("its GPU idle time per step by cause, its own work only (host ranges, pageable copies, GPU compute), "
             "beyond the median rank's")  # (own_excess without the CUDA calls' times: it cannot tell who waited)
EXPOSED_COMM_FINDING = 0.15  # exposed communication (mean over ranks) worth a finding
SHORT_WINDOW = 0.5           # a rank holding less than this share of the steady steps another rank holds: incomplete


# --- the job's verdict ------------------------------------------------------------------------------
def lag_by_step(slow: dict, others: list[dict]) -> dict | None:
    """Step by step, how much longer the slow rank's own work was than the other ranks' median, against the
    step-to-step spread of the ranks' own work (the median over ranks of its interquartile range): the share of steps
    whose lag exceeds that spread (and ``STRAGGLER_MIN_NS``). None where a rank lacks its steps' own work."""
    series = [slow["_own_iterations"]] + [o["_own_iterations"] for o in others]
    if any(not x for x in series):
        return None
    n = min(len(x) for x in series)
    if n < 3:
        return None
    m = np.array([x[:n] for x in series], dtype="float64")
    lag = m[0] - np.median(m[1:], axis=0)
    spread = float(np.median([np.subtract(*np.percentile(x, [75, 25])) for x in m]))
    over = lag > max(spread, STRAGGLER_MIN_NS)
    q1, med, q3 = np.percentile(lag, [25, 50, 75])
    return {"steps": int(n), "lagging_steps_share": float(over.mean()), "spread_ns": spread,
            "lag_ns": {"median": float(med), "q1": float(q1), "q3": float(q3), "min": float(lag.min()),
                       "max": float(lag.max())}}


def work_difference(a: dict, b: dict) -> float:
    """How different two ranks' work per step is (``rank_rows.work_per_step``): the launches per step that differ by
    kernel and grid, over the launches per step of the larger."""
    keys = set(a) | set(b)
    diff = sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)
    return diff / max(sum(a.values()), sum(b.values()), 1e-9)


def same_work(rows: list[dict]) -> bool | None:
    """Whether every rank ran the same work per steady step: the same compute kernels, with the same grids, launched
    as often (within ``SAME_WORK_LAUNCHES`` of the launches), each rank against the first. What ran, not how long it
    took: contention (NCCL kernels beside compute, a throttled GPU) changes time, not work (issue 50). Recordings
    without the launches' times fall back to the kernel names and GPU compute per step within ``SAME_WORK_GPU``.
    None where the ranks' verdicts do not say."""
    if len(rows) < 2:
        return None
    work = [r.get("_work") for r in rows]
    if all(work):
        return all(work_difference(work[0], w) <= SAME_WORK_LAUNCHES for w in work[1:])
    kernels = [r["_compute_kernels"] for r in rows]
    gpu = [r["_per_step"].get((COMPUTE, "GPU compute")) for r in rows]
    if not all(kernels) or any(g is None for g in gpu):
        return None
    med = float(np.median(gpu))
    return len(set(kernels)) == 1 and med > 0 and all(abs(g - med) <= SAME_WORK_GPU * med for g in gpu)


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


def _excess(slow: dict, others: list[dict], per: str = "_per_step") -> list[tuple]:
    """Per cause (``per``: ``_per_step``), or per host frame (``_frames_per_step``), how much more time per step the
    slow rank spends in it than the other ranks' median, largest first (positive only)."""
    keys = set(slow[per]).union(*[o[per] for o in others])
    out = []
    for k in keys:
        d = slow[per].get(k, 0.0) - float(np.median([o[per].get(k, 0.0) for o in others]))
        if d > 0:
            out.append((k, d))
    return sorted(out, key=lambda x: -x[1])


def _host_differences(slow: dict, others: list[dict]) -> str:
    """What differs on the slow rank's host against the others' (``runtime.host_samples.host_facts``): fewer CPUs to
    run on, more threads, and whether its profiler records more (a first run's rank 0 records operators with their
    arguments): the profiler's own work, not the program's, may be the lag."""
    h = slow.get("host") or {}
    hs = [o.get("host") or {} for o in others]
    if not h or not all(hs):
        return ""
    said = []
    mine, theirs = h.get("profiler_records"), {o.get("profiler_records") for o in hs}
    if mine and theirs and mine not in theirs:
        said.append(f"its profiler records more ({mine}; the others: {', '.join(sorted(t for t in theirs if t))}): "
                    "part of the lag may be the profiler's")
    cpus = [o.get("cpus_allowed") for o in hs if o.get("cpus_allowed")]
    if h.get("cpus_allowed") and cpus and h["cpus_allowed"] < min(cpus):
        said.append(f"it may run on {h['cpus_allowed']} CPUs, the others on {min(cpus)} or more (CPU affinity)")
    threads = [o.get("os_threads") for o in hs if o.get("os_threads")]
    if h.get("os_threads") and threads and h["os_threads"] > 1.5 * max(threads):
        said.append(f"it runs {h['os_threads']} threads against at most {max(threads)} on the others")
    return ("; on its host: " + "; ".join(said)) if said else "; its host facts (CPUs allowed, threads, what its " \
        "profiler records) match the other ranks'"


def own_excess(slow: dict, others: list[dict], excess: list[tuple], gap: float) -> dict:
    """What the straggler itself does per step beyond the median rank (``own_excess_ns``, at most its own-step gap),
    and how it was measured (``own_excess_basis``).

    Why not the gap: a rank's own step is its step less the communication it waited in, and in a host-bound job the
    ranks ahead of the straggler wait in NCCL kernels through their own host time too, so the gap holds the others'
    host time as well as the straggler's excess; the idle time by host range has the same fault (the others' idle is
    communication). What does measure it: the ranks ahead *block* on their host while they wait (a sync, a full launch
    queue), the straggler does not, so the median other rank's time in CUDA calls per step less the straggler's is
    how long the others' hosts waited for it. Two H200s (issue 50): FSDP2 with identical ranks, first run
    (``tests/fixtures/fsdp/even_first``): a 45.7 ms gap, host ranges 39 ms, CUDA calls 12.5 ms (plain runs: rank 0
    issued its work 1.3-5.7 ms slower per step); rank 1 with 30 ms of host work (``extra_first``): 26.9 ms; DDP with
    30 ms of sleep on a rank: 29.1-30.5 ms (reports/distributed_windows final50), 37.9 ms (``ddp/straggler_torch``).
    Without the calls' times (a recording without CUDA calls), the excess in the causes that are its own work
    (``OWN_WORK_KINDS``)."""
    mine, theirs = slow.get("_host_api_per_step"), [o.get("_host_api_per_step") for o in others]
    if mine is not None and theirs and all(t is not None for t in theirs):
        waited = max(float(np.median(theirs)) - mine, 0.0)
        # a straggler on its GPU (more work, a slower GPU) keeps every host ahead, blocked alike: its own excess is its
        # longer GPU compute (two H200s, DDP with rank 1 on a 4x batch: no difference in CUDA calls, 28 ms of compute)
        gpu = next((d for k, d in excess if k[0] == COMPUTE), 0.0)
        return {"own_excess_ns": min(max(waited, gpu), gap),
                "own_excess_basis": ("the other ranks' time in CUDA calls per step (where they block waiting for it) "
                                     "less its own") if waited >= gpu else "its GPU compute per step beyond theirs"}
    return {"own_excess_ns": min(sum(d for k, d in excess if k[0] in OWN_WORK_KINDS), gap),
            "own_excess_basis": BY_CAUSES}


def _frames_excess(slow: dict, others: list[dict]) -> list[dict]:
    """Where the straggler's host was longer than the other ranks' per step, by host frame (its samples taken while
    its GPU idled, ``host_frames``), largest first; empty without samples."""
    return [{"frame": k, "per_step_ns": d} for k, d in _excess(slow, others, "_frames_per_step")[:5]]


def _describe(key: tuple[str, str]) -> str:
    kind, name = key
    return {"host-range": "host busy outside any range" if name == "(no range)" else f"host busy in `{name}`", LAUNCH: "launch overhead (the host launched kernels slower)",
            "sync": f"synchronising calls ({name})", "pageable-copy": "pageable host-to-device copies",
            "gpu-wait": "launched work waiting on the GPU", COMPUTE: "longer GPU compute (a slower or throttled GPU, "
            "or more work on this rank)"}.get(kind, f"{kind} ({name})")


def imbalance(rows: list[dict]) -> tuple[dict | None, dict | None, dict | None]:
    """(straggler, launch_imbalance, no consistent straggler): see the module docstring. All None when the ranks'
    own step times agree within the margin (a balanced job gets no invented straggler). A rank whose median own
    work is longer but that lags in fewer than ``MOST_STEPS`` of the steps by more than their spread is no
    straggler: the third says so, with the lag's spread (issue 46: an FSDP2 job's lag moved from rank 1 in one run to
    rank 0 in the next, and was presented as a property of the rank)."""
    cand = [r for r in rows if r["own_step_ns"] is not None and r["rank"] is not None]
    if len(cand) < 2:
        return None, None, None
    slow = max(cand, key=lambda r: r["own_step_ns"])
    rest = [r for r in cand if r is not slow]
    gap = slow["own_step_ns"] - float(np.median([r["own_step_ns"] for r in rest]))
    if gap < max(STRAGGLER_MIN_SHARE * slow["median_step_ns"], STRAGGLER_MIN_NS):
        return None, None, None
    lag = lag_by_step(slow, rest)
    if lag is not None and lag["lagging_steps_share"] < MOST_STEPS:
        return None, None, {"rank": slow["rank"], "excess_ns": gap, **lag,
                            "note": (f"rank {slow['rank']}'s median own work per step is {duration(gap)} longer than "
                                     f"the other ranks', but it lagged by more than the steps' spread "
                                     f"({duration(max(lag['spread_ns'], STRAGGLER_MIN_NS))}) in only "
                                     f"{100 * lag['lagging_steps_share']:.0f}% of {lag['steps']} steps (lag per step "
                                     f"{duration(lag['lag_ns']['q1'])} to {duration(lag['lag_ns']['q3'])}, quartiles): "
                                     "no consistent straggler")}
    wait = float(np.median([r["exposed_comm_per_step_ns"] or 0.0 for r in rest]))
    excess = _excess(slow, rest)
    causes = [(k, d) for k, d in excess if k[0] != LAUNCH]
    launch = sum(d for k, d in excess if k[0] == LAUNCH)
    base = {"rank": slow["rank"], "own_step_ns": slow["own_step_ns"], "lag_by_step": lag,
            # what its fix can remove: its own work per step beyond the median rank's (issue 50)
            **own_excess(slow, rest, excess, gap),
            # what the straggler itself waits in communication: transfers no compute hides, which no rank waits
            # for another in; they stay once the straggler is fixed (``findings``: their own finding and gain)
            "own_wait_per_step_ns": float(slow["exposed_comm_per_step_ns"] or 0.0),
            "others_own_step_ns": slow["own_step_ns"] - gap, "excess_ns": gap, "others_wait_per_step_ns": wait,
            "verdict": slow["verdict"],
            "excess_by_cause": [{"cause": _describe(k), "kind": k[0], "name": k[1], "per_step_ns": d}
                                for k, d in excess[:5]]}
    if base["own_excess_ns"] < max(STRAGGLER_MIN_SHARE * slow["median_step_ns"], STRAGGLER_MIN_NS) and \
            base["own_excess_basis"] != BY_CAUSES:
        # The others did not wait for it on their hosts: the gap is their own host time, spent while their GPUs waited
        # in NCCL kernels for this rank's (a host-bound job's ranks take turns being behind). Two H200s, FSDP2 with
        # identical ranks (issue 50): rank 0 named with a 45.7 ms gap in one run, rank 1 in the next; the others'
        # time blocked in CUDA calls beyond the named rank's was 0.0 and 0.56 ms per step of an 88 ms step.
        return None, None, {"rank": slow["rank"], "excess_ns": gap, "own_excess_ns": base["own_excess_ns"],
                            "not_waited_for": True,
                            "note": (f"rank {slow['rank']}'s step less its waits in communication is {duration(gap)} "
                                     f"longer than the other ranks', but they did not wait for it on their hosts "
                                     f"({duration(base['own_excess_ns'])} per step more in CUDA calls than it, under "
                                     f"{100 * STRAGGLER_MIN_SHARE:.0f}% of the step): their GPUs waited in NCCL kernels "
                                     "while their own hosts were busy, as host-bound ranks do in turn")}
    if causes and sum(d for _, d in causes) >= EXPLAINED_SHARE * gap:
        top = causes[0]
        kind = STRAGGLER_KIND.get(top[0][0], "host")
        cause = f"{_describe(top[0])}: {duration(top[1])} per step more than the other ranks"
        frames = _frames_excess(slow, rest) if kind == "host" else []
        why = (f"rank {slow['rank']}'s step less its waits in communication is {duration(gap)} longer than the median "
               f"rank's, which waits {duration(wait)} per step in communication; its own work beyond theirs, what "
               f"its fix can remove, is {duration(base['own_excess_ns'])} per step; the difference: "
               + "; ".join(f"{_describe(k)} +{duration(d)}" for k, d in causes[:3]))
        if frames:
            why += "; its host, against the other ranks', was longer in " + "; ".join(
                f"{f['frame']} +{duration(f['per_step_ns'])}" for f in frames[:3])
        facts = {r["rank"]: r["host"] for r in [slow] + rest if r.get("host")}
        if kind == "host":
            why += _host_differences(slow, rest)
        why += (f". One run's lag: it held in {100 * lag['lagging_steps_share']:.0f}% of {lag['steps']} steps (lag per "
                f"step {duration(lag['lag_ns']['q1'])} to {duration(lag['lag_ns']['q3'])}); run again before taking it "
                "for a property of the rank") if lag else ""
        return {**base, "cause": cause, "kind": kind, "host_frames_excess": frames, "host_facts": facts,
                "why": why}, None, None
    return None, {**base, "kind": "host", "launch_overhead_excess_ns": launch,
                  "note": (f"rank {slow['rank']}'s own step is {duration(gap)} longer than the other ranks', mostly "
                           f"launch overhead (+{duration(launch)} per step): its host launched kernels slower. A "
                           "tracing profiler slows every launch call and the ranks unevenly, so this is not named a "
                           "straggler; compare the ranks' step times in a plain run")}, None


def _short_windows(rows: list[dict]) -> None:
    """Mark incomplete a rank whose recording holds less than ``SHORT_WINDOW`` of the steady steps the fullest rank
    holds. The ranks of a job agree on their window (``runtime.window_ranks``) and run the same steps, so a rank with
    fewer lost part of its window (its recording started late or stopped early): its step times and causes are
    not the window's, and comparing them with the other ranks' would be comparing different stretches of the job."""
    held = [r.get("_steady_steps") or 0 for r in rows if r["complete"]]
    if len(held) < 2 or max(held) <= 0:
        return
    most = max(held)
    for r in rows:
        n = r.get("_steady_steps") or 0
        if r["complete"] and n < SHORT_WINDOW * most:
            r["complete"] = False
            r["incomplete_reason"] = (f"its recording holds {n} of the window's steady steps, another rank's "
                                      f"{most}: its recording started late or stopped early")
            r["_incomplete_short"] = f"{n} of the window's {most} steps recorded"
            r["_incomplete_why"] = "its recording started late or stopped early"


def distributed(rows: list[dict], world_size: int | None) -> dict:
    # a rank without GPU work in its recording, or with a fraction of the window the others hold, is never merged
    # into the job's verdict, its numbers (communication, step, spread) included: it is named, with why
    _short_windows(rows)
    complete = [r for r in rows if r["complete"]]
    judged = complete or rows  # (no complete rank: the numbers say what was recorded; the headline says it is partial)
    comm_ns = sum(r["communication_kernel_ns"] or 0.0 for r in judged)
    kern_ns = sum(r["kernel_time_ns"] or 0.0 for r in judged)
    exposed = [r["exposed_comm_share"] for r in judged if r["exposed_comm_share"] is not None]
    steps = [r["median_step_ns"] for r in judged if r["median_step_ns"]]
    slowest = max((r for r in judged if r["median_step_ns"]), key=lambda r: r["median_step_ns"], default=None)
    incomplete = [{"rank": r["rank"], "reason": r["incomplete_reason"],
                   "what": r.get("_incomplete_short") or "incomplete",
                   "why": r.get("_incomplete_why") or r["incomplete_reason"]} for r in rows if not r["complete"]]
    strag, launch, unsure = imbalance(complete)
    waited = unsure if unsure and unsure.get("not_waited_for") else None
    unsure = None if waited else unsure
    return {"ranks": len(rows), "world_size": world_size, "straggler": strag, "launch_imbalance": launch,
            "no_consistent_straggler": unsure, "not_waited_for": waited, "incomplete_ranks": incomplete,
            "same_work": same_work(complete), "step_skew": step_skew(complete),
            "sharded_collectives": sharded_exposure(complete),
            "nccl_time_share": comm_ns / kern_ns if kern_ns else 0.0,
            "exposed_comm_share": float(np.mean(exposed)) if exposed else None,
            "exposed_comm_share_max": float(np.max(exposed)) if exposed else None,
            "slowest_rank": slowest["rank"] if slowest else None,
            "slowest_rank_step_ns": slowest["median_step_ns"] if slowest else None,
            "median_step_ns_spread": (max(steps) / min(steps)) if steps and min(steps) > 0 else None}


def shown_rank(rows: list[dict], dist: dict) -> tuple[int, str]:
    """The rank whose timeline, ranges and findings make the job's headline, and why: the straggler; else the
    complete rank whose own work per step (its step less its waits in communication) is longest, the rank the others
    wait for; else the lowest rank. A rank that waits in communication is judged "communication-bound" by its own
    timeline, yet what it waits for is the other rank's work: showing the lowest rank made the same program's headline
    depend on which rank happened to be behind. Two H200s, the same even DDP job in 12 runs (6 first, 6 cached):
    "CPU-bound: launch overhead" 8 times and "communication-bound" 4 times, each of those 4 with rank 1's own work the
    longer; the even FSDP2 job likewise 3 and 9 times (reports/profile_overhead/torchrun_cost/2026-11-27, call 12).
    Judged on the rank the others wait for, all 12 DDP runs said launch overhead, and 10 of the 12 FSDP2 runs its host
    (``benchmarks/probes/headline_by_rank.py``)."""
    if dist.get("straggler"):
        return dist["straggler"]["rank"], "the straggler"
    complete = [r for r in rows if r["complete"] and r["rank"] is not None]
    timed = [r for r in complete if r["own_step_ns"] is not None]
    if len(timed) >= 2:
        return max(timed, key=lambda r: (r["own_step_ns"], -r["rank"]))["rank"], \
            "the rank whose own work per step is longest: the others wait for it"
    return (min(r["rank"] for r in complete), "the lowest rank") if complete else (None, "the lowest rank")


# Sharded data parallelism (FSDP1/FSDP2, ZeRO) gathers parameters and scatters gradients: each exposed collective has
# its own knob. (collective, phase where it was launched) -> what to change. PyTorch 2.11 FSDP2: fully_shard's
# reshard_after_forward, FSDPModule.set_modules_to_forward_prefetch / set_modules_to_backward_prefetch,
# MixedPrecisionPolicy(reduce_dtype); FSDP1: forward_prefetch, backward_prefetch.
FSDP_KNOBS = {
    ("all-gather", "forward"): "prefetch the next block's parameters while this one computes: FSDP2 "
                               "`block.set_modules_to_forward_prefetch([next_block])` (FSDP1: `forward_prefetch=True`); "
                               "`reshard_after_forward=False` on the last blocks keeps them gathered for the backward",
    ("all-gather", "backward"): "prefetch earlier in the backward: FSDP2 `block.set_modules_to_backward_prefetch([...])` "
                                "(FSDP1: `backward_prefetch=BackwardPrefetch.BACKWARD_PRE`), or `reshard_after_forward="
                                "False` (no all-gather in the backward, at the cost of memory)",
    ("reduce-scatter", "backward"): "reduce in bf16 (`MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)`) and shard "
                                    "larger units (fewer, bigger `fully_shard` groups: fewer, larger reduce-scatters "
                                    "that overlap the backward better)",
}
SHARDED = ("all-gather", "reduce-scatter")


def sharded_exposure(rows: list[dict]) -> list[dict]:
    """Per (collective, phase) of the all-gathers and reduce-scatters, the exposed time per step (mean over ranks),
    largest first: what a sharded job's communication costs where no compute hides it."""
    acc: dict[tuple, list[float]] = {}
    for r in rows:
        for c in r.get("_collectives") or []:
            if c["collective"] in SHARDED:
                acc.setdefault((c["collective"], c["phase"]), []).append(c["exposed_per_step_ns"])
    n = max(len(rows), 1)
    out = [{"collective": k[0], "phase": k[1], "exposed_per_step_ns": sum(v) / n} for k, v in acc.items()]
    return sorted(out, key=lambda x: -x["exposed_per_step_ns"])


def findings(rows: list[dict], dist: dict) -> list[Finding]:
    out: list[Finding] = []
    for r in dist.get("incomplete_ranks") or []:
        out.append(Finding(
            "rank-without-gpu-work", "high", f"Rank {r['rank']}'s recording lacks its window: {r['what']}",
            f"rank {r['rank']}: {r['reason']}; it is left out of the job's verdict (straggler, step skew, same work)",
            "Record again: a default run records every rank's window; with a program that ends inside its window, "
            "`--full-run`; `nsighttc analyze` the rank's own directory to see what it holds.", time_ns=0.0))
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
            time_ns=s["own_excess_ns"] * len(rows), kernels=[]))
    ex = dist.get("exposed_comm_share")
    sharded = sharded_exposure(rows)
    step = float(np.median([r["median_step_ns"] for r in rows if r["median_step_ns"]] or [0.0]))
    if sharded and step and sum(x["exposed_per_step_ns"] for x in sharded) >= EXPOSED_COMM_FINDING * step and not s:
        top = sharded[:3]
        fixes = [FSDP_KNOBS[(x["collective"], x["phase"])] for x in top if (x["collective"], x["phase"]) in FSDP_KNOBS]
        out.append(Finding(
            "exposed-sharded-communication", "medium", "Parameter gathers and gradient scatters are not overlapped",
            "per step, exposed (no compute beside them, mean over ranks): "
            + "; ".join(f"{x['collective']} in the {x['phase']} {duration(x['exposed_per_step_ns'])}" for x in top)
            + f" of a {duration(step)} step",
            ("; ".join(fixes) if fixes else "overlap the collectives with compute (prefetching, larger shard groups)")
            + ". Where the forward and backward are not marked (a program nsighttc's hooks did not see), the phase "
              "is `unmarked`.", time_ns=sum(x["exposed_per_step_ns"] for x in top) * len(rows), kernels=[]))
    elif s and step and s.get("own_wait_per_step_ns", 0.0) >= EXPOSED_COMM_FINDING * max(
            step - s["own_excess_ns"], 1.0):
        stays = s["own_wait_per_step_ns"]
        out.append(Finding(
            "exposed-communication", "medium", "Communication stays exposed once the straggler is fixed",
            f"the straggler, rank {s['rank']}, waits for no other rank, yet {duration(stays)} of its {duration(step)} "
            f"step is communication with no compute beside it: transfers that every rank will still wait in after "
            f"its fix (the other ranks' {duration(s['others_wait_per_step_ns'])} per step is that plus the wait for "
            "rank " + str(s["rank"]) + ")",
            "After the straggler's fix: let DDP overlap the all-reduce with backward (smaller `bucket_cap_mb`, "
            "`gradient_as_bucket_view=True`, `static_graph=True`); for FSDP, prefetch (`forward_prefetch`, "
            "`backward_prefetch`) and reduce in bf16.", time_ns=stays * len(rows), kernels=[]))
    elif ex is not None and ex >= EXPOSED_COMM_FINDING and not s:
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
    # (complete ranks only: a rank whose window is lost has the Tensor Core share of whatever else it recorded)
    tcs = [(r["rank"], r["tc_compute_share"]) for r in rows if r["tc_compute_share"] is not None and r["complete"]]
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
