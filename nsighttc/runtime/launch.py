"""The launcher the engines run: ``python -m nsighttc.runtime.launch [options] -- SCRIPT.py [ARGS]`` or
``... -m MODULE [ARGS]``. It runs the user's program unchanged (runpy, as ``python SCRIPT`` would:
``__main__``, ``sys.argv``, ``sys.path[0]``) inside a top-level range, optionally annotating every
``nn.Module`` call, and, for the torch engine, under ``torch.profiler`` with the Kineto trace written
even when the program fails or is interrupted.

For the default ``profile`` run, the Nsight Compute pass starts while the timeline pass still runs and
waits at a gate (``--wait-for FILE``) until nsighttc writes ``go`` into the file (``stop``: exit without
going on). Where the gate is (``--gate-at``):
- ``start``: before the program's first line (any program);
- ``cuda``: at the program's first CUDA use in PyTorch (``torch.cuda._lazy_init``, which PyTorch's C++
  side also calls before the first CUDA tensor): imports, model construction and data preparation on the
  CPU overlap the timeline run too, and no GPU work of the two runs overlaps. While it waits, torch uses
  one CPU thread (restored at the gate) so the timeline run keeps the cores it had.
- ``context``: the same place, but once ``_lazy_init`` has created the CUDA context (under ncu: with the
  profiler's injection set up): that start-up overlaps the timeline run as well. The program itself has
  still put nothing on the GPU.
``--pid-file`` tells nsighttc which process to interrupt (SIGINT, a KeyboardInterrupt here) once every
kernel it needs was profiled, so the rest of the program does not run under ncu.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import signal
import sys
import time
from pathlib import Path

# EXIT_SAID: printed just before the trace is written at the program's end, the exit code the launcher will return.
# With it the default run analyses and writes its report while the process exits (``profile.timeline_run``), and only
# checks afterwards that the process really ended with it (a crash in the interpreter's shutdown is still caught).
from ..record_format import EXIT_SAID
# the trace's writing and its lines (TRACE_WRITTEN, NOTHING_RECORDED: re-exported, the default run reads them here)
from . import gate
from .lines import say
from .trace_writing import NOTHING_RECORDED, TRACE_WRITTEN, trace_only_config, write_trace  # noqa: F401
from .trace_writing import EXTERNAL_CORRELATION_ENV, ranges_config


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m nsighttc.runtime.launch", description=__doc__.split("\n")[0])
    ap.add_argument("--annotate", choices=["none", "script", "modules"], default="script")
    ap.add_argument("--range-name", default=None, help="name of the top-level range (default: the script's name)")
    ap.add_argument("--torch-trace", type=Path, help="run under torch.profiler and write the trace here")
    ap.add_argument("--record-shapes", action="store_true",
                    help="with --torch-trace: record each operator's argument shapes, dtypes and values "
                         "(what `python -m nsighttc.runtime.replay` needs to launch its kernels again)")
    ap.add_argument("--no-operators", dest="operators", action="store_false",
                    help="with --torch-trace: record the ranges, CUDA calls and GPU activities only, not every "
                         "operator (what the timeline's analysis reads; a shorter stop and a smaller trace; "
                         "nsighttc.runtime.recording). --record-shapes records operators all the same, but for the "
                         "ranks --shapes-rank leaves out.")
    ap.add_argument("--ops-trace", type=Path,
                    help="with --record-shapes and --window: record operators with their arguments only until the "
                         "window that ends the recording starts, write them to FILE, and record that window with the "
                         "ranges only into --torch-trace (nsighttc.runtime.recording.OperatorsUntilWindow); a program "
                         "with no such window is recorded whole with its operators into --torch-trace")
    ap.add_argument("--kernel-ops", type=Path,
                    help="with --record-shapes: when the program ends, write each distinct kernel with the "
                         "operator call of its first launch here (JSON, nsighttc.runtime.kernel_ops) before the trace")
    ap.add_argument("--backend-flags", type=Path,
                    help="with --record-shapes: write the program's global backend switches that choose kernels "
                         "(cudnn.benchmark, deterministic algorithms, ...) here where the operators' recording stops "
                         "(JSON, nsighttc.runtime.backend_flags): the replay makes its calls under them")
    ap.add_argument("--shapes-rank", type=int, default=None, metavar="R",
                    help="with --record-shapes in a distributed job: only rank R records operators with their "
                         "arguments (and writes --ops-trace/--kernel-ops); the other ranks record as without "
                         "--record-shapes (the replay reads one rank: every rank launches the same kernels). "
                         "Where rank R changes sessions before its window (--ops-trace), the other ranks start a new "
                         "recording at the same step and drop what they recorded before it "
                         "(nsighttc.runtime.recording.OperatorsUntilWindow)")
    ap.add_argument("--wait-for", type=Path, help="wait until FILE says 'go' (run) or 'stop' (exit 0 at once)")
    ap.add_argument("--gate-at", choices=["start", "cuda", "context"], default="start",
                    help="where to wait: before the program, at its first CUDA use in PyTorch, or just after "
                         "PyTorch created its CUDA context there")
    ap.add_argument("--pid-file", type=Path, help="write this process's id here before running the program")
    ap.add_argument("--variant", action="append", default=[],
                    help="apply a variant of `nsighttc try` before the program runs (nsighttc.runtime.variants)")
    ap.add_argument("--applied", type=Path, help="write what the variants set here (JSON) when the program ends")
    ap.add_argument("--step-marks", choices=["on", "off"], default="on",
                    help="mark the program's steps from global hooks (nsighttc.runtime.steps: optimizer steps, "
                         "DataLoader fetches, the main model's calls, torch.compile's compilations) once it imports "
                         "torch")
    ap.add_argument("--window", action="store_true",
                    help="record a window of steady steps (nsighttc.runtime.window): the recorder runs through the "
                         "warm-up and the window, then the program stops (--window-end stop) or runs on unrecorded")
    ap.add_argument("--window-warmup", default="auto", type=_count_or_auto,
                    help="steps before the window: a number, or auto (until the step time settles)")
    ap.add_argument("--window-warmup-max", default=None, type=int, metavar="N",
                    help="with --window-warmup auto: the warm-up ends after N steps at the latest (the program's last "
                         "run waited that many: the window starts no later than it did then)")
    ap.add_argument("--window-steps", default="auto", type=_count_or_auto,
                    help="steps in the window: a number, or auto (about 2 s of steps, 10 to 100)")
    ap.add_argument("--window-steps-max", default=None, type=int, metavar="N",
                    help="with --window-steps auto: at most N steps (the program's last run's window held that many)")
    ap.add_argument("--window-last-optimizer-step", default=None, type=int, metavar="N",
                    help="the program's last run ended inside its window after N optimizer steps: the window of the "
                         "hooks' steps ends with the step of the N-th (once it holds enough steps), so that the "
                         "program's end runs unrecorded (nsighttc.runtime.window: Window._at_last_step)")
    ap.add_argument("--window-end", choices=["stop", "continue"], default="stop",
                    help="after the window: stop the program, or let it run on unrecorded")
    ap.add_argument("--record-from", choices=["start", "window"], default="start",
                    help="with --torch-trace and --window: record from the program's start (the default), or from "
                         "the first window's start (the profiler starts there; a program whose window never starts "
                         "writes no trace and says so)")
    ap.add_argument("--cuda-profiler", action="store_true",
                    help="switch cudaProfilerStart/Stop at the window (Nsight Compute with --profile-from-start off); "
                         "without --window, profiling starts with the program")
    ap.add_argument("--host-samples", type=Path, metavar="FILE",
                    help="sample the program's Python stacks from a thread inside it and write them to FILE (JSON) "
                         "when the trace is written and at the end (nsighttc.runtime.host_samples)")
    ap.add_argument("--sample-interval-ms", type=float, default=None, metavar="MS",
                    help="with --host-samples: milliseconds between samples (default 5)")
    ap.add_argument("--step-times", type=Path,
                    help="time every step (host clock and CUDA events at the step boundaries, no profiler) and write "
                         "them here when the program ends (JSON, nsighttc.runtime.step_timer): what `nsighttc try` "
                         "compares")
    ap.add_argument("-m", dest="module", help="run a module (like python -m)")
    ap.add_argument("target", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    ns.drop_before_window = False
    if ns.shapes_rank is not None:
        from .rank_env import current_rank
        if current_rank() != ns.shapes_rank:  # this rank records like the others: no arguments, no operators' trace
            # (but it changes sessions where that rank does: ``drop_before_window``)
            ns.drop_before_window = bool(ns.record_shapes and ns.ops_trace is not None)
            ns.record_shapes, ns.ops_trace, ns.kernel_ops = False, None, None
    if ns.record_shapes and ns.backend_flags is not None:
        from . import backend_flags
        backend_flags.remember(ns.backend_flags)
    if ns.target and ns.target[0] == "--":
        ns.target = ns.target[1:]
    if not ns.module and not ns.target:
        ap.error("nothing to run: give SCRIPT.py [ARGS] or -m MODULE [ARGS]")
    return ns


def _count_or_auto(text: str):
    from .window_sizing import parse_count
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# What the program left behind: its globals (what runpy returns) and, when it ended by an exception (the window's stop
# included), that exception, whose frames hold them too. Freed as soon as the program returned, a DDP model's gloo
# process group was destroyed with the GIL held while one of its worker threads, still releasing the job's last
# collective, waited for the GIL (py-spy: ProcessGroupGloo::~ProcessGroupGloo joining runLoop, which waited in
# gil_scoped_acquire): the rank hung after its program had ended, 4-5 of 6 torchrun jobs of two CPU ranks ending one
# step after destroy_process_group, 0 of 6 plain (torch 2.13, this repository's CPU machine). Kept until the
# interpreter's exit instead, 3 of 16 aborted there ("terminate called without an active exception"). So a rank frees
# them once its trace is written and at least ``SETTLE_S`` after the program's end: 0 of 14 (``_let_go``).
SETTLE_S = 0.2
_PROGRAM_LEFT: list = []


def _let_go(ended_at: float) -> None:
    """A rank of a distributed job, whose process groups own worker threads: free what the program left behind
    (``_PROGRAM_LEFT``), ``SETTLE_S`` after its end at the soonest. A single process keeps it until the interpreter
    exits, as a plain run of the program does (and is not kept waiting), and so does a rank whose groups were all
    NCCL's (``group_backends``: the settle and the collection are gloo's)."""
    from .rank_env import world_size
    if "torch.distributed" not in sys.modules or world_size() <= 1:
        return
    from . import group_backends
    if group_backends.nccl_only():
        say(f"nsighttc.launch: process groups {', '.join(sorted(group_backends.SEEN))}: what the program left "
            "is freed as the interpreter exits")
        return
    import gc
    time.sleep(max(0.0, SETTLE_S - (time.perf_counter() - ended_at)))
    _PROGRAM_LEFT.clear()
    gc.collect()


def _run_target(ns: argparse.Namespace) -> None:
    if ns.module:
        sys.argv = [ns.module] + ns.target
        _PROGRAM_LEFT.append(runpy.run_module(ns.module, run_name="__main__", alter_sys=True))
    else:
        script = ns.target[0]
        sys.argv = list(ns.target)
        sys.path.insert(0, str(Path(script).resolve().parent))
        _PROGRAM_LEFT.append(runpy.run_path(script, run_name="__main__"))


def main(argv: list[str] | None = None) -> int:
    # nsighttc stops a program by SIGINT (the ncu pass once its kernels are profiled): a launcher started from a
    # background job inherits SIGINT ignored (`nohup ... &`: seen when the test suite ran that way, a stopped
    # program slept on), and Python then installs no KeyboardInterrupt handler. Restore it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    ns = _parse(sys.argv[1:] if argv is None else argv)
    if ns.pid_file:
        ns.pid_file.write_text(str(os.getpid()))
    if ns.wait_for and not (ns.gate_at in ("cuda", "context") and
                            gate.at_first_cuda_use(ns.wait_for, after_init=ns.gate_at == "context")):
        try:
            if not gate.wait_at_gate(ns.wait_for):
                return 0
        except KeyboardInterrupt:
            return 130
    from . import annotate

    from .rank_env import world_size
    if world_size() > 1:  # (what ``_let_go`` asks at the end: the groups' backends, seen as the program ends them)
        from . import group_backends
        from .after_import import when_imported
        when_imported("torch.distributed", group_backends.install)
    marks = None
    if ns.step_marks == "on":
        from . import steps
        marks = steps.install_when_torch_imports()
    compiles = (lambda: marks.counts["compiles"]) if marks is not None else (lambda: 0)
    window = ranks = None
    if ns.window or ns.cuda_profiler:
        from . import window as windows
        recorder = windows.CudaProfilerRecorder() if ns.cuda_profiler else windows.Recorder()
        from .window_ranks import RankAgreement
        ranks = RankAgreement() if world_size() > 1 else None  # one window for every rank of a distributed job
        window = gate.WINDOW[0] = windows.Window(warmup=ns.window_warmup, steps=ns.window_steps,
                                          warmup_max=ns.window_warmup_max, steps_max=ns.window_steps_max,
                                          stop=ns.window_end == "stop", recorder=recorder, compiles=compiles,
                                          ranks=ranks)
        window.mark_windows = not ns.cuda_profiler  # (ncu's pass reads no marks: nothing to add to its kernels)
        if not ns.window:
            window.disable()
        elif marks is not None:  # (the hooks end that step at its optimizer step, the window there: ``steps``)
            marks.last_optimizer_step = ns.window_last_optimizer_step
            if ns.window_last_optimizer_step is not None:  # (a known end: the window's length, Window._end_known)
                window.steps_left = marks.optimizer_steps_left
        gate.apply_settings(window)
    timer = None
    if ns.step_times:
        from .step_timer import StepTimer
        timer = StepTimer(compiles=compiles)
    if window is not None or timer is not None:
        from .step_timer import Fanout
        listener = Fanout(timer, window) if (timer is not None and window is not None) else (timer or window)
        annotate._step_listener = listener
        if marks is not None:
            marks.window = listener
    name = ns.range_name or (ns.module or Path(ns.target[0]).name)
    top = annotate.range(name) if ns.annotate != "none" else annotate.nothing()
    remove_hooks = None
    prof = None
    trace_only = None  # torch.profiler keeps no events in memory (launch.trace_only_config)
    said = {"operators": True}  # what the profiler records (runtime.recording), for the trace's line
    sessions = None  # a first run's operators until the window, then the ranges (recording.OperatorsUntilWindow)

    def current():
        return sessions.prof if sessions is not None else prof
    # SIGTERM (our timeout) becomes KeyboardInterrupt, so the profiler still writes what it has.
    def _interrupt(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    code = 0
    interrupted = False  # (KeyboardInterrupt: Ctrl-C, our timeout's SIGTERM, or a window's stop on another thread)
    applied = None
    t_start = time.perf_counter()
    variant_ctx = contextlib.nullcontext()
    # --record-from window: the profiler starts at the first window's start, and the host sampler with it
    from_window = bool(ns.torch_trace) and ns.record_from == "window" and window is not None and window.enabled
    try:
        if ns.variant or ns.applied:
            from . import variants
            applied = variants.Applied()
            variant_ctx = variants.apply(ns.variant, applied, marks)
            if any(v.startswith("fp16-autocast") for v in ns.variant):
                say(f"nsighttc.launch: warning: {variants.FP16_WARNING}")
        if ns.annotate == "modules":
            remove_hooks = annotate.annotate_all_modules()
        lead = False  # (a distributed rank 0 whose operators with their arguments are recorded before its window only)
        if ns.torch_trace:
            import torch
            from . import guest_profiler
            guest_profiler.install()  # (the program's own torch.profiler records nothing beside ours: one session)
            acts = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            trace_only = trace_only_config()

            def make_profiler(record_shapes: bool):
                config = trace_only
                if not record_shapes and os.environ.get(EXTERNAL_CORRELATION_ENV) == "off":
                    config = ranges_config(trace_only is not None) or trace_only
                return guest_profiler.own(torch.profiler.profile(
                    activities=acts, record_shapes=record_shapes, with_stack=False,
                    **({"experimental_config": config} if config is not None else {})))
            # a first run whose window may come: the operators until it (their own trace), then the window's ranges
            windowed = window is not None and window.enabled and not from_window
            ops_until_window = ns.ops_trace is not None and ns.record_shapes and windowed
            # A distributed first run's rank 0 (the one recording operators for the replay) records the ranges only
            # until a few steps before its window, and the operators with their arguments for those steps only
            # (``recording.OPERATOR_STEPS``): not from the program's start, which held every rank
            lead = ops_until_window and not ns.operators and ranks is not None
            prof = make_profiler(ns.record_shapes and not lead)
            # --record-from window: the profiler starts at the first window's start. Not prepared before it either:
            # a prepared profiler (torch.profiler's warm-up state) has CUPTI collect every kernel from then on, and
            # its stop went through all of them (H100, torch 2.11, Lightning's second run: stop 0.74-0.81 s for the
            # last second of the program against 0.62-0.72 s recording it all; reports/window/call9).
            from . import recording
            operators = ns.operators or (ns.record_shapes and not lead)

            def start_recording():
                said["operators"] = recording.start(prof, operators)
            if ops_until_window:
                # In a distributed job the change comes at any window's start, a named phase's too: recording
                # arguments through a window would slow this rank alone and make it the job's straggler.
                sessions = recording.OperatorsUntilWindow(prof, lambda: make_profiler(False), ns.ops_trace, t_start,
                                                          any_window=ranks is not None, trace_for=ns.torch_trace,
                                                          lead=(lambda: make_profiler(True)) if lead else None)
            elif ns.drop_before_window and ranks is not None and windowed:
                # the other ranks of that job: a new session at the same step, the one before it dropped
                # (after the shapes rank's lead: at the same step as its second change, one before the window)
                sessions = recording.OperatorsUntilWindow(prof, lambda: make_profiler(False), None, t_start,
                                                          any_window=True, trace_for=ns.torch_trace,
                                                          after_lead=not ns.operators)
            if not from_window:
                start_recording()
            if window is not None and window.enabled:
                from .window_recorders import TorchRecorder
                window.recorder = recorder = TorchRecorder(
                    lambda: write_trace(current(), ns, t_start, trace_only, recorder, said["operators"], sessions),
                    start=start_recording if from_window else None, sessions=sessions)
        if ns.host_samples is not None:
            from . import host_samples
            # (a recording that starts at the first window: the samples from there on, host_samples.start says why)
            host_samples.start(ns.host_samples, (ns.sample_interval_ms or host_samples.INTERVAL_S * 1e3) / 1e3,
                               facts={"profiler_records": host_samples.what_is_recorded(ns, lead)},
                               hold=from_window)
        with top, variant_ctx:
            if window is not None:
                window.base_depth = len(annotate.open_ranges())
            _run_target(ns)
    except SystemExit as exc:  # the script called sys.exit(): keep its code, and its message as Python shows it
        _PROGRAM_LEFT.append(exc)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):  # sys.exit("error: ...") prints it, exits 1
            try:
                sys.stderr.write(f"{exc.code}\n")
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - a closed stderr: the exit code still says it failed
                pass
    except KeyboardInterrupt as exc:
        _PROGRAM_LEFT.append(exc)
        code = 0 if window is not None and window.stopped else 130
        interrupted = True
    except BaseException as exc:
        _PROGRAM_LEFT.append(exc)
        from .window_end import WindowDone
        if not isinstance(exc, WindowDone):
            import traceback
            traceback.print_exc()
        code = 0 if isinstance(exc, WindowDone) else 1
    finally:
        ended_at = time.perf_counter()
        if window is not None:
            # the unrecorded steps after the window, where the program ended among them; where it ended by itself
            # inside its window, after how many optimizer steps (for its next run: ``--window-last-optimizer-step``)
            window.close(ended=code == 0 and not interrupted and not window.stopped,
                         optimizer_steps=marks.counts["optimizer_steps"] if marks is not None else None)
        if ns.host_samples is not None:
            from . import host_samples
            host_samples.finish()
        if remove_hooks:
            remove_hooks()
        if marks is not None:
            marks.finish()
        if timer is not None:
            try:
                timer.write(ns.step_times)
            except Exception as exc:  # noqa: BLE001 - the program's result stands; say why its times are missing
                say(f"nsighttc.launch: step times not written ({type(exc).__name__}: {exc})")
        if marks is not None and any(marks.counts.values()):
            import json
            say(f"nsighttc.launch: step marks: {json.dumps(marks.record())}")
        if applied is not None and ns.applied:
            import json
            ns.applied.write_text(json.dumps({**applied.record(),
                                              **({"step_marks": marks.record()} if marks is not None else {})},
                                             indent=2))
        if sessions is not None:
            sessions.remove()
        recorder = getattr(window, "recorder", None)
        written = getattr(recorder, "finished", False)  # at the window's end (with unrecorded steps after: follow)
        if prof is not None and (getattr(recorder, "follow", False) or not written):
            from .window_recorders import _synchronize
            _synchronize()  # the program's GPU work is done when it says its exit code (a replay may start then)
            say(f"{EXIT_SAID}{code}")
            if not written:
                write_trace(current(), ns, t_start, trace_only, recorder, said["operators"], sessions)
        _let_go(ended_at)
    return code


if __name__ == "__main__":
    sys.exit(main())
