"""Runtime calls that launch, copy, wait for or order nothing, left out of torch.profiler's recording.

CUPTI records every CUDA runtime call while torch.profiler runs (``ProfilerActivity.CUDA``), and torch.profiler's
stop then turns every record into an event. Most of a PyTorch training step's calls do no GPU work: per step of DDP
ResNet-50 AMP, ~430 ``cudaGetErrorString`` (cuDNN's and c10's checks), ``cudaPeekAtLastError``,
``cudaFuncGetAttributes``/``cudaFuncSetAttribute`` (cuDNN), the capture checks, ~2,000 of a rank's ~3,000 records
(two H200s, ``tests/fixtures/ddp/default_first_run_lead``). The analysis reads launches, copies, memsets, allocations
and the calls that wait (``analysis.timeline.base.SYNC_CALLS``), never these. A recent CUPTI (CUDA 13's has it)
turns off the records of single runtime APIs (``cuptiActivityEnableRuntimeApi``): right after a session starts
(``runtime.recording.start``), the launcher turns off those in ``QUIET`` in the CUPTI torch loaded.

Measured (one H200, torch 2.11 + CUDA 13, ResNet-50 AMP at batch 16 under torch.profiler recording the ranges only,
30 steps, two rounds; ``benchmarks/probes/gpu_cupti_records_probe.py``, reports/profile_overhead/torchrun_cost call
25): runtime records 51,119-52,109 -> 22,343-23,036, the profiler's stop 0.55-0.65 s -> 0.28-0.30 s, the trace's
writing 0.33-0.49 s -> 0.22-0.28 s, the same kernels (20,592-20,691); the steps were slowed as much either way
(31.3-32.6 ms recorded against 31.0-35.2 ms, 22-25 ms plain: CUPTI's callback on each call stays).

Whole activity kinds were probed the same way (call 30: each turned off after the start, ``no:KIND`` modes, two rounds
each on one H200): with DRIVER, SYNCHRONIZATION, OVERHEAD, RUNTIME or EXTERNAL_CORRELATION off, the recorded steps
were 1.24-2.08x the plain ones against 1.34-1.64x with all on: within the host's own noise (its plain steps moved
14-25 ms between runs), so none is left out for speed. Without RUNTIME the kernels lose their launches and half the
ranges on the GPU (``gpu_user_annotation`` 66 -> 33). Without CONCURRENT_KERNEL the stop fell to 0.06-0.08 s from
0.26-0.46 s: the kernels' records are most of the stop, and they are what the analysis reads. So what a window costs
goes with how many steps it records (``runtime.window.Window._end_known``).

The ids are CUPTI's ``CUpti_runtime_api_trace_cbid`` values (``cupti_runtime_cbid.h``: an enum of explicit, never
renumbered values; read from CUDA 13's). Standard library only (ctypes): this runs inside the user's program. Where
no CUPTI is loaded, or it lacks the call (an older one), nothing changes; ``QUIET_ENV=off`` turns it off.
"""
from __future__ import annotations

import ctypes
import os

QUIET_ENV = "NSIGHTTC_QUIET_RUNTIME"

# name -> CUPTI runtime callback ids (several: an API's versions, its per-thread-stream forms)
QUIET = {
    "cudaDriverGetVersion": (1,), "cudaRuntimeGetVersion": (2,), "cudaGetDeviceCount": (3,),
    "cudaGetLastError": (10,), "cudaPeekAtLastError": (11,), "cudaGetErrorString": (12,),
    "cudaFuncGetAttributes": (15,), "cudaGetDevice": (17,), "cudaPointerGetAttributes": (151,),
    "cudaDeviceGetAttribute": (200,), "cudaOccupancyMaxActiveBlocksPerMultiprocessor": (207, 210),
    "cudaGetErrorName": (209,), "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": (251,),
    "cudaFuncSetAttribute": (273,), "cudaStreamIsCapturing": (317,), "cudaStreamGetCaptureInfo": (324, 409, 410, 461),
    "cudaThreadExchangeStreamCaptureMode": (327,), "cudaGetFuncBySymbol": (336,), "cudaGetDriverEntryPoint": (406,),
    "cudaGetDriverEntryPointByVersion": (468,),
}


def loaded_cupti(maps: str | None = None) -> str | None:
    """The path of the CUPTI library this process loaded (``/proc/self/maps``), or None."""
    if maps is None:
        try:
            with open("/proc/self/maps") as fh:
                maps = fh.read()
        except OSError:
            return None
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if path.startswith("/") and os.path.basename(path).startswith("libcupti.so"):
            return path
    return None


def quiet(open_lib=None, path: str | None = None) -> str:
    """Turn off CUPTI's records of the ``QUIET`` runtime APIs in the CUPTI already loaded (a torch.profiler session
    has just started); what was done, for the launcher's line ("" where nothing was to do). Never raises: the
    recording goes on as it was whatever happens here. ``open_lib`` and ``path``: how a loaded library is opened, and
    which (tests; else ``loaded_cupti``)."""
    if os.environ.get(QUIET_ENV, "").lower() in ("0", "off", "no"):
        return ""
    path = path or loaded_cupti()
    if path is None:
        return ""
    try:
        lib = (open_lib or _open_loaded)(path)
        enable = getattr(lib, "cuptiActivityEnableRuntimeApi", None)
        if enable is None:
            return "runtime calls all recorded (this CUPTI cannot leave single ones out)"
        enable.argtypes, enable.restype = [ctypes.c_uint32, ctypes.c_uint8], ctypes.c_int
        ids = [i for ids in QUIET.values() for i in ids]
        failed = sum(1 for i in ids if enable(i, 0) != 0)
    except (OSError, AttributeError, TypeError, ValueError) as exc:
        return f"runtime calls all recorded ({type(exc).__name__}: {exc})"
    return f"{len(QUIET)} kinds of runtime call that do no GPU work not recorded" + (
        f" ({failed} of {len(ids)} ids refused)" if failed else "")


def _open_loaded(path: str):
    """The library at ``path`` as this process already loaded it (never a second copy: ``RTLD_NOLOAD``)."""
    return ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | getattr(os, "RTLD_LAZY", 0))
