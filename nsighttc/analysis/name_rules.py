"""Kernel-name rules: the last rung of the evidence ladder, used only when no counters decide.

Names lie (``sm80_xmma_..._ffma`` runs on CUDA cores; ``nvjet_*`` carries no "tensorop" yet runs on
Tensor Cores; ``implicit_convolve_sgemm<__half>`` is fp16 on CUDA cores), so this table is ordered
most-specific first and a rule answers ``None`` ("unknown") whenever the name carries no signal:
Triton kernels are named after the user's Python function and can go either way.

Each rule: (id, regex, tensor_core True/False/None, dtype or None, where the fact was seen).
``dtype`` may be a callable taking the name, for families whose names encode the type.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from . import families
from . import function_names as fnames

# Where facts were seen: H200 = shared/fixtures/h200 (ncu 2025.3.1, measured against sm__ops_path_tensor_*).
H200 = "measured on H200 (fixtures/h200)"
PEER = "peer knowledge (not measured by us)"


def _nvjet_dtype(name: str) -> str | None:
    """nvjet_sm90_<types>_...: h=fp16, t=bf16, q=fp8 (H200: hsh fp16, tst bf16, qqtst fp8)."""
    m = re.search(r"nvjet_sm\d+_([a-z]+)_", name)
    if not m:
        return None
    types = m.group(1)
    if types.startswith("q"):
        return "fp8"
    return {"h": "fp16", "t": "bf16"}.get(types[0])


def _typed_dtype(name: str) -> str | None:
    """xmma/cutlass/legacy cuBLAS names that spell their input type."""
    n = name.lower()
    if "bf16" in n:
        return "bf16"
    if "tf32" in n:
        return "tf32"
    if re.search(r"e4m3|e5m2|fp8", n):
        return "fp8"
    if re.search(r"f64f64|_d\d{3,5}gemm|dgemm|tensorop_d", n):
        return "fp64"
    if re.search(r"i8i8|_s8_|gemm_s8|i161616|i16832|i8816|imma|_i8_", n):
        return "int8"
    if re.search(r"f16f16|_f16_|fp16|_h\d{3,5}gemm|_h1688|_h884|_h16816|hgemm", n):
        return "fp16"
    if re.search(r"tensorop_s\d{3,5}gemm|_s1688gemm|_s16816gemm", n):
        return "tf32"  # fp32 operands through TF32 tensor ops (cutlass_80_tensorop_s1688gemm)
    return None


@dataclass(frozen=True)
class NameRule:
    id: str
    pattern: re.Pattern
    tensor_core: bool | None
    dtype: str | None | Callable[[str], str | None]
    seen: str
    # what the pattern reads (``function_names``): "function" (the qualified function name, and the kernel a launcher
    # template launches), or "signature" (with the template arguments too, for rules that read them on purpose)
    on: str = "function"

    def dtype_for(self, name: str) -> str | None:
        """The dtype the name states: read in the function name and its template arguments (never the parameters)."""
        return self.dtype(fnames.signature(name)) if callable(self.dtype) else self.dtype

    def matches(self, name: str) -> bool:
        return bool(self.pattern.search(fnames.signature(name) if self.on == "signature" else fnames.function(name)))


_CUDA_CORE_DTYPES = ((re.compile(r"dgemm|f64f64|double", re.I), "fp64"),
                     (re.compile(r"hgemm|__half|f16f16|half", re.I), "fp16"),
                     (re.compile(r"bf16|bfloat16", re.I), "bf16"),
                     (re.compile(r"sgemm|f32f32|_ffma|float|_f32_|gemv", re.I), "fp32"))


def _cuda_core_dtype(name: str) -> str | None:
    """The dtype a CUDA-core matrix kernel's name states (``cutlass_80_simt_sgemm``, ``sm80_xmma_gemm_f32f32_..._ffma``:
    fp32; ``implicit_convolve_sgemm<__half>``: fp16): what the Tensor Core headline says of the matrix work that
    missed them. Not a Tensor Core dtype: kernels on CUDA cores keep ``dtype`` empty."""
    for pattern, dtype in _CUDA_CORE_DTYPES:
        if pattern.search(name):
            return dtype
    return None


# Words of matrix-work kernel names, which the library-namespace rules below never call "no".
_MATRIX_WORDS = (r"gemm|gemv|conv(?!ert)|fprop|dgrad|wgrad|matmul|bmm|[_hgiwd]mma|mma_|tensorop|attention|fmha|flash|"
                 r"sdpa|cutlass")


def _tensile_dtype(name: str) -> str | None:
    """Tensile's data type letter after the operand layouts (``Cijk_Alik_Bljk_SB_...``: S single, H half, B bfloat16,
    D double, I8 int8). Single precision on matrix cores has no name among NVIDIA's Tensor Core dtypes (it is not TF32):
    left unsaid."""
    import re as _re
    m = _re.match(r"^Cijk_[A-Za-z]+_[A-Za-z]+_(I8|[DHB])", name)
    return {"D": "fp64", "H": "fp16", "B": "bf16", "I8": "int8"}.get(m.group(1)) if m else None


def _r(id_, pattern, tc, dtype, seen, on="function"):
    return NameRule(id_, re.compile(pattern), tc, dtype, seen, on)


# Where facts come from that are not our own measurement: NVIDIA's and AMD's documentation of their libraries' names.
CUDNN_DOCS = "cuDNN's kernel families (peer knowledge: NVIDIA documentation and DLProf's tables, not measured by us)"
TENSILE_DOCS = ("rocBLAS/hipBLASLt Tensile kernel names (peer knowledge: Tensile's naming, `MI<M>x<N>x<K>` = the MFMA "
                "matrix instruction the kernel is built on; AMD MI250 trace of HolisticTraceAnalysis's test data)")


# Communication between GPUs: collectives and peer reductions. Never Tensor Core work, never "unknown"; the
# timeline counts a rank's time inside them as waiting, not compute (analysis/timeline/comm.py).
# NCCL names seen on H200 x2 with torch 2.11 (reports/ddp): ncclDevKernel_AllReduce_Sum_f32_RING_LL(...);
# older NCCL (2.1x): ncclKernel_AllReduce_RING_LL_Sum_float(...); custom all-reduce kernels of vLLM and
# torch symmetric memory (peer knowledge): cross_device_reduce_*, one_shot/two_shot/multimem_all_reduce.
COMMUNICATION = re.compile(r"\bnccl|^nccl|cross_device_reduce|(one|two)_shot_all_reduce|multimem_all_reduce|"
                           r"multimem_all_gather|all_gather_into_tensor_kernel", re.IGNORECASE)

RULES: tuple[NameRule, ...] = (
    _r("communication", COMMUNICATION.pattern, False, None,
       "collectives and peer reductions move data between GPUs (reduction adds on CUDA cores); names seen on "
       "H200 x2 (reports/ddp); never replayed under ncu, where a lone rank's collective stalls the others"),
    # --- not one kernel: a whole CUDA graph execution (nsys --cuda-graph-trace=graph, its default) ---
    _r("cuda-graph-whole", r"^CUDA graph #\S+ \(traced whole\)$", None, None,
       "nsys 2025.3.1 on H100 (tests/fixtures/multi_phase_nsys_graph): one CUPTI_ACTIVITY_KIND_GRAPH_TRACE record "
       "per graph launch, no kernel names; record with --cuda-graph-trace=node to judge its kernels"),
    # --- CUDA cores although the name suggests otherwise (traps) ---
    _r("xmma-ffma", r"xmma.*_ffma|_ffma_", False, None, H200 + ": sm80_xmma_fprop_..._f32f32_..._ffma"),
    _r("cudnn-implicit-sgemm", r"implicit_convolve_sgemm|implicit_convolve_hgemm", False, None,
       H200 + ": implicit_convolve_sgemm<__half> (VGG16 fp16 first conv, C=3) on CUDA cores"),
    _r("cudnn-layout-transpose", r"nchwToNhwcKernel|nhwcToNchwKernel|nchwToNhwc|nhwcToNchw", False, None,
       H200 + ": layout transposes around fp16 NCHW convs"),
    _r("simt-gemm", r"_simt_|volta_sgemm|maxwell_sgemm|turing_sgemm|ampere_sgemm|\bsgemm_|_sgemm_|"
       r"gemv2T_kernel|gemv2N_kernel|gemvx|gemv_kernel|\bgemv", False, None,
       H200 + ": cutlass_80_simt_sgemm, gemv2T_kernel_val"),
    _r("cublas-internal-float", r"internal::kernel<int, int, float, float, float, float", False, None,
       H200 + ": cuBLAS internal::kernel<...float...> in vgg16_fp32", on="signature"),
    # cuDNN's fp32 convolutions before TF32: the "s" of scudnn is single precision, FFMA on CUDA cores; the dgrad/wgrad
    # engines of fp32 convolutions name their type first (V100 fp32 CNN, HolisticTraceAnalysis's test data: 38% of
    # its kernel time had no answer)
    _r("cudnn-scudnn", r"(^|_)(maxwell|pascal|volta|turing|ampere|sm\d+)_scudnn", False, None, CUDNN_DOCS),
    _r("cudnn-fp32-engines", r"(^|::)(dgrad|dgrad2d|wgrad|wgrad_alg\d+|dgrad_alg\d+)_engine<float\b", False, None,
       CUDNN_DOCS + "; the engines' first template argument is the data type", on="signature"),
    _r("cudnn-fft-winograd-transforms", r"(^|::)(fft2d_[rc]2[rc]|fft1d_[rc]2[rc]|fft2d_r2c|fft2d_c2r)|"
       r"winograd_nonfused::winograd\w*(Data|Output|Filter|Delta)\w*", False, None,
       CUDNN_DOCS + ": the FFT and Winograd convolutions' data transforms (the products are separate GEMM kernels)"),
    # --- AMD matrix cores: Tensile GEMMs named after the MFMA instruction they use; the rest use vector ALUs ---
    _r("amd-tensile-mfma", r"^Cijk_.*_MI\d+x\d+x\d+|mfma", True, _tensile_dtype, TENSILE_DOCS),
    _r("amd-tensile-valu", r"^Cijk_", False, None, TENSILE_DOCS + ": no MI<...> in the name, no MFMA"),
    # --- Tensor Cores ---
    _r("nvjet", r"^nvjet_", True, _nvjet_dtype, H200 + ": nvjet_sm90_hsh/tst/qqtst (cuBLAS on Hopper)"),
    _r("xmma-typed", r"sm\d+_xmma_.*(f16f16|bf16bf16|tf32f32|f64f64|i8i8|e4m3|e5m2|tensor\d+x\d+x\d+)", True,
       _typed_dtype, H200 + ": sm90_xmma_gemm/fprop f16f16, tf32f32, f64f64 tensor16x8x16"),
    _r("cudnn-sdpa-mma", r"cudnn_generated_fort_native_sdpa.*(wgmma|hmma|mma)", True, None,
       H200 + ": ..._sdpa_sm90_flash_fprop_wgmma_f16_... ran a bf16 input: the name's f16 is not the dtype"),
    _r("cutlass-tensorop", r"tensorop|wmma_tensorop", True, _typed_dtype,
       H200 + ": cutlass_75_tensorop_f16_s1688gemm, cutlass_80_wmma_tensorop_i161616gemm_s8"),
    _r("legacy-mma-gemm", r"(volta|turing|ampere|sm\d+)_(fp16_|bf16_|int8_)?[hsdi](884|1688|16816|16832|8816|"
       r"88128)gemm", True, _typed_dtype, PEER + " (material: turing_fp16_s1688gemm on RTX 2080)"),
    _r("cudnn-mma-conv", r"(volta|turing|ampere|sm\d+)_(fp16_|bf16_|int8_)?[hsi](884|1688|16816|8816)cudnn", True,
       lambda n: "int8" if re.search(r"_i8816|int8", n) else "bf16" if "bf16" in n else "fp16", CUDNN_DOCS +
       ": h884/s884 (Volta), h1688/s1688 (Turing), 16816 (Ampere) are the HMMA shapes of fp16 convolutions"),
    _r("flash-attention", r"flash_fwd|flash_bwd|pytorch_flash::|fmha_cutlass[FB]_(f16|bf16)|fmha_.*_(f16|bf16)",
       True, None, PEER + ": FlashAttention kernels issue mma for fp16/bf16"),
    # --- No matrix work at all: PyTorch/Inductor elementwise, reductions, copies, pooling ---
    _r("elementwise", r"elementwise_kernel|unrolled_elementwise|vectorized_elementwise|"
       r"distribution_elementwise|distribution_nullary", False, None, H200 + ": hmma>0 only via HFMA2.MMA"),
    _r("reduce-pool-copy", r"reduce_kernel|splitKreduce_kernel|max_pool|avg_pool|adaptive_average_pool|"
       r"adaptive_max_pool|CatArrayBatchedCopy|softmax_warp|cunn_SoftMax|layer_norm|batch_norm|"
       r"index_elementwise|indexSelect|scatter_gather|fill_kernel|copy_kernel|memcpy|memset|"
       r"\bcat_|upsample|embedding_|nll_loss|cross_entropy|multi_tensor_apply", False, None,
       H200 + ": pooling, splitKreduce, copies"),
    _r("gather-sort-epilogue", r"gather_kernel|scatter_kernel|DeviceRadixSort|radix_sort|randperm|"
       r"cublasLt::epilogue|epilogue::impl", False, None,
       "measured on H100 (reports/mnist_mlp): gather, radix sort, randperm, cuBLASLt epilogue: tensor ops 0"),
    _r("cudnn-batchnorm", r"\bbn_(fw|bw)_|\bbn_fw_inf_|init_device_workspace_kernel", False, None,
       "measured on H100 (ResNet-50 AMP, replayed operators; reports/profile_overhead): cuDNN's bn_fw_tr_1C11_*, "
       "bn_bw_1C11_* batch-norm kernels hmma == hfma2 (HFMA2.MMA moves only), init_device_workspace_kernel 0"),
    _r("cudnn-wgrad-reduce-amp-scale", r"reduce_wgrad_nchw_helper|amp_update_scale_cuda_kernel", False, None,
       "measured on H100 (ResNet-50 AMP, replayed operators; tests/fixtures/h100_resnet_amp_replay_ncu_raw.csv.gz): "
       "cuDNN's reduce_wgrad_nchw_helper (5 launches) and GradScaler's amp_update_scale_cuda_kernel: tensor ops 0"),
    _r("foreach-norm-cleanup", r"lpnorm_cleanup", False, None,
       "measured on H100 (torch._foreach_norm, gradient-norm clipping's last kernel; "
       "benchmarks/probes/gpu_replay_fix_probe.sh, tests/fixtures/h100_foreach_norm_ncu_raw.csv.gz): "
       "lpnorm_cleanup<float|Half|BFloat16>: hmma == hfma2 (HFMA2.MMA moves only), imma and dmma 0"),
    _r("triton-pointwise", r"^triton_(poi|red|per)_", False, None,
       PEER + ": Inductor pointwise/reduction kernels contain no tl.dot"),
    # Inductor's matmul templates (max-autotune): tl.dot, so matrix work; fp16/bf16 operands run on Tensor Cores,
    # fp32 ones only where TF32 is allowed. The name does not say which (triton_tem_fused_mm_0).
    _r("triton-template", r"^triton_tem_", None, None,
       "Inductor matmul template: matrix work whose Tensor Core use depends on its operands' dtype and the TF32 "
       "setting, which the name does not say"),
    # --- library kernels that do no matrix work (30% of a DDP ResNet's compute time was "unknown") ---
    _r("pytorch-native", r"^(?!.*(" + _MATRIX_WORDS + r")).*\b(at::native::|at::cuda::|at_cuda_detail::|c10::cuda::)",
       False, None,
       "measured on H100 and H200 (known-kernel table, 28 at::native kernel names: elementwise, reductions, "
       "dropout, embedding backward, layer-norm backward): no tensor math in any"),
    _r("cub-thrust", r"\bcub::|\bthrust::|DeviceScanKernel|DeviceSelectSweep|DeviceReduceKernel|DeviceSegmented|"
       r"DeviceUniqueByKey|DeviceHistogram", False, None,
       "measured on H100 (known-kernel table: 5 cub kernels of PyTorch's sort, unique and scan): no tensor math"),
    _r("cudnn-nonmatrix", r"^(?!.*(" + _MATRIX_WORDS + r"|winograd|fft)).*(\bcudnn::|nhwcAddPaddingKernel|"
       r"batchnorm_|compute_dot_do_o|convert_dq_to)", False, None,
       "measured on H100 (known-kernel table: 25 cuDNN batch-norm, padding, SDPA-backward helper and layout "
       "kernels, e.g. cudnn::batchnorm_fwtr_nhwc_semiPersist, nhwcAddPaddingKernel): no tensor math"),
    _r("blas-level1", r"\b(scal|axpy|dot|asum|nrm2|rot|swap|iamax|iamin)_kernel\b", False, None,
       "measured on H100 (known-kernel table: cuBLAS scal_kernel): vector operations, no matrix work"),
    _r("softmax-transpose-pad", r"softmax|[Tt]ranspose|_pad_|pad_kernel|Padding", False, None,
       H200 + " (softmax_warp, nchwToNhwc/nhwcToNchw transposes) and H100 (nhwcAddPaddingKernel): no tensor math; "
       "after every Tensor Core family above, so fused attention kernels that say softmax are not caught"),
)


# Architecture facts, applied per launch with the recording's compute capability (``tensor_cores.ladder``): a kernel whose
# name states fp32 or fp64 data on a GPU below compute capability 8.0 ran on CUDA cores, whatever else its name says.
PRE_AMPERE_FP32 = NameRule(
    "no-tf32-before-sm80", re.compile(r"$^"), False, None,
    "NVIDIA's architecture: TF32 and fp64 Tensor Core math (DMMA) start with compute capability 8.0 (A100); Volta and "
    "Turing Tensor Cores take fp16 (and int8/int4 on Turing) only, so an fp32 or fp64 kernel there ran on CUDA cores")


def stated_dtype(name: str) -> str | None:
    """The data type a kernel's name states (``_cuda_core_dtype`` on its function name and template arguments)."""
    return _cuda_core_dtype(fnames.signature(name))


