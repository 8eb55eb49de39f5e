"""Ranges every engine sees: NVTX push/pop (ncu, nsys) plus torch.profiler labels (torch engine).

    from nsighttc import annotate

    with annotate.range("data"):        # or @annotate.range("train_step") on a function
        batch = next(loader)
    annotate.annotate_model(model)      # one range per module call, named by module path
    for batch in loader:
        with annotate.step():           # marks an iteration ("step#N"): steps are how timelines are judged
            ...

Without a profiler attached these cost next to nothing: NVTX calls are no-ops until a tool injects
itself, and ``record_function`` is only used while a torch.profiler session is active (measured by
``benchmarks/bench_annotate.py``).
"""
from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from typing import Any, Callable, Iterator

from . import host_samples
from .rf_labels import Label  # our record_function labels, movable between profiler sessions

try:  # the nvtx package (a runtime dependency); a stub keeps user code working if it is missing
    import nvtx as _nvtx

    _push, _pop = _nvtx.push_range, _nvtx.pop_range
except Exception:  # pragma: no cover - exercised only on broken installs
    def _push(message=None, **_):
        return None

    def _pop(**_):
        return None

DOMAIN = None  # the default NVTX domain: ncu's --nvtx-include "name/" matches it without a domain prefix


def _torch_profiling() -> bool:
    """True only inside an active torch.profiler session (checked without importing torch)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)
    except AttributeError:
        return False


class range(contextlib.ContextDecorator):  # noqa: A001 - the natural name for users: annotate.range(...)
    """NVTX push/pop range + torch.profiler record_function label; context manager or decorator."""

    __slots__ = ("name", "_rf")

    def __init__(self, name: str):
        self.name = str(name)
        self._rf = None

    def __enter__(self) -> "range":
        if host_samples._ACTIVE:  # the host samples' clock, tied to the recording's (a program without step hooks)
            from .mark_ranges import OpenMark
            host_samples.maybe_anchor(OpenMark)
        _push(self.name)
        _open.append(self)
        if _torch_profiling():
            self._rf = Label(self.name)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self._rf is not None:
            self._rf.end()
            self._rf = None
        _pop()
        if _open and _open[-1] is self:
            _open.pop()
        else:  # closed out of order (a generator, a thread): drop it wherever it is
            try:
                _open.remove(self)
            except ValueError:
                pass
        return False


# The annotate ranges open now, outermost first (the window of steady steps, ``runtime.window``, names a step's
# phase by them). One list for the process: steps are marked on one thread.
_open: list = []
# Told of every ``step()`` range entering and leaving (``begin(open_ranges)``, ``end(open_ranges)``): the
# launcher's window (``runtime.window``). None without the launcher: a step is then a plain range.
_step_listener = None


def open_ranges() -> list:
    """The annotate ranges open now, outermost first."""
    return list(_open)


def label_open_ranges() -> int:
    """A torch.profiler session that starts while ranges are open (the launcher's ``--record-from window`` starts it
    at the window, inside the program's ``train`` range and its own top range) would hold their steps without
    them, and the steps would lose their phase: give each open range its ``record_function`` label from now on
    (ended when the range ends), outermost first. Returns how many were labelled."""
    if not _torch_profiling():
        return 0
    n = 0
    for r in list(_open):
        if r._rf is None or not r._rf.active:
            r._rf = Label(r.name)
            n += 1
    return n


class _Step(range):
    """A step range that tells the launcher's window where each step begins and ends."""
    __slots__ = ()

    def __enter__(self) -> "range":
        listener = _step_listener
        if listener is not None:
            listener.explicit_begin(list(_open))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> bool:
        super().__exit__(*exc)
        listener = _step_listener
        if listener is not None and exc[0] is None:
            listener.explicit_end(list(_open))
        return False


def step(name: str = "step") -> range:
    """A range marking one iteration; nsighttc reads repeated 'step' ranges as the loop's steps."""
    return _Step(name)


def traced(fn: Callable | None = None, *, name: str | None = None):
    """Decorator form that names the range after the function: ``@annotate.traced``."""
    def wrap(f):
        label = name or getattr(f, "__qualname__", getattr(f, "__name__", "fn"))

        @functools.wraps(f)
        def inner(*a, **kw):
            with range(label):
                return f(*a, **kw)
        return inner
    return wrap(fn) if fn is not None else wrap


# --- modules ---------------------------------------------------------------------------------------
_names: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def _name_tree(root: Any) -> None:
    """Give every submodule of ``root`` its path name ('VGG.features.0'), once."""
    base = type(root).__name__
    for sub_name, sub in root.named_modules():
        _names.setdefault(sub, f"{base}.{sub_name}" if sub_name else base)


def _pre(module, *_):
    name = _names.get(module)
    if name is None:
        _name_tree(module)
        name = _names[module]
    _push(name)
    if _torch_profiling():
        module.__dict__.setdefault("_nsighttc_rf", []).append(Label(name))


def _post(module, *_):
    stack = module.__dict__.get("_nsighttc_rf")
    if stack:
        stack.pop().end()
    _pop()


def annotate_model(model: Any, backward: bool = False) -> Any:
    """Wrap every module's forward (and, with ``backward=True``, its backward) in a range named by module path.

    Backward ranges use full backward hooks, which PyTorch refuses on modules whose output is modified
    in place (``nn.ReLU(inplace=True)``, as in torchvision's VGG/ResNet): hence opt-in."""
    _name_tree(model)
    handles = []
    for sub in model.modules():
        handles.append(sub.register_forward_pre_hook(_pre))
        handles.append(sub.register_forward_hook(_post))
        if backward and hasattr(sub, "register_full_backward_pre_hook"):
            handles.append(sub.register_full_backward_pre_hook(lambda m, g: _push(f"{_names.get(m, type(m).__name__)}.backward")))
            handles.append(sub.register_full_backward_hook(lambda m, gi, go: _pop()))
    model.__dict__["_nsighttc_handles"] = handles
    return model


def annotate_all_modules() -> Callable[[], None]:
    """Global forward hooks: every nn.Module the program calls gets a range (used by
    ``nsighttc profile --annotate modules``; no edits to user code). Returns a function that removes them."""
    from torch.nn.modules import module as m
    h1 = m.register_module_forward_pre_hook(_pre)
    h2 = m.register_module_forward_hook(_post)

    def remove() -> None:
        h1.remove()
        h2.remove()
    return remove


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield
