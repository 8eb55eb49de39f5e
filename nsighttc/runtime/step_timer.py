"""Step times of a plain run, taken at the step boundaries the launcher already sees: what ``nsighttc try`` compares.

A profiler distorts what it measures: torch.profiler adds host time to every operator, which makes a program look
more host-bound than it is and ranked `try`'s fixes in the wrong order (an fp32 Trainer fine-tune on an H100:
TF32 1.63x plain, 1.38x under the profiler; DataLoader workers 1.22x plain, 1.57x under it). So ``try`` runs every
variant without a profiler, and the launcher times its steps here instead:

- at every step boundary (the hooks' ``nsighttc.step`` or the program's ``annotate.step()``, per phase, the way
  ``runtime.window`` reads them) the host's clock is read and a CUDA event is recorded on the current stream
  (a few microseconds, no synchronisation);
- when the program ends, the events are synchronised once and each step's time is taken as the GPU finished it
  (the elapsed time between consecutive events): a host that runs ahead of the GPU makes host iterations short,
  the GPU's are what the loop costs. Without CUDA (a CPU run), the host's times are used.

``write`` puts ``{"phases": {phase: {"host_ns": [...], "gpu_ns": [...] | None, "compiled": [...]}}}`` in the file
(a generation loop's phase also ``"kinds"``: "prefill"/"decode" per step, and ``"batch"``: its sequences; a loop
that fetches from a DataLoader also ``"data_ns"``: the host's time inside the fetches of each step, and on a GPU
``"fetches_gpu"`` / ``"fetches_gpu_idle"``: its fetches, and those after which the GPU had run out of work)
``--step-times`` names (schema ``nsighttc.step-times/1``); ``steady`` picks the steady steps with the window's own
warm-up rule. Where the main model's calls take inputs of several shapes, ``"shapes"``: each step's first call's
input shapes as a number (0 for the first signature seen, 1 for the next new one, ...), so ``try`` can tell a loop
whose slow steps are its new input shapes without a profiler (``experiment.measure``).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..record_format import HOOK_PHASE
from .window_sizing import STEADY_RUN, STEADY_TOLERANCE, is_steady

from ..record_format import STEP_TIMES_SCHEMA as SCHEMA_ID
MAX_STEPS = 20_000   # per phase: a run of hours keeps its first steps' times (the events are ~100 B each)


class _Phase:
    __slots__ = ("host", "events", "compiled", "compiles_at", "full", "kinds", "batch", "fetched", "shapes")

    def __init__(self, compiles: int):
        self.host: list[float] = []
        self.events: list = []
        self.compiled: list[bool] = []
        self.compiles_at = compiles
        self.full = False
        self.kinds: list[str | None] = []   # a generation loop's: what the step starting at each boundary is
        self.batch: list[int | None] = []   # and how many sequences it takes (tokens per decode call)
        self.fetched: list[tuple] = []      # the timer's ``fetched`` totals so far, at each boundary
        self.shapes: list = []              # the input shapes of the step's first main-model call (``note_shape``)


class StepTimer:
    """Listens to step boundaries like ``runtime.window.Window`` (``hook_boundary``, ``explicit_begin``,
    ``explicit_end``); ``compiles``: how many compilations the program started so far (the step hooks count them)."""

    def __init__(self, compiles=lambda: 0, clock=time.perf_counter, cuda: bool | None = None):
        self.compiles, self.clock = compiles, clock
        self._cuda = cuda
        self.phases: dict[tuple, _Phase] = {}
        self.explicit = False
        # set by the step hooks before each main-model call's boundary (``runtime.steps.model_enter``)
        self.generation, self.next_step, self.next_batch = False, None, None
        # DataLoader fetches (``add_data``), all steps so far: host ns in them, those timed on a GPU, and those of
        # them after which the GPU's stream was idle
        self.fetched = [0.0, 0, 0]
        self._open: _Phase | None = None  # the phase whose step the last boundary opened
        self._signatures: dict = {}       # input shapes -> their number, in the order first seen

    def note_shape(self, signature) -> None:
        """The main model is called with inputs of these shapes (``runtime.steps.model_enter``, after the call's
        boundary): the open step's shapes, where it has none yet."""
        ph = self._open
        if ph is None or not ph.shapes or ph.shapes[-1] is not None or ph.full:
            return
        ph.shapes[-1] = self._signatures.setdefault(signature, len(self._signatures))

    wants_drained = True  # (``add_data``'s stream state: the loop hooks query the stream for it)

    def add_data(self, ns: float, drained: bool | None = None) -> None:
        """A DataLoader fetch took ``ns`` of the host's time (the step hooks time each ``__next__``) and, on a GPU,
        the stream had (``drained``) or had not run out of work when it returned: what tells, without a profiler,
        whether the loader holds the steps (``try``'s next bottleneck). A host busy fetching while the GPU still
        works through the queue costs nothing: a GPU-bound fp32 loop spent 53% of its step in fetches (H200)."""
        self.fetched[0] += ns
        if drained is not None:
            self.fetched[1] += 1
            self.fetched[2] += int(drained)

    # -- what the launcher's hooks call ------------------------------------------------------------------
    def hook_boundary(self, last: bool = False) -> None:
        if not self.explicit:
            self._boundary(HOOK_PHASE)

    def explicit_begin(self, open_ranges: list) -> None:
        if not self.explicit:  # the program marks its own steps: the hook steps so far were not its loop
            self.explicit = True
            self.phases.pop(HOOK_PHASE, None)
        key = tuple(r.name for r in open_ranges)
        ph = self.phases.get(key)
        if ph is None:
            ph = self.phases[key] = _Phase(self.compiles())
            self._mark(ph)  # the phase's first step begins here: its time is known at its end

    def explicit_end(self, open_ranges: list) -> None:
        self._boundary(tuple(r.name for r in open_ranges))

    # -- recording ------------------------------------------------------------------------------------------
    def _cuda_ok(self) -> bool:
        if self._cuda is None:
            torch = sys.modules.get("torch")
            try:
                self._cuda = bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())
            except Exception:
                self._cuda = False
            if not self._cuda:
                self._cuda = None  # CUDA may be initialised later: ask again at the next boundary
                return False
        return bool(self._cuda)

    def _mark(self, ph: _Phase) -> None:
        if len(ph.host) >= MAX_STEPS + 1:
            ph.full = True
            return
        ph.host.append(self.clock())
        ph.fetched.append(tuple(self.fetched))
        ph.kinds.append(self.next_step)
        ph.batch.append(self.next_batch)
        ph.shapes.append(None)
        self._open = ph
        self.next_step = self.next_batch = None  # (a boundary the hooks did not announce is no model call)
        if self._cuda_ok():
            try:
                import torch
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                ph.events.append(ev)
            except Exception:
                ph.events.append(None)
        else:
            ph.events.append(None)

    def _boundary(self, key: tuple) -> None:
        ph = self.phases.get(key)
        compiles = self.compiles()
        if ph is None:
            ph = self.phases[key] = _Phase(compiles)
            self._mark(ph)
            return
        self._mark(ph)
        if not ph.full:
            ph.compiled.append(compiles > ph.compiles_at)
        ph.compiles_at = compiles

    # -- the result ---------------------------------------------------------------------------------------
    def result(self) -> dict:
        """Per phase: the host's and (where every boundary has an event) the GPU's time of each step, in ns."""
        torch = sys.modules.get("torch")
        if any(e is not None for ph in self.phases.values() for e in ph.events):
            try:
                torch.cuda.synchronize()
            except Exception:
                pass
        phases = {}
        for key, ph in self.phases.items():
            host = [(b - a) * 1e9 for a, b in zip(ph.host, ph.host[1:])]
            gpu = None
            if len(ph.events) > 1 and all(e is not None for e in ph.events):
                try:
                    gpu = [a.elapsed_time(b) * 1e6 for a, b in zip(ph.events, ph.events[1:])]
                except Exception:
                    gpu = None
            phases["/".join(key)] = {"host_ns": host, "gpu_ns": gpu, "compiled": ph.compiled[:len(host)],
                                     "truncated": ph.full}
            # per step: host time in DataLoader fetches, the fetches timed on the GPU, those after which it was idle
            per_step = [[b - a for a, b in zip(x, y)] for x, y in zip(ph.fetched, ph.fetched[1:])]
            data, on_gpu, idle = ([s[i] for s in per_step] for i in range(3))
            if any(data):
                phases["/".join(key)]["data_ns"] = data
                if any(on_gpu):
                    phases["/".join(key)]["fetches_gpu"] = on_gpu
                    phases["/".join(key)]["fetches_gpu_idle"] = idle
            if len({x for x in ph.shapes if x is not None}) > 1:  # inputs of several shapes: step i's
                phases["/".join(key)]["shapes"] = ph.shapes[:len(host)]
            if any(k is not None for k in ph.kinds):  # a generation loop: step i's kind and sequences
                phases["/".join(key)].update({"kinds": ph.kinds[:len(host)], "batch": ph.batch[:len(host)]})
        return {"schema": SCHEMA_ID, "phases": phases}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.result()) + "\n")