NO_RULE_WHY = "no measurement or name rule knows this kernel name, and no hardware counters were collected"


def unknown_why(rule_id: str | None) -> str:
    """Why a kernel is "unknown": the reason its rule gives (a Triton template, a CUDA graph traced whole), or that
    nothing knows its name (a user's Triton or CUDA kernel: its name is the author's choice and says nothing)."""
    rule = next((r for r in RULES if r.id == rule_id), None)
    return rule.seen if rule is not None and rule.tensor_core is None else NO_RULE_WHY


def match(name: str) -> tuple[bool | None, str | None, str | None]:
    """(tensor_core, dtype, rule id) for one kernel name, judged by its function name (``function_names``); (None, None,
    None) when no rule knows it."""
    for rule in RULES:
        if rule.matches(name):
            return rule.tensor_core, (rule.dtype_for(name) if rule.tensor_core else None), rule.id
    return None, None, None


def classify_names(names: pd.Series) -> pd.DataFrame:
    """Rules evaluated once per distinct name, then spread by integer codes: columns name_tc
    (object True/False/None), name_dtype, name_rule."""
    codes, uniques = pd.factorize(names)
    res = [match(str(u)) for u in uniques] + [(None, None, None)]  # code -1: missing name
    cols = list(zip(*res))
    rule_codes, rule_names = pd.factorize(pd.Series(cols[2], dtype=object))
    return pd.DataFrame({"name_tc": pd.Series(np.array(cols[0], dtype=object)[codes], dtype=object, index=names.index),
                         "name_dtype": pd.Series(np.array(cols[1], dtype=object)[codes], dtype=object, index=names.index),
                         "name_rule": pd.Categorical.from_codes(rule_codes[codes], categories=list(rule_names))},
                        index=names.index)


