"""The job's findings from its ranks: a rank that lost its window, the straggler, exposed communication (bounded by
its transfers), ranks that differ in Tensor Core use."""
from __future__ import annotations

import numpy as np

from ...durations import duration
from ...model import Finding
from .communication import FSDP_KNOBS, hideable, sharded_exposure, waiting_words

TC_SHARE_DIFF = 0.20         # ranks whose Tensor Core shares differ by more than this run different code
EXPOSED_COMM_FINDING = 0.15  # exposed communication (mean over ranks) worth a finding


def findings(rows: list[dict], dist: dict) -> list[Finding]:
    out: list[Finding] = []
    for r in dist.get("incomplete_ranks") or []:
        out.append(Finding(
            "rank-without-gpu-work", "high", f"Rank {r['rank']}'s recording lacks its window: {r['what']}",
            f"rank {r['rank']}: {r['reason']}; it is left out of the job's verdict (straggler, step skew, same work)",
            "Record again: a default run records every rank's window; with a program that ends inside its window, "
            "`--full-run`; `nsighttc analyze` the rank's own directory to see what it holds.", time_ns=0.0))
    s = dist.get("straggler")
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
    if sharded and step and hideable(sum(x["exposed_per_step_ns"] for x in sharded), dist) >= \
            EXPOSED_COMM_FINDING * step and not s:
        top = sharded[:3]
        fixes = [FSDP_KNOBS[(x["collective"], x["phase"])] for x in top if (x["collective"], x["phase"]) in FSDP_KNOBS]
        out.append(Finding(
            "exposed-sharded-communication", "medium", "Parameter gathers and gradient scatters are not overlapped",
            "per step, exposed (no compute beside them, mean over ranks): "
            + "; ".join(f"{x['collective']} in the {x['phase']} {duration(x['exposed_per_step_ns'])}" for x in top)
            + f" of a {duration(step)} step" + waiting_words(dist),
            ("; ".join(fixes) if fixes else "overlap the collectives with compute (prefetching, larger shard groups)")
            + ". Where the forward and backward are not marked (a program nsighttc's hooks did not see), the phase "
              "is `unmarked`.", time_ns=hideable(sum(x["exposed_per_step_ns"] for x in top), dist) * len(rows),
            kernels=[]))
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
    elif ex is not None and step and hideable(ex * step, dist) >= EXPOSED_COMM_FINDING * step and not s:
        out.append(Finding(
            "exposed-communication", "medium", "Communication is not overlapped with compute",
            f"the ranks spend {100 * ex:.0f}% of their step time (mean over ranks, max "
            f"{100 * dist['exposed_comm_share_max']:.0f}%) in communication kernels with no compute beside them; "
            f"communication kernels are {100 * dist['nccl_time_share']:.0f}% of all kernel time" + waiting_words(dist),
            "Let DDP overlap the all-reduce with backward: smaller buckets start it earlier "
            "(`DistributedDataParallel(..., bucket_cap_mb=...)`), `gradient_as_bucket_view=True` saves a copy, "
            "`static_graph=True` for fixed graphs; with gradient accumulation use `no_sync()` on all but the last "
            "micro-batch; for FSDP check prefetching (`forward_prefetch`, `backward_prefetch`).",
            time_ns=hideable(ex * step, dist) * len(rows), kernels=[]))
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
