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
                     (re.compile(r"sgemm|f32f32|_ffma|float|_f32_|gemv|scudnn", re.I), "fp32"))  # (scudnn: cuDNN single)


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


# Blackwell's block-scaled and narrow types as TensorRT-LLM's generated kernels spell their operands (E2m1: fp4; E4m3,
# E5m2: fp8; the Mx prefix: scaled per block), with the usual ones
_TRTLLM_TYPES = (("e2m1", "fp4"), ("e4m3", "fp8"), ("e5m2", "fp8"), ("bfloat16", "bf16"), ("fp16", "fp16"))


def _trtllm_gen_dtype(name: str) -> str | None:
    """The operand type of TensorRT-LLM's generated GEMM and attention kernels: ``bmm_<C>_<A><B>_<Acc>_...``,
    ``GemmKernel_<C>_<A>_<Acc>_...`` (the input follows the output), ``fmhaSm100aKernel_Qkv<T>O<T>...``."""
    low = name.lower()
    types = "|".join(k for k, _ in _TRTLLM_TYPES)
    m = re.match(rf"^(?:bmm|\w*gemm\w*kernel|batchedgemm\w*)_[a-z0-9]+?_(?:mx)?({types})", low) or \
        re.search(rf"(?:qkv|_q)(?:mx)?({types})", low)
    return dict(_TRTLLM_TYPES)[m.group(1)] if m else None


def _cutlass3_dtype(name: str) -> str | None:
    """CUTLASS 3's element types in its template arguments (``cutlass::bfloat16_t``, ``cutlass::half_t``,
    ``cutlass::float_e4m3_t``, ``cutlass::tfloat32_t``), else what ``_typed_dtype`` reads in the name."""
    n = name.lower()
    for pattern, dtype in ((r"float_e[45]m[23]", "fp8"), (r"float_e2m1|float_ue8m0", "fp4"), (r"bfloat16_t", "bf16"),
                           (r"half_t", "fp16"), (r"tfloat32_t", "tf32"), (r"int8_t", "int8")):
        if re.search(pattern, n):
            return dtype
    return _typed_dtype(name)


def _amd_dtype(name: str) -> str | None:
    """The data type MIOpen's and Composable Kernel's names and template arguments state (``_fp16_``, ``half_t``,
    ``bf16``, ``int8``, ``f8``); fp32 on matrix cores (xf32, or fp32 MFMA) has no NVIDIA Tensor Core dtype: unsaid."""
    n = name.lower()
    for pattern, dtype in ((r"bf16|bhalf|bfloat16", "bf16"), (r"fp16|half_t|\bhalf\b|_f16", "fp16"),
                           (r"int8|_i8\b|int8_t", "int8"), (r"fp8|f8_t|_f8\b|bf8", "fp8")):
        if re.search(pattern, n):
            return dtype
    return None


def _r(id_, pattern, tc, dtype, seen, on="function"):
    return NameRule(id_, re.compile(pattern), tc, dtype, seen, on)


# Where facts come from that are not our own measurement: NVIDIA's and AMD's documentation of their libraries' names.
HTA = ("kernel names in HolisticTraceAnalysis's test traces (facebookresearch/HolisticTraceAnalysis tests/data, "
       "MIT; ../shared/fixtures/hta/)")
CUDNN_DOCS = "cuDNN's kernel families (peer knowledge: NVIDIA documentation and DLProf's tables, not measured by us)"
TENSILE_DOCS = ("rocBLAS/hipBLASLt Tensile kernel names (peer knowledge: Tensile's naming, `MI<M>x<N>x<K>` = the MFMA "
                "matrix instruction the kernel is built on; AMD MI250 trace of HolisticTraceAnalysis's test data)")
