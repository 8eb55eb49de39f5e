"""Command lines of the engines, as argument lists (never shell strings).

Each builder is a pure function so tests can check exactly what we would run:
- torch: the launcher under torch.profiler (CPU + CUDA activities), Kineto trace out;
- nsys: ``nsys profile -t cuda,nvtx,osrt -s none --cpuctxsw=none`` then ``nsys export --type sqlite``;
- ncu: Tensor Core metrics chosen per compute capability, ``--nvtx``, ``--clock-control none`` (the clocks
  are not ours to lock), each distinct launch configuration profiled once
  (``--filter-mode per-launch-config --launch-count 1``): a verdict needs one sample of each kernel, and
  replaying every launch is what makes ncu cost 3-17x a plain run.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .. import ncu_metrics


def launcher_argv(target: list[str], *, module: bool = False, annotate: str = "script",
                  torch_trace: Path | None = None, python: str | None = None, range_name: str | None = None) -> list[str]:
    argv = [python or sys.executable, "-m", "nsighttc.launch", "--annotate", annotate]
    if range_name:
        argv += ["--range-name", range_name]
    if torch_trace is not None:
        argv += ["--torch-trace", str(torch_trace)]
    if module:
        argv += ["-m", target[0], "--", *target[1:]]
    else:
        argv += ["--", *target]
    return argv


def nsys_argv(nsys: Path | str, out_base: Path, inner: list[str], capture_range: str | None = None) -> list[str]:
    argv = [str(nsys), "profile", "-t", "cuda,nvtx,osrt", "-s", "none", "--cpuctxsw=none",
            "--force-overwrite", "false", "-o", str(out_base)]
    if capture_range:
        argv += ["--capture-range=nvtx", f"--nvtx-capture={capture_range}", "--capture-range-end=stop"]
    return argv + inner


def ncu_argv(ncu: Path | str, out_base: Path, inner: list[str], cc: str | None, *, nvtx_range: str | None = None,
             every_launch: bool = False, metrics: list[str] | None = None) -> list[str]:
    argv = [str(ncu), "--nvtx", "--clock-control", "none", "--target-processes", "all",
            "--metrics", ",".join(metrics or ncu_metrics.metrics_for_cc(cc)), "-o", str(out_base)]
    if nvtx_range:
        argv += ["--nvtx-include", f"{nvtx_range}/"]
    if not every_launch:
        argv += ["--filter-mode", "per-launch-config", "--launch-count", "1"]
    return argv + inner
