"""The newest GPU architecture a recording's kernels were built for, where the recording does not name its GPU.

Why: torch.profiler traces before PyTorch 1.9 carry no ``deviceProperties`` (tb_plugin's public ResNet-50 samples
recorded with the autograd profiler API on a V100, 2021), so a verdict had no compute capability and advised bf16
autocast or TF32, neither of which a Volta's Tensor Cores run, and priced that fix at H100's peaks. cuBLAS and cuDNN
name most of their kernels after the architecture they were built for (``volta_sgemm_128x64_nn``,
``sm80_xmma_fprop_...``, ``nvjet_sm90_...``), and a kernel built for an architecture runs only on it or a newer one:
the newest architecture among a recording's kernels is a floor on its GPU's. It is a guess about the GPU, never
evidence about the Tensor Cores (names lie about those, ``name_rules``), and the verdict says it is one
(``device.from_kernel_names``).
"""
from __future__ import annotations

import re

import pandas as pd

from .. import labels

# (compute capability, architecture, what a kernel's name says when it was built for it, the GPU of the peak table
# whose figures stand in for the architecture's, where the spelling was seen). Newest first: the first that any
# kernel name matches is the answer. "(?<![a-z0-9])" keeps `sm80` out of `xsm800` but lets `_sm80` (PyTorch's
# memory-efficient attention, ``fmha_cutlassB_f32_aligned_64x64_k32_dropout_sm80``) count.
ARCHES: list[tuple[str, str, re.Pattern, str | None, str]] = [
    ("10.0", "Blackwell", re.compile(r"(?<![a-z0-9])sm_?100[a-z]?(_|$)|nvjet_sm100", re.I), "B200",
     "cuBLAS's and CUTLASS's sm100 spellings (peer knowledge)"),
    ("9.0", "Hopper", re.compile(r"(?<![a-z0-9])sm_?90a?(_|$)|^nvjet_|cutlass3x_sm90", re.I), "H100 SXM",
     "H200: nvjet_sm90_tst_..., sm90_xmma_gemm_f16f16_..., ..._sdpa_sm90_flash_fprop_..."),
    ("8.9", "Ada", re.compile(r"(?<![a-z0-9])sm_?89(_|$)", re.I), "L40S", "cuBLAS's sm89 spellings (peer knowledge)"),
    ("8.0", "Ampere", re.compile(r"(?<![a-z0-9])(ampere|sm_?8[06])(_|$)|cutlass_80_", re.I), "A100",
     "H200: sm80_xmma_fprop_..._ffma, cutlass_80_tensorop_..., fmha_cutlassF_..._sm80; A100 traces: ampere_sgemm_..."),
    ("7.5", "Turing", re.compile(r"(?<![a-z0-9])turing_", re.I), "T4", "material: turing_fp16_s1688gemm (RTX 2080)"),
    ("7.0", "Volta", re.compile(r"(?<![a-z0-9])volta_", re.I), "V100 SXM2",
     "tb_plugin's V100 samples: volta_sgemm_128x64_nn, volta_scudnn_128x64_relu_interior_nn_v1"),
]


def newest(names: pd.Series) -> dict | None:
    """The newest architecture any of ``names`` was built for: {"compute_capability", "architecture", "example",
    "stands_in": the peak table's GPU for it}, or None where no name says one. Reads each distinct name once."""
    distinct = [str(n) for n in labels.as_categorical(names).cat.categories]  # (no string per launch)
    for cc, arch, rx, gpu, _seen in ARCHES:
        hit = next((n for n in distinct if rx.search(n)), None)
        if hit is not None:
            return {"compute_capability": cc, "architecture": arch, "example": hit[:120], "stands_in": gpu}
    return None


def device_cc(device: dict | None) -> str | None:
    """The compute capability a verdict's device has, or, where the recording did not say it, the one its kernels'
    names were built for (``from_kernel_names``); None for another vendor's GPU or where nothing says."""
    if not device or device.get("vendor"):
        return None
    return device.get("compute_capability") or (device.get("from_kernel_names") or {}).get("compute_capability")
