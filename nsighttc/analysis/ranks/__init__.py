"""Several ranks of one distributed job: the job's distributed verdict (straggler, step skew, communication)
from the verdicts of its ranks.

Why per rank: ranks of a data-parallel job wait for each other in every collective, so one slow rank (a
data loader, a host sync, a throttled GPU) makes every other rank's GPU sit in NCCL kernels that count
as "busy". Merging all ranks into one kernel table hides that. So every rank is analysed alone
(``rank_map.analyze_ranks``: ``api.analyze`` on its own files plus the run's Nsight Compute evidence, which is per
kernel and holds for every rank, in parallel processes whose memory is bounded by the files analysed at
once; which input is which rank: ``parse.ranks``), and this package reduces the per-rank verdicts: a pure
function of them, testable without any trace. One module a question:
- ``straggler``: which rank holds the others back, and why (or why none is named);
- ``work``: whether the ranks did the same work, and how far their steps drift apart;
- ``communication``: what the ranks' exposed communication is made of (transfers, waiting for each other, the sharded
  collectives);
- ``job_findings``: the job's findings from all of it;
- ``headline``: the headline's cause with the shown rank's waits for the others set apart from its transfers;
and here: which ranks are complete, the job's ``distributed`` verdict, and the rank its headline is judged on.
"""
from __future__ import annotations

import numpy as np

from ..rank_rows import COMPUTE, failed_row, rank_row  # noqa: F401 - (a rank's row: what the reduce reads)
from .communication import FSDP_KNOBS, exposed_transfers, hideable, sharded_exposure  # noqa: F401
from .headline import waits_apart  # noqa: F401
from .job_findings import findings  # noqa: F401
from .straggler import (STRAGGLER_MIN_NS, STRAGGLER_MIN_SHARE, imbalance, lag_by_step,  # noqa: F401
                        own_excess)
from .work import SAME_WORK_LAUNCHES, same_work, step_skew, work_difference  # noqa: F401

SHORT_WINDOW = 0.5           # a rank holding less than this share of the steady steps another rank holds: incomplete


# --- the job's verdict ------------------------------------------------------------------------------
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
    """The job's ``distributed`` verdict from its ranks' rows (``rank_rows``): which ranks are complete, the
    straggler or why none is named, same work, step skew, and the exposed communication and what it is made of."""
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
            "sharded_collectives": sharded_exposure(complete), "exposed_transfer": exposed_transfers(complete),
            "nccl_time_share": comm_ns / kern_ns if kern_ns else 0.0,
            "exposed_comm_share": float(np.mean(exposed)) if exposed else None,
            "exposed_comm_share_max": float(np.max(exposed)) if exposed else None,
            "slowest_rank": slowest["rank"] if slowest else None,
            "slowest_rank_step_ns": slowest["median_step_ns"] if slowest else None,
            "median_step_ns_spread": (max(steps) / min(steps)) if steps and min(steps) > 0 else None}


def shown_rank(rows: list[dict], dist: dict) -> tuple[int | None, str]:
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
            "the rank whose own work per step is longest: the other ranks' GPUs wait for it in communication"
    return (min(r["rank"] for r in complete), "the lowest rank") if complete else (None, "the lowest rank")


def public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}
