"""How the launcher ends a torch.profiler recording: the profiler stopped, the trace written, and the lines that tell
the default run so (``TRACE_WRITTEN``, ``NOTHING_RECORDED``). Split from ``runtime.launch``, which runs the program."""
from __future__ import annotations

import argparse
import gc
import os
import time

from . import trace_writer
from .lines import say

# TRACE_WRITTEN: the line the launcher prints once the torch.profiler trace is complete on disk. The default run reads
# the trace from that moment: the process still has to exit, and a CUDA program's exit (interpreter shutdown, CUDA
# and CUPTI teardown) took ResNet-50 AMP 1.6-1.9 s under the profiler on H100 (1.2 s in a plain run;
# benchmarks/probes/gpu_launcher_tail_probe.py, reports/profile_overhead/launcher_tail.txt).
from ..record_format import NOTHING_RECORDED, TRACE_WRITTEN


def trace_only_config():
    """torch.profiler's ``trace_only`` setting where this torch has it (``_ExperimentalConfig(trace_only=True)``,
    torch 2.13; not in 2.11), else None. The launcher only exports the trace, and with it the profiler's stop
    skips turning every recorded event into Python-visible events (``materializeOpEvents``, the event tree);
    the trace keeps the same fields, operator arguments included (torch's ``addTraceMetadata``). Measured on
    this repository's 2-core CPU machine, torch 2.13, 480,000 operator events with ``record_shapes``: stop
    3.4-5.7 s -> 2.9-3.2 s, and no kernel list walk (``nsighttc.runtime.kernel_ops`` needs those events: 2.2-3.5 s
    there), so the trace is complete 3.9-4.1 s after the program instead of 6.4-8.6 s
    (``benchmarks/probes/bench_profiler_stop.py``). Not measured on a GPU: the lent machine has torch 2.11."""
    try:
        from torch._C._profiler import _ExperimentalConfig
        return _ExperimentalConfig(trace_only=True)
    except (ImportError, TypeError, AttributeError):  # an older torch: the ordinary stop
        return None


# An experiment's switch (benchmarks/probes/gpu_torchrun_cost_probe.py, variant cached_noext): a session recording the
# ranges only without kineto's external correlation (``disable_external_correlation``: CUPTI then keeps no record
# tying each runtime call to the innermost range; the timeline's parse reads neither, only the operators' trace does).
# Measured, not adopted: two H200s, DDP ResNet-50 cached runs, 12.41 s against 12.17 s with it (4 rounds each, plain
# 10.40 s; reports/profile_overhead/torchrun_cost call 13).
EXTERNAL_CORRELATION_ENV = "NSIGHTTC_EXTERNAL_CORRELATION"


def ranges_config(trace_only: bool):
    """``_ExperimentalConfig`` for a ranges-only session without external correlation, or None where this torch has no
    such setting."""
    try:
        from torch._C._profiler import _ExperimentalConfig
        return _ExperimentalConfig(disable_external_correlation=True, **({"trace_only": True} if trace_only else {}))
    except (ImportError, TypeError, AttributeError):
        return None


# CUPTI stays attached to the process after torch.profiler stops unless kineto finalizes it (``TEARDOWN_CUPTI=1``, read
# by kineto as the profiler stops; off by default in the kineto of torch 2.11): PyTorch reported training 10-20%
# slower after the profiler had stopped (pytorch/pytorch#144455, #146604). Kineto turned it off where CUDA graphs were
# used because re-initialising CUPTI after a teardown crashed before CUDA 12.6 (inductor still sets it to "0" for
# its cudagraphs), so a value already set is kept, and nothing is set under an older CUDA. Only where the program runs
# on after this stop and no later session starts in this process (the window's unrecorded steps, ``--full-run``): a
# session started after a teardown waits for it (kineto's ``ensureReadyForTrace``, up to 10 s, then records no GPU
# activity).
#
# Never at the program's end in a rank of a distributed job: kineto tears CUPTI down from a thread that waits for the
# program's next CUDA call (pytorch/kineto#1554), and a program at its end makes none on its main thread; NCCL's own
# threads still do. Two H200s, torch 2.11, DDP ResNet-50 with ``TEARDOWN_CUPTI=1`` in its environment: both ranks
# wrote their traces and said their exit code, then hung until the call's limit stopped them 540 s later
# (benchmarks/probes/gpu_torchrun_cost_probe.py, reports/profile_overhead/torchrun_cost). The same jobs released
# CUPTI after a window they outlived (its unrecorded steps then call CUDA) and ended as usual, 4 of 4. So a rank's
# stop at its program's end sets ``TEARDOWN_CUPTI=0`` where the environment asked for a teardown
# (``keep_cupti_at_the_end``).
CUPTI_TEARDOWN_ENV = "TEARDOWN_CUPTI"
CUPTI_TEARDOWN_MIN_CUDA = (12, 6)


