"""The source edits behind ``nsighttc fix``: each fix kind a LibCST transformer of the program's own code.

Why LibCST and not regular expressions: a call spans lines, its arguments are keyword or positional, a flag is set
in a branch, and the user's formatting (comments, line breaks, quotes) must survive: LibCST's concrete syntax tree
keeps every byte it is not asked to change, so the diff holds the edit and nothing else.

Each edit returns the new source and what it did (``Edit.done``: one line per change, ``file:line``), or says why it
did nothing (``Edit.skipped``): an argument built from ``**kwargs`` or set from an expression (the value comes from
elsewhere: the user's option, a config), a call the program never makes. Kinds (``KINDS``):

- ``tf32`` / ``no-tf32``: assignments of ``torch.backends.cuda.matmul.allow_tf32`` / ``torch.backends.cudnn.allow_tf32``
  to the other value flipped where they are, ``torch.set_float32_matmul_precision("highest")`` to ``"high"``; where
  the program sets neither, both set after its ``import torch``.
- ``cudnn-benchmark``: ``torch.backends.cudnn.benchmark = False`` flipped, else set after ``import torch``.
- ``workers=N`` / ``pin-memory`` / ``persistent-workers``: the ``DataLoader(...)`` calls' ``num_workers`` (missing
  or a literal 0), ``pin_memory`` (missing or ``False``), ``persistent_workers`` (missing or ``False``, where the
  loader has workers), keyword or positional (``DataLoader(ds, 64, True, None, None, 0)``).
- ``static-cache``: ``cache_implementation=`` set to ``"static"`` where the program names it (a ``generate()`` call,
  a ``dict(...)`` or ``{...}`` of its arguments), else added to every ``.generate(...)`` call.
- ``fused-optimizer``: ``fused=True`` on ``torch.optim.Adam`` / ``AdamW`` / ``SGD`` constructions.
- ``channels-last``: the main model converted to ``torch.channels_last`` where it is built (``layout``).
- ``pad-buckets``: batches padded to a multiple of 64 tokens, at a tokenizer's or collator's padding or after a
  hand-written ``max(len(x) for x in batch)`` that sizes the batch's tensors (``padding``).
"""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from .calls import _Fused, _Generate
from .layout import _ChannelsLast, first_builds, model_names
from .padding import _PadBuckets, _Uses
from .flags import BENCHMARK_FLAG, TF32_FLAGS, _AfterImport, _Flags, _mentions_torch_import, _top_level_sets
from .loaders import _Loader, _OptionDefault
from .precision import _LoopAutocast, _OptionString, _Precision
from .syntax import Edit

__all__ = ["Edit", "KINDS", "NO_EDIT", "apply", "kind_of"]


KINDS = ("tf32", "no-tf32", "cudnn-benchmark", "workers=N", "pin-memory", "persistent-workers", "static-cache",
         "fused-optimizer", "bf16-autocast", "fp16-autocast", "channels-last", "pad-buckets")
# try variants without a source edit, and why (the advice stays)
NO_EDIT = {"compile": "torch.compile of the model: where the model is built and called is not one line",
           "compile-reduce-overhead": "torch.compile of the model: where the model is built and called is not one line",
           "cuda-graphs": "capturing the evaluation calls needs static input buffers the program does not have"}


def kind_of(variant: str) -> str:
    return "workers=N" if variant.startswith("workers=") else variant


