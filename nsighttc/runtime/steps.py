"""Steps marked from inside a program nobody annotated: global hooks the launcher installs before the program's
first line (``install``), so that every engine's recording (torch.profiler, nsys, ncu) says where each step was.

What is marked (each an NVTX start/end range, plus a ``record_function`` of the same name while torch.profiler
records; start/end ranges because these open and close at different depths of the program and must never take a
user's push/pop range off its stack):

- ``nsighttc.step``: one optimizer step of the loop. ``torch.optim`` calls global hooks around every optimizer's
  ``step`` (``register_optimizer_step_post_hook``), so every optimizer, closures (LBFGS), gradient accumulation
  (one step per N micro-batches) and several optimizers per iteration (a GAN's) are seen without touching the
  program. A step *ends* at the first DataLoader fetch or call of the main model after an optimizer step (in a
  program that shows neither, at the next ``backward`` or optimizer step), and the next one starts there: steps
  are iterations of the loop, data loading, ``zero_grad``, the LR scheduler and logging included, one per
  iteration however many optimizers step in it. The first step starts at the program's first such activity. A step still
  open when the program ends had no optimizer step (an evaluation, or the tail after training): it is left open,
  and the analysis drops it.
- ``nsighttc.optimizer``: each optimizer step (pre to post hook): what makes a ``nsighttc.step`` complete.
- ``nsighttc.data``: each DataLoader fetch (``_BaseDataLoaderIter.__next__``): with no optimizer in the program
  (inference, evaluation), the loop's iterations run from one fetch to the next.
- ``nsighttc.forward``: each call of the main model, the first module *with parameters* the program calls from
  outside any other module (found by wrapping ``nn.Module.__call__`` until then, then a hook on that module
  alone): without a DataLoader either, the iterations are these calls.
- Inference: until the program's first optimizer step (an LLM ``generate()`` loop, an evaluation, a batch
  inference job have none), a step is one iteration of the loop: from one DataLoader fetch to the next where the
  program fetches, else one top-level call of the main model. Nested submodule calls and a model calling itself
  never count as more steps (only calls from outside the model do). So the window of steady steps starts on
  inference programs as on training ones (a ``generate()`` loop recorded every operator of its whole
  run and gave no verdict). A program that has called ``backward`` or stepped an optimizer is a training loop:
  its steps end with optimizer steps as above (gradient accumulation's micro-batches are never steps).
- ``nsighttc.prefill`` / ``nsighttc.decode``: each main-model call whose input is token ids (``input_ids``, or a
  2-D integer tensor) is marked by its query length: a prefill takes the prompt (more than one token), a decode
  one token while its KV cache grows. ``nsighttc.request``: each ``transformers`` ``generate()`` call. Models
  compiled by ``transformers`` itself (a static KV cache compiles the decoding call) are seen through the
  compiled callable, whose inside dynamo traces without our hooks.
- CUDA graph replays: a loop that captured its step once (``torch.cuda.graph``) and replays it (``g.replay()``) calls
  no optimizer, fetch or model hook per iteration, and was read as its few eager warm-up steps (H200: "3 steady
  steps", 2,000 replays unseen, recorded whole with every operator's arguments). A replay from the program's own
  loop (not inside a main-model call, an optimizer step or compiled code: torch.compile's CUDA-graph trees replay
  there) ends the open step when that step holds a replay already and no optimizer stepped since it, and after an
  optimizer step as any activity does: each replay is an iteration.
- ``nsighttc.backward``: each ``backward`` call from the program (the host launching the backward pass: where an
  un-annotated program's GPU waits for its host is often here).
- ``nsighttc.compile``: torch.compile's compilations (``torch._dynamo.callback_handler``'s start/end callbacks:
  frame compiles, lazy backward compiles, CUDA-graph recording), registered once the program imports dynamo.
- ``nsighttc.window``: each window of steady steps the launcher chose (``runtime.window``), from its first step's
  start to its last step's end. The analysis leaves every step before it out of the steady state: a recording that
  began before the window (a distributed first run's ranks, a named phase's) holds warm-up steps no rule on step
  times alone can tell apart, such as one rank's wait while another changed its profiler sessions (call45).

Installed when the program imports torch (``install_when_torch_imports``: a program without PyTorch pays
nothing). Cost: a few microseconds per fetch, model call and optimizer step (a range costs ~1 µs without a
profiler, ``benchmarks/bench_annotate.py``). Every hook does nothing while torch.compile traces
(``torch.compiler.is_compiling()`` is a constant to dynamo), so no hook adds a graph break, even to
``fullgraph=True`` code or to ``module.compile()``, whose hooks dynamo traces. Explicit marks
(``nsighttc.annotate.step``, ``ProfilerStep``, ``--step-range``) win in the analysis; these are read only where a
program has none.
"""
from __future__ import annotations