# NO_MATRIX_FAMILIES and ncu_kernel_filter live in ``families`` (no pandas: the profile run builds ncu's
# command line before its analysis modules are imported).
NO_MATRIX_FAMILIES = families.NO_MATRIX_FAMILIES
ncu_kernel_filter = families.ncu_kernel_filter


# Kernels that do matrix work (GEMM, GEMV, conv, attention), whatever engine ran them: findings look at
# these when they did not use Tensor Cores.
MATRIX_WORK = re.compile(
    r"gemm|gemv|conv|fprop|dgrad|wgrad|matmul|_mm_|bmm|xmma|nvjet|cutlass|sdpa|attention|flash|fmha|"
    r"cublas|cudnn_generated|s1688|h884|s884|16816|tensorop|scudnn|\bmm\b|(?<![a-z])linear(?!ize)|^triton_tem_|"
    r"^Cijk_|mfma|^internal::kernel\b", re.IGNORECASE)  # (cuBLAS's internal::kernel<...>: its small GEMMs)
_NOT_MATRIX = re.compile(r"nchwToNhwc|nhwcToNchw|splitKreduce|elementwise|reduce_kernel|reduce_wgrad|epilogue|nccl|"
                         r"all_reduce|cross_device", re.IGNORECASE)


def _whole(name: str) -> str:
    return name


