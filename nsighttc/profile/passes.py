"""The data of a profile run: its options, its passes (one profiler run each, as an argument list) and its
result, and the errors a pass can end with. No behaviour here: ``planning`` makes the passes, ``running``
runs them, ``stopping`` ends them early, ``evidence`` reads what they recorded.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import CollectError, NsighttcError

ENGINES = ("auto", "ncu", "nsys", "torch")
PERM_ERROR = "ERR_NVGPUCTRPERM"
PERM_FIX = ("ncu is not allowed to read the GPU performance counters (ERR_NVGPUCTRPERM). Fix: run as root or "
            "with CAP_SYS_ADMIN (containers: --cap-add SYS_ADMIN), or set `options nvidia "
            "NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/ and reload the driver")


class NoGPU(NsighttcError):
    exit_code = 5


class CounterPermission(CollectError):
    exit_code = 6


@dataclass
class Options:
    engine: str = "auto"
    out: Path | None = None
    range: str | None = None
    annotate: str = "script"
    ncu: str | None = None
    nsys: str | None = None
    timeout: float | None = None
    keep_going: bool = False
    every_launch: bool = False
    all_kernels: bool = False
    timeline: bool = False          # accepted for old command lines: the default run has the timeline
    fast: bool = False              # default run: timeline only, no Nsight Compute pass
    hardware: bool = False          # default run: measure every kernel needing hardware evidence, cache or not
    cache: bool = True              # default run: read and write the evidence cache
    timeline_engine: str = "auto"   # default run: auto | torch | nsys
    overlap: str = "cuda"           # default run: where the ncu pass waits while the timeline runs
    #                                 (cuda|context|start|none: nsighttc.runtime.launch --gate-at)
    counters: str = "fast"          # default run's ncu pass: fast (one replay pass: instruction counts) | full (FLOPs)
    replay: bool = True             # default run: measure kernels by calling their operators again (nsighttc.runtime.replay)
    record_shapes: bool = False     # torch engine: record operator arguments (set by the default run for replay)
    operators: bool = True          # torch engine: record every operator (the default run's timeline: only for
    #                                 the replay; its analysis reads ranges and GPU work: runtime.recording)
    step_marks: bool = True         # the launcher marks steps from global hooks (nsighttc.runtime.steps)
    host_samples: bool = True       # the timeline's launcher samples the host's Python stacks (runtime.host_samples)
    sample_ms: float | None = None  # ... every this many milliseconds (None: runtime.host_samples.INTERVAL_S)
    window: bool = True             # default run: record a window of steady steps (nsighttc.runtime.window)
    warmup: int | None = None       # steps before the window (None: auto)
    steps: int | None = None        # steps in the window (None: auto, ~2 s)
    full_run: bool = False          # let the program finish after the window (recorded: the window only)
    detail: str = "summary"         # report.md: summary (PR-sized, kernels.md/ranges.md beside) | full (one file)
    jobs: int | None = None         # a torchrun job's ranks analysed at once, in processes started while it runs
    #                                 (None: one per GPU, at most half the cores; 1: here, one after the other)
    python: str = field(default_factory=lambda: sys.executable)


@dataclass
class Pass:
    engine: str
    argv: list[str]
    log: Path
    torch_trace: Path | None = None
    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    interrupted: bool = False
    profiled_kernels: int = 0
    on_prof: Callable[[str], None] | None = None  # sees each ==PROF== line (the default run's stop rule)
    on_line: Callable[[str], None] | None = None  # sees every output line first (the default run's trace watch)
    stopped_early: bool = False                    # we interrupted the program on purpose (all kernels measured)
    mode: str = ""                                 # default run: "overlapped" | "after" ncu pass; "timeline"
    perm_lines: list[str] = field(default_factory=list)  # ncu's ERR_NVGPUCTRPERM lines, if any
    ranked: bool = False                           # run once per rank: outputs in rank<R>/ (distribute)
    tool: str | None = None                        # the profiler's executable when argv[0] is the launcher
    stem: str = ""                                 # ncu: the report's file name stem (default: the engine's)
    trace_written_s: float | None = None           # timeline: when its trace was complete (read from then on)
    window: dict | None = None                     # the launcher's window settings (runtime.window), if windowed
    window_events: list = field(default_factory=list)  # what the launcher's window did (start/end/stop per phase)
    recorded_from_s: float | None = None           # timeline recorded from the window: seconds into the program
    records: bool = True                           # False: a plain run (``try``), its steps timed, nothing recorded
    ops_trace: Path | None = None                  # timeline: where a first run's operators until the window go
    operators_until_s: float | None = None         # ... and when they were written (None: one recording, whole)
    ranks_recorded: dict = field(default_factory=dict)  # distributed timeline: what each rank's launcher recorded
    ranks_left_running_s: float | None = None      # ... stopped: a rank still ran this long after another's stop
    own_profiler: str | None = None                # the program's line whose torch.profiler was held off (guest_profiler)
    frontends_paused_s: float | None = None        # how long the program at its gate paused the frontends above it

    @property
    def stopped_after_window(self) -> bool:
        """The launcher stopped the program itself, at the step that ended its window."""
        # (not a window that ended at the step where the program's last run ended: the program ends there by itself;
        # nor one whose program ended by itself during the steps timed unrecorded after it, the ``ended`` event: a
        # program whose end is known, ``runtime.window.Window._end_known``; two H200s, call 31 of
        # reports/profile_overhead/torchrun_cost/2026-11-27: "nsighttc stopped the program" said of a cached DDP run
        # that ended by itself after its 19 optimizer steps)
        if self.ended_by_itself:
            return False
        return any(e.get("event") == "stop" or (e.get("event") == "end" and e.get("stop") and not e.get("program_end"))
                   for e in self.window_events)

    @property
    def ended_by_itself(self) -> bool:
        """The program ended by itself inside its window or during the steps timed unrecorded after it (the window's
        ``ended`` event), not stopped by the launcher."""
        return any(e.get("event") == "ended" for e in self.window_events)

    @property
    def exe(self) -> str:
        """The profiler executable (ncu/nsys) of this pass, behind a distributed launcher or not."""
        return self.tool or self.argv[0]


@dataclass
class Result:
    run_dir: Path
    verdict: object | None
    exit_code: int
    engines: list[str]
    notes: list[str]
    interrupted: bool = False
    timed_out: bool = False


OPS_TRACE_FILE = "torch_ops_trace.json"  # a first run's operators until its window (runtime.recording)
# The launcher's host stack samples (runtime.host_samples), beside the timeline's recording, and the stacks of the
# samples taken while the GPU idled, collapsed (speedscope, flame graphs)
HOST_SAMPLES_FILE = "host_samples.json"
KERNEL_OPS_FILE = "kernel_ops.json"  # the timeline launcher's early kernel list (nsighttc.runtime.kernel_ops)
BACKEND_FLAGS_FILE = "backend_flags.json"  # the program's kernel-choosing switches (nsighttc.runtime.backend_flags)


# What a program prints on its way out that is not its own words: the launcher's lines, the profiler's USDT probes,
# PyTorch's [W...] warnings and warnings.warn's echo line.
_NOT_THE_PROGRAM = ("nsighttc.launch:", "USDT:", "[W", "warnings.warn", "nsighttc.replay:")


def last_words(*logs: Path) -> str | None:
    """The program's last line of its own (its ``sys.exit("...")`` message, its exception's last line, the last
    thing it printed), from the first of ``logs`` that holds one (the stderr log first)."""
    for log in logs:
        try:
            lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        lines = [ln for ln in lines if not ln.startswith(_NOT_THE_PROGRAM)]
        if lines:
            return lines[-1][:300]
    return None


def how_it_ended(returncode: int | None, log: Path) -> str:
    """One line for a program that failed: its exit code or the signal that killed it, and its last words (read from
    ``log``'s ``.stderr.log`` beside it, then ``log``)."""
    if returncode is not None and returncode < 0:
        how = f"killed by signal {-returncode} ({signal_name(-returncode)})"
    else:
        how = f"exit code {returncode}"
    said = last_words(log.with_suffix(".stderr.log"), log)
    return f"{how}: {said}" if said else how


def signal_name(n: int) -> str:
    import signal as _signal
    try:
        return _signal.Signals(n).name
    except ValueError:
        return "unknown signal"