import sys
import threading

from . import host_samples
from .after_import import AfterImport
from .lines import say
from .loop_hooks import (_compiled, _hook_backward, _hook_compile, _hook_dataloaders, _hook_graph_replays,  # noqa: F401
                         _hook_optimizer_construction, _hook_optimizers)
from .mark_ranges import Mark, OpenMark, _nvtx, _profiling
from .model_calls import compiling as _compiling, hook_generate, hook_main_model, batch_size, query_length

from ..record_format import (BACKWARD, COMPILE, DATA, DECODE, FORWARD, MARK_NAMES as NAMES, OPTIMIZER,  # noqa: F401
                             PREFILL, PREFIX, REQUEST, STEP, WINDOW)


class StepMarks:
    """The hooks' state: the open step, whether an optimizer step ended since it opened, and counts
    (``record`` says what was seen, for run.json)."""

    def __init__(self):
        self._start, self._end = _nvtx()
        self._lock = threading.Lock()
        self.step: Mark | None = None
        self.pending = False           # an optimizer step ended: the open step closes at the next activity
        self._tops = 0                 # fetches and model calls in the open step
        self.counts = {"steps": 0, "optimizer_steps": 0, "fetches": 0, "model_calls": 0, "compiles": 0,
                       "prefills": 0, "decodes": 0, "requests": 0, "backwards": 0, "optimizers": 0}
        self.model: str | None = None  # the main model's class name, once found
        self._compiles: list[Mark] = []
        self._optimizer: Mark | None = None  # the optimizer step under way
        self._compile_hooked = False          # the dynamo callbacks are registered
        self._undo: list = []
        self.window = None                    # the launcher's window of steady steps (runtime.window), if any
        self.last_optimizer_step: int | None = None  # the program's last run ended after this many (``optimizer_post``)
        self.main = None                      # the main model (a module), once found
        self.on_main: list = []               # called with the main model when it is found (try's model variants)
        self._depth = 0                       # main-model calls under way (a model calling itself: 2)
        self._call_marks: list[list[Mark]] = []
        self._replays = 0                     # the program's CUDA graph replays in the open step
        self._opt_at_replay = 0               # optimizer steps counted at the last of them

    def mark(self, name: str) -> Mark:
        if host_samples._ACTIVE:
            host_samples.maybe_anchor(OpenMark)  # the samples' clock, tied to the recording's where marks are drawn
        return Mark(name, self._start, _profiling())

    # -- the step boundary ----------------------------------------------------------------------------
    def activity(self, top: bool = True, kind: str | None = None) -> None:
        """Something the loop does each iteration: a step opens here if none is open, and the open one closes
        first when an optimizer step ended since it opened. ``top``: a DataLoader fetch or a call of the main
        model, where iterations begin; otherwise a ``backward`` or the next optimizer step, which cut the steps
        only in a program that shows neither (a GAN's second backward must not cut its iteration in two).
        ``kind`` ("fetch", "model"): where no optimizer has stepped yet, such an activity ends the open step when it
        is the loop's boundary (``_inference_boundary``)."""
        with self._lock:
            inference_end = False
            if self.step is not None and not self.pending:
                if not (top and kind and self._inference_boundary(kind)):
                    self._tops += top
                    return
                self.pending = inference_end = True  # an inference iteration ends here: closed below like an
                                                     # optimizer step's
            if self.step is not None and not top and self._tops:
                return  # this loop's iterations begin at a fetch or a model call: the step ends there
            if self.step is not None:
                # An evaluation before training (an optimizer made, none stepped yet: Trainer's eval_on_start,
                # Lightning's sanity check, a loop that scores the model first) is a step of the recording but no
                # window's: a window there would stop the program before its training loop was seen.
                self._end_step(tell=not (inference_end and self.counts["optimizers"]))
            self.pending = False
            self._tops = int(top)
            self._replays = 0
            self.step = self.mark(STEP)

    def _inference_boundary(self, kind: str) -> bool:
        """Whether ``kind`` starts an iteration of a loop without optimizer steps: a fetch where the program
        fetches, else a model call; only once the open step holds one such activity already."""
        if self.counts["optimizer_steps"] or self.counts["backwards"] or not self._tops:
            return False  # a training loop (gradient accumulation before its first optimizer step included)
        return kind == ("fetch" if self.counts["fetches"] else "model")

    # -- the main model's calls -------------------------------------------------------------------------
    def found_main(self, module) -> None:
        """The main model is found: remember it and tell whoever asked (``on_main``: try's model variants)."""
        self.main, self.model = module, type(module).__name__
        for fn in self.on_main:
            try:
                fn(module)
            except Exception as exc:  # noqa: BLE001 - the program runs unchanged, and says why
                say(f"nsighttc.launch: could not change the model ({type(exc).__name__}: {exc})")

    def model_enter(self, module, args, kwargs) -> None:
        """A call of the main model begins (its forward pre-hook, or its compiled callable): only a call from
        outside the model is an activity of the loop, marked ``nsighttc.forward`` (and prefill/decode)."""
        self._depth += 1
        if self._depth > 1:  # the model calling itself: part of the call under way
            return
        q = query_length(args, kwargs)
        phase = None if q is None else DECODE if q == 1 else PREFILL
        if self.window is not None:  # a generation loop's window holds whole requests (runtime.window)
            generation = bool(self.counts["prefills"] and self.counts["decodes"])
            nxt = None if phase is None else phase.rsplit(".", 1)[1]
            batch = batch_size(args, kwargs) if phase is not None else None
            for listener in getattr(self.window, "listeners", None) or [self.window]:  # (step_timer.Fanout)
                listener.generation, listener.next_step, listener.next_batch = generation, nxt, batch
        try:
            self.activity(kind="model")  # may stop the program here (the window's WindowDone)
        except BaseException:
            self._depth -= 1  # the call never ran: a later one is no nested call
            raise
        note = getattr(self.window, "note_shape", None)
        if note is not None:  # (the step timer: each step's input shapes, ``step_timer.note_shape``)
            note(shape_signature(args, kwargs))
        self.counts["model_calls"] += 1
        _compiled(self)
        opened = [self.mark(FORWARD)]
        if phase is not None:
            self.counts["decodes" if q == 1 else "prefills"] += 1
            opened.append(self.mark(phase))
        self._call_marks.append(opened)

    def model_exit(self) -> None:
        if self._depth <= 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._call_marks:
            for m in reversed(self._call_marks.pop()):
                m.end(self._end)

    def optimizer_pre(self, *_):
        if _compiling():  # an optimizer step compiled by torch.compile: its hooks are traced, add nothing
            return
        if self.pending:  # no fetch, model call or backward since the last optimizer step: the step may end here
            self.activity(top=False)
        self._optimizer = self.mark(OPTIMIZER)

    def optimizer_post(self, *_):
        if _compiling():
            return
        if self._optimizer is not None:
            self._optimizer.end(self._end)
            self._optimizer = None
        self.counts["optimizer_steps"] += 1
        self.pending = True
        if self.counts["optimizer_steps"] == self.last_optimizer_step and self.counts["optimizers"] <= 1:
            # The program's last run ended after this many optimizer steps, inside its window: this step is
            # complete now, and a window that ends with it leaves the program's end unrecorded (runtime.window,
            # ``Window._at_last_step``). Not with several optimizers, whose iterations step each of them.
            with self._lock:
                if self.step is not None:
                    self._end_step(tell=True, last=True)

    def optimizer_steps_left(self) -> int | None:
        """Optimizer steps left until the one the program's last run ended after (``last_optimizer_step``), or None
        where that is not known or the program steps several optimizers (``runtime.window.Window.steps_left``)."""
        if self.last_optimizer_step is None or self.counts["optimizers"] > 1:
            return None
        return self.last_optimizer_step - self.counts["optimizer_steps"]

    def _end_step(self, tell: bool, last: bool = False) -> None:
        """The open step ends here (the caller holds the lock); ``tell``: the window hears of it (``last``: with the
        optimizer step the program's last run ended after)."""
        self.step.end(self._end)
        self.counts["steps"] += 1
        self.step, self.pending = None, False
        if self.window is not None and tell:
            self.window.hook_boundary(last=last)  # may stop the program here (runtime.window.WindowDone)

    # -- CUDA graph replays ------------------------------------------------------------------------------
    def graph_replay(self) -> None:
        """The program replays a CUDA graph from its own loop (module docstring): an iteration's boundary where the
        open step holds a replay already and no optimizer stepped since, or an optimizer step ended it."""
        if _compiling() or self._depth > 0 or self._optimizer is not None:
            return  # (a model's compiled graphs, make_graphed_callables inside a model call, an optimizer's own)
        with self._lock:
            self.counts["replays"] = self.counts.get("replays", 0) + 1
            if self.counts["replays"] == 1 and self.counts["steps"] and self.window is not None:
                # steps of another kind came before (the eager warm-up calls, the capture): the window hears it
                begin = getattr(self.window, "replays_begin", None)
                if begin is not None:
                    begin()
            again = self._replays and self.counts["optimizer_steps"] == self._opt_at_replay
            if self.step is not None and (self.pending or again):
                self._end_step(tell=True)  # may stop the program here (the window's WindowDone)
            if self.step is None:
                self.pending, self._tops, self._replays = False, 1, 0
                self.step = self.mark(STEP)
            self._replays += 1
            self._opt_at_replay = self.counts["optimizer_steps"]

    # -- compilation ----------------------------------------------------------------------------------
    def compile_start(self, *_):
        self._compiles.append(self.mark(COMPILE))
        self.counts["compiles"] += 1

    def compile_end(self, *_):
        if self._compiles:
            self._compiles.pop().end(self._end)

    def finish(self) -> None:
        """The program has ended: a step whose optimizer step ended is complete (nothing came after it to close
        it); one without is the program's tail after training and stays open, which the analysis reads as no
        step (nsys records it unclosed, torch.profiler closes it at its stop)."""
        with self._lock:
            if self.step is not None and self.pending:
                self.step.end(self._end)
                self.counts["steps"] += 1
                self.step, self.pending = None, False

    def record(self) -> dict:
        return {**self.counts, "model": self.model, "open_step_at_exit": self.step is not None}

    def remove(self) -> None:
        """Take every hook and patch off again (the launcher calls it when the program has ended)."""
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception:
                pass
        self._undo.clear()


