"""The Python API: ``analyze(paths) -> Verdict``. The CLI is a thin layer over this.

    >>> import nsighttc
    >>> v = nsighttc.analyze(["run_ncu.csv"])
    >>> v.tensor_cores["verdict"], v.tensor_cores["tc_time_share"]
    >>> v.kernels            # DataFrame: one row per kernel (name x verdict), time shares, dtype, evidence
    >>> v.launches           # DataFrame: one row per launch with the evidence ladder's columns
    >>> v.to_json()          # the nsighttc.verdict/1 document
    >>> v = nsighttc.analyze(["runs/job/"])   # several ranks of one job (directories are searched)
    >>> v.ranks, v.distributed                # one row per rank; straggler, step skew, communication
"""
from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from . import allocator, stages
from .analysis import findings as findings_mod, gain
from .parse import ranks as rank_inputs
from .analysis import tensor_cores
from .errors import InputError, NsighttcError, ParseError, UsageError
from .model import empty_kernel_table
from .collect.readable import load  # parse.load, with a tool's export in front where needed
from .job_inputs import job_groups, no_recording_twice, rank_groups
from .later_evidence import LaterEvidence
from .parse import Parsed
from .verdict import Verdict, with_gains
from .job_verdict import concat
from . import job_verdict

if TYPE_CHECKING:
    from .analysis.timeline import Thresholds


# Above this many launches the Tensor Core side and the timeline side run one after the other: side by side
# their temporaries add up (4M-kernel nsys export, 2-core machine: peak RSS 2.09-2.14 GB side by side,
# 1.93-1.96 GB one after the other, for ~1 s more), below it the ~0.4 s they save is worth the memory
# (1M kernels: ~0.67 GB side by side).
SIDE_BY_SIDE_MAX_LAUNCHES = 2_000_000
# Below this many they run one after the other too: the two threads hand the interpreter back and forth, and on a
# trace of a window of steps that costs more than the loops that release it save (2-core machine, medians of 7:
# H100 multi_phase window, 22k launches, 0.222 s side by side against 0.190 s one after the other; Lightning's
# window 0.135/0.109 s; the Trainer's 0.157/0.142 s; nsys exports of 100k kernels 0.205/0.200 s, 1M 0.972/1.043 s).
SIDE_BY_SIDE_MIN_LAUNCHES = 200_000


def _load_all(paths: Iterable[str | Path | Parsed]) -> list[Parsed]:
    """Each input parsed (a timeline with the host stacks beside it or in it: ``parse.host_stacks.attach``)."""
    from .parse import host_stacks
    parsed = []
    for p in paths:
        if isinstance(p, Parsed):  # already parsed by the caller (profile's default run plans on it)
            parsed.append(host_stacks.attach(p))
            continue
        try:
            if hasattr(p, "url"):  # a URL (remote_inputs): read from a local copy, named by its URL
                from .remote_inputs import local_copy
                with local_copy(p) as copy:
                    got = host_stacks.attach(load(copy))
                got.path = p
                got.kernels["input"] = p.url
                parsed.append(got)
                continue
            parsed.append(host_stacks.attach(load(p)))
        except NsighttcError:
            raise
        except Exception as exc:  # last resort: a parser bug must still name the file, not dump a trace
            raise ParseError(f"could not be parsed ({type(exc).__name__}: {exc})", p) from exc
    return parsed


def _device(kernels: pd.DataFrame) -> dict | None:
    if kernels.empty:
        return None
    names = kernels["device_name"].dropna()
    ccs = kernels["cc"].dropna()
    if names.empty and ccs.empty:
        return None
    cc = ccs.mode().iloc[0] if not ccs.empty else None
    if cc is not None and not str(cc)[:1].isdigit():  # another vendor's GPU (parse.kineto.device_vendor)
        return {"name": names.mode().iloc[0] if not names.empty else None, "compute_capability": None,
                "vendor": str(cc)}
    return {"name": names.mode().iloc[0] if not names.empty else None, "compute_capability": cc}