def name_mask(names: pd.Series, pattern: re.Pattern | str, exclude: re.Pattern | str | None = None,
              view: Callable[[str], str] = _whole) -> pd.Series:
    """Boolean mask of names whose ``view`` (default: the whole name; ``function_names.function``/``base``/``signature``
    for its parts) matches ``pattern`` (and not ``exclude``), evaluated once per distinct name: a trace has a million
    launches but only hundreds of kernel names."""
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    ex = re.compile(exclude) if isinstance(exclude, str) else exclude
    codes, uniques = pd.factorize(names)
    seen = [view(str(u)) for u in uniques]
    hit = np.array([bool(rx.search(v)) and not (ex is not None and ex.search(v)) for v in seen]
                   + [False], dtype=bool)  # code -1 (missing name) -> the trailing False
    return pd.Series(hit[codes], index=names.index)


def is_communication(names: pd.Series) -> pd.Series:
    """Kernels that move data between GPUs (``COMMUNICATION``), evaluated once per distinct name."""
    return name_mask(names, COMMUNICATION)


def is_matrix_work(names: pd.Series) -> pd.Series:
    """Matrix-work kernels, judged by the function name's last part (``function_names.base``): never by a namespace
    (``fbgemm_gpu::``), a template argument or a parameter type (``cublasTransposeParams``)."""
    return name_mask(names, MATRIX_WORK, _NOT_MATRIX, view=fnames.base)
