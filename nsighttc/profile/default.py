"""The default ``nsighttc profile`` run: the timeline verdict and hardware Tensor Core verdicts together,
at close to the cost of one plain run.

1. **Timeline pass**: the program under torch.profiler (Python programs whose interpreter has torch:
   ~1.0-1.2x a plain run) or Nsight Systems (anything else; ~1.5x). Every kernel of the real run, with
   its time, range, step and the host calls around it. A second run of a program the evidence cache fully knows,
   and whose last run had a window of steady steps, records from that window's start (``profile.window``); the
   verdict is made while the launcher's process still exits (``TimelineRun.provisional``).
2. **Hardware pass** (Nsight Compute), only for what the timeline found still lacking hardware evidence:
   matrix-work kernels and kernels the name rules cannot settle (``collect.hardware_pass``), minus those
   the evidence cache measured before (``collect.evidence_cache``). Each is profiled once, and the program
   is interrupted as soon as the last one was, so the rest of it never runs under ncu. For Python
   programs without the replay pass below (``--no-replay``, an nsys timeline), this pass is started *while the
   timeline pass runs* and waits at a gate in the launcher
   (``nsighttc.runtime.launch``): the interpreter, the imports and ncu's start-up overlap the timeline run (with
   torch, the gate is at its first CUDA use, so its CPU-side start-up, model construction included,
   overlaps too; ``--overlap context``: just after PyTorch created its CUDA context, so the profiler's CUDA
   set-up overlaps as well; ``--overlap none``: the timeline run alone. On H100 an A/B of none/cuda/context
   did not show the overlap changing the timeline: reports/profile_overhead, ``gate_ab.txt`` and
   ``overlap_cpu_probe.txt``, where VGG16's step median is bimodal with nothing beside it). The gate opens
   (``go``) as soon as the timeline run ends, and the plan is made while ncu runs the program to its first
   kernel; should nothing turn out to be missing, the pass is stopped at once. A program whose every kernel
   was found in the cache on its last run skips the overlapped start altogether (no process competes with
   its timeline run, and no gate opens).
   PyTorch programs first get a **replay pass** (``profile.replay_pass``, ``nsighttc/runtime/replay.py``): the timeline
   recorded operator arguments, and the operators that launched the missing kernels are called again under
   ncu, in their own process started beside the timeline; only the kernels the replay did not launch are left
   to the program's ncu pass, which waited at its gate beside them (hosts with fewer than ``MIN_CORES_BESIDE``
   cores: started after the replay, filtered to them) and is stood down when the replay measured everything
   (multi_phase's first run on H100: 2.43x -> 1.48x a plain run; ``--no-replay``). The replay is planned
   from the trace's kernel events alone (or, with a torch whose profiler events carry strides, from the
   launcher's kernel list written before the trace) and runs while the whole trace is parsed.
   Nothing on the way to the program's start imports pandas or the analysis: those load while it runs.
3. The ncu measurements are merged into the timeline's kernels by name (``analysis.merge``), so time shares
   are weighted by the real run's kernel time, per range; the new measurements go into the cache.

The hardware pass collects, by default (``--counters fast``), the tensor-pipe instruction counts that decide
"did this kernel do Tensor Core math" in one replay pass (``ncu_metrics.one_pass_metrics_for_cc``: ~3x
cheaper per profiled kernel than the seven-pass FLOP counters on Hopper); dtypes then come from the kernel
names (int8/fp64 from the counters), and the report says so. ``--counters full`` adds the per-dtype FLOP
counters (exact dtype, TFLOP/s).

``--fast``: the timeline pass alone (Tensor Cores from kernel names). ``--hardware``: measure every kernel
that needs hardware evidence, cache or not. ``--no-cache``: neither read nor write the cache.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..collect import tools
from ..collect.evidence_cache import EvidenceCache, program_key
from ..errors import NsighttcError, UsageError
from ..runtime.gate import write_gate
from . import replay_pass
from .evidence import (NCU_RERUN_MIN_SHARE, Outcome, export, missing_evidence, missing_matrix_share,
                       planned_needs)
from .passes import BACKEND_FLAGS_FILE, KERNEL_OPS_FILE, Options, Pass
from .planning import plan, rank_file, timeline_pass
from .running import run_pass, start_pass
from .stopping import ProgramPass
from .target import Target
from .timeline_run import TimelineRun
from .trace_reader import ReadersOfTheTrace
from .window import recorded_from_window

# pandas and the analysis modules are imported once the timeline pass runs (``_preload``, and where used):
# the program starts ~0.5-1 s sooner (H100 machine: 1.0 s from the run directory to the program's start).


MIN_CORES_BESIDE = 4  # a third process (the program's ncu pass at its gate) beside the timeline and the replay
# How long a rank's analysis started before the plan waits for its evidence (profile.ranks_ahead); the run hands it
# over or abandons it on every path, so this only bounds a bug's cost
RANKS_AHEAD_WAIT_S = 900.0


def rank_workers(opts: Options, target: Target, gpus: list):
    """The processes a torchrun job's ranks are analysed in (``executors.Processes``), started now so that their
    start and imports (~1-2 s each) pass while the job runs; None where the ranks are analysed here, one after the
    other (``--jobs 1``, or fewer than 4 cores). Why: the traces are parsed here for planning, and the ranks were
    then analysed here one by one: two H200s, FSDP2, 3.2-4.8 s for two ranks after a 15 s job (1.4-1.5x its plain
    run), and eight ranks take four times that."""
    if not target.distributed:
        return None
    n = opts.jobs if opts.jobs is not None else min(max(len(gpus), 2), 8, _cores() // 2)
    if n < 2:
        return None
    from ..executors import Processes
    return Processes(n).warm(preload=("nsighttc.api", "nsighttc.rank_map"))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _preload(plots_here: bool) -> None:
    """Import the analysis and report modules (pandas, matplotlib) and draw a first figure while the program runs:
    the profiler's process uses its own cores, and these are ~1 s of every default run's tail otherwise. With plot
    workers (``render.plot_workers``) matplotlib is theirs: this process only draws what they fail to."""
    import importlib
    try:
        for name in ("nsighttc.api", "nsighttc.render.markdown"):
            importlib.import_module(name)
        if plots_here:
            from ..render import plots
            plots.warm()
        from ..parse.ncu_rep import _import_ncu_report
        _import_ncu_report()  # NVIDIA's reader of the replay's report: ~0.15 s of the tail on H100's host
    except Exception:  # only a head start: the real imports report any problem
        pass


def _set_aside(p: Pass) -> Pass:
    """A timeline pass that recorded nothing keeps its logs beside the run that replaces it
    (``torch.window-try.log``, ``torch.window-try.stderr.log``)."""
    aside = p.log.with_name(p.log.stem + ".window-try.log")
    for log, to in ((p.log, aside), (p.log.with_suffix(".stderr.log"), aside.with_suffix(".stderr.log"))):
        try:
            log.rename(to)
        except OSError:
            pass
    p.log = aside
    return p


def run_default(target: Target, opts: Options, gpus: list, run_dir: Path, cc: str | None,
                say: Callable[[str], None], remaining: Callable[[], float | None]) -> Outcome:
    out = Outcome()
    started = time.monotonic()
    ncu = None if opts.fast else tools.find_or_none("ncu", opts.ncu)
    if opts.cache and gpus:
        out.cache = EvidenceCache(gpus[0].name, gpus[0].driver or "")
        out.notes += out.cache.notes
    out.program = program_key(target.argv)
    record = out.cache.program(out.program) if out.cache is not None and not opts.hardware else None
    # Operator arguments are recorded only when the replay may need them: a program the cache fully knows
    # skips it (record_shapes cost ResNet-50 AMP's timeline ~1.3 s on H100: reports/profile_overhead).
    # A distributed job's replay reads rank 0's operators until its window (the other ranks record the ranges only):
    # without it, the kernels lacking evidence were measured by running the whole job again under Nsight Compute
    # (2 H200s, 25 steps of DDP ResNet-50: 22-27 s after a 22 s job; reports/window/call43).
    may_replay = opts.replay and ncu is not None and target.python_program \
        and opts.overlap != "none" and not (record and record.get("complete"))
    # The cache knows every kernel and that the program had a window last time: record from the window's start.
    from_window = recorded_from_window(opts, record)
    tl = timeline_pass(replace(opts, record_shapes=may_replay), target, run_dir, from_window=from_window,
                       warmup_max=(record or {}).get("window_warmup"), steps_max=(record or {}).get("window_steps"),
                       last_optimizer_step=(record or {}).get("window_last_optimizer_step"))
    if tl is None:
        if ncu is None:
            raise UsageError("no engine can profile a non-Python command here: ncu and nsys were not found")
        out.cache = None  # no timeline to weigh cached evidence with: the ncu pass measures everything
        out.notes.append("default run: nsys was not found, so there is no timeline; one Nsight Compute pass "
                         "answers the Tensor Core question only")
        p = plan(replace(opts, engine="ncu"), target, cc, run_dir)[0][0]  # what --engine ncu runs
        p.mode = "after"
        run_pass(p, timeout=remaining(), say=say)
        out.done.append(p)
        out.inputs += export(p, run_dir, out.notes)
        return out
    program = ProgramPass(ncu, opts, target, run_dir, cc, say)
    # A distributed job's ncu pass never starts beside it: two torchrun jobs would contend for the rendezvous port and
    # the GPUs (its replay, one process on rank 0's GPU, does: it waits at its gate until the job has ended).
    # With the replay pass, the program's ncu pass waits beside the timeline too (on hosts with the cores for a
    # third process): the replay measures what it can, and what it cannot launch (a Trainer's embedding and
    # fused-attention backward) is measured by this pass without paying the program's start-up again
    # (transformers Trainer on H100: 22.6 s after the timeline for 18 kernels when started after it,
    # reports/window). Should the replay leave nothing missing, the pass is stood down.
    replay_first = may_replay and tl.engine == "torch"
    if ncu is not None and target.python_program and opts.overlap != "none" and not target.distributed \
            and not (record and record.get("complete")) and (not replay_first or _cores() >= MIN_CORES_BESIDE):
        program.start_beside(opts.overlap if opts.overlap in ("cuda", "context") else "start")
    rp = rp_run = None
    rp_gate = run_dir / ".replay-gate"
    if replay_first:
        rp = replay_pass.replay_pass(ncu, run_dir, cc, opts, rp_gate, rank_file(run_dir, BACKEND_FLAGS_FILE, target))
        say("[ncu] the replay process starts now and waits at its gate while the timeline runs")
        rp_run = start_pass(rp, say=lambda s: None if s.startswith("[ncu] running") else say(s))

    def ncu_frontends() -> list:
        """The idle-class frontends (``running.start_pass``) of the replay and of the program's ncu pass, as started."""
        return [r.frontend for r in (rp_run, program.running) if r is not None and r.frontend is not None]

    def readers_of_the_trace(gate: Path | None) -> ReadersOfTheTrace:
        # the launcher lists its kernels before writing the trace: the replay starts from that
        return ReadersOfTheTrace(run_dir, gate, lambda n: missing_evidence(n, out, opts)[4],
                                 rank_file(run_dir, KERNEL_OPS_FILE, target), run_dir / replay_pass.OPS_FILE)

    def start_timeline(p: Pass) -> TimelineRun:
        # A distributed job's traces are read once the job has ended (one per rank); its rank 0 says what it recorded.
        return TimelineRun(p, early=p.engine == "torch" and not target.distributed, say=say,
                           rank_dir=rank_file(run_dir, "", target) if target.distributed else None)

    def read_trace(p: Pass, run: TimelineRun) -> None:
        job = target.distributed and p.torch_trace is not None  # (rank 0's files: its operators' trace, its trace)
        readers.start(rank_file(run_dir, p.torch_trace.name, target) if job else p.torch_trace, run,
                      ops_trace=rank_file(run_dir, p.ops_trace.name, target) if job and p.ops_trace is not None else None)
    readers = readers_of_the_trace(rp_gate if rp_run is not None else None)
    say(f"[1/2 timeline: {tl.engine}] running the program "
        f"({'torch.profiler' if tl.engine == 'torch' else 'Nsight Systems'}) ... {time.monotonic() - started:.0f}s")
    # the trace is read as soon as it is written: the launcher's exit (CUDA/CUPTI teardown) overlaps what follows
    tl_run = None
    try:
        tl_run = start_timeline(tl)
        out.marks["timeline_started"] = round(time.monotonic() - started, 3)  # the profile's own start before it
        # after the launcher is started: its start (0.5 s before the program on H100) does not share the
        # interpreter with these imports
        if _cores() >= MIN_CORES_BESIDE:  # the report's figures drawn side by side, by processes warm by then
            from ..render.plot_workers import PlotWorkers
            out.plotters = PlotWorkers()
        out.rank_workers = rank_workers(opts, target, gpus)
        threading.Thread(target=_preload, args=(out.plotters is None,), daemon=True, name="nsighttc-preload").start()
        # While the launcher writes the trace: with a replay to plan, only its kernel scan reads it, and the
        # replay's calls are listed as its kernels appear (ResNet-50 AMP on H100: first call 0.02-0.19 s before
        # the trace was complete; with the whole parse beside the scan, which took its interpreter time,
        # 0.5-0.7 s after: benchmarks/gpu/gpu_ab_first_run.py); without one, the whole trace is parsed as it is
        # written (waited for 0.10-0.24 s after it, instead of ~1.3 s of parsing after it).
        read_trace(tl, tl_run)
        tl_run.until_written(remaining())
        if tl_run.nothing_recorded and not (tl.interrupted or tl.timed_out):
            # recorded from the window, and no window started this time (the program changed, or ended within
            # its warm-up): run it again, recorded whole. (No replay or ncu pass waits beside: the cache knew all.)
            tried = _set_aside(tl)
            out.notes.append(f"no window of steady steps started this time (the last run of this program had one, so "
                             f"the timeline recorded from the window's start): the program was run again and recorded "
                             f"whole ({tried.seconds:.1f} s more; its first run's log: {tried.log.name})")
            say(f"[1/2 timeline: {tl.engine}] no window started: running the program again, recorded whole")
            tl = timeline_pass(replace(opts, record_shapes=False), target, run_dir)
            readers = readers_of_the_trace(None)
            tl_run = start_timeline(tl)
            read_trace(tl, tl_run)
            tl_run.until_written(remaining())
    except BaseException:
        if out.plotters is not None:
            out.plotters.close()
        if out.rank_workers is not None:
            out.rank_workers.close()
        if tl_run is not None:
            tl_run.stop()
        readers.abort()
        program.abort()
        if rp_run is not None:
            write_gate(rp_gate, "stop")
            rp_run.kill(grace_s=2.0)
        raise
    for f in ncu_frontends():  # (of the passes started beside the timeline: a program that never appeared under one
        f.stop()               # is no longer looked for)
    out.done.append(tl)
    if tl.ranks_left_running_s is not None:
        out.notes.append(f"a rank of the job still ran {tl.ranks_left_running_s:.0f} s after another rank's window had "
                         "stopped its program and its trace was written: the ranks did not stop at the same step (one "
                         "waited in a collective the others never joined), so the job was stopped; a rank whose "
                         "recording was lost with it is named below")
    program.timeline_events = tl.window_events
    out.marks["timeline_written"] = round(time.monotonic() - started, 3)
    try:
        timeline_ended = time.monotonic()
        import pandas as pd  # (imported by _preload meanwhile: see the module's imports)
        try:
            out.inputs += export(tl, run_dir, out.notes)
        except NsighttcError as exc:
            out.failures.append(str(exc))
        say(f"[1/2 timeline: {tl.engine}] done in {tl.seconds:.1f}s")
        info = out.info
        info.update({"timeline_engine": tl.engine, "hardware_pass": "none"})
        stop_everything = tl.interrupted or tl.timed_out or not out.inputs
        # A program this cache has no complete record of will almost surely need the ncu pass: open the gate now
        # and plan while ncu starts the program (~1 s of planning off the first run); if nothing turns out to be
        # missing, the pass is stopped at once. With the replay, the gate opens only once the replay has left
        # kernels to measure (the Trainer's replay took 0.2 s; ResNet-50 AMP's, which measures everything, ~1 s,
        # not shared with a program under ncu), and the pass leaves from its gate when nothing is left.
        if program.running is not None and not stop_everything and rp_run is None:
            program.open_gate()
        early_found = readers.finish(rank_file(run_dir, tl.torch_trace.name, target) if tl.torch_trace else None,
                                     tl_run, stop_everything, info, out.parsed)
        out.marks["trace_read"] = round(time.monotonic() - started, 3)
        if rp_run is not None:  # the replay makes its CUDA context while we plan; it waits for the operator list
            write_gate(rp_gate, "stop" if stop_everything else "go")
        if out.rank_workers is not None and target.distributed and not stop_everything and \
                1 < len(out.inputs) <= out.rank_workers.jobs:
            # the ranks' analyses start now, in the rank workers: each tells its kernel table (planned from here),
            # judges its timeline while the plan (and a first run's replay) is made, and takes the evidence once
            # handed over (profile.ranks_ahead)
            from .ranks_ahead import RanksAhead
            out.ranks_ahead = RanksAhead(out.inputs, out.rank_workers, run_dir, timeout_s=RANKS_AHEAD_WAIT_S)
            out.marks["ranks_ahead"] = round(time.monotonic() - started, 3)
        tables = out.ranks_ahead.kernel_tables() if out.ranks_ahead is not None else None
        try:
            need = pd.DataFrame() if stop_everything else planned_needs(out.inputs, out.parsed,
                                                                        tables or out.rank_workers)
        except NsighttcError as exc:  # the timeline cannot be read: no plan for ncu; the analysis will say why
            out.failures.append(f"the timeline could not be read to plan the Nsight Compute pass: {exc}")
            need, stop_everything = pd.DataFrame(), True
        # the timeline side of the analysis runs while ncu measures (not a job's ranks analysed in the rank workers:
        # their analysis takes no timeline from here, and one made here would only take this process' time)
        if not stop_everything and out.parsed and out.rank_workers is None:
            from ..api import TimelineAhead
            out.ahead = TimelineAhead([out.parsed[p] for p in out.inputs if p in out.parsed])
        names, cached, have, tried, missing = missing_evidence(need, out, opts)
        out.evidence, out.planned_names = cached, names
        out.marks["planned"] = round(time.monotonic() - started, 3)
        info.update({"counters": opts.counters,
                     "kernels_needing_hardware": len(names), "from_cache": len(have), "to_measure": len(missing),
                     "not_measurable_before": len(tried),
                     "cache": str(out.cache.path) if out.cache is not None else None,
                     "plan_seconds": round(time.monotonic() - timeline_ended, 2)})  # export, parse, plan, cache
        if tables is not None:  # planned from the kernel tables the ranks' analyses told (profile.ranks_ahead)
            info["ranks_ahead"] = {"kernel_tables_told": tables.told, "parsed_for_planning": tables.failed}
        replayed: list[str] = []
        before_replay = list(out.inputs)
        if rp_run is not None:
            to_replay = [] if stop_everything else missing  # (rp_run exists only with ncu, never with --fast)
            missing, replayed = replay_pass.run_replay(rp, rp_run, run_dir, need, to_replay, out, say, started, remaining,
                                                       early=early_found)
        share = missing_matrix_share(need, missing) if missing and not opts.hardware else None
        too_little = share is not None and share < NCU_RERUN_MIN_SHARE and not opts.fast and ncu is not None
        if too_little:
            info["hardware_pass"] = f"skipped: the missing kernels hold {100 * share:.1f}% of the matrix-kernel time"
            what = "the job is" if target.distributed else "the program is"
            out.notes.append(f"the {len(missing)} kernel(s) still lacking hardware evidence hold "
                             f"{100 * share:.1f}% of the matrix kernels' GPU time, under the "
                             f"{100 * NCU_RERUN_MIN_SHARE:.0f}% that could move the verdict, so {what} not run "
                             "again under Nsight Compute: their names answer (--hardware measures them)")
            missing = []
        if opts.fast:
            info["hardware_pass"] = "skipped (--fast)"
            out.notes.append(f"--fast: timeline only; Tensor Core evidence for {len(names) - len(have)} matrix/unknown "
                             "kernel(s) comes from kernel names" + (f", {len(have)} from the evidence cache" if have else ""))
        elif not missing or ncu is None or stop_everything:
            program.stand_down()
            if ncu is None and missing:
                out.notes.append(f"ncu was not found: {len(missing)} matrix/unknown kernel(s) are judged by their names "
                                 "only (install Nsight Compute for hardware evidence)")
            elif too_little:
                pass  # said above
            elif replayed and not missing:
                info["hardware_pass"] = "replay"
            elif names and not missing:
                info["hardware_pass"] = "not needed (cache)"
                out.notes.append(f"hardware evidence for {len(have)} of the {len(names)} kernel(s) that need it came from "
                                 f"the evidence cache ({out.cache.path if out.cache else ''}); no Nsight Compute pass was run"
                                 + (f"; {len(tried)} an earlier ncu pass could not measure keep their names' answer "
                                    "(--hardware tries again)" if tried else ""))
            elif not stop_everything:
                info["hardware_pass"] = "not needed"
                out.notes.append("no kernel needed hardware evidence (none does matrix work or is unsettled by its name)")
        else:
            if out.ranks_ahead is not None:  # its evidence comes from this pass too: the analysis is made after it
                out.ranks_ahead.abandon("the program's own Nsight Compute pass measures more")
            program.measure(missing, have, need, out, started, remaining)
        if out.ranks_ahead is not None and not out.ranks_ahead.abandoned:
            from .ranks_ahead import replay_evidence
            out.ranks_ahead.reports = [i for i in out.inputs if i not in before_replay]
            out.ranks_ahead.hand_over(replay_evidence(out.ranks_ahead.reports, out.parsed, out.evidence))
            out.marks["evidence_handed"] = round(time.monotonic() - started, 3)
    except BaseException:
        if out.ranks_ahead is not None:
            out.ranks_ahead.abandon("the run failed before the evidence was measured")
        if out.plotters is not None:
            out.plotters.close()
        if out.rank_workers is not None:
            out.rank_workers.close()
        if out.ranks_ahead is not None:  # (its analyses ended with their workers: nothing of them left in the run)
            out.ranks_ahead.finish_abandoned("the run failed before the evidence was measured")
        tl_run.stop()
        raise
    if tl_run.provisional():  # the launcher said its exit code: the verdict is made while its process exits
        out.exiting = tl_run
    else:
        tl_run.finish(remaining())
    program.clean_up()
    if ncu_frontends():  # which ncu frontends were put in the idle class, and paused at the gate (run.json)
        paused = {p.mode or p.engine: p.frontends_paused_s for p in (rp, program.p) if p is not None}
        out.info["ncu_frontends"] = [{**f.record(), **({"paused_s": paused[f.name]} if paused.get(f.name) is not None
                                                       else {})} for f in ncu_frontends()]
    try:
        rp_gate.unlink()
    except OSError:
        pass
    return out
