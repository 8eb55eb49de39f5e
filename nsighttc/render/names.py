"""Short kernel names for tables and plots (the full name always stays in the JSON and on hover).

C++ kernel names are mostly template noise; what a reader needs is the family plus the one argument
that says what it computes: the cutlass kernel inside ``cutlass::Kernel2<...>``, the functor inside
PyTorch's ``elementwise_kernel<...>``.
"""
from __future__ import annotations

import re

_WRAPPERS = {"Kernel", "Kernel2", "kernel", "device_kernel"}
_NOISE = re.compile(r"\bat::<unnamed>::|\(anonymous namespace\)::|<unnamed>::|\bat::native::|\bat::")
# every alternative starts at a word boundary: a leading \w+ tried at each position of a long identifier
# is quadratic (a fuzzed 400 KB name took minutes: tests/fixtures/bad/verdict-6ae37d004a.json)
_FUNCTOR = re.compile(r"\b(CUDAFunctor_\w+(?:<[\w:]+>)?|\w+_copy_kernel_cuda|launch_\w+|normal_kernel|"
                      r"random_from_to_kernel|\w+_kernel_cuda|\w+Functor\w*(?:<[\w:]+>)?)")
MAX_NAME = 8192  # longer names are cut before any pattern work: display only needs the start


def _split_template(name: str) -> tuple[str, str]:
    """('base', 'first template argument') with nested <> respected."""
    i = name.find("<")
    if i < 0:
        return name.split("(")[0], ""
    depth, start = 0, i + 1
    for j in range(i, len(name)):
        c = name[j]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return name[:i], name[start:j].strip()
        elif c == "," and depth == 1:
            return name[:i], name[start:j].strip()
    return name[:i], name[start:].split(",")[0].strip()


_RETURN_TYPE = re.compile(r"^(void|std::enable_if<[^>]*>::type)\s+")


def name_parts(name: str) -> tuple[str, str, str, str]:
    """(name without return type and namespace noise, base before templates and parameters, first template
    argument, leaf function name): what short names and ncu's kernel-name filter are made of."""
    n = _NOISE.sub("", _RETURN_TYPE.sub("", str(name)[:MAX_NAME].strip()))
    base, first = _split_template(n)
    base = base.split("(")[0].strip()
    return n, base, first, base.split("::")[-1].strip()


def short_name(name: str, width: int = 64) -> str:
    n, base, first, leaf = name_parts(name)
    if leaf in _WRAPPERS and re.fullmatch(r"[A-Za-z_]\w{8,}", first or ""):
        text = first  # cutlass::Kernel2<cutlass_80_simt_sgemm_...>
    elif "elementwise" in leaf or "distribution" in leaf:
        hint = _FUNCTOR.search(n[len(base):])
        text = f"{base}<{hint.group(1)}>" if hint else f"{base}<…>"
    elif first:
        text = f"{base}<{first}{', …' if ',' in n[len(base):].split('>')[0] else ''}>"
    else:
        text = base
    return text if len(text) <= width else text[: width - 1] + "…"
