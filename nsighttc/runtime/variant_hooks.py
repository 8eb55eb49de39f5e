"""Hooks the ``try`` variants install on classes the program builds: DataLoaders (what the program left at the
defaults a variant changes, how often each is iterated, and the change itself) and optimizers (``fused=True``).
Runs inside the user's program: standard library only besides torch."""
from __future__ import annotations

import inspect


def _fused_optimizers(torch, item: dict) -> None:
    """Adam, AdamW and SGD constructed without ``fused``/``foreach`` get ``fused=True`` (counted in the record)."""
    for name in ("Adam", "AdamW", "SGD"):
        cls = getattr(torch.optim, name, None)
        if cls is None:
            continue
        original = getattr(cls.__init__, "__wrapped__", cls.__init__)

        def __init__(self, *args, _original=original, **kwargs):
            if "fused" not in kwargs and "foreach" not in kwargs:
                kwargs["fused"] = True
                item["set"]["optimizers built with fused=True"] += 1
            _original(self, *args, **kwargs)
        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        cls.__init__ = __init__


def watch_dataloaders(applied, changes: dict | None = None) -> None:
    """Wrap DataLoader.__init__: count loaders built and those left at the defaults variants change (the
    baseline's record, for ``--variant auto``), and give the arguments the program left at their defaults
    (num_workers 0, pin_memory False) the ``changes``; arguments it set otherwise are kept."""
    from torch.utils.data import DataLoader
    original = getattr(DataLoader.__init__, "__wrapped__", DataLoader.__init__)
    sig = inspect.signature(original)
    changes = changes or {}

    def __init__(self, *args, **kwargs):
        bound = sig.bind_partial(self, *args, **kwargs)
        applied.loaders["built"] += 1
        for name, key in (("num_workers", "workers_default"), ("pin_memory", "pin_memory_default")):
            if bound.arguments.get(name, sig.parameters[name].default) == sig.parameters[name].default:
                applied.loaders[key] += 1
        if bound.arguments.get("num_workers", 0) and not bound.arguments.get("persistent_workers", False):
            applied.loaders["persistent_default"] = applied.loaders.get("persistent_default", 0) + 1
        changed = False
        for name, value in changes.items():
            current = bound.arguments.get(name, sig.parameters[name].default)
            if name == "persistent_workers" and not bound.arguments.get("num_workers", 0):
                continue  # (only a loader with workers can keep them)
            if current == sig.parameters[name].default:
                bound.arguments[name] = value
                changed = True
        if changed:
            applied.loaders["changed"] += 1
        original(*bound.args, **bound.kwargs)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    DataLoader.__init__ = __init__
    it_original = getattr(DataLoader._get_iterator, "__wrapped__", DataLoader._get_iterator)

    def _get_iterator(self):  # one per epoch: a loader iterated again restarts its workers unless they persist
        applied.loaders["iterators"] = applied.loaders.get("iterators", 0) + 1
        return it_original(self)
    _get_iterator.__wrapped__ = it_original  # type: ignore[attr-defined]
    DataLoader._get_iterator = _get_iterator


PAD_MULTIPLE = 64  # the same multiple as ``nsighttc fix``'s pad-buckets edit (fix.edits.padding.MULTIPLE)


def pad_buckets(item: dict) -> None:
    """transformers' tokenizers pad to a multiple of ``PAD_MULTIPLE`` wherever the program asks them to pad to the
    longest (``tokenizer(..., padding=True | "longest")``, ``tokenizer.pad(...)``, which its collators call) and sets
    no ``pad_to_multiple_of``: a few input shapes instead of one per batch. Counted in the record; installed when the
    program imports ``transformers.tokenization_utils_base`` (nothing here imports it). Padding written by hand is
    out of the launcher's reach (``nsighttc fix`` edits it)."""
    import sys

    from .after_import import when_imported

    def longest(padding) -> bool:
        return padding is True or padding == "longest" or getattr(padding, "value", None) == "longest"

    def wrap(cls, method: str, default_padding) -> None:
        original = getattr(cls, method, None)
        if original is None or getattr(original, "_nsighttc_pad_buckets", False):
            return

        def padded(self, *args, **kwargs):
            if kwargs.get("pad_to_multiple_of") is None and longest(kwargs.get("padding", default_padding)):
                kwargs["pad_to_multiple_of"] = PAD_MULTIPLE
                item["set"]["tokenizer calls padded to a multiple"] += 1
            return original(self, *args, **kwargs)
        padded._nsighttc_pad_buckets = True  # type: ignore[attr-defined]
        padded.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(cls, method, padded)

    def install() -> None:
        cls = getattr(sys.modules.get("transformers.tokenization_utils_base"), "PreTrainedTokenizerBase", None)
        if cls is not None:
            wrap(cls, "__call__", False)  # (padding=False by default: only calls that ask to pad)
            wrap(cls, "pad", True)
    when_imported("transformers.tokenization_utils_base", install)