def apply(kind: str, source: str, filename: str, workers: int | None = None, insert: bool = True) -> Edit:
    """The edit ``kind`` (``KINDS``; ``workers``: N for ``workers=N``) on one file's source. A file LibCST cannot
    parse is left as it is (skipped, with the parser's reason). ``insert``: flags the program never sets may be added
    after this file's ``import torch`` (one file of a program gets them: ``fix.plan``)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return Edit(kind, source, skipped=[f"{filename}: not parsed ({str(exc).splitlines()[0]})"])
    wrapper = MetadataWrapper(module)
    edit = Edit(kind, source)
    if kind in ("workers=N", "pin-memory", "persistent-workers"):
        t = _Loader(filename, num_workers=workers if kind == "workers=N" else None, pin_memory=kind == "pin-memory",
                    persistent=kind == "persistent-workers")
        new = wrapper.visit(t)
        if t.options:  # values from the program's own options: their defaults move instead
            o = _OptionDefault(filename, t.options)
            new = MetadataWrapper(new).visit(o)
            t.done += o.done
            t.skipped += o.skipped
            t.skipped += [f"{used}: {what} is the option --{n}, whose definition is not in this file"
                          for n, (what, _, used) in t.options.items() if n not in o.found]
    elif kind in ("tf32", "no-tf32", "cudnn-benchmark"):
        on = kind != "no-tf32"
        flags = {f: on for f in TF32_FLAGS} if kind != "cudnn-benchmark" else {BENCHMARK_FLAG: True}
        precision = None if kind == "cudnn-benchmark" else ("high" if on else "highest")
        t = _Flags(filename, flags, precision)
        new = wrapper.visit(t)
        flipped = {d.split(": ", 1)[1].split(" = ")[0] for d in t.done}
        missing = [f for f in flags if f not in flipped and f not in _top_level_sets(module, f, flags[f])]
        if missing and insert and _mentions_torch_import(new):
            ins = _AfterImport([f"{f} = {flags[f]}" for f in missing])
            new = new.visit(ins)
            if ins.done:
                t.done += [f"{filename}: {f} = {flags[f]} (after `import torch`)" for f in missing]
    elif kind == "static-cache":
        t = _Generate(filename, add=False)
        new = wrapper.visit(t)
        if not t.named:
            t = _Generate(filename, add=True)
            new = MetadataWrapper(module).visit(t)
    elif kind in ("bf16-autocast", "fp16-autocast"):
        dtype = "bf16" if kind == "bf16-autocast" else "fp16"
        t = _Precision(filename, dtype)
        new = wrapper.visit(t)
        if t.options:  # Lightning's precision from the program's own option: its default moves
            o = _OptionString(filename, t.options)
            new = MetadataWrapper(new).visit(o)
            t.done += o.done
        if not t.done and _mentions_torch_import(new):  # no trainer: the program's own loop, if it has one
            if dtype == "bf16":
                loop = _LoopAutocast(filename)
                new = new.visit(loop)
                t.done += loop.done
            elif ".backward(" in source:
                t.skipped.append(f"{filename}: fp16 autocast in the program's own training loop needs a GradScaler "
                                 "around its backward and optimizer step: not written (bf16-autocast needs none)")
        if not t.done and not t.skipped:
            t.skipped.append(f"{filename}: no TrainingArguments, Lightning Trainer, or loop that computes its loss "
                             "in the block of its `.backward()`: where the step is, is not in one place")
    elif kind == "fused-optimizer":
        t = _Fused(filename)
        new = wrapper.visit(t)
    elif kind == "channels-last":
        targets, own = first_builds(wrapper, model_names(wrapper.module))
        t = _ChannelsLast(filename, targets)
        new = wrapper.visit(t) if _mentions_torch_import(module) else module
        t.skipped += [f"{filename}: {w}" for w in own]
        if not t.done and not t.skipped and ".fit(" not in source and not targets and "torch" in source:
            t.skipped.append(f"{filename}: no model found (a name whose .parameters(), .train() or .eval() the "
                             "program calls, or one handed to .fit()): where it is built is not known")
    elif kind == "pad-buckets":
        uses = _Uses()
        wrapper.visit(uses)
        t = _PadBuckets(filename, uses.sized)
        new = wrapper.visit(t)
    else:
        return Edit(kind, source, skipped=[f"{kind}: no source edit ({NO_EDIT.get(kind, 'not a fix kind')})"])
    edit.source, edit.done, edit.skipped = new.code, t.done, t.skipped
    return edit
