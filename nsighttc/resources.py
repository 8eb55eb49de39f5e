"""Real recordings shipped inside the package for ``nsighttc demo`` (copies of shared/fixtures/h200).

- ``h200_probe_ncu_raw.csv.gz``: Nsight Compute raw page with Tensor Core counters of the probe workload
  (fp32/TF32/fp16/bf16/fp8/int8/fp64 matmuls, convolutions, attention, VGG16), one NVTX range per case;
- ``h200_loops_nsys.sqlite.xz``: Nsight Systems export of a data-loader-starved loop and a GEMM loop.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

DEMOS = {
    "counters": ("h200_probe_ncu_raw.csv.gz",),
    "timeline": ("h200_loops_nsys.sqlite.xz",),
    "both": ("h200_loops_nsys.sqlite.xz", "h200_probe_ncu_raw.csv.gz"),
}


def demo_inputs(which: str = "both") -> list[Path]:
    base = resources.files("nsighttc") / "data"
    return [Path(str(base / name)) for name in DEMOS[which]]
