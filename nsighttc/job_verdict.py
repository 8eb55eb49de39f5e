"""A job's verdict from its ranks' (``api``: each rank analysed on its own by ``rank_map``, here, in processes or on a
cluster): the rank table and the distributed verdict, the job's Tensor Core numbers over its complete ranks, folded a
batch of ranks at a time, and the timeline, ranges and findings of the rank it shows (``ranks.shown_rank``)."""
from __future__ import annotations

import pandas as pd

from .analysis import ranks as ranks_mod, tensor_cores
from .errors import NsighttcError, ParseError
from .verdict import Verdict, with_gains


# The ranks' per-kernel rows are combined this many ranks at a time, then the batches' results: a job of thousands of
# ranks never holds every rank's table at once (a job of up to this many gets the one combination it always had).
REDUCE_BATCH = 256


def reduce_ranks(m, infos: dict, kwargs: dict, unread: list) -> Verdict:
    """The job's verdict from the ranks' summaries (``rank_map.summarize``), with the full verdicts of the rank it
    shows and of the lowest rank brought from where they were made."""
    from .analysis import peak
    failures = sorted([*unread, *m.failures], key=lambda f: f.rank)
    if not m.summaries:  # no rank could be analysed: the first one's error, as a single bad input's
        first = failures[0]
        if first.error is not None and isinstance(first.error, NsighttcError):
            raise first.error
        raise ParseError(f"no rank could be analysed; rank {first.rank}: {first.reason}")
    # the summaries unpacked one at a time (rank order): their rows first, which say the ranks that are complete
    ok_rows, warnings, inputs = [], [], []
    for s in m.unpacked():
        ok_rows.append(s["row"])
        warnings += [w for w in s["warnings"] if w not in warnings]
        inputs += [i for i in s["inputs"] if i["kind"] not in ("ncu-csv", "ncu-rep")]
    rows = sorted([*ok_rows, *(ranks_mod.failed_row(f.rank, f.inputs, f.reason) for f in failures)],
                  key=lambda r: r["rank"])
    results = m.summaries
    sizes = {i.world_size for i in infos.values() if i.world_size}
    dist = ranks_mod.distributed(rows, sizes.pop() if len(sizes) == 1 else None)
    # then the job's Tensor Core numbers over the complete ranks, as every other job-wide number (a rank whose window
    # was lost holds whatever else it recorded: its kernels read 85% communication against the complete ranks' 81%
    # in the same report), folded a batch at a time
    complete = {r["rank"] for r in rows if r["complete"]}
    kernel_batches, compacted_batches, kernels, compacted = [], [], [], []
    for s in m.unpacked():
        if complete and s["rank"] not in complete:
            continue
        kernels.append(s["kernels"])
        compacted.append(s["compacted"])
        if len(kernels) == REDUCE_BATCH:
            kernel_batches.append(tensor_cores.combine_kernel_rows(kernels))
            compacted_batches.append(pd.concat(compacted, ignore_index=True))
            kernels, compacted = [], []
    if kernels:
        kernel_batches.append(tensor_cores.combine_kernel_rows(kernels))
        compacted_batches.append(pd.concat(compacted, ignore_index=True))
    del kernels, compacted
    shown, why_shown = ranks_mod.shown_rank(rows, dist)
    if shown is None or shown not in results:  # (no complete rank: the lowest one analysed)
        shown, why_shown = min(results), "the lowest rank"
    sv = m.verdict(shown)
    low = sv if min(results) == shown else m.verdict(min(results))
    shown_tl, apart = ranks_mod.waits_apart(sv.timeline, next((r for r in rows if r["rank"] == shown), None), dist) \
        if sv.timeline is not None else (None, None)
    if apart:
        dist["headline_waits_apart"] = apart
    compacted = concat(compacted_batches)
    summary = tensor_cores.rollup(tensor_cores.compact(compacted), yes_threshold=kwargs["yes_threshold"])
    kernel_rows = kernel_batches[0] if len(kernel_batches) == 1 else tensor_cores.combine_kernel_rows(kernel_batches)
    gpu_name = (sv.device or {}).get("name")
    gpu_peak = peak.match(gpu_name)
    kernel_rows["pct_of_peak"] = peak.pct_of_peak(kernel_rows["tflops"], kernel_rows["dtype"], gpu_peak)
    summary["peak"] = peak.summary(kernel_rows, gpu_peak, gpu_name)
    summary["off_tc_dtypes"] = tensor_cores.off_tc_dtypes(kernel_rows)
    summary["unknown_kernels"] = tensor_cores.unknown_kernels(kernel_rows)
    if complete:  # one number, said in the headline, the ranks section and the findings alike
        dist["nccl_time_share"] = summary["denominator"]["communication_share"]
    found = sorted(ranks_mod.findings(rows, dist) + list(sv.findings), key=lambda f: -f.time_ns)
    warnings += [f"rank {r['rank']}: {r['reason']}; left out of the job's verdict" for r in dist["incomplete_ranks"]]
    # (which rank's launch table ``Verdict.launches`` holds is the Python API's business, not the verdict's: the lowest
    # rank's, or none where the ranks ran on a cluster and sent back their summaries only; docs/api.md)
    warnings.append(f"{len(rows)} ranks analysed each on its own; the timeline, ranges and findings shown are rank "
                    f"{shown}'s ({why_shown}); the Tensor Core numbers cover every rank")
    dist["timeline_rank"], dist["timeline_rank_why"] = shown, why_shown
    inputs += [i for i in low.inputs if i["kind"] in ("ncu-csv", "ncu-rep")]
    v = Verdict(inputs, sv.device, summary, kernel_rows, sv.ranges, found, low.launches, warnings, shown_tl)
    v.ranks = [ranks_mod.public(r) for r in rows]
    v.distributed = dist
    return with_gains(v)


def concat(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """One table from several; a single one as it is (a concat would copy a million rows)."""
    return tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)
