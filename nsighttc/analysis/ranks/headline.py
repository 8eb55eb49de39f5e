"""The job's headline cause with the shown rank's waits for the other ranks set apart from its transfers.

The headline is judged on the rank the others wait for (``shown_rank``). Where the ranks take turns being late within
a step (rank 0 behind in the forward, rank 1 in the backward), that rank waits in communication too, and its own
timeline's first cause is "waiting in communication": the headline then said "communication-bound" although what
held the job was each rank's own work in turn, and overlapping the collectives could hide only their transfers. Two
H200s, the even FSDP2 job: 2 of 12 runs ("no consistent straggler") read so on the rank the others wait for in
call 12, 3 of 8 in call 16; with this, call 16's 8 said "CPU-bound: host busy"
(reports/profile_overhead/torchrun_cost/2026-11-27, ``tests/fixtures/fsdp/turns_cached``). The job's split
(``communication.exposed_transfers``: step by step, the least any rank waited bounds the transfers from above) says how
much of that rank's exposed communication can be transfers; only that part competes with its other causes for the
headline. The rest still counts in the time without compute (the shares keep their denominator) and is said after the
cause.
"""
from __future__ import annotations

from ..timeline import idle


def waits_apart(tl: dict, row: dict | None, dist: dict) -> tuple[dict, dict | None]:
    """``tl`` (the shown rank's timeline, as its verdict holds it) with its headline cause judged with its waits for
    the other ranks set apart, and what was done (None, and ``tl`` as it is, where its first cause is not
    communication, the split or its own exposed communication is not known, or the transfers alone still come
    first)."""
    causes = list(tl.get("causes") or [])
    split = dist.get("exposed_transfer")
    own = row.get("exposed_comm_per_step_ns") if row else None
    if not causes or causes[0]["kind"] != "communication" or not split or not own:
        return tl, None
    comm = causes[0]
    share = min(1.0, split["transfer_per_step_ns"] / own)   # of this rank's exposed communication: transfers at most
    transfers = dict(comm, idle_ns=comm["idle_ns"] * share)
    ranked = sorted([*causes[1:], transfers], key=lambda c: -c["idle_ns"])
    if ranked[0] is transfers:
        return tl, None
    waiting = dict(comm, idle_ns=comm["idle_ns"] - transfers["idle_ns"])   # in the total, never the first cause
    fams = tl.get("step_families") or []
    rows = fams[0].get("host_frames") if fams else None   # (the dominant family first, as ``tl["causes"]``)
    cause = idle.headline([*ranked, waiting], tl.get("verdict"), rows)
    if cause is None:
        return tl, None
    total = sum(c["idle_ns"] for c in causes) or 1.0
    cause += (f"; {100 * waiting['idle_ns'] / total:.0f}% of that time is this rank waiting in communication for the "
              f"other ranks' work, which overlapping cannot hide (at most {100 * transfers['idle_ns'] / total:.0f}% "
              "transfers)")
    said = {"rank": row.get("rank"), "cause_before": tl.get("headline_cause"),
            "communication_share": comm["idle_ns"] / total, "transfer_share": transfers["idle_ns"] / total}
    return {**tl, "headline_cause": cause}, said
