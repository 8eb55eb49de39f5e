"""Samples of the program's Python stacks, taken by a thread inside the program, for "where the host time went"
(``analysis.timeline.host_frames`` puts each sample taken while the GPU idled down to its frame).

Why a thread in the process, not py-spy or austin outside it:
- it needs no ptrace: containers (Docker's default seccomp profile, Kubernetes pods without ``SYS_PTRACE``) refuse
  an external sampler, and a tool that answers only where ptrace is allowed answers too rarely;
- it runs in every rank, under every engine, with no second process to start, find and stop per rank;
- its clock is the launcher's: at most every ``ANCHOR_EVERY_S`` a mark ``nsighttc.clock#<n>`` is drawn and its time
  noted, so each sample lands on the recording's clock (``parse.host_samples``) whichever profiler made it. The
  sampling thread draws NVTX marks (nsys); the main thread, at the step hooks' marks (``maybe_anchor``), draws
  them as the step marks are drawn, NVTX and ``record_function`` (torch.profiler). Only the main thread makes
  ``record_function`` labels: a label begun in one torch.profiler session and ended in the next corrupts memory
  (``rf_labels``), and only the main thread knows when the sessions change.
What it cannot see: a sample needs the interpreter's lock, so while the program's thread holds it inside a C call
(no PyTorch operator does: their bindings release it) the sample waits until that call ends; the time is then
given to the line that made the call, which is where it belongs. ``sys._current_frames`` and a walk of each
stack cost 40-200 us of CPU per sample on this repository's 2-core machine (a PyTorch loop of a few frames, and a
launcher's deeper stacks; the wake-up of a sleeping thread is most of it): the pause between samples is at least
``INTERVAL_S`` and grows so that the sampler's CPU time stays under ``COST_BUDGET`` of the time, and the file says
what it cost (``cost_ns``). Each sample still stands for an equal share of the idle time it falls in. py-spy stays
the independent check (``benchmarks/host_frames_check.py pyspy``).
"""
from __future__ import annotations

import gc
import itertools
import json
import os
import sys
import sysconfig
import threading
import time
from array import array
from pathlib import Path

from ..record_format import CLOCK_MARK, HOST_SAMPLES_SCHEMA as SCHEMA, LIBRARY, OWN, STDLIB, TOOL

INTERVAL_S = 0.005               # at most 200 samples a second (fewer when a sample costs more: COST_BUDGET)
COST_BUDGET = 0.01             # the sampler's CPU time stays under this share of the time: the pause grows with the cost
# ... and inside a window of steady steps (``runtime.window``), the only samples the analysis ranks, this share: on the
# H100 a Trainer's deep stacks cost ~300 us a sample, so 1% gave ~30 samples a second and 10 to 46 of them in a
# window's idle time (too few to rank the top rows); outside the window the budget is spent on start-up
# only. Still within the 1.05x for the run: the window is a few seconds of it.
WINDOW_COST_BUDGET = 0.03
ANCHOR_EVERY_S = 0.25
# ... and inside a window of steady steps, from its first step on: a window of fast steps is shorter than the interval
# above (H200, wrappers/graph_serve.py: 110 replays of 0.55 ms, a 0.18 s recording after a first run's change of
# profiler sessions held no clock mark, and none of its 162 samples could be placed)
WINDOW_ANCHOR_EVERY_S = 0.02
# While sampling, the interpreter hands its lock over to a waiting thread after this long (Python's default: 5 ms).
# A sample needs the lock; a pure-Python loop gives it up only when the switch interval forces it, a C call that
# releases it at once, so at 5 ms the samples came late in Python code and early in C calls: a CPU loop spending 52%
# of its time in a list comprehension (its own clock; py-spy 52%) had 25% of the samples there
# (benchmarks/host_frames_check.py bias). The interval only matters when a thread waits for the lock: the program's
# own threads switch as before unless two of them are busy in Python at once.
SWITCH_INTERVAL_S = 0.0005
# An experiment's switch (benchmarks/probes/gpu_torchrun_cost_probe.py, variant ``switch5``): the interval while
# sampling, in milliseconds, instead of ``SWITCH_INTERVAL_S`` (5: Python's own, the program's lock handed over as
# without the sampler). Does the shorter interval cost a launch-bound rank's steps?
SWITCH_ENV = "NSIGHTTC_SAMPLER_SWITCH_MS"
MAX_DEPTH = 128                  # frames kept per stack, from the innermost
_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep


