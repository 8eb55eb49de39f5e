"""Findings: matrix work that missed the Tensor Cores (and why), and Tensor Core work that idles them.

Each rule looks at the classified launch table, picks the kernels it is about with vectorised
masks, and returns ``Finding``s carrying the evidence (kernel names, time share, how we know) and a
concrete fix. Rules that lack the data they need say nothing rather than guess.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import labels
from ..model import Finding
from . import peak as peak_mod
from .name_rules import is_communication, name_mask, stated_dtype
from .tensor_cores import tc_states

LOW_PIPE_PCT = 20.0      # tensor pipe utilisation below which a TC kernel is "underfed"
MIN_SHARE = 0.01         # findings about less than 1% of kernel time are not worth a reader's time
# The fix of fp32 matrix work on a GPU whose Tensor Cores do fp16 only (``peak.fp16_only``: V100, T4): bf16 autocast
# and TF32 do not exist there (bf16 runs on the CUDA cores, TF32 is ignored). HTA's and tb_plugin's public V100 traces.
HALF_ONLY_FIX = ("This GPU (compute capability {cc}) has fp16 Tensor Cores only, no bf16 and no TF32: use fp16 mixed "
                 "precision, `with torch.autocast('cuda', dtype=torch.float16):` with `torch.amp.GradScaler('cuda')` "
                 "for training.")
# A recording that does not name its GPU, whose kernels were built for Volta or Turing at newest (kernel_arch)
HALF_ONLY_BY_NAMES = ("The recording does not name its GPU; its kernels were built for {architecture} at newest "
                      "(e.g. `{example}`), and Volta's and Turing's Tensor Cores do fp16 only, no bf16 and no TF32: "
                      "use fp16 mixed precision, `with torch.autocast('cuda', dtype=torch.float16):` with "
                      "`torch.amp.GradScaler('cuda')` for training. (On an Ampere or newer GPU, bf16 autocast or TF32, "
                      "`torch.set_float32_matmul_precision('high')`, would do as well.)")
TF32_SHARE = 0.10        # TF32 Tensor Core work worth moving to bf16/fp16 (a hint, not a fault)
# A finding's severity is bounded by how much of the compute kernel time it is about: a "high" fp32 finding for 2.3%
# of it (an MI300X trace) told a reader to drop everything for what could buy at most 1.02x
HIGH_SHARE, MEDIUM_SHARE = 0.15, 0.05

_FP32_SIMT = re.compile(r"ffma|simt|sgemm|f32f32_f32f32|gemv|internal::kernel<int, int, float", re.I)
_ALIGN_LEGACY = re.compile(r"align1|align2|cutlass_75_tensorop|s1688gemm|h1688gemm|884gemm", re.I)
_TRANSPOSE = re.compile(r"nchwToNhwc|nhwcToNchw", re.I)
_HALF_CONV_SIMT = re.compile(r"implicit_convolve_sgemm<__half|implicit_convolve_sgemm<c10::Half", re.I)


def _share(t: float, total: float, of: str = "GPU kernel time") -> str:
    return f"{100 * t / total:.1f}% of {of}" if total else "n/a"


def bounded_severity(severity: str, share: float) -> str:
    """``severity`` lowered to what ``share`` of the compute kernel time can carry (``HIGH_SHARE``, ``MEDIUM_SHARE``)."""
    if severity == "high" and share < HIGH_SHARE:
        severity = "medium"
    if severity == "medium" and share < MEDIUM_SHARE:
        severity = "low"
    return severity


def _names(df: pd.DataFrame, n: int = 3) -> list[str]:
    return [str(x) for x in df.groupby("name", observed=True)["time_ns"].sum().sort_values(ascending=False).index[:n]]


def _how(df: pd.DataFrame) -> str:
    ev = sorted(set(df["evidence"]))
    return " and ".join("hardware counters" if e == "hardware" else "kernel names" for e in ev if e != "none")


def _names_with_several_states(name: pd.Series, state: pd.Series) -> list[str]:
    """Kernel names whose launches got more than one verdict, in the order a group-by on the name gives
    (category order, else sorted): distinct (name, verdict) pairs as one packed integer per launch, not a
    frame of pairs (4M launches: ~130 MB less)."""
    names = labels.as_categorical(name)
    states = pd.Categorical(state)
    st = states.codes.astype(np.int64) + 1                          # 0: missing
    width = len(states.categories) + 1
    pairs = pd.unique(names.cat.codes.to_numpy().astype(np.int64) * width + st)
    per_name = np.bincount(pairs // width, minlength=len(names.cat.categories))
    found = [str(names.cat.categories[c]) for c in np.flatnonzero(per_name > 1)]
    return found if isinstance(name.dtype, pd.CategoricalDtype) else sorted(found)


def find(launches: pd.DataFrame, cc: str | None = None, names_arch: dict | None = None) -> list[Finding]:
    """The findings on these launches. ``cc``: the GPU's compute capability where the recording says it;
    ``names_arch``: else what its kernels' names say (``analysis.kernel_arch.newest``), for the fixes' wording."""
    if launches.empty:
        return []
    state = tc_states(launches)
    # the rules read these columns only: their row subsets stay small on a million-launch table (with every
    # column, two subsets of a 4M-kernel trace took ~150 MB beside the timeline analysis)
    launches = launches[["name", "time_ns", "evidence", "tensor_pipe_pct", "matrix_work", "dtype"]]
    name = launches["name"]
    # shares of the compute kernel time, as the Tensor Core headline's (communication kernels apart, said apart)
    comm = is_communication(name).to_numpy()
    total = float(launches["time_ns"].to_numpy()[~comm].sum()) or float(launches["time_ns"].sum())
    of = "compute kernel time" if comm.any() else "GPU kernel time"
    out: list[Finding] = []

    def named(rx: re.Pattern) -> pd.Series:
        return name_mask(name, rx)

    is_yes, is_no, is_unk = (state == "yes").to_numpy(), (state == "no").to_numpy(), (state == "unknown").to_numpy()
    no_tc = is_no & launches["matrix_work"].to_numpy()

    def chosen(mask: np.ndarray, min_share: float = MIN_SHARE) -> pd.DataFrame | None:
        """The launches a rule is about, when there are any and they hold ``min_share`` of the kernel time."""
        sub = launches[mask]
        return sub if not sub.empty and sub["time_ns"].sum() / total >= min_share else None

    def add(f: Finding, mask: np.ndarray) -> None:
        f.rows = np.asarray(mask, dtype=bool)  # the launches it is about: analysis.gain prices them per step
        out.append(f)

    # every matrix kernel on CUDA cores whose name says fp32, as the headline counts it (``off_tc_dtypes``), not only
    # the FFMA/SIMT spellings: a V100 fp32 CNN's volta_scudnn and wgrad engines read 23% here against 56% there
    fp32_named = name_mask(name, _FP32_SIMT).to_numpy() | (labels.per_category(
        name, lambda n: stated_dtype(n) == "fp32", dtype=bool) if len(name) else np.zeros(0, dtype=bool))
    m_fp32 = no_tc & fp32_named & ~named(_HALF_CONV_SIMT).to_numpy()
    fp32 = chosen(m_fp32)
    if fp32 is not None:
        t = fp32["time_ns"].sum()
        add(Finding(
            "fp32-matmul-on-cuda-cores", "high",
            "fp32 matrix work ran on CUDA cores (FFMA/SIMT kernels), not Tensor Cores",
            f"{len(fp32)} launches, {_share(t, total, of)}, e.g. {_names(fp32, 1)[0][:100]} (by {_how(fp32)})",
            HALF_ONLY_FIX.format(cc=cc) if peak_mod.fp16_only(cc) else
            HALF_ONLY_BY_NAMES.format(**names_arch) if not cc and names_arch and
            peak_mod.fp16_only(names_arch["compute_capability"]) else
            "Use mixed precision (`with torch.autocast('cuda', dtype=torch.bfloat16):` or fp16 + GradScaler), "
            "or allow TF32: `torch.set_float32_matmul_precision('high')` for matmuls and "
            "`torch.backends.cudnn.allow_tf32 = True` for convolutions.",
            t, _names(fp32)), m_fp32)

    m_half = no_tc & named(_HALF_CONV_SIMT).to_numpy()
    half_conv = chosen(m_half, 0.0)
    if half_conv is not None:
        t = half_conv["time_ns"].sum()
        add(Finding(
            "fp16-conv-on-cuda-cores", "low" if t / total < 0.1 else "medium",
            "fp16 convolution ran on CUDA cores (cuDNN implicit_convolve_sgemm<__half>)",
            f"{len(half_conv)} launches, {_share(t, total, of)} (by {_how(half_conv)}); the name says __half but "
            "the kernel is a CUDA-core GEMM",
            "Expected for a first layer with 3 input channels (RGB): Tensor Core convolutions need channel "
            "counts that are multiples of 8. If it matters, pad the input to 4 or 8 channels "
            "(`F.pad(x, (0, 0, 0, 0, 0, 5))` plus zero weights) or use channels_last.",
            t, _names(half_conv)), m_half)

    m_trans = named(_TRANSPOSE).to_numpy()
    trans = chosen(m_trans)
    if trans is not None:
        t = trans["time_ns"].sum()
        add(Finding(
            "nchw-layout-transposes", "medium",
            "cuDNN transposes NCHW tensors to NHWC and back around Tensor Core convolutions",
            f"{len(trans)} nchwToNhwc/nhwcToNchw launches, {_share(t, total, of)}",
            "Keep activations in channels_last: `model = model.to(memory_format=torch.channels_last)` and "
            "`x = x.to(memory_format=torch.channels_last)`.",
            t, _names(trans)), m_trans)

    m_legacy = is_yes & named(_ALIGN_LEGACY).to_numpy()
    legacy = chosen(m_legacy)
    if legacy is not None:
        t = legacy["time_ns"].sum()
        pipe = legacy["tensor_pipe_pct"]
        pipe_txt = (f"; tensor pipe {pipe.mean():.0f}% busy" if pipe.notna().any() else "")
        add(Finding(
            "misaligned-tensor-core-path", "medium",
            "Tensor Core GEMM on a legacy or misaligned (align1/align2) path",
            f"{len(legacy)} launches, {_share(t, total, of)}, e.g. {_names(legacy, 1)[0][:100]}{pipe_txt}",
            "Make GEMM dimensions (batch*seq, hidden, vocab; conv channels) multiples of 8 for fp16/bf16 "
            "(16 for fp8/int8) so cuBLAS can pick aligned, modern kernels: pad the tensor or round the layer "
            "sizes up.",
            t, _names(legacy)), m_legacy)

    m_unknown = is_unk & launches["matrix_work"].to_numpy()
    unknown = chosen(m_unknown)
    if unknown is not None:
        t = unknown["time_ns"].sum()
        add(Finding(
            "matrix-work-unknown", "medium",
            "Matrix work whose Tensor Core use cannot be told from its name",
            f"{len(unknown)} launches, {_share(t, total, of)}, e.g. {_names(unknown, 1)[0][:100]}; no hardware "
            "counters in this input",
            "Profile with Nsight Compute for hardware truth: `nsighttc profile --engine ncu SCRIPT` (or add "
            "`--metrics sm__ops_path_tensor_src_fp16.sum,...` to your ncu command and pass the export here).",
            t, _names(unknown)), m_unknown)

    m_tf32 = is_yes & (launches["dtype"].astype(object) == "tf32").to_numpy()
    tf32 = chosen(m_tf32, TF32_SHARE)
    if tf32 is not None:
        t = tf32["time_ns"].sum()
        add(Finding(
            "tf32-tensor-core-work", "low",
            "Matrix work runs on the Tensor Cores in TF32, at half the bf16/fp16 peak",
            f"{len(tf32)} launches, {_share(t, total, of)}, e.g. {_names(tf32, 1)[0][:100]} (by {_how(tf32)}); fp32 "
            "inputs with TF32 allowed (cuDNN allows it for convolutions by default)",
            "Mixed precision halves the bytes and doubles the Tensor Core peak: `with torch.autocast('cuda', "
            "dtype=torch.bfloat16):` around the forward pass and loss (check the loss/metric: some models need fp32 "
            "in places).",
            t, _names(tf32)), m_tf32)

    pipe = launches["tensor_pipe_pct"]
    m_low = is_yes & pipe.notna().to_numpy() & (pipe < LOW_PIPE_PCT).to_numpy()
    low = chosen(m_low)
    if low is not None:
        t = low["time_ns"].sum()
        add(Finding(
            "low-tensor-pipe-utilisation", "low",
            f"Tensor Core kernels keep the tensor pipe busy less than {LOW_PIPE_PCT:.0f}% of the time",
            f"{len(low)} launches, {_share(t, total, of)}, time-weighted pipe use "
            f"{(low['tensor_pipe_pct'] * low['time_ns']).sum() / t:.1f}%, e.g. {_names(low, 1)[0][:100]}",
            "Small or skinny GEMMs (batch 1 inference, split-K) cannot fill the Tensor Cores: batch more work "
            "per call, fuse small matmuls, or accept it when the kernels are short.",
            t, _names(low)), m_low)

    split = _names_with_several_states(name, state)
    if split:
        rows = name.isin(split).to_numpy()
        out.append(Finding(
            "same-name-different-verdicts", "info",
            "Kernels sharing a name got different verdicts per launch",
            f"{len(split)} name(s), e.g. {split[0][:100]}: kept apart in the kernel table",
            "Usually Triton/Inductor specialisations of one function (different dtypes or shapes); read each "
            "variant's row.",
            float(launches["time_ns"].to_numpy()[rows].sum()), split[:3]))

    for f in out:
        f.severity = bounded_severity(f.severity, f.time_ns / total if total else 0.0)
    order = {"high": 0, "medium": 1, "low": 2, "info": 3}
    return sorted(out, key=lambda f: (-f.time_ns, order[f.severity]))
