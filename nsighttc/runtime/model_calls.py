"""The main model's calls, seen from outside it: which module is the main model, how many tokens a call takes (a
prefill or a decode), a call through a compiled ``module.__call__``, and ``transformers``' ``generate()``. The step
hooks (``runtime.steps``) mark them; ``try``'s model variants (``runtime.variants``) change the model found here.
Imports only the standard library and torch (lazily)."""
from __future__ import annotations

import functools
import sys

from .after_import import when_imported

from ..record_format import REQUEST  # each generate() call


def compiling() -> bool:
    """True while torch.compile traces (dynamo evaluates the call to a constant, so the hook's body is dropped
    from the graph instead of breaking it)."""
    try:
        import torch
        return torch.compiler.is_compiling()
    except Exception:
        return False


def has_parameters(module) -> bool:
    try:
        return next(iter(module.parameters()), None) is not None
    except Exception:
        return False


def hook_main_model(marks) -> None:
    """Find the main model (the first module with parameters called from outside any module), then mark its
    calls with a hook on it alone. Until then ``nn.Module.__call__`` is wrapped to see the calls' depth."""
    from torch import nn
    original = nn.Module.__call__
    state = {"depth": 0}

    def on_model(module) -> None:
        marks.found_main(module)

        def pre(mod, args, kwargs):
            if not compiling():
                marks.model_enter(mod, args, kwargs)

        def post(mod, *_):
            if not compiling():
                marks.model_exit()
        h1 = module.register_forward_pre_hook(pre, with_kwargs=True)
        h2 = module.register_forward_hook(post, always_call=True) if always_call_ok() else module.register_forward_hook(post)
        marks._undo += [h1.remove, h2.remove]

    def restore() -> None:
        if nn.Module.__call__ is wrapped:
            nn.Module.__call__ = original

    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
        # Found already: the wrapper is gone from nn.Module, but a caller may hold it still. transformers' generate()
        # takes ``self.__call__`` once per request, before the first call: every call of the first request came here,
        # and each hooked the model again (H100, transformers 5.17: 96 hooks on each later call of a 96-token
        # request, the unrecorded decode call 13.5 ms against 12 ms plain; on this repository's CPU, 64 hooks).
        if compiling() or state.get("found"):  # (or a compiled function calling modules: leave it alone)
            return original(self, *args, **kwargs)
        if state["depth"] == 0 and has_parameters(self):
            restore()  # found: the wrapper is gone before the model (and any compiled region) runs
            state["found"] = True
            on_model(self)
            return original(self, *args, **kwargs)  # through the hook just registered
        state["depth"] += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            state["depth"] -= 1

    nn.Module.__call__ = wrapped
    marks._undo.append(restore)


def always_call_ok() -> bool:
    import inspect
    from torch import nn
    try:
        return "always_call" in inspect.signature(nn.Module.register_forward_hook).parameters
    except (TypeError, ValueError):
        return False


def is_module_call(target, owner) -> bool:
    """``target`` is a module's bound ``__call__`` (``Module._wrapped_call_impl`` on torch 2.x)."""
    if owner is None:
        return False
    from torch import nn
    return isinstance(owner, nn.Module) and getattr(target, "__name__", "") in ("__call__", "_wrapped_call_impl",
                                                                               "_call_impl")


class ModelCall:
    """A compiled ``module.__call__`` (``transformers`` compiles its decoding call so: ``torch.compile(self.__call__)``
    when the KV cache is static). Dynamo traces ``Module.__call__`` with its hooks, where ``compiling()`` drops
    their bodies, so the call is marked here, outside the compiled region, when ``owner`` is the main model (or the
    first module with parameters called so)."""

    def __init__(self, fn, owner, marks):
        self._fn, self._owner, self._marks = fn, owner, marks
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        marks = self._marks
        if compiling() or (marks.main is not None and marks.main is not self._owner):
            return self._fn(*args, **kwargs)
        if marks.main is None and has_parameters(self._owner):
            marks.found_main(self._owner)
        marks.model_enter(self._owner, args, kwargs)
        try:
            return self._fn(*args, **kwargs)
        finally:
            marks.model_exit()

    def __getattr__(self, name):  # the compiled callable's own attributes (dynamo's _torchdynamo_orig_callable, ...)
        return getattr(self._fn, name)


def query_length(args, kwargs) -> int | None:
    """How many tokens a model call takes per sequence: ``input_ids`` (or ``inputs_embeds``) as a keyword, else a
    first positional 2-D integer tensor; None when the call takes no token ids (an image model)."""
    x = _token_input(args, kwargs)
    return None if x is None else int(x.shape[1])


def batch_size(args, kwargs) -> int | None:
    """How many sequences a model call takes (the token input's first dimension): each decode call makes one token
    per sequence, which ``try``'s tokens/s counts."""
    x = _token_input(args, kwargs)
    return None if x is None else int(x.shape[0])


def _token_input(args, kwargs):
    """The call's token ids (2-D) or embeddings (3-D), or None."""
    x = kwargs.get("input_ids") if kwargs else None
    if x is None and kwargs:
        x = kwargs.get("inputs_embeds")
        if x is not None and getattr(x, "ndim", 0) == 3:
            return x
        x = None
    if x is None and args:
        first = args[0]
        is_int = getattr(getattr(first, "dtype", None), "is_floating_point", True) is False
        x = first if is_int and not getattr(first.dtype, "is_complex", False) else None
    if x is None or getattr(x, "ndim", 0) != 2:
        return None
    return x


def patch_generate(make, flag: str, undo: list | None = None) -> None:
    """Replace ``transformers``' ``GenerationMixin.generate`` by ``make(original)``, once per ``flag``, when the program
    imports ``transformers.generation.utils`` (transformers loads it lazily; nothing here imports it). The step hooks'
    request marks and ``try``'s ``static-cache`` variant both wrap it."""
    def patch() -> None:
        mod = sys.modules.get("transformers.generation.utils")
        cls = getattr(mod, "GenerationMixin", None)
        if cls is None or getattr(cls.generate, flag, False):
            return
        original = cls.generate
        replacement = functools.wraps(original)(make(original))
        setattr(replacement, flag, True)
        cls.generate = replacement
        if undo is not None:
            undo.append(lambda: setattr(cls, "generate", original))
    when_imported("transformers.generation.utils", patch, undo)


def hook_generate(marks) -> None:
    """``transformers``' ``generate()``: one request each (``nsighttc.request``)."""
    def make(original):
        def generate(self, *args, **kwargs):
            if compiling():
                return original(self, *args, **kwargs)
            marks.counts["requests"] += 1
            m = marks.mark(REQUEST)
            try:
                return original(self, *args, **kwargs)
            finally:
                m.end(marks._end)
        return generate
    patch_generate(make, "_nsighttc_request", marks._undo)
