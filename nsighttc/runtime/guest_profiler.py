"""The program's own ``torch.profiler``, held off while nsighttc's records the process.

One process holds one Kineto session. A program that profiles itself as PyTorch's recipe shows (``profile(schedule=
schedule(wait=1, warmup=1, active=3), on_trace_ready=tensorboard_trace_handler(DIR))`` and ``prof.step()``) started
and stopped sessions over nsighttc's: each of its cycles ended the session nsighttc was recording, and the launcher's
own stop then failed ("RuntimeError: Can't disable Kineto profiler when it's not running"), so the run had no trace
and no verdict, and said the workload had failed (H200, torch 2.11, ``benchmarks/gpu/user_programs/sched_cycles.py``,
gpu_steps_time.sh users5; the program itself exited 0). On this machine's CPU build the program's first cycle took the
session over silently and nsighttc wrote no trace at all.

So, while the launcher records with torch.profiler, a ``torch.profiler.profile`` the program makes starts, steps and
stops as the program asks but records nothing of its own: its schedule's actions (prepare, start, stop, its
``on_trace_ready``) are not run, and its ``prof.step()`` still marks each step as ``ProfilerStep#N`` in nsighttc's
recording, the program's own step marks. What the program reads back afterwards (``key_averages()``, ``events()``)
is empty, and ``export_chrome_trace`` writes nothing: the run says so, with the program's line, and how to have both
(``--timeline-engine nsys``: nsys and the program's profiler record side by side, as seen on the same program).
Standard library only until torch is imported: this runs inside the user's program.
"""
from __future__ import annotations

import os
import traceback
import weakref

from ..record_format import OWN_PROFILER_HELD
from .lines import say

_OWN: "weakref.WeakSet" = weakref.WeakSet()   # nsighttc's own profilers: never held off
_SAID: list[str] = []                          # where the program's first profiler was held off (said once)
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def own(prof):
    """``prof`` (a ``torch.profiler.profile`` nsighttc made), marked as nsighttc's: it records. Returns it."""
    _OWN.add(prof)
    return prof


def _library(path: str) -> bool:
    """An installed package's file, or the standard library's (``contextlib``): not the program's."""
    import sysconfig
    std = sysconfig.get_paths().get("stdlib") or ""
    return any(part in ("site-packages", "dist-packages") for part in path.replace("\\", "/").split("/")) or \
        bool(std) and os.path.abspath(path).startswith(os.path.abspath(std) + os.sep)


def _short(path: str) -> str:
    """A library's file from its package (``lightning/pytorch/profilers/pytorch.py``), the program's by its name."""
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            return "/".join(parts[i + 1:])
    return os.path.basename(path)


def _program_line() -> str:
    """Where the profiler was driven from: the innermost frame outside torch and nsighttc, and where that is a
    library's (Lightning's ``Trainer(profiler="pytorch")``), the program's own line that called into it."""
    import torch
    skip = (os.path.dirname(os.path.abspath(torch.__file__)), _HERE)
    frames = [fr for fr in traceback.extract_stack()[:-2]
              if not fr.filename.startswith("<") and not os.path.abspath(fr.filename).startswith(skip)]
    if not frames:
        return "?"
    inner = frames[-1]
    where = f"{_short(inner.filename)}:{inner.lineno}"
    if _library(inner.filename):
        own = next((fr for fr in reversed(frames) if not _library(fr.filename)), None)
        if own is not None:
            where += f", called from {os.path.basename(own.filename)}:{own.lineno}"
    return where


def _empty(EventList):
    """No events, as a profiler that recorded none returns them (the tree built: ``key_averages()`` asks for it)."""
    events = EventList([])
    events._build_tree()
    return events


def install() -> None:
    """Hold off every ``torch.profiler.profile`` that is not nsighttc's, from now on in this process."""
    from torch.profiler import profiler as tp
    from torch.autograd.profiler_util import EventList
    cls = tp.profile
    if getattr(cls, "_nsighttc_held", False):
        return
    transit, key_averages, events, export = cls._transit_action, cls.key_averages, cls.events, \
        cls.export_chrome_trace

    def held(self) -> bool:
        if self in _OWN:
            return False
        if not _SAID:
            _SAID.append(_program_line())
            say(f"{OWN_PROFILER_HELD}{_SAID[0]}")
        return True

    def _transit_action(self, prev_action, current_action):
        if held(self):
            return None  # (no session prepared, started or stopped, no on_trace_ready: nsighttc's records)
        return transit(self, prev_action, current_action)

    def _key_averages(self, *a, **kw):
        return _empty(EventList) if held(self) else key_averages(self, *a, **kw)

    def _events(self):
        return _empty(EventList) if held(self) else events(self)

    def _export_chrome_trace(self, path, *a, **kw):
        return None if held(self) else export(self, path, *a, **kw)

    cls._transit_action, cls.key_averages, cls.events = _transit_action, _key_averages, _events
    cls.export_chrome_trace = _export_chrome_trace
    cls._nsighttc_held = True
    _hold_off_legacy(held, EventList)
    _keep_session_on(held)


def _keep_session_on(held) -> None:
    """A program that stops whatever profiler is on before starting its own (Lightning's PyTorchProfiler: "close profiler
    if it is already opened", ``torch.autograd._disable_profiler()``) stopped nsighttc's recording, and the launcher
    then wrote no trace at all (this machine, torch 2.13, Lightning 2.6.6, ``Trainer(profiler="pytorch")``). The call
    through ``torch.autograd`` leaves nsighttc's session on; torch's own profilers hold their own reference to the
    binding, and nsighttc stops its sessions through them."""
    import torch.autograd as autograd
    if getattr(autograd._disable_profiler, "_nsighttc", False):
        return

    def _disable_profiler():
        held(None)
        return None
    _disable_profiler._nsighttc = True
    autograd._disable_profiler = _disable_profiler


def _hold_off_legacy(held, EventList) -> None:
    """The same for ``torch.autograd.profiler.profile`` used as a context (``with profile(use_cuda=True) as p:``, the
    older spelling). nsighttc's own profilers drive theirs through ``_prepare_trace``/``_start_trace`` and stop it by
    ``__exit__``, never entering it, so an instance is held off where the program entered it: it then exits as a no-op
    and reads back no events."""
    from torch.autograd import profiler as ap
    cls = ap.profile
    enter, leave, export = cls.__enter__, cls.__exit__, cls.export_chrome_trace

    def __enter__(self):
        if not self.enabled:
            return enter(self)
        self._nsighttc_guest = True
        held(self)
        self.entered, self.kineto_results = True, None
        self._function_events, self._needs_processing = _empty(EventList), False
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if getattr(self, "_nsighttc_guest", False):
            return False
        return leave(self, exc_type, exc_val, exc_tb)

    def export_chrome_trace(self, path, *a, **kw):
        return None if getattr(self, "_nsighttc_guest", False) else export(self, path, *a, **kw)

    cls.__enter__, cls.__exit__, cls.export_chrome_trace = __enter__, __exit__, export_chrome_trace