def frame_kind(filename: str) -> str:
    """What a frame's file is, from its path alone."""
    if filename.startswith("<") or filename.startswith(_PACKAGE_DIR):
        return TOOL    # <frozen importlib._bootstrap>, <string>, nsighttc itself
    if f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}dist-packages{os.sep}" in filename:
        return LIBRARY
    for key in ("stdlib", "platstdlib"):
        root = sysconfig.get_paths().get(key)
        if root and filename.startswith(root.rstrip(os.sep) + os.sep):
            return STDLIB
    return OWN


class Sampler:
    """Samples every Python thread's stack each ``interval_s`` until ``stop``; ``write`` saves what it has."""

    def __init__(self, path: Path, interval_s: float = INTERVAL_S, facts: dict | None = None):
        self.path = Path(path)
        self.facts = dict(facts or {})          # what the launcher knows of this process (what its profiler records)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()           # the clock marks' list (the main thread and the sampler append)
        self._frame_ids: dict[tuple, int] = {}  # (id of the code object, line) -> frame index
        self._frames: list[tuple] = []          # (code object, line)
        self._stack_ids: dict[tuple, int] = {}
        self._stacks: list[tuple] = []
        self.t, self.tid, self.stack = array("q"), array("q"), array("l")
        self.anchors: list[tuple[int, int]] = []
        self._seq = itertools.count()
        self.cost_ns = 0
        self.started_ns = 0
        self._native: dict[int, int] = {}      # thread ident -> native id (the recording's thread id)
        self._names: dict[int, str] = {}
        self.main_ident = threading.main_thread().ident
        self._thread = threading.Thread(target=self._run, name="nsighttc-host-samples", daemon=True)
        self.budget = COST_BUDGET               # the share of the time the sampler may take (``in_window``)
        self._go = threading.Event()            # set: sampling (``hold`` leaves it unset until ``release``)
        self._switch = None

    # --- in the program ---------------------------------------------------------------------------
    def start(self, hold: bool = False) -> "Sampler":
        """Start the sampling thread; with ``hold``, it samples nothing until ``release`` (the first window)."""
        self.started_ns = time.perf_counter_ns()
        if not hold:
            self.release()
        self._thread.start()
        return self

    @property
    def sampling(self) -> bool:
        return self._go.is_set()

    def release(self) -> None:
        """Begin sampling (a held sampler: at the first window's start, ``in_window``)."""
        if self._go.is_set() or self._stop.is_set():
            return
        self.started_ns = time.perf_counter_ns()
        self._switch = sys.getswitchinterval()
        try:
            interval = float(os.environ[SWITCH_ENV]) / 1e3 if os.environ.get(SWITCH_ENV) else SWITCH_INTERVAL_S
        except ValueError:
            interval = SWITCH_INTERVAL_S
        sys.setswitchinterval(min(self._switch, interval))
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()  # (a held sampler's thread wakes, sees the stop and ends)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=1.0)
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None

    def anchor(self, draw=None) -> None:
        """Draw one clock mark and note the time it was drawn: with ``draw`` (the main thread's: NVTX and
        ``record_function``), else NVTX only (the sampling thread)."""
        n = next(self._seq)
        t = time.perf_counter_ns()
        try:
            (draw or _nvtx_only)(f"{CLOCK_MARK}{n}")
        except Exception:  # noqa: BLE001 - a mark that cannot be drawn costs only this anchor
            return
        with self._lock:
            self.anchors.append((n, t))  # the time the mark opened (its start in the recording)

    def _thread_ids(self) -> None:
        """Native ids (the recording's thread ids) and names of the threads alive now."""
        for th in threading.enumerate():
            if th.ident is not None and th.ident not in self._native:
                self._native[th.ident] = th.native_id or th.ident
                self._names[th.ident] = th.name

    def _run(self) -> None:
        me = threading.get_ident()
        next_anchor = 0
        wait = self._stop.wait
        cpu = time.thread_time_ns  # this thread's CPU time: what it took from the program (wall time would count
        #                            the program's own turns whenever it takes the interpreter back mid-sample)
        pause = self.interval_s
        # a sample's CPU time, smoothed, from what the interval allows: one costly sample (the first, meeting every
        # frame; or the first clock mark, importing nvtx in a fresh environment) does not set the pause for seconds.
        # A fresh CI environment's test run had one sample a second, 1 in a 1.5 s program, where 200 were taken
        # before (tests/runtime/test_host_samples.py)
        typical = self.interval_s * self.budget * 1e9
        self._go.wait()  # (held until the first window: ``start(hold=True)``)
        while not wait(pause):
            c0 = cpu()
            t = time.perf_counter_ns()
            try:
                self._sample(me, t)
            except Exception:  # noqa: BLE001 - a thread that vanished mid-walk: skip this sample
                pass
            sampled = cpu() - c0
            if t >= next_anchor:
                self.anchor()
                next_anchor = t + int(ANCHOR_EVERY_S * 1e9)
            self.cost_ns += cpu() - c0  # (the clock marks' cost too: the program paid it)
            # the cost budget: samples further apart when they cost more (a deep stack, a busy host)
            typical = 0.9 * typical + 0.1 * sampled
            pause = max(self.interval_s, typical / 1e9 / self.budget)

    def _sample(self, me: int, t: int) -> None:
        """One sample of every other thread. Nothing here may let the interpreter switch threads while a frame of
        another thread is held: no lock is taken, no thread table read and no garbage collected between
        ``sys._current_frames`` and the end of the walk (a walk interrupted while the sampled thread ran on crashed
        CPython 3.11 with a segmentation fault, 3 runs in 5 of a CPU loop). The thread ids are read before."""
        idents = threading._active  # noqa: SLF001 - a dict read under the interpreter lock, no lock taken
        if any(i not in self._native for i in list(idents)):
            self._thread_ids()
        native = self._native
        fid, stack_ids, frames_ = self._frame_ids, self._stack_ids, self._frames
        t_, tid_, stack_ = self.t, self.tid, self.stack
        collecting = gc.isenabled()
        if collecting:  # a collection set off by the walk's allocations would run finalizers: Python code, a switch
            gc.disable()
        try:
            self._walk(me, t, native, fid, stack_ids, frames_, t_, tid_, stack_)
        finally:
            if collecting:
                gc.enable()

    def _walk(self, me, t, native, fid, stack_ids, frames_, t_, tid_, stack_) -> None:
        for ident, f in sys._current_frames().items():
            if ident == me:
                continue
            ids = []
            while f is not None and len(ids) < MAX_DEPTH:
                code = f.f_code
                # keyed by the code object's id: a code object hashes its whole body each time (a 1.2 ms sample
                # of a PyTorch loop, against 35 us); self._frames holds each code, so no id is reused
                key = (id(code), f.f_lineno)
                i = fid.get(key)
                if i is None:
                    i = fid[key] = len(frames_)
                    frames_.append((code, key[1]))
                ids.append(i)
                f = f.f_back
            st = tuple(ids)
            sid = stack_ids.get(st)
            if sid is None:
                sid = stack_ids[st] = len(self._stacks)
                self._stacks.append(st)
            stack_.append(sid)  # (document() reads the three arrays to their shortest length)
            tid_.append(native.get(ident, ident))
            t_.append(t)

    # --- out --------------------------------------------------------------------------------------
    def document(self) -> dict:
        import linecache
        with self._lock:
            anchors = list(self.anchors)
        # the sampling thread appends without a lock (``_sample``): copy in the order it appends, the tables that only
        # grow after what refers to them, then cut to the samples complete in all three
        stack, tid, t = list(self.stack), list(self.tid), list(self.t)
        stacks = list(self._stacks)
        frames = list(self._frames)
        n = min(len(t), len(tid), len(stack))
        t, tid, stack = t[:n], tid[:n], stack[:n]
        native = dict(self._native)
        kinds: dict[str, str] = {}
        rows = []
        for code, line in frames:
            fn = code.co_filename
            kind = kinds.setdefault(fn, frame_kind(fn))
            src = linecache.getline(fn, line).strip()[:160] if kind == OWN and line else ""
            rows.append([fn, getattr(code, "co_qualname", code.co_name), int(line or 0), kind, src])
        main = native.get(self.main_ident, threading.main_thread().native_id)
        host = {**self.facts, **host_facts()}
        return {"schema": SCHEMA, "clock": "time.perf_counter_ns (CLOCK_MONOTONIC)", "pid": os.getpid(),
                "interval_ns": int(self.interval_s * 1e9), "started_ns": self.started_ns,
                "cost_ns": int(self.cost_ns), "main_tid": main, "host": host,
                "threads": {str(native[i]): self._names.get(i, "") for i in native},
                "anchors": anchors, "frames": rows, "stacks": [list(s) for s in stacks],
                "t": t, "tid": tid, "stack": stack}

    def write(self) -> None:
        """Save the samples so far (atomically: a reader never sees half a file)."""
        doc = self.document()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, self.path)


