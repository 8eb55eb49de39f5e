"""What the passes return: their recordings turned into inputs ``analyze`` reads (exports), the kernels of the
timeline that still need hardware evidence and where it comes from (the evidence cache, the replay, ncu on the
program), and, after the verdict, what goes back into the cache.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..collect.evidence_cache import EvidenceCache
from ..collect.ncu_export import export_raw_csv
from ..collect.nsys_export import export_sqlite
from ..errors import CollectError
from . import replay_plan
from .distributed import rank_dirs
from .passes import Options, Pass
from .target import Target

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Outcome:
    done: list[Pass] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    evidence: pd.DataFrame | None = None      # cached hardware evidence to merge into the timeline
    cache: EvidenceCache | None = None
    program: str = ""
    info: dict = field(default_factory=dict)  # what the run did for the evidence: provenance["evidence"]
    parsed: dict = field(default_factory=dict)  # input path -> parse.Parsed, read once for planning and verdict
    ahead: object | None = None  # api.TimelineAhead: the timeline verdict made while the evidence is measured
    exiting: object | None = None  # timeline_run.TimelineRun still exiting: the verdict is made meanwhile
    # seconds since the passes started at which the default run reached each step (run.json phase_seconds.marks):
    # where a run's time beyond the program's own goes
    marks: dict = field(default_factory=dict)
    plotters: object | None = None  # render.plot_workers.PlotWorkers warming up while the program runs
    rank_workers: object | None = None  # executors.Processes a torchrun job's ranks are analysed in (default.rank_workers)
    ranks_ahead: object | None = None  # profile.ranks_ahead.RanksAhead: those analyses, started before the plan
    # every kernel the plan found needing evidence, on every rank (``planned_needs``): what ``remember`` marks as
    # asked for, so a cached run never launches the job again for kernels no pass could measure
    planned_names: list = field(default_factory=list)


def export(p: Pass, run_dir: Path, notes: list[str]) -> list[Path]:
    """Turn a pass's artifacts into files `analyze` reads; keep everything that exists. A pass run once
    per rank exports each rank's directory."""
    if not p.ranked:
        return export_dir(p, run_dir, notes)
    dirs = rank_dirs(run_dir)
    if not dirs:
        notes.append(f"{p.engine}: no rank wrote a recording (no rank<N>/ directory in {run_dir})")
    out: list[Path] = []
    for d in dirs:
        rank_notes: list[str] = []
        out += export_dir(p, d, rank_notes, trace=d / p.torch_trace.name if p.torch_trace else None)
        notes += [f"{d.name}: {n}" for n in rank_notes]
    return out


def export_dir(p: Pass, run_dir: Path, notes: list[str], trace: Path | None = None) -> list[Path]:
    out: list[Path] = []
    trace = trace or p.torch_trace
    if p.engine == "ncu":
        stem = p.stem or "ncu"
        rep = run_dir / f"{stem}.ncu-rep"
        if rep.exists():
            from ..parse.ncu_rep import _import_ncu_report
            if _import_ncu_report() is not None:  # read in-process: no second ncu start-up to export
                out.append(rep)
            else:
                out.append(export_raw_csv(Path(p.exe), rep, run_dir / f"{stem}_raw.csv"))
        else:
            notes.append("ncu wrote no report (the workload launched no kernels, or was stopped before any was profiled)")
    if p.engine == "nsys":
        rep = run_dir / "nsys.nsys-rep"
        if rep.exists():
            out.append(export_sqlite(Path(p.exe), rep, run_dir / "nsys.sqlite"))
        elif list(run_dir.glob("nsys*.qdstrm")):
            raise CollectError("nsys recorded a .qdstrm stream but could not turn it into a .nsys-rep report: its "
                               "importer (QdstrmImporter) failed, on Linux usually because libdw.so.1 is missing "
                               "(install libdw1 / elfutils, or put it on LD_LIBRARY_PATH); `nsighttc doctor` checks it")
        else:
            notes.append("nsys wrote no report")
    if trace is not None:
        if trace.exists() and trace.stat().st_size > 0:
            out.append(trace)
        else:
            notes.append(f"no torch.profiler trace was written ({trace.name})")
    return out


