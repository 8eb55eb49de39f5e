"""The default ``nsighttc profile`` run: the timeline verdict and hardware Tensor Core verdicts together,
at close to the cost of one plain run.

1. **Timeline pass**: the program under torch.profiler (Python programs whose interpreter has torch:
   ~1.0-1.2x a plain run) or Nsight Systems (anything else; ~1.5x). Every kernel of the real run, with
   its time, range, step and the host calls around it.
2. **Hardware pass** (Nsight Compute), only for what the timeline found still lacking hardware evidence:
   matrix-work kernels and kernels the name rules cannot settle (``collect.hardware_pass``), minus those
   the evidence cache measured before (``collect.evidence_cache``). Each is profiled once, and the program
   is interrupted as soon as the last one was, so the rest of it never runs under ncu. For Python
   programs without the replay pass below (``--no-replay``, an nsys timeline), this pass is started *while the
   timeline pass runs* and waits at a gate in the launcher
   (``nsighttc.launch``): the interpreter, the imports and ncu's start-up overlap the timeline run (with
   torch, the gate is at its first CUDA use, so its CPU-side start-up, model construction included,
   overlaps too; ``--overlap context``: just after PyTorch created its CUDA context, so the profiler's CUDA
   set-up overlaps as well; ``--overlap none``: the timeline run alone. On H100 an A/B of none/cuda/context
   did not show the overlap changing the timeline: reports/profile_overhead, ``gate_ab.txt`` and
   ``overlap_cpu_probe.txt``, where VGG16's step median is bimodal with nothing beside it). The gate opens
   (``go``) as soon as the timeline run ends, and the plan is made while ncu runs the program to its first
   kernel; should nothing turn out to be missing, the pass is stopped at once. A program whose every kernel
   was found in the cache on its last run skips the overlapped start altogether (no process competes with
   its timeline run, and no gate opens).
   PyTorch programs first get a **replay pass** (``profile.replay_pass``, ``nsighttc/replay.py``): the timeline
   recorded operator arguments, and the operators that launched the missing kernels are called again under
   ncu, in their own process started beside the timeline (then the only one there); only the kernels the
   replay did not launch are left to the program's ncu pass, started after it and filtered to them
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
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import ncu_metrics
from ..collect import engines, process, tools
from ..collect.evidence_cache import EvidenceCache, program_key
from ..errors import NsighttcError, UsageError
from . import (KERNEL_OPS_FILE, CounterPermission, Options, Pass, PERM_FIX, Target, _export, distribute, finish_pass, plan, run_pass,
               start_pass)
from . import replay_pass, replay_plan, trace_reader
from .timeline_run import TimelineRun

if TYPE_CHECKING:
    import pandas as pd
# pandas and the analysis modules are imported once the timeline pass runs (``_preload``, and where used):
# the program starts ~0.5-1 s sooner (H100 machine: 1.0 s from the run directory to the program's start).

GATE_WAIT_S = 60.0  # how long a gated pass told "stop" may take to exit before its group is killed


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


def _has_torch(python: str) -> bool:
    if os.path.realpath(python) == os.path.realpath(sys.executable):  # our own interpreter: no process start
        import importlib.util
        return importlib.util.find_spec("torch") is not None
    rc, _, _ = process.capture([python, "-c", "import importlib.util, sys; "
                                "sys.exit(0 if importlib.util.find_spec('torch') else 1)"], timeout=60)
    return rc == 0


def timeline_pass(opts: Options, target: Target, run_dir: Path) -> Pass | None:
    """torch.profiler for Python programs with torch (the cheapest timeline), else nsys, else None."""
    choice = opts.timeline_engine
    nsys = tools.find_or_none("nsys", opts.nsys) if choice in ("auto", "nsys") else None
    if choice == "nsys" and nsys is None:
        tools.find("nsys", opts.nsys)  # raises, naming where we looked
    # Distributed runs prefer nsys: torch.profiler's host-side recording slows each rank's host unevenly
    # (DDP ResNet-50 AMP on 2 H200s, 30 ms straggler: plain 60.2 ms/step, nsys 69 ms, torch.profiler 86.8 ms;
    # reports/ddp), and uneven host slow-downs are exactly what the straggler question measures.
    prefer_nsys = target.distributed and choice == "auto" and nsys is not None
    use_torch = target.python_program and choice in ("auto", "torch") and not prefer_nsys and \
        (choice == "torch" or nsys is None or _has_torch(opts.python))
    if choice == "torch" and not target.python_program:
        raise UsageError("--timeline-engine torch runs Python programs only (SCRIPT.py or -- python -m MODULE)")
    engine = "torch" if use_torch else "nsys" if nsys is not None else None
    if engine is None:
        return None
    p = plan(replace(opts, engine=engine), target, None, run_dir)[0][0]  # the same pass --engine X runs
    p.mode = "timeline"
    return p


def _interrupt_program(pid_file: Path, p: Pass, say: Callable[[str], None], reason: str) -> None:
    """SIGINT the profiled program (the launcher turns it into KeyboardInterrupt; ncu then writes its
    report). The pid file may not exist yet when ncu prints before the program starts: retry a while."""
    p.stopped_early = True

    def send() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGINT)
                return
            except (OSError, ValueError):
                time.sleep(0.05)

    say("[ncu] " + {"covered": "every kernel that needed hardware evidence was profiled",
                    "passed": "the run went past where the kernels still missing first ran in the timeline run "
                              "(this run chose others)"}.get(reason, "most of the needed kernels' time is measured "
                                                                    "and no new one came for a while")
        + ": stopping the program")
    threading.Thread(target=send, daemon=True).start()


class _Relay:
    """ncu's ``==PROF==`` lines, kept until the stop rule exists (the gate can open before the plan is made),
    then handed to it in order. The pump thread calls it; ``attach`` runs on the main thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._target: Callable[[str], None] | None = None

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._target is None:
                self._lines.append(line)
                return
            target = self._target
        target(line)

    def attach(self, target: Callable[[str], None]) -> None:
        with self._lock:
            lines, self._lines, self._target = self._lines, [], target
        for line in lines:
            target(line)