def what_is_recorded(ns, operators_apart: bool = False) -> str:
    """What this process's profiler records in the steps the verdict judges, in words: a rank that records more works
    more on its host (a first run's rank 0 records operators with their arguments for the replay; the other ranks the
    ranges only). ``operators_apart``: the operators with their arguments are recorded before the window only (their
    own trace, or the dispatch mode's list), and the window like every other rank's. Said so, a rank's own lag in its
    window is not put down to a recording it did not make there (a DDP first run on two H200s, 2026-11-29: rank 0
    named "operators with their arguments" for a window recorded with the ranges only)."""
    if ns.torch_trace is None:
        return "no profiler in this process (nsys records it from outside)"
    if ns.record_shapes and not operators_apart:
        from .rank_env import current_rank
        if ns.shapes_rank is None or current_rank() == ns.shapes_rank:
            return "torch.profiler: operators with their arguments"
    return "torch.profiler: operators" if ns.operators else "torch.profiler: ranges, CUDA calls and GPU work only"


def host_facts() -> dict:
    """This process's share of its host: the CPUs it may run on, the machine's, its threads and the load, and its
    rank. A straggler rank whose lag is on its host is compared on these: one rank pinned to fewer cores,
    or sharing them with more threads, is slower for that reason, not because of its code."""
    out = {"cpu_count": os.cpu_count(), "python_threads": threading.active_count(),
           "rank": os.environ.get("RANK"), "local_rank": os.environ.get("LOCAL_RANK")}
    try:
        out["cpus_allowed"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        out["cpus_allowed"] = None
    try:
        out["load_1min"] = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        out["load_1min"] = None
    try:
        out["os_threads"] = len(os.listdir("/proc/self/task"))
    except OSError:
        out["os_threads"] = None
    return out


def _nvtx_only(name: str) -> None:
    try:
        import nvtx
    except Exception:  # noqa: BLE001 - no NVTX: the main thread's marks still anchor the clock
        return
    nvtx.end_range(nvtx.start_range(message=name))


_ACTIVE: list[Sampler] = []
_next_main_anchor = 0
_anchor_every_s = ANCHOR_EVERY_S  # (``WINDOW_ANCHOR_EVERY_S`` inside a window: ``in_window``)


def _forget_in_child() -> None:
    """A forked child (a DataLoader worker) has no sampling thread, and its copy of the sampler's lock may be held:
    it samples nothing and draws no clock mark."""
    _ACTIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def maybe_anchor(open_mark) -> None:
    """A clock mark from the main thread, at most every ``ANCHOR_EVERY_S``: the step hooks call it at each of their
    marks with their ``OpenMark`` (NVTX and ``record_function`` as the step marks are drawn)."""
    global _next_main_anchor
    if not _ACTIVE or not _ACTIVE[0].sampling or threading.get_ident() != _ACTIVE[0].main_ident:
        return
    t = time.perf_counter_ns()
    if t >= _next_main_anchor:
        _next_main_anchor = t + int(_anchor_every_s * 1e9)
        _ACTIVE[0].anchor(lambda name: open_mark(name).close())


def start(path: Path, interval_s: float = INTERVAL_S, facts: dict | None = None, hold: bool = False) -> Sampler:
    """Sample the program's stacks from now, or with ``hold`` from its first window's start (``in_window``): where
    the recording itself starts there (``--record-from window``, a cached run), a sample before it falls in no
    recorded time and the analysis places none of them (``analysis.timeline.host_frames`` reads the samples in the
    recording's idle GPU time only), while each one still took the interpreter's lock from the program's start-up.
    Two H200s, FSDP2 cached runs (tests/fixtures/fsdp/turns_cached): ~1,000 samples a rank over 7 s, 75-80 ms of the
    sampler's CPU, most of them before the window. (Not a speed-up one can see in a whole run: DDP ResNet-50 cached
    runs without any samples were no faster, reports/profile_overhead/torchrun_cost call 19.)"""
    s = Sampler(path, interval_s, facts={**(facts or {}), **({"sampled_from": "the first window"} if hold else {})})
    s.start(hold=hold)
    _ACTIVE.append(s)
    return s


def in_window(on: bool) -> None:
    """A window of steady steps starts (``on``) or ends: the active sampler spends ``WINDOW_COST_BUDGET`` there (a
    held one begins sampling at the first), and the main thread's clock marks come every ``WINDOW_ANCHOR_EVERY_S``
    there, the first at the window's next mark."""
    global _next_main_anchor, _anchor_every_s
    _anchor_every_s = WINDOW_ANCHOR_EVERY_S if on else ANCHOR_EVERY_S
    if on:
        _next_main_anchor = 0
    for s in _ACTIVE:
        s.budget = WINDOW_COST_BUDGET if on else COST_BUDGET
        if on:
            s.release()


def flush() -> None:
    """Write the active sampler's samples (before a trace is said to be written: the analysis may start then)."""
    for s in _ACTIVE:
        try:
            s.write()
        except Exception as exc:  # noqa: BLE001 - the program's result stands; say why the samples are missing
            from .lines import say
            say(f"nsighttc.launch: host samples not written ({type(exc).__name__}: {exc})")


def finish() -> None:
    while _ACTIVE:
        s = _ACTIVE.pop()
        s.stop()
        _ACTIVE.append(s)
        flush()
        _ACTIVE.pop()
