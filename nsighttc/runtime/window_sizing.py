"""How long a window's warm-up and window are: when a phase's steps are steady, how many steps the window holds, and
each phase's record of its steps (``Phase``) that the window's decisions read.

1. **Warm-up**: ``--window-warmup N`` steps, or ``auto``: until the last ``STEADY_RUN`` steps each lie within
   ``STEADY_TOLERANCE`` of their median and none of them compiled (torch.compile's callbacks, counted by the hooks),
   and never fewer than ``MIN_WARMUP`` steps; a phase that never settles starts its window after
   ``MAX_WARMUP_STEPS`` steps or ``MAX_WARMUP_S`` seconds anyway, and a program the evidence cache knows after as
   many steps as its last run's warm-up at the latest (``--window-warmup-max``: the same stretch of the program
   recorded run after run). The step times are the host's (step end to step end): in a steady loop the host waits
   for the GPU (a full launch queue, ``.item()``, a sync) and its step time is the GPU's.
2. **The window**: ``--window-steps N`` steps, or enough for ``TARGET_WINDOW_S`` seconds at the median step of the
   warm-up's last steps, between ``MIN_STEPS`` and ``MAX_STEPS``. A generation loop's window (the hooks saw prefill
   and decode calls) holds whole requests instead: it starts at a prefill and ends at one, after ``GEN_REQUESTS``
   requests, or at the first request boundary past ``GEN_WINDOW_S`` seconds.
"""
from __future__ import annotations

import math

STEADY_RUN = 3              # steps whose times must agree for the warm-up to be over
STEADY_TOLERANCE = 0.20     # each within 20% of their median
MIN_WARMUP = 2              # the first steps are never steady (allocator growth, cuDNN/cuBLAS heuristics)
MAX_WARMUP_STEPS = 50       # a phase that never settles: its window starts anyway
MAX_WARMUP_S = 30.0
TARGET_WINDOW_S = 2.0       # the window's length at the steady step time
MIN_STEPS = 10              # enough steps for the analysis' median and its warm-up rule
END_WINDOW_STEPS = MIN_STEPS + 2  # the window of a program whose end is known (``Window._end_known``)
END_SLACK = 2               # ... times this many steps more than its last run had before stopping it (an AMP loop's
                            # scaler skips a different count of optimizer steps from run to run)
MAX_STEPS = 100
PREPARE_WAIT_STEPS = 4      # a recorder not ready this many steps after its preparation: the window starts anyway
PHASE_GRACE_S = 3.0         # after a named phase's window: how long another phase may take to begin
# After the last window, in a single process, the program runs on unrecorded for a few steps, timed; a
# run recording from the window times its warm-up's last steps unrecorded: ``runtime.unrecorded``.
# Generation loops (the hooks saw prefill and decode calls, ``runtime.steps``): the window starts where a request
# starts (its prefill) and ends where one starts, after ``GEN_REQUESTS`` whole requests, or at the first request
# boundary after ``GEN_WINDOW_S`` seconds (at least one whole request): time to first token needs the prefills, time
# per output token whole requests. Bounded by time as any window is, because a window's cost grows with what
# it holds: a Llama-shaped decoder's 288 model calls (3 requests of 96 tokens, ~690 kernels a call) took torch.profiler
# 4.5-5.9 s to stop and 3.6-4.9 s to write, the first and cached runs 1.24x and 1.11x plain (H100, torch 2.11,
# reports/structural call_cost).
GEN_REQUESTS = 3
GEN_WINDOW_S = TARGET_WINDOW_S


def parse_count(text) -> int | None:
    """A number of steps (0 or more), or ``auto``: None. ValueError says what is wrong (the launcher's and the CLI's
    ``--warmup``/``--steps`` both read them here)."""
    if text is None or text == "auto":
        return None
    try:
        n = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of steps or 'auto', got {text!r}") from None
    if n < 0:
        raise ValueError(f"expected a number of steps >= 0, got {n}")
    return n


