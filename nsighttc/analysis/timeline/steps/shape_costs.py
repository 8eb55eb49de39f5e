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
from ...kernel_keys import short_kernel

MOST = 0.5  # the kernel the pauses came before holds this share of the new shapes' cost: the headline names it
SMALL = 0.05  # kernels after the first named only where their pauses hold this share of the cost


# A new shape's steps launching this many times the kernels of a step at a known shape: the library tried kernels
# there (autotuning). H200, an image loop at 25 sizes under cudnn.benchmark (wrappers/varlen_conv.py): 3.6-5x in
# cached runs and recordings by hand; BERT-base at 36 lengths, cuDNN's attention building plans (varlen_infer.py):
# about 1x.
TRIALS = 2.0
BENCHMARK_FIX = ("Or keep the sizes and let cuDNN choose its convolution algorithms by its heuristics: "
                 "`torch.backends.cudnn.benchmark = False` times nothing per shape (H200, an image loop at 25 sizes: "
                 "5,279 images/s with it off, 768-783 with it on, 2,983-3,445 padded to three sizes; "
                 "reports/steps_time/final/probe_summary.txt.gz).")
# ... where the recording shows no trials (a first run's window recorded a new size's steps with as many launches as
# a known size's: H200, reports/steps_time/final3), the same fix, said as the likely one: with its heuristics alone
# cuDNN's new sizes cost little (the loop at 25 sizes: 4,350-5,279 images/s without cudnn.benchmark).
BENCHMARK_IF = ("Where the program sets `torch.backends.cudnn.benchmark = True` (cuDNN then times its algorithms at "
                "each new shape), turning it off keeps the sizes and removes that cost: " + BENCHMARK_FIX.split(": ", 1)[1])


@dataclass(frozen=True)
class Preparer:
    pattern: re.Pattern
    who: str         # the op's library, as the headline names it
    what: str        # ... and what it does at a new shape
    fix: str         # beside padding: what else removes the per-shape cost ("" where padding is the fix)
    seen: str
    trials_fix: str = ""  # ... said instead where the steps at new shapes tried kernels (``TRIALS``)


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
             BENCHMARK_IF, "peer knowledge: PyTorch's documentation of cudnn.benchmark; H200 (wrappers/varlen_conv.py): "
             "the host's pauses before 40-odd of cuDNN's convolution kernels at each new size",
             trials_fix=BENCHMARK_FIX),
    Preparer(re.compile(r"nvjet|gemm|cublas|cutlass|xmma", re.I), "cuBLAS's matrix multiply",
             "cuBLAS's matrix multiply (a kernel chosen per shape by its heuristics)",
             "", "H200: the GEMMs' pauses at new shapes were 1-2% of their cost in wrappers/varlen_infer.py"),
)


def preparer(name: str) -> Preparer | None:
    return next((p for p in PREPARERS if p.pattern.search(name)), None)


@dataclass(frozen=True)
class Leader:
    """What the new shapes were paid for, as the headline names it: one kernel (``name``) or, where no kernel holds
    ``MOST`` of the cost, one library's kernels (``kernels`` of them); ``share`` of the cost; ``trials``: the steps
    at new shapes launched ``TRIALS`` times the kernels of a step at a known shape or more."""
    name: str | None
    preparer: Preparer | None
    share: float
    kernels: int
    trials: float | None


def leader(acc: dict) -> Leader | None:
    paid = acc.get("paid_before") or []
    cost = acc.get("new_shape_excess_ns") or 0.0
    if not paid or not cost:
        return None
    ratio = acc.get("new_shape_launch_ratio")
    trials = float(ratio) if ratio and ratio >= TRIALS else None
    if paid[0]["ns"] >= MOST * cost:
        return Leader(paid[0]["name"], preparer(paid[0]["name"]), paid[0]["ns"] / cost, 1, trials)
    libs = acc.get("paid_by_library") or []
    if libs and libs[0]["ns"] >= MOST * cost:
        p = next((x for x in PREPARERS if x.who == libs[0]["who"]), None)
        return Leader(None, p, libs[0]["ns"] / cost, int(libs[0]["kernels"]), trials)
    return None


def _of_it(share: float) -> str:
    """A share of the new shapes' cost: the host's pauses before one kernel can add up to more than the steps' time
    beyond a known-shape step (the rest of those steps ran faster than a known one's), which is then all of it, not
    over 100% (Llama-shaped generate() at new prompt lengths, an H200: 414 ms of pauses before cuDNN's attention
    against 400 ms beyond, once said "103% of it")."""
    return f"{100 * share:.0f}%" if share < 0.995 else "all"


def _trials_words(lead: Leader | None) -> str:
    return (f" (the steps at new shapes launched {lead.trials:.0f}x the kernels of a step at a known one: it tried "
            "kernels there)") if lead is not None and lead.trials else ""


def headline_words(acc: dict) -> str:
    """'; 94% of it the host's pauses before `<kernel>`: cuDNN's attention' (one kernel holds ``MOST`` of the cost), or
    '; 90% of it the host's pauses before 31 of cuDNN's convolution kernels' (one library's do), else ''."""
    lead = leader(acc)
    if lead is None:
        return ""
    if lead.name is not None:
        return (f"; {_of_it(lead.share)} of it the host's pauses before `{short_kernel(lead.name)}`"
                + (f": {lead.preparer.who}" if lead.preparer else "") + _trials_words(lead))
    return (f"; {_of_it(lead.share)} of it the host's pauses before {lead.kernels} kernels of "
            f"{lead.preparer.who if lead.preparer else 'one library'}" + _trials_words(lead))


def evidence_words(acc: dict) -> str:
    """The finding's sentence on what paid: each kernel the host paused before, its time and share."""
    paid = acc.get("paid_before") or []
    cost = acc.get("new_shape_excess_ns") or 0.0
    if not paid or not cost:
        return ""
    paid = paid[:1] + [p for p in paid[1:] if p["ns"] >= SMALL * cost]
    parts = [f"`{short_kernel(p['name'])}` {duration(p['ns'])} ({_of_it(p['ns'] / cost)} of it, over {p['launches']} "
             "launches)" for p in paid]
    said = f". The host paused at the new shapes before launching {'; '.join(parts)}, beyond its pause before the " \
           "same kernel at a known shape"
    lead = leader(acc)
    if lead is not None and lead.preparer is not None:
        said += (f": the first is {lead.preparer.what}" if lead.name is not None else
                 f"; before {lead.kernels} kernels of {lead.preparer.who}, {_of_it(lead.share)} of it: "
                 f"{lead.preparer.what}")
    return said + _trials_words(lead) + "."


def fix_words(acc: dict) -> str:
    """What else removes the cost, where the kernel (or library) paid before most has a fix of its own beside
    padding: its ``trials_fix`` where the steps at new shapes tried kernels (cuDNN timing its convolutions per
    shape: turning the timing off), else its ``fix``."""
    lead = leader(acc)
    if lead is None or lead.preparer is None:
        return ""
    fix = lead.preparer.trials_fix if lead.trials and lead.preparer.trials_fix else lead.preparer.fix
    return f" {fix}" if fix else ""
