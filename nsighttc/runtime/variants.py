"""Variants ``nsighttc try`` applies to a program from the launcher, without editing it.

Each variant is one change the material's experiments make by hand (TF32 on/off, autocast, cuDNN autotuning,
DataLoader workers and pinned memory). ``apply`` runs inside the program's process (``nsighttc.runtime.launch
--variant NAME``) before its first line, and returns a record of exactly what it set; the record lands in
the variant's ``run.json``.

Model variants (``compile``, ``compile-reduce-overhead``, ``channels-last``) change the main model, which the step
hooks find (``runtime.steps``: the first module with parameters the program calls from outside any module): its
``forward`` is replaced by ``torch.compile(forward)`` (the module object stays the program's, and the hooks around
its calls stay outside the compiled region), or the module is converted to ``torch.channels_last`` (PyTorch's
convolutions follow the weight's memory format: cuDNN suggests channels-last when the weight is, so the inputs need
no change). ``compile-reduce-overhead`` marks each call of the main model as a new CUDA-graph step
(``torch.compiler.cudagraph_mark_step_begin()``): the replay of one call may then overwrite the outputs of the
previous one, which a loop that keeps no output across calls never reads (a loop that sums several calls' losses
before one backward fails, with PyTorch's own error naming the call).

Generation loops (``transformers``' ``generate()``): a dynamic KV cache grows every token, and
``torch.compile(mode="reduce-overhead")`` of a model over it replays graphs whose outputs the cache still holds
("accessing tensor output of CUDAGraphs that has been overwritten", seen on the H100 with transformers 5.17; "To
prevent overwriting, clone the tensor outside of torch.compile()"). So both graph variants take
transformers' own compiled path there, which graphs the decoding step over a static cache updated in place:
``static-cache`` sets ``cache_implementation="static"`` on every ``generate()`` call, also where the program named
another cache itself (``cache_implementation="dynamic"``, or in ``generation_config``: the table says what it
overrode), and transformers then compiles the decoding step (``CompileConfig``'s default mode is "reduce-overhead");
``compile-reduce-overhead`` does the same with ``compile_config=CompileConfig(mode="reduce-overhead")`` spelled out,
and leaves the main model's ``forward`` alone when it is called from ``generate()``. A call that passes its own cache
object (``past_key_values``) is left as it is.

``cuda-graphs`` replays the main model's evaluation calls as CUDA graphs captured without the compiler, where their
signatures are static (``runtime.cuda_graphs``, which says where it cannot apply).

Every variant's record says whether it changed anything (``applied``) and why not: a variant that applied nowhere ran
the program unchanged, and ``try`` does not present its run as a measurement of it (a ``static-cache``
that changed 0 calls was reported as "0.81x (slower)"). At exit the record also holds what torch.compile did in the
process (graphs, compile seconds: ``compile_record``).
"""
from __future__ import annotations

import contextlib
import re
import sys
import warnings
from dataclasses import dataclass

from . import held_flags
from .variant_hooks import PAD_MULTIPLE, _fused_optimizers, pad_buckets, watch_dataloaders

# name -> what it does (shown by `nsighttc try --help` and written beside each result)
VARIANTS = {
    "baseline": "the program as it is",
    "tf32": "fp32 matmuls and convolutions on TF32 Tensor Cores: torch.backends.cuda.matmul.allow_tf32 = "
            "torch.backends.cudnn.allow_tf32 = True, torch.set_float32_matmul_precision('high')",
    "no-tf32": "TF32 off: allow_tf32 = False for matmul and cuDNN, set_float32_matmul_precision('highest')",
    "bf16-autocast": "the whole program inside torch.autocast('cuda', dtype=torch.bfloat16)",
    "fp16-autocast": "the whole program inside torch.autocast('cuda', dtype=torch.float16); training without a "
                     "GradScaler may underflow gradients",
    "cudnn-benchmark": "torch.backends.cudnn.benchmark = True (cuDNN times its algorithms per input shape)",
    "workers=N": "DataLoaders built with num_workers=0 (the default) get N worker processes",
    "pin-memory": "DataLoaders built with pin_memory=False (the default) pin their batches",
    "fused-optimizer": "torch.optim.Adam, AdamW and SGD built without fused= or foreach= get fused=True (one kernel "
                       "per parameter group's update instead of several per parameter)",
    "persistent-workers": "DataLoaders with workers built with persistent_workers=False (the default) keep them "
                          "between epochs (no restart of every worker at each epoch's first batch)",
    "compile": "the main model's forward through torch.compile (Inductor's fused kernels; the first calls compile)",
    "compile-reduce-overhead": "the main model's forward through torch.compile(mode='reduce-overhead'), each call a "
                               "new CUDA-graph step: graphs replay each call's kernels without the host launching "
                               "them one by one; generate() loops take transformers' compiled static-cache path",
    "channels-last": "the main model converted to torch.channels_last (convolutions follow the weight's layout)",
    "cuda-graphs": "the main model's evaluation calls (autograd off, static shapes, on the GPU) captured once per "
                   "input signature and replayed as CUDA graphs, without torch.compile; training calls, calls from "
                   "generate() and calls whose capture fails run as written, and the table says how many",
    "static-cache": "transformers generate() calls with cache_implementation='static', also where the program named "
                    "another cache (transformers then compiles the decoding step with CUDA graphs)",
    "pad-buckets": f"transformers tokenizers asked to pad to the longest pad to a multiple of {PAD_MULTIPLE} tokens "
                   "(a few input shapes, not one per batch; padding written by hand: nsighttc fix edits it)",
}
MODEL_VARIANTS = ("compile", "compile-reduce-overhead", "channels-last", "cuda-graphs")
FP16_WARNING = ("fp16-autocast: training needs a torch.amp.GradScaler, which the program may not have; without "
                "one small gradients underflow to zero (check the loss/metric column)")
