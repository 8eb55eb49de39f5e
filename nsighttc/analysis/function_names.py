"""A kernel's function name, out of the signature a profiler writes: what the name rules judge.

Profilers name a kernel by its whole demangled signature: return type, namespaces, template arguments, parameter
list (``void fbgemm_gpu::bounds_check_indices_kernel<long, 32>(at::PackedTensorAccessor32<long, 1, ...>, ...)``).
Searched whole, its arguments read as its name: a template argument ``fbgemm_gpu::FixedDivisor`` made every fbgemm
embedding kernel "gemm", ``scal_kernel(cublasTransposeParams...)`` "cublas", and one kernel family got different
answers where its signatures differed (torch.profiler traces of recommendation models, A100 and V100 ranks;
HolisticTraceAnalysis's test data). So the rules read:

- ``function``: the qualified function name, without its return type, template arguments and parameters
  (``fbgemm_gpu::bounds_check_indices_kernel``); for the launcher templates whose first template argument *is* the
  kernel (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>``, ``cutlass::Kernel2<...>``, ``cutlass::device_kernel<...>``),
  that argument's name after it: on purpose, the one place a template argument names the kernel;
- ``base``: ``function``'s last component (and the launched kernel): words such as "gemm" or "linear" are judged there,
  never in a namespace (``fbgemm_gpu::``);
- ``signature``: ``function`` and the template arguments, for the rules and dtypes that read them on purpose
  (``implicit_convolve_sgemm<__half, ...>`` is fp16, ``dgrad_engine<float, ...>`` fp32).

Names without any of these parts (``nvjet_sm90_tst_...``, ncu's function-only names) are their own function name.
"""
from __future__ import annotations

import re
from functools import lru_cache

# Templates that launch the kernel their first template argument names (CUTLASS 2.x device kernels, CUTLASS 3 /
# CuTe's device_kernel): seen in H100/H200 cuBLAS and PyTorch traces as `void cutlass::Kernel2<cutlass_80_...>(...)`.
LAUNCHERS = ("cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel", "cutlass::KernelLauncher",
             # Composable Kernel's tile kernels: `ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<...>>(...)`, its block
             # size and occupancy first (ROCm traces of MI300X, ck_tile's FMHA; peer knowledge: ck_tile's kentry)
             "ck_tile::kentry",
             # cuDNN's own copy of CUTLASS: `cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_...>`
             # (an A100 DLRM job's traces in HolisticTraceAnalysis's test data)
             "cutlass_cudnn_infer::Kernel", "cutlass_cudnn_train::Kernel", "cutlass_cudnn::Kernel")
_ANON = ("(anonymous namespace)", "{anonymous}")
# ncu's CSV spells an anonymous namespace `<unnamed>` (`at::<unnamed>::max_pool_forward_nchw<float, int>(...)`, H200)
_UNNAMED = ("<unnamed>", "{unnamed}")
_RETURN_TYPES = ("void ", "std::", "static ", "__global__ ", "auto ")
# Function names too generic to say what the kernel is: the namespace says it (cuBLAS's `internal::kernel<...>`)
GENERIC = ("kernel", "Kernel", "kernel2", "device_kernel")


def _split_top(s: str, sep: str) -> list[str]:
    """``s`` split at ``sep`` outside any <>, () or {}."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c in "<({":
            depth += 1
        elif c in ">)}":
            depth = max(depth - 1, 0)
        elif c == sep and depth == 0:
            out.append(s[start:i])
            start = i + 1
    out.append(s[start:])
    return out


_AFTER_NAME_UNNAMED = re.compile(r"(?<=[\w>])<unnamed>::")   # kernel<ns::<unnamed>::T> collapsed by ncu's CSV
_ORPHAN_UNNAMED = re.compile(r"(?:(?<=^)|(?<=[ ,]))unnamed>::")  # its leading "ns::<" dropped: "void unnamed>::k<...>"


def _unnamed(s: str) -> str:
    """ncu's CSV collapses namespaces around `<unnamed>` (H100, torch._foreach_norm's kernels:
    `void unnamed>::multi_tensor_apply_kernel<unnamed>::TensorListMetadata<1>, ...>`): its brackets are no
    template's. Each spelling becomes one placeholder, the template bracket it swallowed given back."""
    s = _AFTER_NAME_UNNAMED.sub("<" + _UNNAMED[1] + "::", s)
    s = _ORPHAN_UNNAMED.sub(_UNNAMED[1] + "::", s)
    return s.replace(*_UNNAMED)


@lru_cache(maxsize=65536)
def parts(name: str) -> tuple[str, str, str]:
    """(qualified function name, template arguments without their brackets, parameter list) of a signature."""
    s = _unnamed(" ".join(str(name).replace(*_ANON).split()))
    # the parameter list: the first "(" outside template arguments that follows a name
    depth, cut = 0, len(s)
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(depth - 1, 0)
        elif c == "(" and depth == 0 and i > 0 and s[i - 1] not in " ,(":
            cut = i
            break
    head, params = s[:cut], s[cut:]
    # the return type of a C++ signature: everything before the last space outside template arguments (a name that is
    # no signature, "CUDA graph #1 (traced whole)", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", keeps its words)
    start = 0
    if head.startswith(_RETURN_TYPES) or "::" in head:
        depth = 0
        for i, c in enumerate(head):
            if c == "<":
                depth += 1
            elif c == ">":
                depth = max(depth - 1, 0)
            elif c == " " and depth == 0:
                start = i + 1
    func = head[start:]
    i = func.find("<")
    if i > 0 and not func[:i].endswith("operator"):
        qualified, targs = func[:i], func[i + 1:func.rfind(">")] if func.rfind(">") > i else func[i + 1:]
    else:
        qualified, targs = func, ""
    def back(x: str) -> str:
        return x.replace(_ANON[1], _ANON[0]).replace(_UNNAMED[1], _UNNAMED[0])
    return back(qualified), back(targs), params


def _launched(qualified: str, targs: str) -> str:
    """The kernel a launcher template launches (its first template argument that is a type, not a number), else ''."""
    if qualified not in LAUNCHERS or not targs:
        return ""
    first = next((a.strip() for a in _split_top(targs, ",") if a.strip() and not _NUMBER.match(a.strip())), "")
    return parts(first)[0] if first else ""


_NUMBER = re.compile(r"^-?\d+[uUlL]*$")


@lru_cache(maxsize=65536)
def function(name: str) -> str:
    """The qualified function name (and, for a launcher template, the kernel it launches)."""
    qualified, targs, _ = parts(name)
    inner = _launched(qualified, targs)
    return f"{qualified} {inner}" if inner else qualified


@lru_cache(maxsize=65536)
def base(name: str) -> str:
    """The function name's last component (and the kernel a launcher launches): no namespace."""
    qualified, targs, _ = parts(name)
    last = qualified.rsplit("::", 1)[-1]
    if last in GENERIC:
        last = qualified.rsplit("::", 2)[-2] + "::" + last if "::" in qualified else last
    inner = _launched(qualified, targs)
    return f"{last} {inner.rsplit('::', 1)[-1]}" if inner else last


@lru_cache(maxsize=65536)
def signature(name: str) -> str:
    """The function name and its template arguments (no return type, no parameter list)."""
    qualified, targs, _ = parts(name)
    return f"{qualified}<{targs}>" if targs else function(name)