TRTLLM_GEN = ("TensorRT-LLM's generated Blackwell kernels (peer knowledge: the names of its cubins in "
              "NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/trtllmGenKernels, e.g. GemmKernel_Bfloat16_E4m3_Fp32_tile128x128x128_"
              "..._sm100a, bmm_E2m1_E2m1E2m1_Fp32_..._sm100a, fmhaSm100aKernel_QkvE4m3OBfloat16...: built on tcgen05 UMMA, "
              "the Tensor Cores of sm_100; a B200 vLLM rank spent ~74% of its compute in them)")
CUTLASS3 = ("CUTLASS 3 kernels on Hopper and Blackwell (peer knowledge: their mainloops are named after the Tensor Core "
            "instruction, MainloopSm90TmaGmmaWarpSpecialized for wgmma, MainloopSm100TmaUmmaWarpSpecialized for tcgen05)")
MIOPEN_XDLOPS = ("MIOpen's implicit-GEMM convolutions and Composable Kernel (peer knowledge: `gtcx` kernels are MIOpen's "
                 "xdlops tensor contractions, CK's `xdl`/`xdlops` and `wmma` pipelines use the MFMA/WMMA matrix "
                 "instructions, ck_tile's FMHA kernels are built on MFMA; an MI300X ResNet DDP rank and SGLang prefill "
                 "had 24% of compute in them, told unknown before)")