_WORKERS = re.compile(r"^workers=(\d+)$")


@dataclass(frozen=True)
class Variant:
    name: str
    key: str          # the VARIANTS entry: "workers=N" for workers=8
    arg: int | None = None


def parse(name: str) -> Variant:
    """A variant name as the user typed it; ValueError names the ones that exist."""
    name = name.strip()
    m = _WORKERS.match(name)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise ValueError("workers=N needs N >= 1")
        return Variant(name, "workers=N", n)
    if name in VARIANTS and name != "workers=N":
        return Variant(name, name)
    raise ValueError(f"unknown variant {name!r}; variants: {', '.join(k for k in VARIANTS if k != 'baseline')}, auto")


class Applied:
    """What the variants set in this process, and what the program itself did with the settings variants
    touch (DataLoaders it built, TF32 and cuDNN flags at the end): ``record()`` is written to the run's
    applied-variants file, and ``--variant auto`` reads the baseline's to choose."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.loaders = {"built": 0, "changed": 0, "workers_default": 0, "pin_memory_default": 0}

    def record(self) -> dict:
        for item in self.items:
            item["applied"], why = _applied(item, self.loaders)
            if why:
                item["not_applied"] = why
            else:
                item.pop("not_applied", None)
        out = {"variants": self.items, "dataloaders": dict(self.loaders)}
        compiled = compile_record()
        if compiled:
            out["compile"] = compiled
        try:
            import torch
            out["flags_at_exit"] = {"torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                                    "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                                    "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
                                    "float32_matmul_precision": torch.get_float32_matmul_precision()}
        except Exception:
            pass
        return out


def apply(names: list[str], applied: Applied, marks=None) -> contextlib.AbstractContextManager:
    """Apply the variants in this process; returns the context the program must run in (autocast). With no
    variants (the baseline) it only watches what the program does with DataLoaders. ``marks``: the step hooks
    (``runtime.steps.StepMarks``), which tell the model variants the main model once the program first calls it."""
    try:
        import torch
    except ImportError:
        if names:
            raise
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    loader_changes: dict[str, object] = {}
    for v in (parse(n) for n in names):
        if v.key in ("tf32", "no-tf32"):
            on = v.key == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.backends.cudnn.allow_tf32 = on
            torch.set_float32_matmul_precision("high" if on else "highest")
            item = {"variant": v.name, "set": {"torch.backends.cuda.matmul.allow_tf32": on,
                                               "torch.backends.cudnn.allow_tf32": on,
                                               "float32_matmul_precision": "high" if on else "highest"}}
            applied.items.append(item)
            held_flags.hold(torch, {"tf32": on}, item)  # the program's own `allow_tf32 = False` cannot undo it
        elif v.key in ("bf16-autocast", "fp16-autocast"):
            dtype = torch.bfloat16 if v.key == "bf16-autocast" else torch.float16
            device = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: what CI can check
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fp16 on CPU autocast is allowed on recent torch
                stack.enter_context(torch.autocast(device, dtype=dtype))
            applied.items.append({"variant": v.name, "set": {"autocast": device, "dtype": str(dtype).replace("torch.", "")}})
        elif v.key == "cudnn-benchmark":
            torch.backends.cudnn.benchmark = True
            item = {"variant": v.name, "set": {"torch.backends.cudnn.benchmark": True}}
            applied.items.append(item)
            held_flags.hold(torch, {"benchmark": True}, item)
        elif v.key == "workers=N":
            loader_changes["num_workers"] = v.arg
            applied.items.append({"variant": v.name, "set": {"DataLoader num_workers (where 0)": v.arg}})
        elif v.key == "pin-memory":
            loader_changes["pin_memory"] = True
            applied.items.append({"variant": v.name, "set": {"DataLoader pin_memory (where False)": True}})
        elif v.key == "fused-optimizer":
            item = {"variant": v.name, "set": {"optimizers built with fused=True": 0}}
            applied.items.append(item)
            _fused_optimizers(torch, item)
        elif v.key == "persistent-workers":
            loader_changes["persistent_workers"] = True
            applied.items.append({"variant": v.name, "set": {"DataLoader persistent_workers (where False, with "
                                                             "workers)": True}})
        elif v.key in MODEL_VARIANTS:
            if marks is None:
                raise ValueError(f"variant {v.name} changes the main model, which the step hooks find: "
                                 "run it with --step-marks on")
            item = {"variant": v.name, "set": {}}
            applied.items.append(item)
            if v.key == "compile-reduce-overhead":
                item["set"]["generate calls"] = 0
                _graphed_generate(item, compile_config=True)
            elif v.key == "cuda-graphs":
                _count_generate()
            marks.on_main.append(lambda module, key=v.key, item=item: _change_model(module, key, item))
        elif v.key == "static-cache":
            item = {"variant": v.name, "set": {"generate(cache_implementation)": "static", "generate calls": 0}}
            applied.items.append(item)
            _graphed_generate(item, compile_config=False)
        elif v.key == "pad-buckets":
            item = {"variant": v.name, "set": {"tokenizer calls padded to a multiple": 0, "multiple": PAD_MULTIPLE}}
            applied.items.append(item)
            pad_buckets(item)
    watch_dataloaders(applied, loader_changes)
    return stack


def _applied(item: dict, loaders: dict) -> tuple[bool, str | None]:
    """(whether the variant changed anything in this run, why not). Settings (TF32, autocast, cuDNN) always apply."""
    name = item["variant"]
    key = parse(name).key
    st = item.get("set") or {}
    if key in ("workers=N", "pin-memory", "persistent-workers"):
        if loaders.get("changed"):
            return True, None
        if not loaders.get("built"):
            return False, "the program built no DataLoader"
        if key == "persistent-workers":
            return False, (f"no DataLoader the program built ({loaders['built']}) had workers and "
                           "persistent_workers=False")
        arg = "num_workers" if key == "workers=N" else "pin_memory=True"
        return False, f"every DataLoader the program built ({loaders['built']}) set {arg} itself"
    if key == "static-cache" or (key == "compile-reduce-overhead" and "model" not in st):
        if st.get("generate calls"):
            return True, None
        if st.get("own cache object"):
            return False, (f"each generate() call ({st['own cache object']}) passed its own cache object "
                           "(past_key_values), which the variant leaves alone")
        if key == "static-cache":
            return False, "no transformers generate() call ran"
    if key == "pad-buckets" and not st.get("tokenizer calls padded to a multiple"):
        return False, ("no transformers tokenizer was asked to pad to the longest (padding written by hand is out of "
                       "the launcher's reach: nsighttc fix edits it)")
    if key == "fused-optimizer" and not st.get("optimizers built with fused=True"):
        return False, "the program built no Adam, AdamW or SGD without fused= or foreach="
    if key in MODEL_VARIANTS:
        if not st.get("model"):
            return False, ("the step hooks found no main model (a module with parameters the program calls from "
                           "outside any module) before the run ended")
        if key == "cuda-graphs":  # found, but were its calls graphed?
            from .cuda_graphs import not_applied
            why = not_applied(st)
            return why is None, why
        return True, None
    return True, None


def compile_record() -> dict | None:
    """What torch.compile did in this process, where it ran: compile seconds (dynamo's per-frame compile time),
    distinct graphs compiled, frames compiled (dynamo's counters; torch 2.11, 2.13). None when nothing compiled."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    try:
        stats = utils.counters.get("stats") or {}
        frames = utils.counters.get("frames") or {}
        secs = sum((getattr(utils, "compilation_time_metrics", {}) or {}).get("_compile.compile_inner", []) or [])
        graphs = int(stats.get("unique_graphs", 0))
    except Exception:
        return None
    if not graphs and not secs:
        return None
    return {"graphs": graphs, "frames_compiled": int(frames.get("ok", 0)), "compile_s": round(float(secs), 3)}


_GENERATE_DEPTH = [0]  # generate() calls open on this process' stack (``_graphed_generate``)


def _change_model(module, key: str, item: dict) -> None:
    """A model variant, applied to the main model when the hooks find it (before its first call runs)."""
    import torch
    name = type(module).__name__
    if key == "channels-last":
        module.to(memory_format=torch.channels_last)
        item["set"] = {"model": name, "memory_format": "channels_last"}
        return
    if key == "cuda-graphs":
        from .cuda_graphs import GraphedForward
        item["set"]["model"] = name
        module.forward = GraphedForward(module.forward, item, in_generate=lambda: _GENERATE_DEPTH[0] > 0)
        return
    if key == "compile-reduce-overhead" and _GENERATE_DEPTH[0]:
        # called from generate(): transformers' compiled static-cache path graphs it (``_graphed_generate``)
        item["set"]["model"] = name
        item["set"]["forward"] = "left to generate(): transformers compiles the decoding step over a static cache"
        return
    mode = "reduce-overhead" if key == "compile-reduce-overhead" else None
    compiled = torch.compile(module.forward, mode=mode)
    if mode is None:
        module.forward = compiled
    else:
        def forward(*args, **kwargs):
            # each call of the main model is a new CUDA-graph step: the previous call's outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*args, **kwargs)
        module.forward = forward
    item["set"].update({"model": name, "forward": f"torch.compile(mode={mode or 'default'!r})"
                                                  + (", each call a new CUDA-graph step" if mode else "")})


def _counted(original, self, args, kwargs):
    """``original(self, *args, **kwargs)``, a ``generate()`` call, counted in ``_GENERATE_DEPTH`` while it runs."""
    _GENERATE_DEPTH[0] += 1
    try:
        return original(self, *args, **kwargs)
    finally:
        _GENERATE_DEPTH[0] -= 1


def _count_generate() -> None:
    """Count the ``generate()`` calls open on the stack (``_GENERATE_DEPTH``), for a variant that leaves their model
    calls alone (``cuda-graphs``)."""
    from .model_calls import patch_generate

    def make(original):
        def generate(self, *args, **kwargs):
            return _counted(original, self, args, kwargs)
        return generate
    patch_generate(make, "_nsighttc_generate_depth")


def _graphed_generate(item: dict, compile_config: bool) -> None:
    """``generate()`` calls get ``cache_implementation="static"`` (transformers then compiles the decoding step with
    CUDA graphs), whatever cache the program chose by name; with ``compile_config``, also
    ``compile_config=CompileConfig(mode="reduce-overhead")`` where the program set none. What each call had chosen is
    counted in ``item["set"]["overrode"]``."""
    from .model_calls import patch_generate

    def make(original):
        def generate(self, *args, **kwargs):
            st = item["set"]
            # the program's own cache object (``past_key_values``; ``cache`` from transformers 5.24 on): left alone
            if kwargs.get("past_key_values") is not None or not isinstance(kwargs.get("cache", ""), (str, type(None))):
                st["own cache object"] = st.get("own cache object", 0) + 1
            else:
                config = kwargs.get("generation_config")
                config = config if config is not None else getattr(self, "generation_config", None)
                before = kwargs.get("cache_implementation", getattr(config, "cache_implementation", None))
                if before not in (None, "static"):
                    over = st.setdefault("overrode", {})
                    over[f"cache_implementation={before!r}"] = over.get(f"cache_implementation={before!r}", 0) + 1
                kwargs["cache_implementation"] = "static"
                if compile_config and kwargs.get("compile_config") is None and \
                        getattr(config, "compile_config", None) is None:
                    # (transformers is loaded: its generate() is running; an older one without CompileConfig
                    # compiles a static cache's decoding step by its own default)
                    compile_cls = getattr(sys.modules.get("transformers"), "CompileConfig", None)
                    if compile_cls is not None:
                        kwargs["compile_config"] = compile_cls(mode="reduce-overhead")
                        st["generate(compile_config)"] = "CompileConfig(mode='reduce-overhead')"
                if kwargs.get("disable_compile"):
                    st["disable_compile"] = "kept: the program's generate(disable_compile=True)"
                st["generate calls"] += 1
            return _counted(original, self, args, kwargs)
        return generate
    patch_generate(make, "_nsighttc_static_" + item["variant"].replace("-", "_"))


