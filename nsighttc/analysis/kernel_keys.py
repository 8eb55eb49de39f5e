"""One spelling of a kernel name for every tool: the key under which ncu evidence (``merge``), the evidence cache and
the known-kernel table (``known_kernels``) find a timeline's kernels. ncu's CSV, ncu_report, nsys and torch.profiler
demangle the same kernel differently; the key drops what they disagree on. Its own module: the Tensor Core ladder
(``tensor_cores``) asks the known-kernel table, which needs the key, and ``merge`` needs the ladder's constants.
"""
from __future__ import annotations

import re

import pandas as pd

from .. import labels

# Template values: the ncu CSV writes `nchwToNhwcKernel<__half, __half, float, 0, 1, 0>`, torch.profiler
# `<__half, __half, float, false, true, (cudnnKernelDataType_t)0>` (same kernel, probe cases on H200):
# booleans become 0/1 and any C cast in front of a number goes.
_BOOL = re.compile(r"\b(true|false)\b|\(bool\)([01])")
_ENUM_CAST = re.compile(r"\((?:[A-Za-z_][\w:]*)\s*\)(?=-?\d)")
_CASTS = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)")
# The ncu CSV collapses namespaces (`native::vectorized_gather_kernel`, `at_cuda_detail::DeviceRadixSort...`)
# where nsys writes them in full (`at::native::...`, `at_cuda_detail::cub::detail::radix_sort::...`):
# seen on H100 with ncu/nsys 2025.3.1. Keys drop every qualifier.
_QUALIFIERS = re.compile(r"(?:<unnamed>::|\(anonymous namespace\)::|\b[A-Za-z_]\w*::)+")
# Spelling the demanglers differ in, inside template arguments (a transformers Trainer on H100, torch 2.11 against
# ncu 2025.3.1; tests/fixtures/h100_trainer_kernel_names.json): torch.profiler writes `GammaBetaBackward...<float,
# float, 32u, 32u, 256u, ...>`, `policy_hub<..., SumOp<long> >::Policy1000, long const*, long*` where the ncu CSV writes
# `<float, float, 32, 32, 256, ...>`, `SumOp<long>>::Policy1000, const long *, long *`: integer suffixes go, `const T *`
# becomes `T const*`, and no space is kept beside `<`, `>`, `*`, `&` or before `,`. Five kernels the replay had
# measured went unmatched and sent the program itself under ncu for them (6 s of the Trainer's first run).
_INT_SUFFIX = re.compile(r"\b(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")
_WEST_CONST = re.compile(r"\bconst ((?:(?:unsigned|signed|long|short) )*[A-Za-z_]\w*)\s*([*&])")
_SPACE_BESIDE = re.compile(r"\s*([<>*&])\s*|\s+(?=,)")


def _bool01(m: re.Match) -> str:
    return m.group(2) if m.group(2) else ("1" if m.group(1) == "true" else "0")


def _drop_params(name: str) -> str:
    """Cut the parameter list: ncu's CSV writes it generically (`(nchw2nhwc_params_t<T3>, const T1 *, T2 *)`),
    torch.profiler concretely (`(nchw2nhwc_params_t<float>, __half const*, __half*)`); the template arguments
    before it already say which kernel it is."""
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def merge_key(names: pd.Series) -> pd.Series:
    """Names as one demangler would write them: ncu_report and nsys write template values with C casts
    (`implicit_convolve_sgemm<__half, __half, (int)1024, ...>`, seen with 2025.3.1), the ncu CSV without
    (`..., 1024, ...`); and namespaces differ (see _QUALIFIERS)."""
    # once per distinct name: a timeline's names are a categorical of a few hundred kernels over a million
    # launches (text per row cost ResNet-50 AMP's merge 0.06 of its 0.13 s)
    return pd.Series(labels.per_category(names, _key), index=names.index)


def kernel_key(name: str) -> str:
    """``merge_key`` of one name."""
    return _key(name)


def _key(name: str) -> str:
    key = re.sub(r"\s+", " ", _drop_params(_QUALIFIERS.sub("", _CASTS.sub("", _ENUM_CAST.sub(
        "", _BOOL.sub(_bool01, name)))))).strip()
    key = _WEST_CONST.sub(r"\1 const\2", _INT_SUFFIX.sub(r"\1", key))
    return _SPACE_BESIDE.sub(lambda m: m.group(1) or "", key)


def short_kernel(name: str, width: int = 60) -> str:
    """A kernel's name cut to ``width`` characters for a sentence: the findings' advice and the shape-churn headline
    name kernels with it, one spelling for both."""
    return name if len(name) <= width else name[:width - 3] + "..."
