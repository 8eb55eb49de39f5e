"""What a job's exposed communication is made of: transfers that overlapping could hide, ranks waiting for each
other's work, and (sharded jobs) which all-gathers and reduce-scatters."""
from __future__ import annotations

import numpy as np

from ...durations import duration
from .straggler import STRAGGLER_MIN_NS


def exposed_transfers(rows: list[dict]) -> dict | None:
    """How much of the ranks' exposed communication is transfers, and how much is ranks waiting for each other.

    A collective ends on every rank when the last rank has joined it: the rank that joins last waits only for the
    transfer, the others also for it. So step by step (the ranks' steady steps side by side, as ``lag_by_step``), the
    least any rank waited in communication with no compute beside it bounds what overlapping the collectives could
    hide that step; the rest of each rank's exposed communication is waiting for another rank's work, which only that
    work can shorten. (Within a step, ranks that take turns being late at different collectives make the least more
    than the transfers alone: a bound from above.) Two H200s, FSDP2 with identical ranks, cached run: 27.5 ms per
    step exposed (mean over ranks, 45.8 and 9.2 ms), 5.9 ms of it transfers (3.8 ms in most steps); the finding it made
    then said overlapping the gathers would give up to 1.38x. None where a rank lacks its steps' waits or the ranks
    share no step."""
    series = [np.asarray(r["_iterations"][:len(r["_own_iterations"])], dtype="float64")
              - np.asarray(r["_own_iterations"], dtype="float64") for r in rows if r["_own_iterations"]]
    if len(series) < 2 or len(series) < len(rows):
        return None
    n = min(len(x) for x in series)
    if n < 1:
        return None
    least = np.clip(np.array([x[:n] for x in series]).min(axis=0), 0.0, None)
    transfer = float(least.mean())  # (per step, as the rows' exposed communication: the window's over its steps)
    exposed = float(np.mean([r["exposed_comm_per_step_ns"] or 0.0 for r in rows]))
    return {"steps": int(n), "transfer_per_step_ns": transfer, "exposed_per_step_ns": exposed,
            "waiting_per_step_ns": max(exposed - transfer, 0.0)}


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


def hideable(exposed_per_step_ns: float, dist: dict) -> float:
    """Of this much exposed communication per step, what overlapping the collectives with compute could hide: at most
    the transfers (``exposed_transfers``), all of it where the ranks' steps' waits are not known."""
    tr = dist.get("exposed_transfer")
    return min(exposed_per_step_ns, tr["transfer_per_step_ns"]) if tr else exposed_per_step_ns


def waiting_words(dist: dict) -> str:
    """What of the exposed communication is the ranks waiting for each other (none said where it is not known)."""
    tr = dist.get("exposed_transfer")
    if not tr or tr["waiting_per_step_ns"] < STRAGGLER_MIN_NS:
        return ""
    return (f"; of the {duration(tr['exposed_per_step_ns'])} per step exposed (mean over ranks), "
            f"at most {duration(tr['transfer_per_step_ns'])} is transfers (the least any rank waited, step by step) "
            f"and at least {duration(tr['waiting_per_step_ns'])} the ranks waiting for each other's work, which "
            "overlapping "
            "cannot hide")
