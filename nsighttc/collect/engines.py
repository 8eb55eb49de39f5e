"""Command lines of the engines, as argument lists (never shell strings).

Each builder is a pure function so tests can check exactly what we would run:
- torch: the launcher under torch.profiler (CPU + CUDA activities), Kineto trace out;
- nsys: ``nsys profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --cuda-graph-trace=node`` then
  ``nsys export --type sqlite``. Graph nodes are traced one by one so graph kernels get names and Tensor
  Core verdicts (nsys's default, ``graph``, records whole executions only); measured on H100 with
  wrappers/multi_phase.py (60 graph launches of 7 kernels): node vs graph within run-to-run noise
  (reports/multi_phase/README.md);
- ncu: Tensor Core metrics chosen per compute capability, ``--nvtx``, ``--clock-control none`` (the clocks
  are not ours to lock), ``--cache-control none`` (counts do not depend on cache state), each distinct
  launch configuration profiled once (``--filter-mode per-launch-config --launch-count 1``; ncu keys a
  configuration on the function's base name and launch shape, so two ``cutlass::Kernel2<...>`` instances with
  the same grid and block count as one: benchmarks/probes/gpu_replay_filter_probe.sh), and kernel
  families whose answer is settled (elementwise, pooling, layout copies) left out: a verdict needs one
  sample of each matrix kernel, and replaying every launch is what makes ncu cost 3-17x a plain run.
  Measured on H100 with VGG16 fp16 batch 1: 50 -> 10 profiled kernels, 24.6 s -> 18 s (plain 12 s).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .. import ncu_metrics


def launcher_argv(target: list[str], *, module: bool = False, annotate: str = "script",
                  torch_trace: Path | None = None, python: str | None = None, range_name: str | None = None,
                  gate: Path | None = None, pid_file: Path | None = None, gate_at: str = "start",
                  variants: list[str] | None = None, applied: Path | None = None,
                  record_shapes: bool = False, kernel_ops: Path | None = None, step_marks: bool = True,
                  window: dict | None = None, operators: bool = True, ops_trace: Path | None = None,
                  shapes_rank: int | None = None, host_samples: Path | None = None,
                  sample_ms: float | None = None, backend_flags: Path | None = None) -> list[str]:
    """``kernel_ops`` (with ``record_shapes``): where the launcher writes the early kernel list
    (``nsighttc.runtime.kernel_ops``); ``backend_flags`` (with ``record_shapes``): the program's kernel-choosing
    switches, for the replay (``nsighttc.runtime.backend_flags``). ``ops_trace`` (with ``record_shapes`` and a ``window``): the operators with
    their arguments are recorded until the window and written there, the window with the ranges only
    (``nsighttc.runtime.recording.OperatorsUntilWindow``). ``operators=False``: torch.profiler records the ranges, CUDA calls and GPU
    activities only (``nsighttc.runtime.recording``; operators are recorded anyway with ``record_shapes``).
    ``step_marks``: the step hooks (``nsighttc.runtime.steps``), on by default.
    ``window``: record a window of steady steps (``nsighttc.runtime.window``): ``warmup``/``steps`` (None: auto),
    ``end`` (stop|continue), ``cuda_profiler`` (switch cudaProfilerStart/Stop: ncu --profile-from-start off),
    ``record_from`` ("window": torch.profiler records from the first window's start, ``--record-from``),
    ``warmup_max`` (an automatic warm-up ends after at most so many steps: ``--window-warmup-max``), ``steps_max``
    (an automatic window holds at most so many: ``--window-steps-max``), ``last_optimizer_step`` (the window ends with
    the step of that optimizer step, after which the program's last run ended: ``--window-last-optimizer-step``).
    ``shapes_rank`` (a distributed job, with ``record_shapes``): only that rank records arguments; the others record
    as ``operators`` says. ``host_samples``: where the launcher writes the host's Python stack samples
    (``nsighttc.runtime.host_samples``; every ``sample_ms``)."""
    argv = [python or sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", annotate]
    if not step_marks:
        argv += ["--step-marks", "off"]
    if window is not None:
        argv += ["--window", "--window-warmup", _auto(window.get("warmup")), "--window-steps",
                 _auto(window.get("steps")), "--window-end", window.get("end", "stop")]
        if window.get("cuda_profiler"):
            argv += ["--cuda-profiler"]
        if window.get("record_from") == "window":
            argv += ["--record-from", "window"]
        if window.get("warmup_max") is not None:
            argv += ["--window-warmup-max", str(int(window["warmup_max"]))]
        if window.get("steps_max") is not None:
            argv += ["--window-steps-max", str(int(window["steps_max"]))]
        if window.get("last_optimizer_step") is not None:
            argv += ["--window-last-optimizer-step", str(int(window["last_optimizer_step"]))]
    if host_samples is not None:
        argv += ["--host-samples", str(host_samples)]
        if sample_ms is not None:
            argv += ["--sample-interval-ms", f"{float(sample_ms):g}"]
    for v in variants or []:
        argv += ["--variant", v]
    if applied is not None:
        argv += ["--applied", str(applied)]
    if gate is not None:
        argv += ["--wait-for", str(gate), "--gate-at", gate_at]
    if pid_file is not None:
        argv += ["--pid-file", str(pid_file)]
    if range_name:
        argv += ["--range-name", range_name]
    if torch_trace is not None:
        argv += ["--torch-trace", str(torch_trace)] + (["--record-shapes"] if record_shapes else [])
        if record_shapes and shapes_rank is not None:
            argv += ["--shapes-rank", str(int(shapes_rank))]
        if record_shapes and kernel_ops is not None:
            argv += ["--kernel-ops", str(kernel_ops)]
        if record_shapes and backend_flags is not None:
            argv += ["--backend-flags", str(backend_flags)]
        if record_shapes and ops_trace is not None and window is not None:
            argv += ["--ops-trace", str(ops_trace)]
        if not operators and (not record_shapes or shapes_rank is not None):
            argv += ["--no-operators"]  # (with --shapes-rank: what the other ranks record)
    if module:
        argv += ["-m", target[0], "--", *target[1:]]
    else:
        argv += ["--", *target]
    return argv


def _auto(n) -> str:
    return "auto" if n is None else str(int(n))


def replay_argv(ops: Path, *, python: str | None = None, gate: Path | None = None, gate_at: str = "start",
                backend_flags: Path | None = None) -> list[str]:
    """``nsighttc.runtime.replay``: the operators that launched the kernels still lacking evidence, called again
    (``nsighttc/runtime/replay.py``); behind a gate like the launcher's; under the program's backend switches where
    its launcher wrote them (``backend_flags``: ``runtime.backend_flags``)."""
    argv = [python or sys.executable, "-m", "nsighttc.runtime.replay", "--ops", str(ops)]
    if backend_flags is not None:
        argv += ["--backend-flags", str(backend_flags)]
    if gate is not None:
        argv += ["--wait-for", str(gate), "--gate-at", gate_at]
    return argv


def nsys_argv(nsys: Path | str, out_base: Path, inner: list[str], capture_range: str | None = None) -> list[str]:
    argv = [str(nsys), "profile", "-t", "cuda,nvtx,osrt", "-s", "none", "--cpuctxsw=none",
            "--cuda-graph-trace=node", "--force-overwrite", "false", "-o", str(out_base)]
    if capture_range:
        argv += ["--capture-range=nvtx", f"--nvtx-capture={capture_range}", "--capture-range-end=stop"]
    return argv + inner


def ncu_argv(ncu: Path | str, out_base: Path, inner: list[str], cc: str | None, *,
             nvtx_range: str | tuple[str, ...] | None = None,
             every_launch: bool = False, all_kernels: bool = False, metrics: list[str] | None = None,
             kernel_regex: str | None = None, nvtx: bool = True, from_start: bool = True) -> list[str]:
    """``nvtx_range``: profile only kernels inside this NVTX range (any of several).
    ``kernel_regex``: profile only kernels whose demangled name matches (``hardware_pass.kernel_regex``),
    else every kernel outside the settled no-matrix families (unless ``all_kernels``). ``nvtx=False``: ncu
    does not track NVTX ranges (the default run takes ranges from its timeline); a range filter needs them.
    ``from_start=False``: profile only between cudaProfilerStart/Stop (the launcher's window of steady steps)."""
    from ..analysis.families import ncu_kernel_filter

    argv = [str(ncu), *(["--nvtx"] if nvtx or nvtx_range else []), "--clock-control", "none", "--cache-control",
            "none", "--target-processes", "all", *([] if from_start else ["--profile-from-start", "off"]),
            "--metrics", ",".join(metrics or ncu_metrics.metrics_for_cc(cc)), "-o", str(out_base)]
    for r in (nvtx_range,) if isinstance(nvtx_range, str) else nvtx_range or ():
        argv += ["--nvtx-include", f"{r}/"]
    if kernel_regex:
        argv += ["--kernel-name-base", "demangled", "--kernel-name", kernel_regex]
    elif not all_kernels:
        argv += ["--kernel-name", ncu_kernel_filter()]
    if not every_launch:
        argv += ["--filter-mode", "per-launch-config", "--launch-count", "1"]
    return argv + inner