MIOPEN_TENSOR_OPS = ("MIOpen's tensor operations (peer knowledge: SubTensorOpWithScalar1d, SubTensorOpWithCastTensor1d, "
                     "Op1dTensorGeneric... are element-wise kernels over a tensor, no matrix instruction)")


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
       r"winograd_nonfused::winograd\w*(Data|Output|Filter|Delta)\w*|^DSE::(regular_fft_\w+|vector_fft)$|^flip_filter$", False, None,
       CUDNN_DOCS + ": the FFT and Winograd convolutions' data transforms (the products are separate GEMM kernels); "
       "DSE::regular_fft_clip/pad, DSE::vector_fft and flip_filter<float, float> " + H200 + " (an fp32 VGG-style convnet, cudnn.allow_tf32=False, "
       "wrappers/grad_accum.py, torch 2.11)"),
    # the FFT convolution's product: a complex multiply-accumulate over channels in the frequency domain, on CUDA cores
    # (float2: complex fp32); the convolution's matrix work in the fp32 run above, 18% of its kernel time
    _r("cudnn-fft-product", r"(^|::)pointwise_mult_and_sum_complex$", False, "fp32",
       H200 + ": pointwise_mult_and_sum_complex<float2, 8, 4> in an fp32 convnet's FFT convolutions (grad_accum.py)"),
    # --- AMD matrix cores: Tensile GEMMs named after the MFMA instruction they use; the rest use vector ALUs ---
    _r("amd-tensile-mfma", r"^Cijk_.*_MI\d+x\d+x\d+|mfma", True, _tensile_dtype, TENSILE_DOCS),
    _r("amd-tensile-valu", r"^Cijk_", False, None, TENSILE_DOCS + ": no MI<...> in the name, no MFMA"),
    _r("amd-miopen-tensor-ops", r"(^|::)(SubTensorOp\w*|Op[1-5]dTensor\w*|ScaleTensor\w*|SetTensor\w*|CopyTensor\w*)$",
       False, None, MIOPEN_TENSOR_OPS),
    _r("amd-xdlops", r"^igemm_\w*gtcx\d*_|(^|::|_)(xdl|xdlops|wmma)(_|$)|Xdl|XdlOps|Wmma|(^|::)Fmha\w*Kernel|"
       r"ck_tile::\w*[Ff]mha|^fmha_(fwd|bwd)_", True, _amd_dtype, MIOPEN_XDLOPS, on="signature"),
    # --- Blackwell: TensorRT-LLM's generated GEMMs (MoE block-scaled bmm included) and attention; CUTLASS 3 ---
    _r("trtllm-gen", r"^(bmm_|\w*Gemm\w*Kernel_|BatchedGemm\w*_)\w*_sm1\d\d[af]?\b|^fmhaSm1\d\d", True, _trtllm_gen_dtype,
       TRTLLM_GEN),
    _r("cutlass3-mma", r"cutlass.*(Sm90|Sm100|Sm120)\w*(Gmma|Umma|TmaWarpSpecialized)|Mainloop\w*(Gmma|Umma)", True,
       _cutlass3_dtype, CUTLASS3, on="signature"),
    # --- Tensor Cores ---
    _r("nvjet", r"^nvjet_", True, _nvjet_dtype, H200 + ": nvjet_sm90_hsh/tst/qqtst (cuBLAS on Hopper)"),
    _r("xmma-typed", r"sm\d+_xmma_.*(f16f16|bf16bf16|tf32f32|f64f64|i8i8|e4m3|e5m2|tensor\d+x\d+x\d+)", True,
       _typed_dtype, H200 + ": sm90_xmma_gemm/fprop f16f16, tf32f32, f64f64 tensor16x8x16"),
    _r("cudnn-sdpa-mma", r"cudnn_generated_fort_native_sdpa.*(wgmma|hmma|mma)", True, None,
       H200 + ": ..._sdpa_sm90_flash_fprop_wgmma_f16_... ran a bf16 input: the name's f16 is not the dtype"),
    # cuDNN 9's CUTLASS 2 kernels launch through a template whose argument is the kernel's own name
    _r("cutlass-kernel-tensorop", r"::Kernel2?<\s*cutlass_tensorop_", True, _typed_dtype,
       H200 + ": cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x5_nhwc_align8>, "
       "<cutlass_tensorop_s1688fprop_optimized_tf32_...> (cuDNN's trials under cudnn.benchmark, wrappers/varlen_conv.py)",
       on="signature"),
    _r("cutlass-tensorop", r"(^|_|\b)tensorop_|wmma_tensorop", True, _typed_dtype,
       H200 + ": cutlass_75_tensorop_f16_s1688gemm, cutlass_80_wmma_tensorop_i161616gemm_s8"),
    # cuDNN's own copy of CUTLASS (cutlass_cudnn_infer/_train) names its kernels mangled, its Tensor Core operand
    # layouts (TensorOpMultiplicand) and element type (tfloat32_t, half_t, bfloat16_t) in the template arguments
    _r("cutlass-mangled-tensorop", r"^_ZN\d+cutlass\w*6Kernel.*TensorOp", True,
       lambda n: "tf32" if "tfloat32_t" in n else "bf16" if "bfloat16_t" in n else "fp16" if "half_t" in n else None,
       HTA + ": _ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolution..."
       "ColumnMajorTensorOpMultiplicandCongruous...tfloat32_t (an A100 tf32 convolution)", on="signature"),
    _r("legacy-mma-gemm", r"(volta|turing|ampere|sm\d+)_(fp16_|bf16_|int8_)?[hsdi](884|1688|16816|16832|8816|"
       r"88128)gemm", True, _typed_dtype, PEER + " (material: turing_fp16_s1688gemm on RTX 2080)"),
    _r("cudnn-mma-conv", r"(volta|turing|ampere|sm\d+)_(fp16_|bf16_|int8_)?[hsi](884|1688|16816|8816)cudnn", True,
       lambda n: "int8" if re.search(r"_i8816|int8", n) else "bf16" if "bf16" in n else "fp16", CUDNN_DOCS +
       ": h884/s884 (Volta), h1688/s1688 (Turing), 16816 (Ampere) are the HMMA shapes of fp16 convolutions"),
    _r("flash-attention", r"flash_fwd|flash_bwd|pytorch_flash::|fmha_cutlass[FB]_(f16|bf16)|fmha_.*_(f16|bf16)",
       True, None, PEER + ": FlashAttention kernels issue mma for fp16/bf16"),
    # PyTorch's memory-efficient attention in fp32, built for sm80 and newer (the name's _sm80/_sm90 suffix; _sm50,
    # _sm70 and _sm75 builds are SIMT): its GEMMs are CUTLASS tensor ops with OpMultiplyAddFastF32, fp32 accuracy
    # from three TF32 mmas (mem_eff_attention/gemm_kernel_utils.h, DefaultGemmType<ArchTag, float> for compute
    # capability 8.0 and up). Measured: two of them on the H100 (known-kernel table, on Tensor Cores); seen unmeasured
    # as fmha_cutlassB_f32_aligned_64x64_k32_dropout_sm80, a tiny BERT's attention backward on the H200
    # (tests/fixtures/steps/trainer_accum_nsys.sqlite.xz, 5.3% of its kernel time)
    _r("mem-efficient-attention-fp32", r"fmha_cutlass[FB]_f32_\w*_sm(8\d|9\d|1\d\d)\b", True, "tf32",
       "PyTorch's mem_eff_attention source (fp32 on sm80+: OpClassTensorOp, OpMultiplyAddFastF32, 3xTF32) and the "
       "H100's ncu measurements of fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80 and fmha_cutlassF_f32_aligned_"
       "64x64_rf_sm80 (known-kernel table)"),
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
    # recommendation models' sparse-feature kernels (fbgemm_gpu, torchrec; PyTorch's repeat_interleave): permutes,
    # index checks and FP8 row-wise (de)quantisation of embeddings, no matrix work. HTA's test data (a DLRM-style job on
    # A100/V100 ranks): 4-14% of their compute kernel time was unknown in them
    _r("fbgemm-sparse-ops", r"(^|::)(permute_\w+_kernel|bounds_check_indices_kernel|linearize_index_kernel|"
       r"recat_copy_async_kernel|_offsets_range_cuda_kernel|to_dense_representation_kernel|compute_cuda_kernel|"
       r"_compute_FP8_quantize_cuda_kernel|_FP8rowwise_to_float_cuda_kernel|_get_FP8_qparam_cuda_kernel)$", False,
       None, HTA + ": fbgemm_gpu::permute_2D_data_kernel, permute_pooled_embs_kernel, bounds_check_indices_kernel, "
       "_compute_FP8_quantize_cuda_kernel, linearize_index_kernel, recat_copy_async_kernel"),
    # cuDNN's kernels (cask: its kernel library) that compute a convolution's offsets before the GEMM does the work
    _r("cudnn-cask-offsets", r"(^|::)compute\w*Offsets\w*Kernel\w*$", False, None,
       HTA + ": cask_cudnn_infer::computeOffsetsKernel, cask_cudnn_train::computeWgradSplitKOffsetsKernel"),
    _r("cutlass-reduce-split-k", r"ReduceSplitK", False, None,
       HTA + ": cutlass_cudnn_train::reduction::kernel::ReduceSplitK (the split-K partial sums added up)",
       on="signature"),
    _r("cublas-gemmk1-float", r"^gemmk1_kernel<float\b", False, "fp32",
       HTA + ": cuBLAS gemmk1_kernel<float, ...> (a K=1 product in fp32 on CUDA cores)", on="signature"),
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
    r"cublas|cudnn_generated|s1688|h884|s884|16816|(^|_)tensorop_|scudnn|\bmm\b|(?<![a-z])linear(?!ize)|^triton_tem_|"
    r"^Cijk_|mfma|^internal::kernel\b|^igemm_|xdl|wmma|^fmhasm|pointwise_mult_and_sum_complex", re.IGNORECASE)  # (cuBLAS's internal::kernel<...>: its small GEMMs)
# (the Winograd convolutions' data transforms are no matrix work, whichever pass they serve: the products are the
# separate GEMM kernels; their rule ``cudnn-fft-winograd-transforms`` says so of ForwardData and WgradDelta alike)
_NOT_MATRIX = re.compile(r"nchwToNhwc|nhwcToNchw|splitKreduce|ReduceSplitK|compute\w*Offsets\w*Kernel|elementwise|reduce_kernel|reduce_wgrad|epilogue(?!tile)|nccl|"
                         r"all_reduce|cross_device|winograd\w*(Data|Output|Filter|Delta)|SubTensorOp|Op\ddTensor",
                         re.IGNORECASE)


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
