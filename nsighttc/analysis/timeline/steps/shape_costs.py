"""What a loop's new input shapes were paid for: the kernel the host paused before at each new shape
(``slow.paid_before``), told as the library whose op prepared it, and the fix that library allows beside padding.

The rules match kernel names, and say where each fact was seen. The pause is measured (launch times, every recording
kind); which library's work it was is read from the name of the kernel launched after it, so it is said as that
kernel's library, with the kernel's name beside it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ....durations import duration

MOST = 0.5  # the kernel the pauses came before holds this share of the new shapes' cost: the headline names it
SMALL = 0.05  # kernels after the first named only where their pauses hold this share of the cost


@dataclass(frozen=True)
class Preparer:
    pattern: re.Pattern
    who: str         # the op's library, as the headline names it
    what: str        # ... and what it does at a new shape
    fix: str         # beside padding: what else removes the per-shape cost ("" where padding is the fix)
    seen: str


PREPARERS = (
    Preparer(re.compile(r"cudnn.*(sdpa|fmha|flash|attention)|fort_native_sdpa", re.I), "cuDNN's attention",
             "cuDNN's attention (`aten::_cudnn_attention_forward`), which builds a plan for each new shape",
             "Or keep the shapes and run attention on a backend with no plan per shape: "
             "`with torch.nn.attention.sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):` around the model call "
             "(PyTorch's memory-efficient kernels take an attention mask; the flash backend takes none).",
             "H200, torch 2.11, BERT-base fp16 at 36 lengths (wrappers/varlen_infer.py): 92-94% of the steps' "
             "excess was the host's pause before `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_*`, in a "
             "torch.profiler and an nsys recording (tests/fixtures/steps/varlen_infer_*), 92-97% in live runs; "
             "plain runs: padded 372-649 requests/s, EFFICIENT_ATTENTION 1,627-1,883, bucketed 1,461-2,283 "
             "(reports/steps_time/shape_costs)"),
    Preparer(re.compile(r"^triton_|triton", re.I), "a kernel torch.compile generated",
             "a kernel torch.compile generated (each new shape recompiles, unless the dimension is dynamic)",
             "", "peer knowledge: torch.compile specialises on shapes and recompiles on a new one"),
    Preparer(re.compile(r"cudnn|conv|dgrad|wgrad|fprop", re.I), "cuDNN's convolution",
             "cuDNN's convolution (an algorithm chosen per shape; timed for each new one under "
             "`torch.backends.cudnn.benchmark = True`)",
             "", "peer knowledge: PyTorch's documentation of cudnn.benchmark"),
    Preparer(re.compile(r"nvjet|gemm|cublas|cutlass|xmma", re.I), "cuBLAS's matrix multiply",
             "cuBLAS's matrix multiply (a kernel chosen per shape by its heuristics)",
             "", "H200: the GEMMs' pauses at new shapes were 1-2% of their cost in wrappers/varlen_infer.py"),
)


def preparer(name: str) -> Preparer | None:
    return next((p for p in PREPARERS if p.pattern.search(name)), None)


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


def top(acc: dict) -> tuple[dict, float] | None:
    """(the kernel the host paused before most at new shapes, its share of their cost), or None."""
    paid = acc.get("paid_before") or []
    if not paid or not acc.get("new_shape_excess_ns"):
        return None
    return paid[0], paid[0]["ns"] / acc["new_shape_excess_ns"]


def headline_words(acc: dict) -> str:
    """'; paid before `<kernel>` (cuDNN's attention ...)' where one kernel holds ``MOST`` of the cost, else ''."""
    t = top(acc)
    if t is None or t[1] < MOST:
        return ""
    p = preparer(t[0]["name"])
    return (f"; {100 * t[1]:.0f}% of it the host's pauses before `{_short(t[0]['name'])}`"
            + (f": {p.who}" if p else ""))


def evidence_words(acc: dict) -> str:
    """The finding's sentence on what paid: each kernel the host paused before, its time and share."""
    paid = acc.get("paid_before") or []
    cost = acc.get("new_shape_excess_ns") or 0.0
    if not paid or not cost:
        return ""
    paid = paid[:1] + [p for p in paid[1:] if p["ns"] >= SMALL * cost]
    parts = [f"`{_short(p['name'])}` {duration(p['ns'])} ({100 * p['ns'] / cost:.0f}%, over {p['launches']} "
             "launches)" for p in paid]
    first = preparer(paid[0]["name"])
    said = f". The host paused at the new shapes before launching {'; '.join(parts)}, beyond its pause before the " \
           "same kernel at a known shape"
    if first is not None and paid[0]["ns"] >= MOST * cost:
        said += f": the first is {first.what}"
    return said + "."


def fix_words(acc: dict) -> str:
    """What else removes the cost, where the kernel paid before most has a fix of its own beside padding."""
    t = top(acc)
    if t is None or t[1] < MOST:
        return ""
    p = preparer(t[0]["name"])
    return f" {p.fix}" if p and p.fix else ""
