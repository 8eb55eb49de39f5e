"""Steps bounded by the copies that bring each iteration's result to the host (``find``'s ``result-copy`` source):
where a loop's kernels do not repeat through it, and where a graph-replaying loop replays in some iterations only."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..base import device_to_host
from .find import RESULT_COPY, StepSet

MIN_COPIES = 6        # result copies that make a loop
COPY_MATCH = 0.9      # copies per iteration: the byte counts repeat with this period for this share of the copies
COPIES_SPAN = 2.0     # the copies' steps replace the kernel period's where they span this many times its loop


def result_copies(ops: pd.DataFrame | None) -> list[StepSet]:
    """Steps bounded by the device-to-host copies that bring each iteration's result back (``loss.item()``,
    ``logits.argmax(1).cpu()``): the host's boundary of a loop whose kernels do not repeat. Where an iteration copies
    more than one result, the copies' byte counts repeat with that period, and one copy in each period bounds the
    iterations (the one followed by the longest time, the median over the loop).

    Why: an image loop at 25 sizes under ``cudnn.benchmark`` launches other kernels at each size (cuDNN's trials,
    another algorithm per shape), so no kernel sequence repeats until the sizes do: a plain torch.profiler recording
    gave "52 steady steps of 1.63 ms", the last 1% of a 6.1 s loop, and left 96% of it "before the first step"; its
    150 batches each ended with one 256-byte copy of the answers (H200, wrappers/varlen_conv.py,
    reports/steps_time; an nsys recording of the same loop at 13 sizes: tests/fixtures/steps/varlen_conv_nsys.sqlite.xz)."""
    dtoh = device_to_host(ops)
    if dtoh.sum() < MIN_COPIES + 1:
        return []
    c = ops.loc[dtoh, ["end_ns", "bytes"]].sort_values("end_ns", kind="stable")
    ends = c["end_ns"].to_numpy(dtype="float64")
    size = np.nan_to_num(c["bytes"].to_numpy(dtype="float64"), nan=-1.0)
    k = next((k for k in range(1, 9) if len(size) > 2 * k and (size[k:] == size[:-k]).mean() >= COPY_MATCH), None)
    if k is None:
        return []
    if k > 1:  # the copy of each period followed by the longest time: where one iteration ends and the next begins
        after = np.diff(ends)
        phase = int(np.argmax([np.median(after[j::k]) for j in range(k)]))
        ends = ends[phase::k]
    if len(ends) < MIN_COPIES + 1 or _one_holds_the_span(np.diff(ends)[1:]):
        return []
    return [StepSet("result copies", None, ends[:-1], ends[1:], RESULT_COPY,
                    f"the device-to-host copies that end each iteration ({k} a step), where no kernel sequence repeats "
                    "through the loop: the recording has no step marks")]


def _one_holds_the_span(it: np.ndarray) -> bool:
    """Whether one iteration after the first holds more than ``ONE_ITERATION_SHARE`` of their time and
    ``ONE_ITERATION_RATIO`` times their median: a burst of copies and a long gap, no loop (a long first iteration is a
    warm-up, as a compiled loop's first batch: 3.2 s of 4.8 s, tests/fixtures/steps/varlen_compiled_torch).
    torch.compile copies results to the host as it compiles (its warm-up runs, autotuning): a compiled training loop
    recorded without marks (a plain nsys, a torch.profiler recording of the CUDA activity alone) read as "14 steady
    steps of 289 us" and one "slow step" of 12 s that held the compilation and the whole real loop (11 steps of 13 ms),
    "GPU busy 1%", first fix "up to 153x" (H200, ``wrappers/compile_loop.py``; tests/fixtures/unmarked/compile_nsys
    without its NVTX ranges)."""
    if not len(it):
        return False
    top, med = float(it.max()), float(np.median(it))
    return top > ONE_ITERATION_SHARE * float(it.sum()) and top > ONE_ITERATION_RATIO * med


ONE_ITERATION_SHARE = 0.5
ONE_ITERATION_RATIO = 20.0


# iterations of a wider loop inside the replays' span holding no replay: the replays are a part of it. A generation loop
# replaying its decoding step has one prompt between replays per request: 10 of 99 copy-bounded iterations held no
# replay (transformers' static cache under torch.compile, H100; tests/fixtures/inference/llm_static_graphs_nsys is now
# the H200's recording of it), and its
# steps are the replays; a compiled loop of changing lengths, 29 of 60 batches (tests/fixtures/steps)
NO_REPLAY_SHARE = 0.25
MANY_REPLAYS_SHARE = 0.05  # ... and at most this share hold two or more (a loop reading its result every N replays)


def replays_within(copies: list[StepSet], replays: list[StepSet]) -> bool:
    """Whether the result copies' iterations are the loop and the replays one part of some of them: inside the
    replays' span, at least ``NO_REPLAY_SHARE`` of the copies' iterations hold no replay and almost none
    (``MANY_REPLAYS_SHARE``) two or more.
    Why: ``torch.compile(mode="reduce-overhead")`` on requests of many lengths runs each new length eagerly once,
    records its graph at the second call and replays it after (CUDA graph trees), so 31 of 60 batches replayed a
    graph; the replays were taken as the steps and the batches between them left out (H200, a torch.profiler
    recording of ``wrappers/varlen_infer.py --compile reduce-overhead``, tests/fixtures/steps). A loop that replays
    its graph every iteration (one replay in each) or reads its result every N replays (many in each) keeps them."""
    if not copies or not replays:
        return False
    r = np.sort(replays[0].starts)
    s, e = copies[0].starts, copies[0].ends
    inside = (s >= r[0]) & (e <= r[-1])
    if inside.sum() < MIN_COPIES:
        return False
    n = np.searchsorted(r, e[inside], side="left") - np.searchsorted(r, s[inside], side="left")
    return bool((n == 0).mean() >= NO_REPLAY_SHARE and (n >= 2).mean() <= MANY_REPLAYS_SHARE)


def wider_loop(kernels: list[StepSet], copies: list[StepSet]) -> list[StepSet]:
    """The kernel period's family, or the result copies' where they span at least ``COPIES_SPAN`` times the loop the
    kernel period found (the kernels repeat in a corner of the loop only) and are no finer than its iterations:
    copies that end several steps inside one kernel iteration (``FINER_COPIES``) are parts of it."""
    if not copies:
        return kernels
    if not kernels:
        return copies
    span = lambda st: float(st.ends[-1] - st.starts[0])  # noqa: E731
    if span(copies[0]) < COPIES_SPAN * max(span(kernels[0]), 1.0):
        return kernels
    k, c = kernels[0], copies[0]
    inside = int(((c.ends > k.starts[0]) & (c.ends <= k.ends[-1])).sum())
    return kernels if inside >= FINER_COPIES * len(k.starts) else copies


# copies' steps per kernel iteration, over the kernel loop's span, that make them parts of it: transformers' Trainer
# with gradient_accumulation_steps=4 copies a flag to the host after each micro-batch (its NaN/inf check of the
# loss) and the loss every logging step, ~13 copies an optimizer step; a tiny BERT's plain nsys recording on the
# H200 read "128 steady steps of 1.31 ms" where the program's 10 optimizer steps took ~45 ms, its kernel period
# the optimizer steps (tests/fixtures/steps/trainer_accum_nsys.sqlite.xz)
FINER_COPIES = 1.5