class Fanout:
    """Several step listeners as one (the step timer first: a window may stop the program at the boundary)."""

    def __init__(self, *listeners):
        self.listeners = [x for x in listeners if x is not None]

    def hook_boundary(self, last: bool = False) -> None:
        for x in self.listeners:
            x.hook_boundary(last=last)

    def replays_begin(self) -> None:
        for x in self.listeners:
            begin = getattr(x, "replays_begin", None)
            if begin is not None:
                begin()

    def explicit_begin(self, open_ranges: list) -> None:
        for x in self.listeners:
            x.explicit_begin(open_ranges)

    def explicit_end(self, open_ranges: list) -> None:
        for x in self.listeners:
            x.explicit_end(open_ranges)

    @property
    def wants_drained(self) -> bool:
        return any(getattr(x, "wants_drained", False) for x in self.listeners)

    def add_data(self, ns: float, drained: bool | None = None) -> None:
        for x in self.listeners:
            if hasattr(x, "add_data"):
                x.add_data(ns, drained)

    def note_shape(self, signature) -> None:
        for x in self.listeners:
            if hasattr(x, "note_shape"):
                x.note_shape(signature)

    def note_loader(self, workers) -> None:
        for x in self.listeners:
            if hasattr(x, "note_loader"):
                x.note_loader(workers)