def window_steps(median_s: float | None, steps: int | None = None) -> int:
    """How many steps the window records: ``steps`` if given, else ``TARGET_WINDOW_S`` worth of steps."""
    if steps is not None:
        return max(1, int(steps))
    if not median_s or median_s <= 0:
        return MIN_STEPS
    return int(min(MAX_STEPS, max(MIN_STEPS, math.ceil(round(TARGET_WINDOW_S / median_s, 6)))))


def is_steady(durations: list[float], compiled: list[bool], n_steps: int) -> bool:
    """The auto warm-up rule (see the module docstring)."""
    if n_steps < max(MIN_WARMUP, STEADY_RUN) or len(durations) < STEADY_RUN:
        return False
    last, comp = durations[-STEADY_RUN:], compiled[-STEADY_RUN:]
    if any(comp):
        return False
    med = sorted(last)[len(last) // 2]
    return med > 0 and all(abs(d - med) <= STEADY_TOLERANCE * med for d in last)


class Phase:
    """One phase's steps as the window counts them (a phase: the path of ``annotate`` ranges a step family sits in; the
    hook steps are one phase)."""
    __slots__ = ("key", "n", "durations", "compiled", "state", "left", "first_at", "last_at", "begun_at",
                 "compiles_at", "warmup", "steps", "median_s", "prepared", "agreed", "requests", "settled",
                 "prepared_n", "recorded", "after_steps", "sized_s", "new_shape", "data", "window_from")

    def __init__(self, key: tuple, now: float, compiles: int):
        self.key = key
        self.n = 0                     # steps ended
        self.durations: list[float] = []
        self.compiled: list[bool] = []
        self.recorded: list[bool] = []  # whether the recorder recorded each step (``Recorder.recording``)
        self.new_shape: list[bool] = []  # whether each step's main-model call met input shapes not seen before
        self.data: list[float] = []     # seconds each step waited in the DataLoader's fetch (``Window.add_data``)
        self.window_from: int | None = None  # the index in ``durations`` of the window's first step
        self.after_steps: int | None = None  # unrecorded steps timed after the window, as the ranks agreed
        self.state = "warmup"          # warmup -> window -> done
        self.left = 0
        self.first_at = now
        self.last_at: float | None = None
        self.begun_at: float | None = None
        self.compiles_at = compiles
        self.warmup = 0
        self.steps = 0
        self.median_s: float | None = None
        self.prepared = False          # the recorder's step before the window was taken (``Recorder.prepare``)
        self.prepared_n = 0            # ... at the end of which step
        self.sized_s: float | None = None  # the warm-up's step time before the recorder's first change (``prepare``)
        self.agreed = False            # the window was started by the ranks' agreement (``runtime.window_ranks``)
        self.requests = 0              # a generation loop's requests completed inside the window
        self.settled = False           # the recorder was told the warm-up is steady before the window could start


def shapes_changed(ph: Phase) -> bool:
    """Whether the phase's main-model input shapes changed after its first step (``Phase.new_shape``, one flag a
    timed step)."""
    return any(ph.new_shape[1:]) and len(ph.new_shape) == len(ph.durations)


def known_shape_steps(ph: Phase) -> tuple[list[float], list[bool]]:
    """(step times, compiled) of the phase's steps at input shapes seen before, where its main model's input shapes
    changed after its first step; else all of them. A step at a new shape is no sign of the loop's pace: an image
    loop at 25 sizes under cudnn.benchmark took 150-350 ms at each new size and 1.7 ms at a size seen before (H200,
    wrappers/varlen_conv.py), and its first steps, nearly all new sizes, agreed within 20%: the window started on them
    and was sized on them (10 steps, all new sizes; "the recording's slowdown 132x" against the steps after it)."""
    if not shapes_changed(ph):
        return ph.durations, ph.compiled
    keep = [i for i, new in enumerate(ph.new_shape) if not new]
    return [ph.durations[i] for i in keep], [ph.compiled[i] for i in keep]


def recent_median(ph: Phase) -> float | None:
    """The median of a phase's last ``STEADY_RUN`` step times (at known shapes: ``known_shape_steps``)."""
    recent = sorted(known_shape_steps(ph)[0][-STEADY_RUN:])
    return recent[len(recent) // 2] if recent else None