def _preload() -> None:
    """Import the analysis and report modules (pandas, matplotlib) while the program runs: the profiler's
    process uses its own cores, and these imports are ~1 s of every default run's tail otherwise."""
    import importlib
    try:
        for name in ("nsighttc.api", "nsighttc.render.markdown"):
            importlib.import_module(name)
        from ..render import plots
        plots._plt()
        from ..parse.ncu_rep import _import_ncu_report
        _import_ncu_report()  # NVIDIA's reader of the replay's report: ~0.15 s of the tail on H100's host
    except Exception:  # only a head start: the real imports report any problem
        pass


def planned_needs(inputs: list, parsed: dict) -> pd.DataFrame:
    """Kernels of the timeline that need hardware evidence; the parsed files are kept in ``parsed`` so the
    final analysis does not read them a second time (a 30 MB trace costs seconds). ``attrs["order"]``:
    every kernel's first-launch rank in the timeline run (``first_launch_order``)."""
    import pandas as pd
    from ..analysis.tensor_cores import classify_launches
    from ..api import _load_all
    from ..collect.hardware_pass import first_launch_order, needs_hardware

    todo = [p for p in inputs if p not in parsed]  # a trace parsed while it was written is not read again
    for p, loaded in zip(todo, _load_all(todo)):
        parsed[p] = loaded
    frames = [parsed[p].kernels for p in inputs]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return needs_hardware(pd.DataFrame())
    launches = classify_launches(pd.concat(frames, ignore_index=True))
    need = needs_hardware(launches)
    need.attrs["order"] = first_launch_order(launches)
    need.attrs["first"] = replay_plan.first_launches(launches, need["name"]) if not need.empty else {}
    return need


