"""Which rank holds the others back, and why; or why no rank is named (``imbalance``).

The straggler rule: a rank's *own* step time is its median step minus the communication
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

from ...durations import duration
from ..rank_rows import COMPUTE

STRAGGLER_MIN_SHARE = 0.10   # of the slowest rank's median step
EXPLAINED_SHARE = 0.5        # distinguishing causes (launch overhead aside) must explain this much of the excess
LAUNCH = "launch-overhead"
STRAGGLER_MIN_NS = 1e6       # and at least 1 ms: timer noise and launch jitter stay below this
MOST_STEPS = 0.6             # a straggler lags in at least this share of the steady steps
# What kind of lag a straggler's first distinguishing cause is: its host, its GPU, or its communication
STRAGGLER_KIND = {COMPUTE: "gpu", "communication": "communication"}  # every other cause is the host's
# The causes that are a rank's own work, not its waiting: what a straggler's fix can remove (``own_excess``). Launch
# overhead is left out (a tracing profiler slows the ranks' launches unevenly: ``launch_imbalance``), and so are
# syncs and launched work waiting on the GPU (waits: a rank that runs behind waits less, not more).
OWN_WORK_KINDS = ("host-range", "pageable-copy", COMPUTE)
BY_CAUSES = ("its GPU idle time per step by cause, its own work only (host ranges, pageable copies, GPU compute), "
             "beyond the median rank's")  # (own_excess without the CUDA calls' times: it cannot tell who waited)


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
    how long the others' hosts waited for it. Two H200s: FSDP2 with identical ranks, first run
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
    straggler: the third says so, with the lag's spread (an FSDP2 job's lag moved from rank 1 in one run to
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
            # what its fix can remove: its own work per step beyond the median rank's
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
        # identical ranks: rank 0 named with a 45.7 ms gap in one run, rank 1 in the next; the others'
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