def kernels_of(path) -> pd.DataFrame:
    """One recording's kernel table (run in a rank worker: ``planned_needs``)."""
    from ..parse import load
    return load(path).kernels


def planned_needs(inputs: list, parsed: dict, executor=None) -> pd.DataFrame:
    """Kernels of the timeline that need hardware evidence; the parsed files are kept in ``parsed`` so the
    final analysis does not read them a second time (a 30 MB trace costs seconds). ``attrs["order"]``:
    every kernel's first-launch rank in the timeline run (``first_launch_order``).

    ``executor`` (a torchrun job's rank workers, ``default.rank_workers``): the ranks not parsed yet are parsed there,
    side by side, and only their kernel tables come back. Those workers analyse each rank from its file anyway (a
    parsed table would be sent to them whole), so the ranks parsed here one after the other were read twice, the
    first time while nothing else ran: 1.0-1.2 s of a cached two-rank run's planning on two H200s (cost50c)."""
    import pandas as pd
    from ..analysis.tensor_cores import classify_launches
    from ..api import _load_all
    from ..collect.hardware_pass import first_launch_order, needs_hardware

    todo = [p for p in inputs if p not in parsed]  # a trace parsed while it was written is not read again
    kernels = {p: parsed[p].kernels for p in inputs if p in parsed}
    if executor is not None and len(todo) > 1:
        from ..executors import Failed
        try:
            got = executor.map(kernels_of, [(i, (p,)) for i, p in enumerate(todo)])
        except Exception:  # noqa: BLE001 - a pool that broke (a worker killed): every rank is read here instead
            got = {}
        kernels.update({todo[i]: k for i, k in got.items() if not isinstance(k, Failed)})
        todo = [p for p in todo if p not in kernels]  # a rank that failed there: read here, its error said as ever
    for p, loaded in zip(todo, _load_all(todo)):
        parsed[p] = loaded
        kernels[p] = loaded.kernels
    frames = [kernels[p] for p in inputs]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return needs_hardware(pd.DataFrame())
    launches = classify_launches(pd.concat(frames, ignore_index=True))
    need = needs_hardware(launches)
    matrix = launches["matrix_work"].astype(bool).to_numpy()
    need.attrs["matrix_ns"] = float(launches["duration_ns"].to_numpy()[matrix].sum()) if matrix.any() else 0.0
    need.attrs["order"] = first_launch_order(launches)
    need.attrs["first"] = replay_plan.first_launches(launches, need["name"]) if not need.empty else {}
    return need


# The Nsight Compute pass on the program launches it again: a torchrun job's whole job (a 52 s launch for 2 kernels
# the replay could not launch, FSDP2 on 2 H100s), a generate() loop's run to its window (~20 s for 1 kernel
# of 11 after the replay measured 10, H100). It runs only when the kernels still missing hold at least this
# share of the recording's matrix-kernel time, for every program. Below it they cannot move the Tensor Core verdict's
# shares by more than this (the verdict's own line is at 90%: analysis.tensor_cores), so their names answer, with a
# note; ``--hardware`` measures them anyway.
NCU_RERUN_MIN_SHARE = 0.05


def missing_matrix_share(need: pd.DataFrame, missing: list[str]) -> float | None:
    """The share of the recording's matrix-kernel time held by the kernels still missing evidence."""
    total = need.attrs.get("matrix_ns") if need is not None else None
    if not total or need.empty:
        return None
    return float(need.loc[need["name"].isin(missing), "time_ns"].sum()) / total


