"""What every timeline question shares: thresholds, the verdict rule, the result object, the call tables."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...parse.marks import STEP_PATTERN  # leaves that mark an iteration (defined where the ranges are split)

# Host calls that block until the GPU (or a copy) is done. `.item()`, `.cpu()`, `print(tensor)` and
# blocking `.to()` copies reach the driver as cudaMemcpyAsync + cudaStreamSynchronize (torch 2.11, H100,
# tests/fixtures/multi_phase_*), older code as cudaMemcpy.
def with_hip(names) -> frozenset[str]:
    """``names`` and their HIP twins: ROCm's runtime mirrors CUDA's (``cudaGraphLaunch`` is ``hipGraphLaunch``), and a
    torch.profiler trace recorded on an AMD GPU names its runtime calls so (roctracer; public MI300 and MI355 traces of
    AMD's TraceLens tests)."""
    return frozenset(names) | {"hip" + n[len("cuda"):] for n in names if n.startswith("cuda")}


SYNC_CALLS = with_hip({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                       "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cuCtxSynchronize",
                       "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cudaMemset",
                       # PyTorch on ROCm copies with sync by one call (memcpy_and_sync: an SGLang trace, TraceLens)
                       "cudaMemcpyWithStream"})
# Host calls that launch a whole CUDA graph: their correlation id is shared by every node of the graph.
GRAPH_LAUNCH_CALLS = with_hip({"cudaGraphLaunch", "cuGraphLaunch"})


def device_to_host(ops: pd.DataFrame | None):
    """Which of the GPU operations are copies to the host (a result read back, a checkpoint's state): the idle
    pieces' blocking copies, the result copies that bound a loop's steps, the slow steps' copies."""
    if ops is None or ops.empty or "copy_kind" not in ops:
        return np.zeros(0 if ops is None else len(ops), dtype=bool)
    return (ops["kind"] == "memcpy").to_numpy() & (ops["copy_kind"] == "DtoH").to_numpy()


@dataclass
class Thresholds:
    cpu_bound: float = 0.50
    gpu_bound: float = 0.75
    min_wall_ns: float = 2e6
    min_kernels: int = 10
    launch_gap_ns: float = 100e3      # idle gaps shorter than this, before a kernel launched after the
                                      # GPU went idle, are launch overhead; longer ones are host work
    warmup_factor: float = 3.0        # leading steps longer than this x median are warm-up
    warmup_explained: float = 1.2     # ... and those longer than this x median with a one-time cause (steps.steady)


def classify(busy_share: float, wall_ns: float, kernels: int, th: Thresholds) -> str:
    if wall_ns < th.min_wall_ns or kernels < th.min_kernels:
        return "insufficient-data"
    if busy_share < th.cpu_bound:
        return "cpu-bound"
    if busy_share >= th.gpu_bound:
        return "gpu-bound"
    return "mixed"


def is_step_leaf(leaf: str, step_range: str | None) -> bool:
    return leaf == step_range if step_range else bool(STEP_PATTERN.match(leaf))


@dataclass
class TimelineResult:
    wall_ns: float
    busy_ns: float
    window: tuple[float, float]
    verdict: str
    ranges: pd.DataFrame
    steps: dict                      # the family with the most wall time ({} without steps)
    families: list[dict]             # every step family, judged on its own
    gaps: list[dict]
    causes: list[dict]               # of the dominant family's steady state, else of the window
    devices: list[dict]
    sync: dict
    pageable: dict
    launch: dict
    graphs: dict
    kernels: int
    headline_cause: str | None = None
    notes: list[str] = field(default_factory=list)
    activity: dict = field(default_factory=dict)
    communication: dict = field(default_factory=dict)  # comm.py: compute busy and exposed communication
    activity_window: tuple[float, float] = (0.0, 0.0)  # what the activity picture covers
    startup: dict = field(default_factory=dict)        # steps.startup: before the steady steps
    loop_time: dict = field(default_factory=dict)      # steps.slow.split: the recording's time, part by part
    inference: dict | None = None                      # inference.summarize: a generation loop's prefill/decode
    training: bool | None = None                       # optimizer steps or a backward pass in the recording
    in_use: dict = field(default_factory=dict)         # fixes the recording shows in use (``in_use.detect``)
    host_frames: dict = field(default_factory=dict)   # host_frames.summary: where the host time went
    host_collapsed: str = ""                           # the idle samples' stacks, collapsed (a file in the run dir)

    @property
    def window_busy_share(self) -> float:
        return self.busy_ns / self.wall_ns if self.wall_ns else 0.0

    @property
    def busy_share(self) -> float:
        """The headline number: the dominant step family's GPU busy time over its steady steps' wall time (time-weighted,
        the GPU's work after the host's last step included) when the run has steps, else the whole profiled window's.
        Not the median step's: a loop whose steps differ is what its time says (a training trace with 15 of 29 steps
        99% busy and the rest 19-56% is 47% busy, not 99%), and the compute share said beside it for a rank that
        communicates is over the same steps (it read "GPU busy 18% (compute 19%)" with the median)."""
        if self.steps.get("count"):
            return self.steps.get("steady_gpu_busy_share", self.steps["median_gpu_busy_share"])
        return self.window_busy_share

    @property
    def basis(self) -> str:
        return "steady steps, time-weighted" if self.steps.get("count") else "profiled window"