def steady(phase: dict) -> tuple[list[float], int]:
    """A phase's steady step times (the GPU's where recorded, else the host's) and how many warm-up steps were
    left out: the window's auto rule (``runtime.window.is_steady``) on the step times as they came, then past every
    later fall (``stopped_falling``)."""
    times = phase.get("gpu_ns") or phase.get("host_ns") or []
    compiled = phase.get("compiled") or [False] * len(times)
    for n in range(len(times) + 1):
        if n and is_steady(times[:n], compiled[:n], n):
            warm = stopped_falling(times, max(n - STEADY_RUN, 1))
            return times[warm:], warm
    # never settled: leave out the first step (initialisation) when there are others
    return (times[1:], 1) if len(times) > 2 else (times, 0)


def stopped_falling(times: list[float], warm: int) -> int:
    """Where the steps stop falling: from ``warm`` on, the split after which the steps' mean is lowest against the
    mean before it, while more than ``STEADY_TOLERANCE`` lower (and their median too), starts the steady state
    again, until no split does. Three steps agreeing is not steady when a plateau of slow early steps is followed by
    the real rate: a Trainer's autocast variant ran ~190 ms steps for a while, then ~40 ms, and ``try`` said 0.94x.
    A loader's bursts (short steps, a long one every Nth) keep their mean: no split there is a fall. A split with
    fewer than ``2 * STEADY_RUN`` steps after it is a fall only where every one of them is under the steps before:
    two DataLoader workers in phase deliver batches in pairs, steps alternating 2 and 15 ms to the end, and a split
    before the last three, two of them fast, was a "fall" (their median under the one before), so the run was "still
    getting faster when it ended" and `try` gave the patched copy no speed-up (the fix test's loader on a 2-core host,
    2026-11-29, tests/fixtures/try_steps)."""
    while True:
        seg = times[warm:]
        n = len(seg)
        if n < 2 * STEADY_RUN:
            return warm
        csum = [0.0]
        for t in seg:
            csum.append(csum[-1] + t)
        best, at = 1.0, None
        for j in range(STEADY_RUN, n - STEADY_RUN + 1):
            before, after = csum[j] / j, (csum[n] - csum[j]) / (n - j)
            if before > 0 and after / before < best and \
                    (n - j >= 2 * STEADY_RUN or max(seg[j:]) < (1 - STEADY_TOLERANCE) * median(seg[:j])):
                best, at = after / before, j
        if at is None or best >= 1 - STEADY_TOLERANCE or \
                median(seg[at:]) >= (1 - STEADY_TOLERANCE) * median(seg[:at]):
            return warm
        warm += at


def settled_at_end(times: list[float], warm: int) -> bool:
    """Whether a phase's steps had settled by the run's end: enough steady steps after the last fall to judge
    (``2 * STEADY_RUN``). A run whose steps were still falling when it stopped gets no speed, only that remark."""
    return len(times) - warm >= 2 * STEADY_RUN


SETTLE_TOLERANCE = 0.25  # the steady steps' two halves differ by more than this: the first half is left out
SETTLE_MIN_STEPS = 8     # fewer steady steps than this: too few to compare halves


def settled(times: list[float]) -> tuple[list[float], float | None]:
    """The steady steps whose mean is the rate the program keeps, and, where the first half of them was left out,
    the ratio of its mean to the second half's. The warm-up rule looks at a few consecutive steps; a producer
    that filled a buffer before them (a DataLoader's workers prefetching ``num_workers x prefetch_factor``
    batches) hands out that buffer in fast steps the warm-up rule calls steady, then settles into bursts at the
    workers' rate (H100, ``dataloader_bound.py`` with 8 workers: 16 steps of 6-14 ms, then 8 per ~420 ms; the mean
    of all 35 steady steps was 40 ms/step where the program keeps 52, so ``try`` said 9.4x where plain 300-step
    runs gave 7.1-7.8x: reports/try/calibration). When the halves' means differ by more than
    ``SETTLE_TOLERANCE``, the rate is the second half's."""
    if len(times) < SETTLE_MIN_STEPS:
        return times, None
    h = len(times) // 2
    first, second = sum(times[:h]) / h, sum(times[h:]) / (len(times) - h)
    if second > 0 and abs(first - second) > SETTLE_TOLERANCE * second:
        return times[h:], first / second
    return times, None


def median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def quartiles(xs: list[float]) -> tuple[float, float] | None:
    if len(xs) < 2:
        return None
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]  # noqa: E731 - nearest rank
    return q(0.25), q(0.75)