def missing_evidence(need: pd.DataFrame, out: Outcome, opts: Options):
    """(names needing evidence, cached evidence, names found in the cache, names an earlier pass could not
    measure, names to measure now) for a ``needs_hardware`` table."""
    names = list(dict.fromkeys(need["name"])) if not need.empty else []
    cached = out.cache.lookup(need) if (out.cache is not None and not opts.hardware and names) else None
    if cached is not None and opts.counters == "full":  # exact dtypes asked for: name-typed entries do not do
        cached = cached[~cached["dtype_named"].fillna(False).astype(bool).to_numpy()]
    have = set(cached["name"]) if cached is not None and not cached.empty else set()
    tried = out.cache.unmeasured(set(names) - have) if (out.cache is not None and not opts.hardware) else set()
    return names, cached, have, tried, [n for n in names if n not in have and n not in tried]


def remember(out: Outcome, verdict, target: Target) -> None:
    """Put this run's ncu measurements into the evidence cache, and whether the program is now covered."""
    if out.cache is None or verdict is None:
        return
    source = str(out.done[0].log.parent) if out.done else ""
    added = out.cache.add(verdict.launches, source=source)
    from ..collect.hardware_pass import needs_hardware
    still = needs_hardware(verdict.launches)
    ncu_had_its_chance = any(p.engine == "ncu" and p.returncode is not None for p in out.done)
    if ncu_had_its_chance:  # asked for, not measured: do not rerun ncu for them every time
        # (every rank's: the verdict's launches are one rank's where a job's headline shows one, and a kernel only
        # another rank launched, left unmarked, sent the cached run of a DDP job back under Nsight Compute: 2 x H200)
        asked = list(dict.fromkeys(list(still["name"]) + list(out.planned_names)))
        never = [n for n in asked if n not in out.cache.known(asked)]
        if never:
            out.cache.add_unmeasured(never, source)
    from .window import had_window, last_optimizer_step_seen, warmup_seen, window_steps_seen
    timed = [p for p in out.done if p.mode == "timeline" and had_window(p)]
    warmups = [warmup_seen(p.window_events) for p in timed]
    steps = [n for n in (window_steps_seen(p.window_events) for p in timed) if n]
    last = [n for n in (last_optimizer_step_seen(p.window_events) for p in timed) if n]
    # covered: every kernel has evidence, or had its chance under ncu in this run or an earlier one (kernels an earlier
    # pass could not measure are not asked for again: a program whose only missing kernels are those starts no replay
    # on its next run; two H200s, a DDP job whose kernels another program's runs had put in the cache: its second run
    # started the replay beside the timeline for 3 such kernels and stopped it after, 2 s of a 1.22x cached run)
    left = set(still["name"]) if not still.empty else set()
    tried_before = bool(left) and left <= out.cache.unmeasured(left)
    out.cache.set_program(out.program, still.empty or ncu_had_its_chance or tried_before, target.label,
                          window=bool(warmups),
                          window_warmup=max(warmups) if warmups else None, window_steps=max(steps) if steps else None,
                          window_last_optimizer_step=max(last) if last else None)
    if out.cache.save():
        out.info["cached_now"] = added
    out.notes += [n for n in out.cache.notes if n not in out.notes]


def evidence_sources(launches) -> dict:
    """Where the Tensor Core answer of the kernels that decide it (matrix work, or on Tensor Cores) came
    from, as shares of their GPU time: ncu in this run, ncu from the evidence cache, or names only."""
    from ..analysis.merge import CACHE_DETAIL

    if launches is None or launches.empty:
        return {}
    deciding = launches[(launches["matrix_work"].astype(bool) | (launches["tensor_core"] == True)).to_numpy()]  # noqa: E712
    total = float(deciding["duration_ns"].sum()) if not deciding.empty else 0.0
    if not total:
        return {}
    hw = (deciding["evidence"] == "hardware").to_numpy()
    cached = deciding["evidence_detail"].astype(str).str.startswith(CACHE_DETAIL).to_numpy()
    t = deciding["duration_ns"].to_numpy(dtype=float)
    return {"ncu_this_run": float(t[hw & ~cached].sum() / total), "ncu_cache": float(t[hw & cached].sum() / total),
            "kernel_names": float(t[~hw].sum() / total)}
