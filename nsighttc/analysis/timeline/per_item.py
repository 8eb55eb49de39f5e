"""A library's one-input call in a loop of the program's: one cause, not the parts it runs in turn.

A transformers pipeline called once per input runs ``preprocess``, ``forward`` (a batch of one: every kernel launched
for one input) and ``postprocess`` in turn, the GPU idle through most of it. The host-frames table splits that time by
the part the host was in, and the idle causes by kind (host work in a range, launch gaps), so findings named the
parts: on H200 (users6/final6b, reports/steps_time) the same program's first run led with "the host loads data in
`preprocess`" (54% of the idle time, 2.50-3.18x) and its cached run with "launch-bound" (`forward` 47%, 1.31-1.91x),
each the gain of removing its one part, while what the user changes is one line (the batched call: 2.1-4.0x measured,
workers alone 1.2-1.4x). Where most of the idle time's host samples sit under such a call, its parts' findings are one
finding here, with one headline, and one gain: half of the idle time under the call removed at the low end (as other
host fixes), all of it but the parts the batched form still runs one input at a time at the high end."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...model import Finding

PER_ITEM_ID = "per-input-calls"
PER_ITEM_SHARE = 0.5          # of the idle time's host samples under the per-input call
# the host findings a per-input call's parts make (the merged ones)
PER_ITEM_FINDINGS = ("gpu-starved-by-data-loading", "launch-bound", "host-bound-model-code",
                     "gpu-idle-during-host-range")


@dataclass(frozen=True)
class PerItemCall:
    """A library's one-input call: the frame the host's stacks are in (``file``, ``frame``), what it is in words,
    the fix, and the parts (``stays``) that its batched form still runs one input at a time."""
    file: re.Pattern
    frame: re.Pattern
    what: str
    advice: str
    stays: re.Pattern


# A transformers pipeline (transformers/pipelines/base.py, `Pipeline.run_single`: preprocess, forward, postprocess).
# Batched (`pipe(inputs, batch_size=..., num_workers=...)`), its DataLoader workers run `preprocess` beside the GPU
# and `forward` takes a batch, while `postprocess` still runs in the program's process once per input, on outputs
# already moved to the host (`Pipeline.forward` → `_ensure_tensor_on_device(..., cpu)`; `PipelineIterator` unrolls
# the batch). users6 (benchmarks/gpu/gpu_steps_time.sh, H200): ViT-base fp16 `pipe(img)` per photo 87-99 images/s,
# `pipe(images, batch_size=32, num_workers=8)` 187-292 (2.1x-4.0x as the host's speed moved); workers alone 123.
PER_ITEM_CALLS = (
    PerItemCall(re.compile(r"(?:^|/)pipelines/base\.py$"), re.compile(r"(?:^|\.)run_single$"),
                "a transformers pipeline",
                "The program calls a transformers pipeline one input at a time, so each input is preprocessed, run as "
                "a batch of one and read back alone while the GPU waits: pass the inputs as one list, a dataset or a "
                "generator with `pipe(inputs, batch_size=32, num_workers=8)` (its DataLoader workers preprocess while "
                "the GPU runs; tune `batch_size` to the GPU's memory). ",
                re.compile(r"(?:^|\.)postprocess$")),
)


@dataclass
class Match:
    """The rows of a host-frames table under one per-input call: their share of the idle time,
    the share of each part it called, and the share of the parts that stay one input at a time."""
    call: PerItemCall
    frame: str
    file: str
    share: float
    idle_ns: float
    parts: dict[str, float]
    stays: float


def _part(calls: object) -> str:
    """`ImageClassificationPipeline.preprocess` -> `preprocess`: the part, whichever subclass ran it."""
    return str(calls or "").rsplit(".", 1)[-1] or "(its own code)"


def match(rows: list[dict] | None) -> Match | None:
    """The per-input call (``PER_ITEM_CALLS``) under which at least ``PER_ITEM_SHARE`` of the idle time's host
    samples fell, with its parts; None where there is none."""
    for call in PER_ITEM_CALLS:
        under = [r for r in rows or () if call.file.search(str(r.get("file") or ""))
                 and call.frame.search(str(r.get("frame") or ""))]
        share = sum(r.get("share") or 0.0 for r in under)
        if not under or share < PER_ITEM_SHARE:
            continue
        parts: dict[str, float] = {}
        for r in under:
            part = _part(r.get("calls"))
            parts[part] = parts.get(part, 0.0) + (r.get("share") or 0.0)
        stays = sum(v for k, v in parts.items() if call.stays.search(k))
        return Match(call, str(under[0]["frame"]), str(under[0].get("file") or ""), share,
                     sum(r.get("idle_ns") or 0.0 for r in under), dict(sorted(parts.items(), key=lambda kv: -kv[1])),
                     stays)
    return None


def parts_words(m: Match) -> str:
    """'`preprocess` 54%, `forward` 35%, `postprocess` 10%': each part's share of the idle time (1% or more)."""
    return ", ".join(f"`{k}` {100 * v:.0f}%" for k, v in m.parts.items() if v >= 0.005)


def headline(m: Match, what: str, ms: str) -> str:
    """The headline's cause: the call, not its largest part, so a program's runs that split its time differently
    name the same thing. Its share has no error bar: its parts' errors are of one split of the same samples (their
    shares add up to the call's), so adding them would overstate it (±13 on a call that held 100% of the samples)."""
    return (f"host busy in `{m.frame}` ({m.file}), {m.call.what} called one input at a time "
            f"({100 * m.share:.0f}% of the GPU's {what}, {ms}: {parts_words(m)})")


def merge(rows: list[dict] | None, out: list[Finding]) -> None:
    """Where a per-input call holds most of the idle time (``match``), the host findings its parts made
    (``PER_ITEM_FINDINGS``) become one, in the place of the first of them: its cost theirs added per phase, its fix the
    batched call."""
    m = match(rows)
    parts = [f for f in out if f.id in PER_ITEM_FINDINGS]
    if m is None or not parts:
        return
    cost: dict[str, float] = {}
    for f in parts:
        for k, v in (f.per_step_ns or {}).items():
            cost[k] = cost.get(k, 0.0) + v
    merged = Finding(
        PER_ITEM_ID, "high", f"The GPU waits while the host runs {m.call.what} one input a call in `{m.frame}` "
        f"({parts_words(m)} of the idle time)",
        f"{100 * m.share:.0f}% of the GPU's idle time in the steady steps fell under `{m.frame}` ({m.file}); its parts "
        "read as: " + "; ".join(f"{f.title} ({f.evidence})" for f in parts),
        m.call.advice.strip(), sum(f.time_ns for f in parts), [], cost)
    at = out.index(parts[0])
    out[:] = [f for f in out[:at] if f not in parts] + [merged] + [f for f in out[at:] if f not in parts]


def kept_share(doc: dict) -> tuple[float, str]:
    """(the part of a per-input call's idle time its batched form keeps, its parts in words), from the verdict's
    host-frames table (``analysis.gain``'s high end of ``PER_ITEM_ID``)."""
    m = match(((doc.get("timeline") or {}).get("host_frames") or {}).get("rows"))
    if m is None or m.share <= 0:
        return 0.0, ""
    kept = [k for k in m.parts if m.call.stays.search(k)]
    return min(m.stays / m.share, 1.0), ", ".join(f"`{k}`" for k in kept)
