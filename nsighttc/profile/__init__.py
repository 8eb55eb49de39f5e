"""``nsighttc profile``: from a script to a verdict. Plans the engines, runs them as subprocesses in a
new run directory, exports what they recorded, analyses it, and writes ``verdict.json`` + ``report.md``.

Engines (``collect.engines`` builds their argument lists):
- ``auto`` (the default run, ``profile.default``): a timeline pass (torch.profiler, or nsys) and an
  Nsight Compute pass restricted to the kernels that still lack hardware evidence, started beside the
  timeline pass and stopped once each was profiled; an evidence cache makes the ncu pass unnecessary on
  later runs. The two cannot share one run: torch.profiler's CUPTI session is refused under ncu
  (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, seen on H100 with torch 2.11 / ncu 2025.3.1), and under
  ncu every launch is serialised, so its timing is no timeline. ``--fast``: timeline only.
  When ncu is refused performance counters the verdict keeps the timeline and says so.
- ``torch``: the program under torch.profiler (needs only PyTorch): timeline, kernel names;
- ``nsys``: Nsight Systems: timeline with NVTX ranges and CUDA API calls;
- ``ncu``: Nsight Compute alone: hardware Tensor Core counters, each distinct launch configuration once.

The run directory is never reused; Ctrl-C or ``--timeout`` kills the workload's whole process group and
a report is still written from what was collected. The workload's exit code is reported and returned.

The package, split by question: ``passes`` (the data: options, passes, result), ``planning`` (which profiler
runs what), ``running`` (subprocesses, their output and their end), ``stopping`` (the Nsight Compute pass on
the program and the rule that ends it early), ``evidence`` (what the passes recorded, what still needs
hardware evidence, the cache), ``rundir`` (the run directory and run.json), ``default`` (the default run);
``replay_pass`` / ``replay_plan`` / ``trace_reader`` / ``timeline_run`` serve the default run, ``target`` and
``distributed`` say what runs and how per rank. This module runs a profile from start to verdict (``profile``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from ..collect import gpu, tools
from ..errors import CollectError, NsighttcError, UsageError
from .distributed import distribute, launched_per_rank, rank_dirs, rank_run_dir
from .evidence import evidence_sources
from .passes import (ENGINES, PERM_FIX, CounterPermission, NoGPU, Options, Pass, Result,
                     last_words)
from .planning import plan
from .rundir import kept, new_run_dir, provenance, safe_name, write_meta
from .running import finish_pass, pass_env, run_pass, run_queue, signal_name, start_pass
from .target import Target, resolve_target

# The program ran its own torch.profiler beside nsighttc's (``runtime.guest_profiler``): one process holds one Kineto
# session, and the program's cycles ended nsighttc's recording, so the run had no trace (H200,
# benchmarks/gpu/user_programs/sched_cycles.py). Under nsys both record: the same program's nsys run wrote its own 8
# traces and nsighttc's verdict (gpu_steps_time.sh users5).
OWN_PROFILER_NOTE = ("the program runs its own torch.profiler ({where}); one process holds one such recording, so it "
                     "was held off while nsighttc's recorded: its `prof.step()` calls still mark the program's own steps, but "
                     "its own traces (`on_trace_ready`, `export_chrome_trace`) were not written this run and what it "
                     "read back (`key_averages()`) was empty. To have both: `--timeline-engine nsys`, beside which it "
                     "records as written; or run it without nsighttc and read its traces with `nsighttc analyze DIR`")

__all__ = ["ENGINES", "PERM_FIX", "CounterPermission", "NoGPU", "Options", "Pass", "Result", "Target", "distribute",
           "finish_pass", "new_run_dir", "pass_env", "plan", "profile", "rank_dirs", "rank_run_dir", "resolve_target",
           "run_pass", "safe_name", "start_pass"]


def profile(target: Target, opts: Options, say: Callable[[str], None] = lambda s: None) -> Result:
    t0 = time.monotonic()
    gpus = gpu.list_gpus()
    if not gpus:
        raise NoGPU("no NVIDIA GPU found here (nvidia-smi is missing or lists none), so nothing can be profiled. "
                    "What still works: `nsighttc analyze` on ncu/nsys/torch.profiler outputs recorded on a GPU "
                    "machine, and `nsighttc demo`")
    cc = gpus[0].compute_capability
    if opts.engine != "auto" and (opts.fast or opts.hardware or opts.counters != "fast"):
        raise UsageError("--fast, --hardware and --counters choose what the default run measures; they do not combine "
                         "with --engine (--engine ncu always collects the full FLOP counters)")
    if opts.fast and opts.counters != "fast":
        raise UsageError("--fast runs no Nsight Compute pass, so --counters has nothing to choose")
    if opts.fast and opts.hardware:
        raise UsageError("--fast (no Nsight Compute pass) and --hardware (always one) contradict each other")
    run_dir = rank_run_dir(opts.out) if launched_per_rank(target) else new_run_dir(opts.out, target.label)
    # tool versions for the provenance, looked up while the workload runs (an ncu start costs ~0.5 s)
    import threading
    for tool, given in (("ncu", opts.ncu), ("nsys", opts.nsys)):
        exe = tools.find_or_none(tool, given)
        if exe is not None:
            threading.Thread(target=gpu.tool_version, args=(str(exe),), daemon=True).start()
    say(f"nsighttc: run directory {run_dir}")
    started = time.monotonic()
    phases = {"gpu_query": round(started - t0, 3)}  # where the default run's time goes (run.json)

    def remaining() -> float | None:
        return None if opts.timeout is None else max(1.0, opts.timeout - (time.monotonic() - started))

    outcome = None
    if opts.engine == "auto":
        from .default import run_default
        outcome = run_default(target, opts, gpus, run_dir, cc, say, remaining)
        done, inputs, notes, failures = outcome.done, outcome.inputs, outcome.notes, outcome.failures
    else:
        passes, notes = plan(opts, target, cc, run_dir)
        done, inputs, failures = run_queue(passes, opts, target, run_dir, gpus, notes, say, remaining)
    base_notes = list(notes)
    ended = _ending(done, opts, failures)
    exiting = outcome.exiting if outcome is not None else None
    try:
        verdict, ended = _finish(run_dir, target, opts, done, gpus, base_notes, ended, inputs, outcome, phases, started)
        if exiting is not None:  # the verdict was made while the timeline's process exited: its real end now
            t_exit = time.monotonic()
            exiting.finish(remaining())
            phases["exit_after_report"] = round(time.monotonic() - t_exit, 3)  # the exit's part not overlapped
            if exiting.changed():  # it did not end as the launcher said (a crash in its shutdown, a timeout)
                ended = _ending(done, opts, failures)
                verdict, ended = _finish(run_dir, target, opts, done, gpus, base_notes, ended, inputs, outcome,
                                         phases, started)
            elif verdict is not None:
                _rewrite_provenance(run_dir, target, opts, done, gpus, ended.notes, outcome)
        write_meta(run_dir, target, opts, done, gpus, ended.notes, outcome.info if outcome else None, phases)
    except OSError as exc:  # a full disk, a directory made read-only under us: say so, keep what exists
        raise CollectError(f"cannot write the run directory ({exc.strerror or exc}{': ' + exc.filename if exc.filename else ''}); "
                           f"what was recorded is kept: {kept(run_dir)}", run_dir) from None
    finally:
        if exiting is not None and exiting.pending:  # an error above: do not leave the exiting launcher behind
            exiting.stop()
        if outcome is not None and outcome.plotters is not None:  # (no verdict: they were never asked)
            outcome.plotters.close()
    interrupted, timed_out, workload_rc = ended.interrupted, ended.timed_out, ended.workload_rc
    code = 130 if interrupted else 124 if timed_out else workload_rc
    return Result(run_dir, verdict, code, [p.engine for p in done], ended.notes, interrupted, timed_out)


class _Ending:
    """How the passes ended, as the verdict says it: the notes it adds and the exit code ``profile`` returns."""

    def __init__(self, notes: list[str], workload_rc: int, interrupted: bool, timed_out: bool):
        self.notes, self.workload_rc, self.interrupted, self.timed_out = notes, workload_rc, interrupted, timed_out


def _ending(done: list[Pass], opts: Options, failures: list[str]) -> _Ending:
    """The exit code is the program's own, from its first pass (the timeline pass of the default run, the one pass
    of an explicit engine). A later pass (the replay, ncu on the program) that nsighttc stopped, or whose program
    died after its measurements were taken, is a note: the Trainer under ncu exited 11 after printing its results
    on H100 (reports/unmarked), while its timeline run had exited 0."""
    notes: list[str] = []
    own, later = (done[0], done[1:]) if done else (None, [])
    workload_rc = own.returncode if own is not None and own.returncode not in (None, 0) and not own.stopped_early else 0
    if own is not None and own.returncode is not None and own.returncode < 0 and not own.stopped_early:
        # the tool (or the program under it) died of a signal we did not send
        said = last_words(own.log.with_suffix(".stderr.log"), own.log)
        notes.append(f"{own.engine} died of signal {-own.returncode} ({signal_name(-own.returncode)})"
                     + (f"; the program's last words: {said}" if said else "") + f"; see {own.log.name}")
        workload_rc = CollectError.exit_code
    for p in later:
        if p.returncode not in (None, 0) and not p.stopped_early:
            why = (f"died of signal {-p.returncode} ({signal_name(-p.returncode)})" if p.returncode < 0
                   else f"exited with code {p.returncode}")
            notes.append(f"the {p.mode or p.engine} pass ({p.engine}) {why}; what it measured before is used, and "
                         f"the program's own run exited {own.returncode if own else '?'}; see {p.log.name}")
    from .window import note as window_note
    for p in done:
        said = window_note(p) if p.mode == "timeline" else None
        if said:
            notes.append(said)
        if p.own_profiler and p.engine == "torch":
            notes.append(OWN_PROFILER_NOTE.format(where=p.own_profiler))
    interrupted = any(p.interrupted for p in done)
    timed_out = any(p.timed_out for p in done)
    if interrupted:
        notes.append("interrupted (Ctrl-C): the workload's process group was stopped; the report covers what was recorded")
    if timed_out:
        notes.append(f"--timeout {opts.timeout:g}s reached: the workload's process group was stopped; the report "
                     "covers what was recorded")
    if workload_rc and own is not None and own.returncode == workload_rc:
        said = last_words(own.log.with_suffix(".stderr.log"), own.log)
        notes.append(f"the workload exited with code {workload_rc}" + (f": {said}" if said else ""))
    elif workload_rc and not (own is not None and (own.returncode or 0) < 0):  # (a signal: said above)
        notes.append(f"the workload exited with code {workload_rc}")
    return _Ending(notes + failures, workload_rc, interrupted, timed_out)


def _finish(run_dir: Path, target: Target, opts: Options, done: list, gpus: list, base_notes: list[str],
            ended: _Ending, inputs: list, outcome, phases: dict, started: float) -> tuple[object | None, _Ending]:
    """The verdict and report from what was recorded, with the notes of how the passes ended."""
    notes = base_notes + ended.notes
    phases["passes"] = round(time.monotonic() - started, 3)
    if outcome is not None and outcome.marks:
        phases["marks"] = dict(outcome.marks)
    try:
        verdict = _conclude(run_dir, target, opts, done, gpus, notes, inputs, outcome, phases, started)
    finally:
        if outcome is not None and outcome.ranks_ahead is not None:  # not taken (no inputs, an error): end them
            outcome.ranks_ahead.finish_abandoned("no verdict was made from them")
            outcome.ranks_ahead = None
        if outcome is not None and outcome.rank_workers is not None:
            outcome.rank_workers.close()
    workload_rc = ended.workload_rc
    if verdict is None and not (ended.interrupted or ended.timed_out):
        notes.append(f"no verdict could be made; what was recorded is kept in {run_dir}: {kept(run_dir)}")
        if inputs and not workload_rc:  # recordings exist but cannot be read: the profiler run failed
            workload_rc = CollectError.exit_code
    return verdict, _Ending(notes, workload_rc, ended.interrupted, ended.timed_out)


def _rewrite_provenance(run_dir: Path, target: Target, opts: Options, done: list, gpus: list, notes: list[str],
                        outcome) -> None:
    """verdict.json's provenance with the timeline pass' real end (its time), once its process exited."""
    path = run_dir / "verdict.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    cost = (doc.get("provenance") or {}).get("run_cost")  # (as the report said it, at the verdict)
    doc["provenance"] = provenance(run_dir, target, opts, done, gpus, notes, outcome.info if outcome else None)
    if cost is not None:
        doc["provenance"]["run_cost"] = cost
    path.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")


def _ranks_ahead_verdict(ranks_ahead, parsed: dict):
    """The verdict of the rank analyses started before the plan (``profile.ranks_ahead``), with the replay's reports
    among its inputs and their warnings, as if every rank had read them."""
    from ..parse.ncu_csv import NO_DURATION
    from .ranks_ahead import report_inputs
    verdict = ranks_ahead.result()
    verdict.inputs = list(verdict.inputs) + report_inputs(ranks_ahead.reports, parsed)
    said = [w for r in ranks_ahead.reports if r in parsed for w in parsed[r].warnings if NO_DURATION not in w]
    verdict.warnings = list(verdict.warnings) + [w for w in dict.fromkeys(said) if w not in verdict.warnings]
    return verdict


def _conclude(run_dir: Path, target: Target, opts: Options, done: list, gpus: list, notes: list[str],
              inputs: list, outcome, phases: dict | None = None, started: float | None = None) -> object | None:
    """Analyse what was recorded and write verdict.json, report.md and the plots."""
    verdict = None
    phases = {} if phases is None else phases
    t = time.monotonic()
    if inputs:
        from ..api import analyze
        from ..render import markdown
        try:
            ready = outcome.parsed if outcome else {}
            workers = outcome.rank_workers if outcome and len(inputs) > 1 else None  # (closed by ``_finish``)
            ranks_ahead = outcome.ranks_ahead if outcome is not None else None
            if ranks_ahead is not None:  # (taken once: a verdict made again after the exit is made as below)
                outcome.ranks_ahead = None
            if ranks_ahead is not None and ranks_ahead.usable_for(inputs):
                verdict = _ranks_ahead_verdict(ranks_ahead, ready)
            else:
                if ranks_ahead is not None:
                    ranks_ahead.finish_abandoned("the verdict is made from other inputs")
                # (ranks in the workers read their own files: a parsed table would be sent to them whole)
                verdict = analyze([p if workers is not None else ready.get(p, p) for p in inputs],
                                  evidence=outcome.evidence if outcome else None,
                                  ahead=outcome.ahead if outcome else None, same_job_check=False,  # (recorded here)
                                  executor=workers)
        except NsighttcError as exc:
            notes.append(f"analysis failed: {exc}")
        phases["analyze"] = round(time.monotonic() - t, 3)  # of "analysis": the rules alone (the rest: cache, JSON)
        if verdict is not None:
            from .churn import churn_before_window
            from .window import unrecorded_speed, unrecorded_startup
            unrecorded_startup(verdict, done)
            sped = unrecorded_speed(verdict, done)
            churn = bool((verdict.timeline.get("steps") or {}).get("shape_churn")) if verdict.timeline else False
            # the straggler's fix at that speed; a loop's new shapes: their cost before the window, its known steps
            # at that speed (``analysis.wide_gain.loop``)
            from .data_waits import loader_workers
            workers_seen = loader_workers(verdict, done)
            if churn_before_window(verdict, done) or (sped and (verdict.distributed or churn)) or workers_seen:
                from ..api import with_gains
                verdict = with_gains(verdict)
            sampled = any(p.engine == "ncu" for p in done) and not any(p.engine in ("nsys", "torch") for p in done)
            if sampled and not (opts.every_launch and opts.all_kernels):
                verdict.tensor_cores["basis"] = "sampled"
                verdict.tensor_cores["sampling"] = (
                    ("every launch" if opts.every_launch else "one launch of each launch configuration")
                    + ("" if opts.all_kernels else "; elementwise/pooling/copy kernels judged by name, not profiled"))
            if outcome is not None:
                from .evidence import remember
                remember(outcome, verdict, target)
            verdict.tensor_cores["evidence_sources"] = evidence_sources(verdict.launches)
            verdict.provenance = provenance(run_dir, target, opts, done, gpus, notes,
                                             outcome.info if outcome else None)
            if started is not None:  # what this run cost, against a plain run of what the program ran (run_cost)
                from .run_cost import run_cost
                cost = run_cost(verdict.timeline, done, time.monotonic() - started)
                if cost is not None:
                    verdict.provenance["run_cost"] = cost
            verdict.warnings = list(verdict.warnings) + notes
            doc = verdict.to_json()
            (run_dir / "verdict.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
            phases["analysis"] = round(time.monotonic() - t, 3)
            t = time.monotonic()
            from ..render.plots import write_plots
            plotters = outcome.plotters if outcome is not None else None
            drawn = plotters.draw(run_dir / "verdict.json", run_dir) if plotters is not None else None
            if drawn:
                phases["figures_by_workers"] = drawn  # {figure: made}; the others were drawn here
                phases["figure_seconds"] = dict(plotters.seconds)  # each worker's reading and drawing
            made = write_plots(doc, run_dir, drawn=drawn)
            # (and the stacks behind "where the host time went", for speedscope / flame graphs)
            markdown.write_report(doc, run_dir / "report.md", plots=made, detail=opts.detail,
                                  stacks=verdict.host_collapsed)
            phases["report"] = round(time.monotonic() - t, 3)
    return verdict
