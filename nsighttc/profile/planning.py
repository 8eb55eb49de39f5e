"""Planning the passes: which profiler runs what, as argument lists (``collect.engines`` builds them).

- the explicit engines (``--engine ncu|nsys|torch``): one pass of that tool (``plan``);
- the default run's timeline pass: torch.profiler for Python programs with torch, else nsys (``timeline_pass``);
- the default run's Nsight Compute pass on the program: beside the timeline behind the launcher's gate, or
  after it filtered to the kernels still missing (``hardware_pass``); distributed targets on rank 0 only.
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

from .. import ncu_metrics
from ..collect import engines, process, tools
from ..errors import UsageError
from .distributed import distribute
from .passes import BACKEND_FLAGS_FILE, HOST_SAMPLES_FILE, KERNEL_OPS_FILE, OPS_TRACE_FILE, Options, Pass
from .target import Target


def plan(opts: Options, target: Target, cc: str | None, run_dir: Path,
         window: dict | None = None, ops_trace: Path | None = None) -> tuple[list[Pass], list[str]]:
    """The pass of an explicit engine (``--engine ncu|nsys|torch``), as an argument list. Pure except for
    looking tools up. The default run (``auto``) is planned step by step by ``profile.default``."""
    notes: list[str] = []
    engine = opts.engine
    if engine == "auto":
        raise ValueError("the default run is planned by profile.default.run_default")
    if engine == "torch" and not target.python_program:
        raise UsageError("--engine torch runs Python programs only (SCRIPT.py or -- python -m MODULE)")

    def inner(torch_trace: Path | None = None) -> list[str]:
        if not target.python_program:
            return list(target.argv)
        # the host's stacks for the timelines (not under ncu: its replays would be what they sample)
        samples = run_dir / HOST_SAMPLES_FILE if opts.host_samples and engine in ("nsys", "torch") else None
        return engines.launcher_argv(target.argv, module=target.module, annotate=opts.annotate,
                                     step_marks=opts.step_marks, host_samples=samples, sample_ms=opts.sample_ms,
                                     torch_trace=torch_trace, python=opts.python,
                                     record_shapes=opts.record_shapes and torch_trace is not None,
                                     operators=opts.operators,
                                     kernel_ops=run_dir / KERNEL_OPS_FILE, window=window,
                                     ops_trace=ops_trace, shapes_rank=SHAPES_RANK if target.distributed else None,
                                     backend_flags=run_dir / BACKEND_FLAGS_FILE)

    if engine == "ncu":
        ncu = tools.find("ncu", opts.ncu)  # raises ToolNotFound naming where we looked
        p = Pass("ncu", engines.ncu_argv(ncu, run_dir / "ncu", inner(), cc, nvtx_range=opts.range,
                                         every_launch=opts.every_launch, all_kernels=opts.all_kernels),
                 run_dir / "ncu.log")
        if target.distributed:
            notes.append("distributed run: Nsight Compute profiles rank 0 (every rank runs the same kernels)")
        return [distribute(p, target, run_dir, len(inner()), only_ranks="0")], notes
    if engine == "nsys":
        nsys = tools.find("nsys", opts.nsys)
        p = Pass("nsys", engines.nsys_argv(nsys, run_dir / "nsys", inner(), opts.range), run_dir / "nsys.log")
        return [distribute(p, target, run_dir, len(inner()))], notes
    trace = run_dir / "torch_trace.json"
    p = Pass("torch", inner(trace), run_dir / "torch.log", torch_trace=trace)
    return [distribute(p, target, run_dir, len(p.argv))], notes


# The rank whose operators the replay reads in a distributed job (its paths: ``rank_file``).
SHAPES_RANK = 0


def rank_file(run_dir: Path, name: str, target: Target) -> Path:
    """Where a file the default run reads from the timeline launcher is written: the run directory, or for a
    distributed job the directory of the rank that records operators (``SHAPES_RANK``)."""
    return run_dir / f"rank{SHAPES_RANK}" / name if target.distributed else run_dir / name


def has_torch(python: str) -> bool:
    if os.path.realpath(python) == os.path.realpath(sys.executable):  # our own interpreter: no process start
        import importlib.util
        return importlib.util.find_spec("torch") is not None
    rc, _, _ = process.capture([python, "-c", "import importlib.util, sys; "
                                "sys.exit(0 if importlib.util.find_spec('torch') else 1)"], timeout=60)
    return rc == 0


def timeline_pass(opts: Options, target: Target, run_dir: Path, from_window: bool = False,
                  warmup_max: int | None = None, steps_max: int | None = None,
                  last_optimizer_step: int | None = None) -> Pass | None:
    """torch.profiler for Python programs with torch (the cheapest timeline), else nsys, else None.
    ``from_window``: torch.profiler records from the window's start; ``warmup_max``: the last run's warm-up, where
    this one's ends at the latest; ``steps_max``: the last run's window, the most this one holds;
    ``last_optimizer_step``: after how many optimizer steps the last run's program ended inside its window
    (``profile.window.timeline_window``)."""
    choice = opts.timeline_engine
    nsys = tools.find_or_none("nsys", opts.nsys) if choice in ("auto", "nsys") else None
    if choice == "nsys" and nsys is None:
        tools.find("nsys", opts.nsys)  # raises, naming where we looked
    # Distributed runs: torch.profiler recording the ranges only (runtime.recording) where nothing reads operators,
    # nsys where it would record every operator (--no-step-marks). Recording every operator slowed each rank's host
    # unevenly (DDP ResNet-50 AMP on 2 H200s, 30 ms straggler: plain 60.2 ms/step, nsys 69 ms, torch.profiler with
    # operators 86.8 ms; reports/ddp), and uneven host slow-downs are what the straggler question measures. With the
    # ranges only, on 2 H200s (reports/window/call43, benchmarks/probes/gpu_ddp_engine_probe.sh): the same straggler
    # and cause under both (rank 1, host busy +30.4 ms against +30.2 ms under nsys, for its 30 ms sleep), steady
    # steps 73.3 ms against 79.7 ms under nsys (65.9 ms plain), the whole job 28.05 s against 34.74 s (27.16 s plain):
    # nsys also finishes and exports each rank's report after the program.
    # Operators are recorded only where something reads them: the replay (their arguments), and, without the step
    # hooks (--no-step-marks), torch.compile's compilation spans, which are cpu_op events (parse.marks); the
    # analysis reads ranges and GPU work, and every operator recorded lengthens the profiler's stop and the trace
    # (runtime.recording).
    # A distributed job's replay reads rank 0's operators (every rank launches the same kernels): the other ranks
    # record as if no replay were planned (the launcher's --shapes-rank), so it is their recording that decides.
    operators = (opts.record_shapes and not target.distributed) or not opts.step_marks
    prefer_nsys = target.distributed and choice == "auto" and nsys is not None and operators
    use_torch = target.python_program and choice in ("auto", "torch") and not prefer_nsys and \
        (choice == "torch" or nsys is None or has_torch(opts.python))
    if choice == "torch" and not target.python_program:
        raise UsageError("--timeline-engine torch runs Python programs only (SCRIPT.py or -- python -m MODULE)")
    engine = "torch" if use_torch else "nsys" if nsys is not None else None
    if engine is None:
        return None
    from .window import timeline_window
    window = timeline_window(opts, target.python_program, from_window=from_window and engine == "torch",
                             warmup_max=warmup_max, steps_max=steps_max, last_optimizer_step=last_optimizer_step)
    # With the replay's arguments and a window: operators until the window, the window with the ranges only
    # (runtime.recording.OperatorsUntilWindow); the replay reads the first trace, the analysis the second.
    ops_trace = run_dir / OPS_TRACE_FILE if engine == "torch" and opts.record_shapes and window is not None \
        and window.get("record_from") != "window" else None
    p = plan(replace(opts, engine=engine, operators=operators), target, None, run_dir, window, ops_trace)[0][0]
    p.mode = "timeline"
    p.window = window
    p.ops_trace = ops_trace
    return p




def hardware_pass(ncu, opts: Options, target: Target, run_dir: Path, cc: str | None, mode: str, pid_file: Path,
                  regex: str | None = None, window: dict | None = None, **gating) -> Pass:
    """The default run's Nsight Compute pass on the program: beside the timeline behind the gate (mode
    "overlapped", ``gating``: the launcher's ``gate``/``gate_at``), or after it, filtered to exactly the missing
    kernels (mode "after", ``regex``). ``pid_file``: where the launcher says which process to interrupt once
    the kernels were profiled. ``window``: profile one steady step per phase only (``profile.window.ncu_window``).
    Distributed: on rank 0 only."""
    window = window if target.python_program else None
    inner = engines.launcher_argv(target.argv, module=target.module, annotate=opts.annotate, python=opts.python,
                                  step_marks=opts.step_marks, window=window,
                                  pid_file=pid_file, **gating) if target.python_program else list(target.argv)
    metrics = ncu_metrics.one_pass_metrics_for_cc(cc) if opts.counters == "fast" else None
    p = Pass("ncu", engines.ncu_argv(ncu, run_dir / "ncu", inner, cc, nvtx_range=opts.range,
                                     every_launch=opts.every_launch, all_kernels=opts.all_kernels,
                                     kernel_regex=regex, metrics=metrics, nvtx=False, from_start=window is None),
             run_dir / "ncu.log", mode=mode, window=window)
    return distribute(p, target, run_dir, len(inner), only_ranks="0")