def release_cupti_after_stop() -> str:
    """Ask kineto to detach CUPTI when the profiler stops now (``CUPTI_TEARDOWN_ENV``); what was decided, for the log."""
    if os.environ.get(CUPTI_TEARDOWN_ENV) is not None:
        return f"{CUPTI_TEARDOWN_ENV}={os.environ[CUPTI_TEARDOWN_ENV]} kept"
    try:
        import torch
        version = tuple(int(x) for x in (torch.version.cuda or "0.0").split(".")[:2])
    except Exception:  # noqa: BLE001 - no torch, or a CUDA version it cannot tell: CUPTI is left as it is
        return ""
    if version == (0, 0):  # a CPU build: there is no CUPTI to release
        return ""
    if version < CUPTI_TEARDOWN_MIN_CUDA:
        return f"CUDA {version[0]}.{version[1]}: CUPTI left attached"
    os.environ[CUPTI_TEARDOWN_ENV] = "1"
    return "CUPTI released"


def keep_cupti_at_the_end() -> str:
    """A distributed job's rank, its profiler stopped at its program's end: no CUPTI teardown, even where its
    environment asks for one (the comment above ``CUPTI_TEARDOWN_ENV`` says why); what was decided, for the log."""
    from .rank_env import world_size
    if os.environ.get(CUPTI_TEARDOWN_ENV) != "1" or world_size() <= 1:
        return ""
    os.environ[CUPTI_TEARDOWN_ENV] = "0"
    return (f"{CUPTI_TEARDOWN_ENV}=1 set to 0 for this stop: a CUPTI teardown at a rank's end hung a DDP job's exit "
            "(H200, torch 2.11)")


def add_rank_metadata(prof) -> None:
    """torch.profiler writes ``distributedInfo`` only when torch.distributed is initialised as the trace
    *starts*; ours starts before the program calls ``init_process_group``. Write what the distributed
    launcher told this process (torchrun's RANK/WORLD_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS), so every
    rank's trace says which rank it is (``parse.ranks``)."""
    import json
    from .rank_env import RANK_VARIABLES, current_rank, world_size
    if not any(os.environ.get(v, "").strip().isdigit() for v in RANK_VARIABLES):
        return
    info = {"rank": current_rank(), "world_size": world_size(), "source": "environment (nsighttc.runtime.launch)"}
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            info["backend"] = dist.get_backend()
    except Exception:
        pass
    try:
        prof.add_metadata_json("distributedInfo", json.dumps(info))
    except Exception:  # an older torch without add_metadata_json: the rank<N>/ directory still tells
        pass




