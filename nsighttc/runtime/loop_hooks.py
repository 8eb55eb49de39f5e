"""What the step hooks wrap in torch (``runtime.steps.install``): the optimizers' step hooks and constructor, the
DataLoader's fetch, CUDA graph replays, ``torch.autograd.backward`` and ``torch.compile`` (with dynamo's compile
callbacks). Each wrapper tells the marks' state (``steps.StepMarks``) what the loop did, does nothing while dynamo
traces, and leaves an undo in ``marks._undo``; the main model's calls and ``generate()`` are ``runtime.model_calls``'.
"""
from __future__ import annotations

import functools
import sys
import time
from typing import TYPE_CHECKING

from .model_calls import ModelCall, compiling as _compiling, is_module_call
from ..record_format import BACKWARD, DATA

if TYPE_CHECKING:
    from .steps import StepMarks


def _hook_optimizers(marks: StepMarks) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    pre = register_optimizer_step_pre_hook(marks.optimizer_pre)
    post = register_optimizer_step_post_hook(marks.optimizer_post)
    marks._undo += [pre.remove, post.remove]


def _hook_optimizer_construction(marks: StepMarks) -> None:
    """Count the optimizers the program makes (``torch.optim.Optimizer.__init__``, which every optimizer's runs): a
    program that made one means to train, so its inference steps before the first optimizer step are an evaluation
    ahead of training, not the loop to window (``StepMarks.activity``)."""
    from torch.optim.optimizer import Optimizer
    original = Optimizer.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        marks.counts["optimizers"] += 1
        return original(self, *args, **kwargs)

    Optimizer.__init__ = __init__
    marks._undo.append(lambda: setattr(Optimizer, "__init__", original))


def _hook_dataloaders(marks: StepMarks) -> None:
    from torch.utils.data import dataloader
    cls = dataloader._BaseDataLoaderIter
    original = cls.__next__

    @functools.wraps(original)
    def __next__(self):
        if _compiling():
            return original(self)
        marks.counts["fetches"] += 1
        marks.activity(kind="fetch")
        note = getattr(marks.window, "note_loader", None)
        if note is not None:  # the loader's worker processes: what more workers would add (``analysis.gain``)
            note(getattr(self, "_num_workers", None))
        m = marks.mark(DATA)
        t0 = time.perf_counter_ns()
        try:
            return original(self)
        finally:
            m.end(marks._end)
            # the step timer: the loader's share of each step; the window: each step's wait for its data
            add = getattr(marks.window, "add_data", None)
            if add is not None:  # (the stream's state only for a listener that reads it: no CUDA call in a recording)
                took = time.perf_counter_ns() - t0
                add(took, _gpu_drained() if getattr(marks.window, "wants_drained", True) else None)

    cls.__next__ = __next__
    marks._undo.append(lambda: setattr(cls, "__next__", original))


def _gpu_drained() -> bool | None:
    """Whether the GPU had run out of queued work when a DataLoader fetch returned (the current stream idle: it
    waited on the fetch), or None without CUDA. A stream query, no synchronisation (~µs)."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        return bool(torch.cuda.current_stream().query())
    except Exception:  # noqa: BLE001 - a query that fails tells nothing
        return None


def _hook_graph_replays(marks: StepMarks, cls=None) -> None:
    """``torch.cuda.CUDAGraph.replay`` (``cls``: a stand-in in tests): the program's replays as its iterations."""
    if cls is None:
        import torch
        cls = torch.cuda.CUDAGraph
    original = cls.replay

    @functools.wraps(original)
    def replay(self, *args, **kwargs):
        marks.graph_replay()
        return original(self, *args, **kwargs)

    cls.replay = replay
    marks._undo.append(lambda: setattr(cls, "replay", original))


def _hook_backward(marks: StepMarks) -> None:
    """``loss.backward()`` (``Tensor.backward`` calls ``torch.autograd.backward``): an activity of the loop where
    neither a DataLoader nor a hook on the model is seen (``module.compile()``: dynamo traces its hooks)."""
    import torch.autograd
    original = torch.autograd.backward

    @functools.wraps(original)
    def backward(*args, **kwargs):
        if _compiling():
            return original(*args, **kwargs)
        marks.counts["backwards"] += 1
        marks.activity(top=False)
        m = marks.mark(BACKWARD)
        try:
            return original(*args, **kwargs)
        finally:
            m.end(marks._end)

    torch.autograd.backward = backward
    marks._undo.append(lambda: setattr(torch.autograd, "backward", original))


def _compiled(marks: StepMarks) -> None:
    """Register the compile callbacks once the program has imported torch.compile's machinery (importing it
    ourselves would cost every program ~1 s)."""
    if marks._compile_hooked or "torch._dynamo" not in sys.modules:
        return
    marks._compile_hooked = True
    try:
        from torch._dynamo import callback_handler
        callback_handler.register_start_callback(marks.compile_start)
        callback_handler.register_end_callback(marks.compile_end)
        marks._undo += [lambda: callback_handler.remove_start_callback(marks.compile_start),
                        lambda: callback_handler.remove_end_callback(marks.compile_end)]
    except Exception:  # a torch without dynamo callbacks: compilation shows up inside the steps only
        pass


def _hook_compile(marks: StepMarks) -> None:
    """``torch.compile`` itself registers the callbacks on first use (decorators compile lazily, at the first
    call, which the main model's hook may not see)."""
    import torch
    original = torch.compile

    @functools.wraps(original)
    def compile(*args, **kwargs):
        result = original(*args, **kwargs)
        _compiled(marks)
        target = args[0] if args else kwargs.get("model")
        owner = getattr(target, "__self__", None)
        if is_module_call(target, owner) and callable(result):
            return ModelCall(result, owner, marks)  # torch.compile(model.__call__): its hooks are traced away
        return result

    torch.compile = compile
    marks._undo.append(lambda: setattr(torch, "compile", original))