def install(marks: StepMarks | None = None) -> StepMarks | None:
    """Install every hook (None when torch cannot be imported: a program without PyTorch has no steps to
    find this way). A hook that cannot be installed on this torch is skipped; the others still work."""
    try:
        import torch  # noqa: F401
    except Exception:
        return None
    marks = marks if marks is not None else StepMarks()
    for hook in (_hook_optimizers, _hook_optimizer_construction, _hook_dataloaders, hook_main_model, _hook_backward,
                 _hook_compile, hook_generate, _hook_graph_replays):
        try:
            hook(marks)
        except Exception as exc:  # noqa: BLE001 - a torch without this API: that source of marks is missing
            say(f"nsighttc.launch: step marks: {hook.__name__[6:]} not hooked ({type(exc).__name__}: {exc})")
    return marks


def install_when_torch_imports() -> StepMarks:
    """The hooks, installed now when torch is already imported, else as soon as the program imports it. Returns
    the marks' state either way (its counts stay zero for a program that never imports torch)."""
    marks = StepMarks()
    if "torch" in sys.modules:
        install(marks)
    else:
        finder = AfterImport("torch", lambda: install(marks))
        sys.meta_path.insert(0, finder)
        marks._undo.append(finder.remove)
    return marks


def shape_signature(args, kwargs) -> tuple:
    """The shapes of a call's tensor arguments (positional, then keyword by name; one level into lists and tuples):
    what makes a new input shape for the kernels the call launches. Cheap: attribute reads only."""
    def shapes(x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return tuple(x.shape)
        if isinstance(x, (list, tuple)) and x and len(x) <= 64:
            inner = tuple(tuple(v.shape) for v in x if hasattr(v, "shape") and hasattr(v, "dtype"))
            return inner or None
        return None
    out = [sh for sh in (shapes(a) for a in args) if sh is not None]
    out += [(k, sh) for k in sorted(kwargs) if (sh := shapes(kwargs[k])) is not None]
    return tuple(out)
