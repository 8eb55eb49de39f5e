"""Dense peak Tensor Core throughput per GPU and source dtype, so "319.8 TFLOP/s" can say whether that is good.

Numbers are NVIDIA's datasheet figures **without sparsity** (the datasheets print the 2:4-sparse figure,
twice these, next to them), in TFLOP/s (TOPS for int8), for the boost clock. A GPU is matched by its
device name (as nvidia-smi / the profilers spell it) and, where the name alone is ambiguous, by SM count.
A GPU not in the table gets no percentage, and the report says so: a guessed peak would be a made-up number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Peak:
    gpu: str                       # the model the numbers are for
    tflops: dict = field(hash=False)   # source dtype -> dense peak TFLOP/s
    source: str = ""


# NVIDIA H100 datasheet, SXM5 column: FP16/BF16 1,979*, TF32 989*, FP8 3,958*, INT8 3,958*, FP64 TC 67; 132 SMs
_HOPPER_SXM = {"fp16": 989.5, "bf16": 989.5, "tf32": 494.7, "fp8": 1978.9, "int8": 1978.9, "fp64": 67.0}
H100_SXM = Peak("H100 SXM", _HOPPER_SXM, "NVIDIA H100 datasheet (SXM)")
# same datasheet, PCIe column: FP16/BF16 1,513*, TF32 756*, FP8 3,026*, INT8 3,026*, FP64 TC 51; 114 SMs
H100_PCIE = Peak("H100 PCIe", {"fp16": 756.5, "bf16": 756.5, "tf32": 378.0, "fp8": 1513.0, "int8": 1513.0,
                               "fp64": 51.0}, "NVIDIA H100 datasheet (PCIe)")

# (name regex, SM count or None, Peak). First match wins; order specific before general.
PEAKS: list[tuple[str, int | None, Peak]] = [
    # NVIDIA H200 datasheet (SXM): FP16/BF16 1,979 TFLOPS*, TF32 989*, FP8 3,958*, INT8 3,958*, FP64 TC 67
    # (* with sparsity). Same SM count (132) and clocks as H100 SXM. (The H200 NVL runs lower: not listed.)
    (r"\bH200\b(?!.*NVL)", None, Peak("H200 SXM", _HOPPER_SXM, "NVIDIA H200 Tensor Core GPU datasheet")),
    # NVIDIA H100 datasheet, NVL column: FP16/BF16 1,671*, TF32 835*, FP8 3,341*, INT8 3,341*, FP64 TC 60
    (r"\bH100\b.*NVL", None, Peak("H100 NVL", {"fp16": 835.5, "bf16": 835.5, "tf32": 417.5, "fp8": 1670.5,
                                               "int8": 1670.5, "fp64": 60.0}, "NVIDIA H100 datasheet (NVL)")),
    (r"\bH100\b.*(SXM|HBM3\b)", None, H100_SXM),
    (r"\bH100\b.*PCIe", None, H100_PCIE),
    (r"\bH100\b", 132, H100_SXM),  # a bare "H100": the SM count tells SXM from PCIe
    (r"\bH100\b", 114, H100_PCIE),
    # NVIDIA A100 datasheet (SXM and PCIe, 40 and 80 GB alike): FP16/BF16 312, TF32 156, INT8 624, FP64 TC 19.5
    # (dense; 624/312/1248 with sparsity); 108 SMs
    (r"\bA100\b", None, Peak("A100", {"fp16": 312.0, "bf16": 312.0, "tf32": 156.0, "int8": 624.0, "fp64": 19.5},
                             "NVIDIA A100 Tensor Core GPU datasheet")),
    # NVIDIA B200 (HGX B200 datasheet, per GPU): FP16/BF16 4.5 PF*, TF32 2.2 PF*, FP8 9 PF*, INT8 9 POPS*, FP64 40
    (r"\bB200\b", None, Peak("B200", {"fp16": 2250.0, "bf16": 2250.0, "tf32": 1100.0, "fp8": 4500.0, "int8": 4500.0,
                                      "fp64": 40.0}, "NVIDIA HGX B200 datasheet (per GPU)")),
    # NVIDIA L40S datasheet: FP16/BF16 733*, TF32 366*, FP8 1,466*, INT8 1,466*; 142 SMs
    (r"\bL40S\b", None, Peak("L40S", {"fp16": 366.0, "bf16": 366.0, "tf32": 183.0, "fp8": 733.0, "int8": 733.0},
                             "NVIDIA L40S datasheet")),
    # NVIDIA L4 datasheet: FP16/BF16 242*, TF32 120*, FP8 485*, INT8 485*; 58 SMs
    (r"\bL4\b", None, Peak("L4", {"fp16": 121.0, "bf16": 121.0, "tf32": 60.0, "fp8": 242.5, "int8": 242.5},
                           "NVIDIA L4 datasheet")),
    # NVIDIA V100 datasheet: Tensor Performance (fp16 with fp32 accumulate) 125 TFLOPS for SXM2 (the DGX Station's
    # V100-DGXS is the SXM2 part), 112 for PCIe, 130 for V100S PCIe; no bf16, TF32 or int8 Tensor Core math (Volta,
    # compute capability 7.0). Named by HTA's and tb_plugin's public traces (Tesla V100-SXM2-16GB, -32GB, -DGXS-32GB)
    (r"\bV100S\b", None, Peak("V100S PCIe", {"fp16": 130.0}, "NVIDIA V100 Tensor Core GPU datasheet (V100S PCIe)")),
    (r"\bV100\b.*PCIE", None, Peak("V100 PCIe", {"fp16": 112.0}, "NVIDIA V100 Tensor Core GPU datasheet (PCIe)")),
    (r"\bV100\b", None, Peak("V100 SXM2", {"fp16": 125.0}, "NVIDIA V100 Tensor Core GPU datasheet (SXM2)")),
    # NVIDIA T4 datasheet: mixed precision (fp16/fp32) 65 TFLOPS, INT8 130 TOPS (Turing, 7.5: no bf16, no TF32)
    (r"\bT4\b", None, Peak("T4", {"fp16": 65.0, "int8": 130.0}, "NVIDIA T4 datasheet")),
    # NVIDIA Ada Lovelace architecture whitepaper, RTX 4090 column: FP16/BF16 with FP32 accumulate 165.2
    # (GeForce runs FP32 accumulation at half the FP16-accumulate rate, 330.3), TF32 82.6, FP8 with FP32
    # accumulate 330.3, INT8 660.6 (all dense); 128 SMs
    (r"RTX 4090\b", None, Peak("RTX 4090", {"fp16": 165.2, "bf16": 165.2, "tf32": 82.6, "fp8": 330.3, "int8": 660.6},
                               "NVIDIA Ada Lovelace architecture whitepaper")),
]


def match(device_name: str | None, sm_count: int | None = None) -> Peak | None:
    if not device_name:
        return None
    for pattern, sms, peak in PEAKS:
        if re.search(pattern, device_name, re.IGNORECASE) and (sms is None or sms == sm_count):
            return peak
    return None


def pct_of_peak(tflops: pd.Series, dtype: pd.Series, peak: Peak | None) -> pd.Series:
    """Per kernel: achieved TFLOP/s over the dense peak of its dtype (0..1, can pass 1 only if the clock
    ran above the datasheet's boost clock); NaN where there is no figure or no peak."""
    if peak is None:
        return pd.Series(np.nan, index=tflops.index)
    ref = dtype.map(lambda d: peak.tflops.get(d) if isinstance(d, str) else None).astype(float)
    return pd.to_numeric(tflops, errors="coerce") / ref


def summary(kernels: pd.DataFrame, peak: Peak | None, device_name: str | None) -> dict:
    """``tensor_cores.peak``: the GPU matched (``match``), its peaks, and the time-weighted % of peak of the
    kernels with a TFLOP/s figure (``pct_of_peak`` column); or why there is none."""
    if peak is None:
        return {"gpu": None, "pct_of_peak": None,
                "note": f"no dense Tensor Core peak is known for {device_name or 'this GPU'}: no % of peak"}
    pct = kernels["pct_of_peak"] if "pct_of_peak" in kernels else pd.Series(dtype=float)
    w = kernels.loc[pct.notna(), "total_time_ns"].astype(float) if not kernels.empty else pd.Series(dtype=float)
    weighted = float((pct[pct.notna()] * w).sum() / w.sum()) if len(w) and w.sum() > 0 else None
    top = kernels.loc[pct.notna()].groupby("dtype")["total_time_ns"].sum() if len(w) else pd.Series(dtype=float)
    return {"gpu": peak.gpu, "source": peak.source, "dense_tflops": dict(peak.tflops), "pct_of_peak": weighted,
            "main_dtype": str(top.idxmax()) if len(top) else None}


# FP32 peak on the CUDA cores (non-tensor), TFLOP/s, per ``Peak.gpu``: what fp32 matrix work left off the Tensor
# Cores runs at best (analysis.gain divides a Tensor Core peak by it). Same datasheets as above: H100 SXM5 FP32 67,
# PCIe 51, NVL 60; H200 SXM 67; A100 19.5; L40S 91.6; L4 30.3; RTX 4090 82.6 (Ada whitepaper). B200: no per-GPU
# FP32 figure in the HGX datasheet used above, left out (the estimate then says its ratio was assumed). V100 SXM2 15.7,
# PCIe 14, V100S 16.4; T4 8.1 (their datasheets).
CUDA_CORE_FP32 = {"H100 SXM": 67.0, "H100 PCIe": 51.0, "H100 NVL": 60.0, "H200 SXM": 67.0, "A100": 19.5,
                  "L40S": 91.6, "L4": 30.3, "RTX 4090": 82.6, "V100 SXM2": 15.7, "V100 PCIe": 14.0,
                  "V100S PCIe": 16.4, "T4": 8.1}

# Tensor Cores before compute capability 8.0 (Volta 7.0, Turing 7.5) do fp16 (and, Turing, int8) only: no bf16 and
# no TF32, so a fix that moves fp32 matrix work to them is fp16 autocast with a gradient scaler.
HALF_ONLY_BELOW = (8, 0)


def fp16_only(cc: str | None) -> bool:
    """Whether a GPU of compute capability ``cc`` ("7.0") has fp16 Tensor Cores only (``HALF_ONLY_BELOW``)."""
    try:
        major, minor = (int(x) for x in str(cc).split(".")[:2])
    except (TypeError, ValueError):
        return False
    return (major, minor) < HALF_ONLY_BELOW