def _missing(need: pd.DataFrame, out: Outcome, opts: Options):
    """(names needing evidence, cached evidence, names found in the cache, names an earlier pass could not
    measure, names to measure now) for a ``needs_hardware`` table."""
    names = list(dict.fromkeys(need["name"])) if not need.empty else []
    cached = out.cache.lookup(need) if (out.cache is not None and not opts.hardware and names) else None
    if cached is not None and opts.counters == "full":  # exact dtypes asked for: name-typed entries do not do
        cached = cached[~cached["dtype_named"].fillna(False).astype(bool).to_numpy()]
    have = set(cached["name"]) if cached is not None and not cached.empty else set()
    tried = out.cache.unmeasured(set(names) - have) if (out.cache is not None and not opts.hardware) else set()
    return names, cached, have, tried, [n for n in names if n not in have and n not in tried]


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
    may_replay = opts.replay and ncu is not None and target.python_program and not target.distributed \
        and opts.overlap != "none" and not (record and record.get("complete"))
    tl = timeline_pass(replace(opts, record_shapes=may_replay), target, run_dir)
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
        out.inputs += _export(p, run_dir, out.notes)
        return out
    gate, pid_file = run_dir / ".ncu-gate", run_dir / ".ncu-pid"

    def ncu_pass(mode: str, regex: str | None = None, **gating) -> Pass:
        """The hardware pass: beside the timeline behind the gate (mode "overlapped"), or after it,
        filtered to exactly the missing kernels (mode "after"). Distributed: on rank 0 only."""
        inner = engines.launcher_argv(target.argv, module=target.module, annotate=opts.annotate, python=opts.python,
                                      pid_file=pid_file, **gating) if target.python_program else list(target.argv)
        metrics = ncu_metrics.one_pass_metrics_for_cc(cc) if opts.counters == "fast" else None
        p = Pass("ncu", engines.ncu_argv(ncu, run_dir / "ncu", inner, cc, nvtx_range=opts.range,
                                         every_launch=opts.every_launch, all_kernels=opts.all_kernels,
                                         kernel_regex=regex, metrics=metrics, nvtx=False), run_dir / "ncu.log",
                 mode=mode)
        return distribute(p, target, run_dir, len(inner), only_ranks="0")

    # the pid the stop rule interrupts: rank 0's launcher in a distributed run (rankexec fills rank<R>/)
    pid_to_stop = run_dir / "rank0" / pid_file.name if target.distributed else pid_file
    hw: Pass | None = None
    hw_run: process.Running | None = None
    # Distributed runs never overlap: two torchrun jobs would contend for the rendezvous port and the GPUs.
    # With the replay pass, only the replay process waits beside the timeline: on the wrappers it measured
    # every kernel (H100), and the program's ncu pass, when still needed, starts after it, filtered to the rest.
    replay_first = may_replay and tl.engine == "torch"
    if ncu is not None and target.python_program and opts.overlap != "none" and not target.distributed \
            and not (record and record.get("complete")) and not replay_first:
        hw = ncu_pass("overlapped", gate=gate,
                      gate_at=opts.overlap if opts.overlap in ("cuda", "context") else "start"
                      if tl.engine == "torch" else "start")
        hw.on_prof = relay = _Relay()  # kept for the stop rule (the gate may open before the plan exists)
        say("[ncu] starting now and waiting at the gate while the timeline runs (start-up overlaps)")
        hw_run = start_pass(hw, say=lambda s: None if s.startswith("[ncu] running") else say(s))
    rp: Pass | None = None
    rp_run: process.Running | None = None
    rp_gate = run_dir / ".replay-gate"
    if replay_first:
        rp = replay_pass.replay_pass(ncu, run_dir, cc, opts, rp_gate)
        say("[ncu] the replay process starts now and waits at its gate while the timeline runs")
        rp_run = start_pass(rp, say=lambda s: None if s.startswith("[ncu] running") else say(s))

    def close_gate(word: str, which: Path = gate) -> None:
        try:
            which.write_text(word)
        except OSError:
            pass

    threading.Thread(target=_preload, daemon=True, name="nsighttc-preload").start()
    early: replay_plan.EarlyPlan | None = None
    early_found: dict | None = None
    if rp_run is not None:  # the launcher lists its kernels before writing the trace: start the replay from that
        early = replay_plan.EarlyPlan(run_dir / KERNEL_OPS_FILE, run_dir / replay_pass.OPS_FILE, rp_gate,
                                      lambda n: _missing(n, out, opts)[4]).start()
    say(f"[1/2 timeline: {tl.engine}] running the program "
        f"({'torch.profiler' if tl.engine == 'torch' else 'Nsight Systems'}) ... {time.monotonic() - started:.0f}s")
    # the trace is read as soon as it is written: the launcher's exit (CUDA/CUPTI teardown) overlaps what follows
    tl_run = stream = streamed = scan = None
    try:
        tl_run = TimelineRun(tl, early=tl.engine == "torch" and not target.distributed, say=say)
        # While the launcher writes the trace: with a replay to plan, only its kernel scan reads it, and the
        # replay's calls are listed as its kernels appear (ResNet-50 AMP on H100: first call 0.02-0.19 s before
        # the trace was complete; with the whole parse beside the scan, which took its interpreter time,
        # 0.5-0.7 s after: benchmarks/gpu_ab_first_run.py); without one, the whole trace is parsed as it is
        # written (waited for 0.10-0.24 s after it, instead of ~1.3 s of parsing after it).
        if tl_run.early and rp_run is not None:
            from ..parse.kineto_ops import OperatorIndex
            index = OperatorIndex()  # the operators' offsets, noted by the scan as it passes them
            streamed = replay_plan.StreamPlan(tl.torch_trace, run_dir / replay_pass.OPS_FILE, rp_gate,
                                              lambda n: _missing(n, out, opts)[4],
                                              defer_to=run_dir / KERNEL_OPS_FILE, index=index).start()
            scan = trace_reader.KernelScan(tl.torch_trace, tl_run.trace_done, streamed.add, index=index).start()
        elif tl_run.early:
            stream = trace_reader.TraceStream(tl.torch_trace, tl_run.trace_done).start()
        tl_run.until_written(remaining())
    except BaseException:
        if tl_run is not None:
            tl_run.stop()
        if early is not None:
            early.finish()
        if streamed is not None:
            streamed.finish()
        for g, r in ((gate, hw_run), (rp_gate, rp_run)):
            if r is not None:
                close_gate("stop", g)
                r.kill(grace_s=2.0)
        raise
    out.done.append(tl)
    try:
        timeline_ended = time.monotonic()
        import pandas as pd  # (imported by _preload meanwhile: see the module's imports)
        from ..collect import hardware_pass
        try:
            out.inputs += _export(tl, run_dir, out.notes)
        except NsighttcError as exc:
            out.failures.append(str(exc))
        say(f"[1/2 timeline: {tl.engine}] done in {tl.seconds:.1f}s")
        info = out.info
        info.update({"timeline_engine": tl.engine, "hardware_pass": "none"})
        stop_everything = tl.interrupted or tl.timed_out or not out.inputs
        # A program this cache has no complete record of will almost surely need the ncu pass: open the gate now
        # and plan while ncu starts the program (~1 s of planning off the first run); if nothing turns out to be
        # missing, the pass is stopped at once.
        opened_early = hw_run is not None and not stop_everything  # never with the replay: hw_run starts after it
        if opened_early:
            close_gate("go")
            watcher_started = time.monotonic()
        if early is not None:  # the launcher wrote its kernel list before the trace, or none: that plan has ended
            early_found = early.finish()
            info["early_plan"] = early.info if early_found is not None else {"launcher": early.error or "no kernel list"}
        if streamed is not None:  # the replay's list ends now (first: the replay waits for it, not for the parse)
            t0 = time.monotonic()
            rest = scan.kernels() if tl_run.said_written else None
            if rest is None and tl_run.said_written and not stop_everything and early_found is None:
                from ..parse import kineto_ops  # the scan failed: read the finished file's kernels
                rest = kineto_ops.kernel_launches(tl.torch_trace)
            found = streamed.finish(rest)
            if early_found is None and not stop_everything and not streamed.errors and not streamed.stood_down:
                early_found = found
            info["early_plan"] = {**info.get("early_plan", {}),
                                  "source": "trace kernel events, read while written" if scan.error is None else
                                  f"trace kernel events (scan: {scan.error})",
                                  "first_call_s": found.get("first_call_s"),
                                  # relative to the trace's completion (negative: before it): when the scan
                                  # handed over the first kernel needing evidence, the first and last call listed
                                  **{f"{k}_after_trace_s": None if found.get(f"{k}_s") is None or
                                     tl_run.p.seconds is None else round(found[f"{k}_s"] - tl_run.p.seconds, 2)
                                     for k in ("first_needed", "first_call", "last_call")},
                                  "lookup_s": found.get("lookup_s"),
                                  "planned_in_s": round(time.monotonic() - t0, 2)}
            if streamed.errors:
                info["early_plan"]["error"] = "; ".join(streamed.errors)
        t0 = time.monotonic()
        parsed = stream.parsed() if stream is not None and tl_run.said_written else None
        if parsed is not None and not stop_everything:  # the trace as parsed while it was written
            out.parsed[tl.torch_trace] = parsed
        if stream is not None:
            info["trace_parse"] = {"while_written": parsed is not None, "waited_s": round(time.monotonic() - t0, 2),
                                   **({"error": stream.error} if stream.error else {})}
        if early_found is None and rp_run is not None and not stop_everything and tl.torch_trace is not None \
                and not (streamed is not None and streamed.first_call_s is not None):
            # the replay is planned from the trace's kernel events alone and runs while the whole trace is parsed
            t0 = time.monotonic()
            try:
                early_found = replay_plan.start_from_trace(tl.torch_trace, run_dir / replay_pass.OPS_FILE, rp_gate,
                                                           lambda n: _missing(n, out, opts)[4])
                info["early_plan"] = {**info.get("early_plan", {}), "source": "trace kernel events",
                                      "planned_in_s": round(time.monotonic() - t0, 2)}
            except Exception as exc:  # noqa: BLE001 - planned from the parsed trace below instead
                info["early_plan"] = {**info.get("early_plan", {}), "error": f"{type(exc).__name__}: {exc}"}
        if rp_run is not None:  # the replay makes its CUDA context while we plan; it waits for the operator list
            close_gate("stop" if stop_everything else "go", rp_gate)
        try:
            need = pd.DataFrame() if stop_everything else planned_needs(out.inputs, out.parsed)
        except NsighttcError as exc:  # the timeline cannot be read: no plan for ncu; the analysis will say why
            out.failures.append(f"the timeline could not be read to plan the Nsight Compute pass: {exc}")
            need, stop_everything = pd.DataFrame(), True
        if not stop_everything and out.parsed:  # the timeline side of the analysis runs while ncu measures
            from ..api import TimelineAhead
            out.ahead = TimelineAhead([out.parsed[p] for p in out.inputs if p in out.parsed])
        names, cached, have, tried, missing = _missing(need, out, opts)
        out.evidence = cached
        info.update({"counters": opts.counters,
                     "kernels_needing_hardware": len(names), "from_cache": len(have), "to_measure": len(missing),
                     "not_measurable_before": len(tried),
                     "cache": str(out.cache.path) if out.cache is not None else None,
                     "plan_seconds": round(time.monotonic() - timeline_ended, 2)})  # export, parse, plan, cache
        replayed: list[str] = []
        if rp_run is not None:
            to_replay = [] if stop_everything else missing  # (rp_run exists only with ncu, never with --fast)
            missing, replayed = replay_pass.run_replay(rp, rp_run, run_dir, need, to_replay, out, say, started, remaining,
                                                       early=early_found)
        if opts.fast:
            info["hardware_pass"] = "skipped (--fast)"
            out.notes.append(f"--fast: timeline only; Tensor Core evidence for {len(names) - len(have)} matrix/unknown "
                             "kernel(s) comes from kernel names" + (f", {len(have)} from the evidence cache" if have else ""))
        elif not missing or ncu is None or stop_everything:
            if hw_run is not None and opened_early:  # already past the gate: stop it now
                hw_run.kill(grace_s=2.0)
            elif hw_run is not None:
                close_gate("stop")
                res = hw_run.wait(GATE_WAIT_S)
                if res.returncode is None:
                    hw_run.kill(grace_s=2.0)
            if ncu is None and missing:
                out.notes.append(f"ncu was not found: {len(missing)} matrix/unknown kernel(s) are judged by their names "
                                 "only (install Nsight Compute for hardware evidence)")
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
            say(f"[2/2 ncu] {len(missing)} kernel(s) need hardware evidence"
                + (f" ({len(have)} more found in the cache)" if have else "") + f" ... {time.monotonic() - started:.0f}s")
            if hw is None:  # not started beside the timeline: start it now, filtered to exactly these kernels
                hw = ncu_pass("after", regex=hardware_pass.kernel_regex(missing))
            p = hw
            weights = need.groupby("name")["time_ns"].sum().to_dict()
            watcher = hardware_pass.StopWhenCovered(missing, stop=lambda: _interrupt_program(pid_to_stop, p, say, watcher.reason)
                                      if target.python_program else None, weights=weights,
                                      order=need.attrs.get("order"))

            def progress(line: str) -> None:
                watcher.on_line(line)
                say(f"[2/2 ncu] profiled {watcher.profiled} kernel(s); {watcher.covered}/{watcher.total} of those needed "
                    f"... {time.monotonic() - started:.0f}s")
            if hw_run is None:
                hw.on_prof = progress
                hw_run = start_pass(hw, say=say)
                watcher.started = time.monotonic()
            else:
                if not opened_early:
                    close_gate("go")
                watcher.started = watcher_started if opened_early else time.monotonic()
                relay.attach(progress)

            def idle_stop() -> None:
                while hw_run.proc.poll() is None and not watcher.stopped:
                    watcher.check_idle()
                    time.sleep(0.5)
            if target.python_program:
                threading.Thread(target=idle_stop, daemon=True).start()
            try:
                finish_pass(hw, hw_run, remaining())
            except CounterPermission:
                out.notes.append(f"ncu was refused the performance counters; Tensor Core evidence comes from kernel "
                                 f"names and the cache. {PERM_FIX}")
                hw = None
            if hw is not None:
                out.done.append(hw)
                info.update({"hardware_pass": hw.mode, "stopped_early": hw.stopped_early, "stop_reason": watcher.reason,
                             "profiled": hw.profiled_kernels, "measured": watcher.covered,
                             "measured_time_share": round(watcher.covered_share, 4),
                             "seconds_after_timeline": round(time.monotonic() - watcher.started, 2)})
                try:
                    out.inputs += _export(hw, run_dir, out.notes)
                except NsighttcError as exc:
                    out.failures.append(str(exc))
                if hw.stopped_early and watcher.reason == "covered":
                    out.notes.append(f"Nsight Compute pass: the program was stopped after the {watcher.total} kernel(s) "
                                     "needing hardware evidence were profiled (the timeline pass ran it to the end)")
                elif hw.stopped_early and watcher.reason == "passed":
                    out.notes.append(f"Nsight Compute pass: the program was stopped once {watcher.covered} of "
                                     f"{watcher.total} kernel(s) needing evidence ({watcher.covered_share:.0%} of their "
                                     "GPU time) were profiled and the run had gone past the point where the others first "
                                     "ran in the timeline run (this run launched other kernels there); the others keep "
                                     "their names' answer")
                elif hw.stopped_early:
                    out.notes.append(f"Nsight Compute pass: the program was stopped once {watcher.covered} of "
                                     f"{watcher.total} kernel(s) needing evidence ({watcher.covered_share:.0%} of their "
                                     "GPU time) were profiled and no new one appeared for a while; the others keep their "
                                     "names' answer (`--engine ncu` profiles every launch configuration of a whole run)")
                elif watcher.remaining:
                    out.notes.append(f"Nsight Compute pass: {len(watcher.remaining)} kernel(s) needing evidence were not "
                                     "seen by ncu (launched only in the timeline run, or named differently); they keep "
                                     "name-rule evidence")
    except BaseException:
        tl_run.stop()
        raise
    tl_run.finish(remaining())
    for f in (gate, pid_file, rp_gate):
        try:
            f.unlink()
        except OSError:
            pass
    return out


def remember(out: Outcome, verdict, target: Target) -> None:
    """Put this run's ncu measurements into the evidence cache, and whether the program is now covered."""
    if out.cache is None or verdict is None:
        return
    source = str(out.done[0].log.parent) if out.done else ""
    added = out.cache.add(verdict.launches, source=source)
    from ..collect.hardware_pass import needs_hardware
    still = needs_hardware(verdict.launches)
    ncu_had_its_chance = any(p.engine == "ncu" and p.returncode is not None for p in out.done)
    if ncu_had_its_chance and not still.empty:  # asked for, not measured: do not rerun ncu for them every time
        out.cache.add_unmeasured(list(dict.fromkeys(still["name"])), source)
    out.cache.set_program(out.program, still.empty or ncu_had_its_chance, target.label)
    if out.cache.save():
        out.info["cached_now"] = added
    out.notes += [n for n in out.cache.notes if n not in out.notes]