def write_trace(prof, ns: argparse.Namespace, t_start: float, trace_only, recorder=None,
                 operators: bool = True, sessions=None) -> None:
    """Stop torch.profiler and write its trace (at the program's end, or at the window's end with
    ``--window-end continue``: the program then runs on unrecorded). With ``--record-from window`` and no window
    started, nothing was recorded: no trace is written, and the line ``NOTHING_RECORDED`` says why. ``sessions``:
    a first run whose window was recorded with the ranges only after the operators (``--ops-trace``)."""
    from .window_recorders import _synchronize
    _synchronize()  # every kernel launched is in the recording
    switched = sessions is not None and sessions.state == "ranges"
    if sessions is not None and sessions.state == "failed":  # the operators' trace is all there is
        if sessions.written:
            os.replace(ns.ops_trace, ns.torch_trace)
            say(f"{TRACE_WRITTEN}{ns.torch_trace} (program {time.perf_counter() - t_start:.2f} s, the operators "
                  "until the window only)")
        else:
            say(f"{NOTHING_RECORDED}the recording failed at the window's start")
        return
    # (a session that changed records from its change: the window's ranges, or a rank 0's operators after its lead)
    changed = sessions is not None and sessions.switched_at is not None
    started_at = sessions.switched_at if changed else getattr(recorder, "started_at", 0.0)
    operators = sessions.state == "operators" if changed and not switched else operators and not switched
    if started_at is None:  # never started: nothing was recorded, nothing is written
        say(f"{NOTHING_RECORDED}the program ended before any window of steady steps started "
              f"(--record-from window; program {time.perf_counter() - t_start:.2f} s)")
        return
    add_rank_metadata(prof)
    if operators and ns.record_shapes:  # the switches the operators were recorded under, for the replay
        from . import backend_flags
        backend_flags.write_once()
    runs_on = bool(getattr(recorder, "finished", False))  # stopped at the window's end: the program goes on
    # (a window that ended at the step where the program's last run ended: its end follows, as at the program's end)
    ends = not runs_on or getattr(recorder, "at_program_end", False)
    released = keep_cupti_at_the_end() if ends else release_cupti_after_stop()
    t_end = time.perf_counter()
    prof.__exit__(None, None, None)
    t_stop = time.perf_counter()
    if runs_on:
        # The stop made the recording's Python objects (a million and more for a long window); the program's next
        # steps would have the collector walk them again and again: set aside until the trace is written.
        gc.freeze()
    if switched:
        pass  # the kernels and their operators are in the operators' trace (--ops-trace), read from there
    elif ns.kernel_ops is not None and ns.record_shapes and operators and trace_only is None:
        # (not from a session that recorded the ranges only: a rank 0 whose program ended before its lead's change)
        from . import kernel_ops
        say(f"nsighttc.launch: {kernel_ops.write(prof, ns.kernel_ops)}")
    elif ns.kernel_ops is not None and ns.record_shapes and operators:
        say("nsighttc.launch: no kernel list (trace_only: the profiler kept no events in memory; the "
              "replay starts from the trace)")
    t_list = time.perf_counter()

    def export() -> None:
        t_export = time.perf_counter()
        from . import host_samples
        host_samples.flush()  # before the line that lets the analysis start (here: the sampler's lock is this process')
        since = f", recorded from {started_at - t_start:.2f} s" if started_at else ""
        if started_at and getattr(recorder, "start_seconds", None) is not None:
            since += f" (profiler start {recorder.start_seconds:.2f} s)"
        since += "" if operators else ", ranges only"
        after = f"; written after {t_export - t_list:.2f} s of unrecorded steps" if t_export - t_list > 0.01 else ""
        after += f"; {released}" if released else ""

        def write() -> str:
            t_write = time.perf_counter()
            prof.export_chrome_trace(str(ns.torch_trace))
            return (f"{TRACE_WRITTEN}{ns.torch_trace} (program {t_end - t_start:.2f} s{since}, profiler stop "
                    f"{t_stop - t_end:.2f} s, kernel list {t_list - t_stop:.2f} s, trace written in "
                    f"{time.perf_counter() - t_write:.2f} s{after})")
        try:
            ns.torch_trace.parent.mkdir(parents=True, exist_ok=True)
            # by a forked copy of this process: the program's exit (or its unrecorded steps) goes on meanwhile
            trace_writer.apart(ns.torch_trace, write, trace_writer.limit_for(t_stop - t_end))
        finally:
            if runs_on:  # (the recording's objects collectable again, whether the trace could be written or not)
                gc.unfreeze()
    if getattr(recorder, "follow", False):
        # The program runs on a few steps unrecorded, timed (runtime.unrecorded): the trace is written after them, so
        # that nothing reads it (the profile run parses as it is written) while they run. Read beside them, on an
        # H100, a generate() loop's unrecorded decode calls took 28-30 ms against 13-14 ms in plain runs and in the
        # runs that were not (reports/host_frames call_gen51).
        recorder.deferred = export
        return
    export()