def _with_kernel_arch(device: dict | None, kernels: pd.DataFrame) -> dict | None:
    """A recording that names no compute capability (torch.profiler before 1.9 wrote no ``deviceProperties``): the
    newest architecture its kernels were built for, said as such (``analysis.kernel_arch``), so the fixes it is
    advised fit the GPU it most likely ran on. Another vendor's GPU, or a known one, is left as it is."""
    if (device and (device.get("compute_capability") or device.get("vendor"))) or kernels.empty:
        return device
    from .analysis import kernel_arch
    arch = kernel_arch.newest(kernels["name"])
    if arch is None:
        return device
    return {**(device or {"name": None, "compute_capability": None}), "from_kernel_names": arch}


@contextlib.contextmanager
def _no_cyclic_gc():
    """Analysis allocates millions of short-lived containers and no reference cycles; pausing the
    cyclic collector saves ~20% on million-launch traces. Reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class TimelineAhead:
    """The timeline side of ``analyze``, started before the hardware evidence exists.

    Why: the default run's replay pass measures the kernels still lacking evidence for ~2-3 s after the
    timeline, while this process only waits; the timeline verdict (GPU busy, steps, causes) needs launch
    times, durations, names and ranges, none of which the evidence changes. ``analyze(..., ahead=this)``
    then takes the result instead of computing it again and redraws only the activity picture's Tensor Core
    row from the final evidence (``timeline.refresh_tensor_cores``). ResNet-50 AMP on H100: ~0.3 s of the
    analysis after the replay. Any failure here means ``analyze`` computes it as before."""

    def __init__(self, parsed: list[Parsed], *, thresholds: "Thresholds | None" = None,
                 step_range: str | None = None):
        from concurrent.futures import ThreadPoolExecutor
        from .parse import host_stacks
        # (a trace parsed while it was written has not met its host samples yet: the launcher writes them before it
        # says the trace is written, so they are there now)
        self.timelines = [host_stacks.attach(p) for p in parsed if p.timeline is not None]
        self.key = (thresholds, step_range)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsighttc-timeline-ahead")
        self._future = pool.submit(self._run, thresholds, step_range) if self.timelines else None
        pool.shutdown(wait=False)  # the worker ends after this one task

    def _run(self, thresholds, step_range):
        from .analysis import timeline as timeline_mod
        launches = tensor_cores.classify_launches(concat([p.kernels for p in self.timelines]))
        return launches, timeline_mod.analyze_timelines([p.timeline for p in self.timelines], launches, thresholds,
                                                        step_range)

    def take(self, timelines: list[Parsed], thresholds, step_range) -> tuple[pd.DataFrame, object] | None:
        """(classified launches without the evidence, timeline result) when made from exactly these
        timelines with these settings, else None."""
        if self._future is None or (thresholds, step_range) != self.key or \
                [id(t) for t in timelines] != [id(t) for t in self.timelines]:
            return None
        try:
            return self._future.result()
        except Exception:  # noqa: BLE001 - analyze computes it itself and reports what fails
            return None


def analyze(paths: Iterable[str | Path], *, yes_threshold: float = 0.9, thresholds: "Thresholds | None" = None,
            step_range: str | None = None, range_name: str | None = None,
            evidence: pd.DataFrame | None = None, jobs: int | None = None,
            ahead: TimelineAhead | None = None, executor=None, progress=None, same_job_check: bool = True) -> Verdict:
    """Analyse profiler outputs of one run.

    ``yes_threshold``: share of matrix-work time on Tensor Cores for a "yes" (else "partial").
    ``thresholds``: timeline verdict thresholds (``nsighttc.analysis.timeline.Thresholds``: cpu_bound=0.5,
    gpu_bound=0.75, min_wall_ns=2e6, min_kernels=10). ``step_range``: the NVTX/record_function range that
    marks one training/inference step (default: ``ProfilerStep#N`` or ranges named like ``step``).
    ``range_name``: keep only kernels launched inside this NVTX range (a path prefix ``a/b`` or a range
    name anywhere in the path); an error names the ranges that exist when nothing matches.
    ``evidence``: hardware evidence measured earlier (``collect.evidence_cache.EvidenceCache.lookup``),
    merged into the timeline's kernels by name like an ncu export of the same run; or a ``LaterEvidence``, which
    each analysis waits for once its timeline side is under way (the default run plans, and its replay measures,
    meanwhile). ``ahead``: the timeline side already under way for these parsed inputs (``TimelineAhead``).

    Directories are read as the profiler outputs inside them. Inputs of several ranks of one distributed
    job (``parse.ranks``: torch.profiler's ``distributedInfo``, or ``rank<N>`` in the path) are analysed
    rank by rank and the verdict gains ``ranks`` and ``distributed``; Nsight Compute inputs are evidence for every
    rank. Where the ranks run: ``executor`` "processes" (``jobs`` at once; default: one per core when the files are
    big, else here), "local" (here), "dask" (a LocalCluster) or "dask://HOST:PORT" (an existing Dask cluster: its
    workers read the files where they lie, paths or fsspec URLs), or an ``executors`` object.
    ``progress(done, total, failed)`` is called after each rank. A rank that cannot be analysed is named in
    ``distributed.incomplete_ranks`` and left out of every cross-rank claim.

    One verdict is one run or one job (``parse.same_job``): the same recording given twice is an error, and so are
    recordings that cannot be ranks of one job (other world sizes, GPUs, backends, days apart); ``analyze_jobs`` gives
    one verdict per job instead. ``same_job_check=False`` checks neither: ``profile`` passes it for the files its own
    run just recorded, one per rank.
    """
    kwargs = dict(yes_threshold=yes_threshold, thresholds=thresholds, step_range=step_range,
                  range_name=range_name, evidence=evidence)
    with _no_cyclic_gc(), allocator.reuse_freed_memory():
        paths = rank_inputs.expand(list(paths))
        if same_job_check:
            no_recording_twice(paths)
            jobs_found = job_groups(paths)
            if jobs_found is not None:
                raise InputError(f"{jobs_found[1]}; give one job's files, or --no-same-job-check for one verdict per "
                                 "job")
        grouped = rank_groups(paths)
        if grouped is not None:
            by_rank, counters, infos, unread = grouped
            if isinstance(evidence, LaterEvidence):  # files that could not be opened: the run's planning reads them
                for f in unread:
                    evidence.tell_failed(f.inputs, f.reason)
            return _analyze_ranks(by_rank, counters, infos, jobs=jobs, kwargs=kwargs, unread=unread,
                                  executor=executor, progress=progress)
        return _analyze(paths, **kwargs, ahead=ahead)


def analyze_jobs(paths: Iterable[str | Path], **kwargs) -> list[Verdict]:
    """One verdict per job among ``paths`` (``parse.same_job.job_groups``): recordings that cannot be ranks of one job
    are judged apart, and no cross-rank claim is ever made between them. ``kwargs``: as ``analyze``'s."""
    expanded = rank_inputs.expand(list(paths))
    no_recording_twice(expanded)
    found = job_groups(expanded)
    groups = found[0] if found is not None else [expanded]
    return [analyze(g, **kwargs) for g in groups]


# --- several ranks: each analysed on its own (rank_map: here, in processes or on a cluster), then reduced ----------
def _analyze_ranks(by_rank: dict, counters: list, infos: dict, *, jobs: int | None, kwargs: dict,
                   unread: list | None = None, executor=None, progress=None) -> Verdict:
    """Every rank on its own (``rank_map``), then the job: rank table, distributed verdict, cross-rank
    Tensor Core roll-up. The timeline, ranges and findings shown are the straggler's, else those of the rank the
    others wait for (``ranks.shown_rank``).
    ``unread``: ranks whose files could not even be opened (``rank_map.RankFailure``), named like the failed ones."""
    from . import rank_map
    with rank_map.RankMap(by_rank, counters, jobs, kwargs, analyze, executor, progress) as m:
        return job_verdict.reduce_ranks(m, infos, kwargs, unread or [])


def _in_range(launches: pd.DataFrame, name: str) -> pd.Series:
    """Launches whose range path is ``name``, lies under it, or contains a range called ``name``."""
    codes, uniq = pd.factorize(launches["nvtx"].astype(str))
    hit = [(p == name or p.startswith(name + "/") or name in p.split("/")) for p in uniq] + [False]
    return pd.Series(np.asarray(hit)[codes], index=launches.index)


def hardware_rows(counter_kernels: list[pd.DataFrame], evidence: pd.DataFrame | None) -> pd.DataFrame | None:
    """The hardware evidence merged into a timeline's launches: the Nsight Compute inputs' kernels classified, then
    the rows measured earlier (``evidence``), or None where there is neither. The default run hands a job's rank
    analyses the same rows made from its replay's reports (``profile.ranks_ahead.replay_evidence``)."""
    hw = [tensor_cores.classify_launches(concat(counter_kernels))] if counter_kernels else []
    if evidence is not None and not evidence.empty:
        hw.append(evidence)
    return pd.concat(hw, ignore_index=True) if hw else None


def _analyze(paths, *, yes_threshold, thresholds, step_range, range_name=None, evidence=None,
             ahead: TimelineAhead | None = None) -> Verdict:
    """Parse every input, classify each kernel launch, roll up, and collect findings.

    Inputs of one run can be mixed: an nsys/torch timeline plus an ncu export, in which case the ncu
    hardware evidence is merged into the timeline's kernels by name (see ``analyze.merge``).
    """
    paths = list(paths)
    if not paths:
        raise UsageError("no input files given")
    with stages.stage("parse"):
        parsed = _load_all(paths)
    from .parse import segments
    parsed, joined = segments.join(parsed)  # (recordings of one program one after another: a profiler's cycles)
    timelines = [p for p in parsed if p.timeline is not None]
    counters = [p for p in parsed if p.timeline is None]
    warnings = [w for p in parsed for w in p.warnings]
    empty = [p for p in timelines if p.timeline.gpu_ops.empty]
    if counters and empty:  # a timeline without GPU events has nothing to merge ncu evidence into
        timelines = [p for p in timelines if not p.timeline.gpu_ops.empty]
        warnings += [f"{p.path}: no GPU events in this timeline; the verdict uses the counters alone" for p in empty]
    timeline_mod = None
    if isinstance(evidence, LaterEvidence):  # handed over once measured: the timeline side is judged meanwhile
        evidence.tell_kernels(timelines)  # (what the run plans from: ``later_evidence``)
        if timelines and ahead is None:
            ahead = TimelineAhead(timelines, thresholds=thresholds, step_range=step_range)
        with stages.stage("evidence_wait"):
            evidence = evidence.wait()
    early = ahead.take(timelines, thresholds, step_range) if ahead is not None and timelines else None
    if timelines:
        from .analysis import merge, timeline as timeline_mod
        from .parse.ncu_csv import NO_DURATION
        warnings = [w for w in warnings if NO_DURATION not in w]  # the timeline's kernel times weigh the shares
        kernels = concat([p.kernels for p in timelines])
        hw = hardware_rows([p.kernels for p in counters], evidence)
        with stages.stage("classify"):
            launches = early[0] if early is not None else tensor_cores.classify_launches(kernels)
        if hw is not None:
            launches, merge_note = merge.apply_hardware_evidence(launches, hw)
            warnings.append(merge_note)
    else:
        kernels = concat([p.kernels for p in parsed]) if parsed else empty_kernel_table()
        launches = tensor_cores.classify_launches(kernels)
    all_launches = launches  # the timeline judges the whole run; --range narrows the Tensor Core verdicts
    if range_name:
        keep = _in_range(launches, range_name)
        if not keep.any():
            known = sorted(set(launches["nvtx"].astype(str)) - {""})[:20]
            raise UsageError(f"--range {range_name}: no kernel was launched inside it (ranges: {', '.join(known) or 'none'})")
        launches = launches[keep.to_numpy()]
        warnings.append(f"only kernels launched inside range {range_name!r} are judged")
    device = _device(kernels)
    if device is None and timelines:  # no kernels, but the trace still names its GPU
        devs = {k: v for p in timelines for k, v in p.timeline.devices.items()}
        device = next(iter(devs.values()), None)
    device = _with_kernel_arch(device, kernels)

    def tensor_core_side():
        """Everything the Tensor Core verdict needs; independent of the timeline analysis, so the two run
        side by side (numpy and pandas release the GIL in their loops: ~0.4 s of a 1M-kernel trace's
        analysis on 2 cores)."""
        with stages.stage("tensor_core_side"):
            return _tensor_core_side()

    def _tensor_core_side():
        from .analysis import peak
        compacted = tensor_cores.compact(launches)
        summary = tensor_cores.rollup(compacted, yes_threshold=yes_threshold)
        tc_ranges = tensor_cores.range_table(compacted)
        found = findings_mod.find(launches, device and device.get("compute_capability"),
                                  (device or {}).get("from_kernel_names"))
        kernel_rows = tensor_cores.aggregate_kernels(launches)
        gpu_name = (device or {}).get("name")
        gpu_peak = peak.match(gpu_name)
        kernel_rows["pct_of_peak"] = peak.pct_of_peak(kernel_rows["tflops"], kernel_rows["dtype"], gpu_peak)
        summary["peak"] = peak.summary(kernel_rows, gpu_peak, gpu_name)
        summary["off_tc_dtypes"] = tensor_cores.off_tc_dtypes(kernel_rows)
        summary["unknown_kernels"] = tensor_cores.unknown_kernels(kernel_rows)
        if timelines:
            # this thread's malloc arena keeps what it freed, where the timeline analysis (main thread) cannot
            # reuse it (4M-kernel export side by side: peak RSS 2.27 -> 2.20 GB)
            allocator.give_back_free_memory()
        return summary, tc_ranges, found, kernel_rows

    if early is not None:  # the timeline side ran while the evidence was measured
        timeline = timeline_mod.refresh_tensor_cores(early[1], all_launches)
        summary, ranges, found, kernel_rows = tensor_core_side()
    elif timelines and not SIDE_BY_SIDE_MIN_LAUNCHES <= len(all_launches) <= SIDE_BY_SIDE_MAX_LAUNCHES:
        # memory first above the range, the interpreter's hand-overs below it: one side, then the other
        summary, ranges, found, kernel_rows = tensor_core_side()  # (hands back what it freed at its end)
        timeline = timeline_mod.analyze_timelines([p.timeline for p in timelines], all_launches, thresholds,
                                                  step_range)
    elif timelines:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsighttc-tc") as pool:
            tc_future = pool.submit(tensor_core_side)
            timeline = timeline_mod.analyze_timelines([p.timeline for p in timelines], all_launches, thresholds,
                                                      step_range)
            summary, ranges, found, kernel_rows = tc_future.result()
    else:
        timeline = None
        summary, ranges, found, kernel_rows = tensor_core_side()
    if timeline is not None:
        ranges = timeline_mod.extend_ranges(ranges, timeline)
        gain.kernel_costs(found, launches, timeline.families)
        found = sorted(found + timeline_mod.findings(timeline), key=lambda f: -f.time_ns)
    inputs = [{"path": str(p.path), "kind": p.kind.value, "launches": int(len(p.kernels))} for p in parsed]
    tl_doc = timeline_mod.to_json(timeline) if timeline is not None else None
    if joined and tl_doc is not None:
        tl_doc["recordings"] = joined
        warnings.append(segments.note(joined))
    v = Verdict(inputs, device, summary, kernel_rows, ranges, found, launches, warnings, tl_doc)
    v.host_collapsed = timeline.host_collapsed if timeline is not None else ""
    return with_gains(v)
