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
