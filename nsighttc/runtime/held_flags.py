"""The settings a ``try`` variant sets (TF32, cuDNN's benchmark mode) held for the whole run, with where the program
tried to set them back.

Why: a variant is applied before the program starts, and a program that sets the flag itself later undoes it. On an
H200, ``wrappers/grad_accum.py`` (fp32 "as written": ``torch.backends.cudnn.allow_tf32 = False``) measured ``tf32``
at 0.98x, "no measurable change", where a plain run with TF32 on was 1.40x faster: its convolutions never left fp32.
The edit a user would make is at that line, so the variant holds its value there, as the edit would, and records the
program's attempt (``item["set"]["held"]``: what was asked, where, how often) for the report to name.

How: each setter is wrapped where PyTorch defines it, not per object: ``torch.backends.cudnn``'s ``ContextProp``
descriptors (``allow_tf32``, ``benchmark``), ``cuBLASModule.__setattr__`` (``torch.backends.cuda.matmul.allow_tf32``
and ``.fp32_precision``), ``_FP32Precision.__setattr__`` (torch 2.9's ``torch.backends.cudnn.conv.fp32_precision``
and friends) and ``torch.set_float32_matmul_precision``. A set to the held value goes through; another is
skipped. ``torch.backends.cudnn.flags(...)`` (a context manager that calls the C setters directly) is not held.
Standard library only besides torch: this runs inside the user's program.
"""
from __future__ import annotations

import os
import sys

# fp32_precision values that turn TF32 off / on (torch 2.9+: "ieee" = full fp32, "tf32"; "none" = follow the parent)
_FP32_OFF, _FP32_ON = ("ieee",), ("tf32",)


def hold(torch, flags: dict, item: dict) -> None:
    """Hold ``flags`` (``{"tf32": bool}`` and/or ``{"benchmark": bool}``) for the rest of the process; the program's
    attempts to set them otherwise land in ``item["set"]["held"]``."""
    def attempt(what: str) -> None:
        where = _program_line()
        held = item.setdefault("set", {}).setdefault("held", {})  # (only where the program tried)
        entry = held.setdefault(what, {"where": where, "times": 0})
        entry["times"] += 1

    if "tf32" in flags:
        on = bool(flags["tf32"])
        _hold_cudnn_prop(torch, "allow_tf32", on, attempt)
        _hold_cublas(torch, on, attempt)
        _hold_fp32_precision(torch, on, attempt)
        _hold_matmul_precision(torch, on, attempt)
    if "benchmark" in flags:
        _hold_cudnn_prop(torch, "benchmark", bool(flags["benchmark"]), attempt)


class _HeldProp:
    """A ``ContextProp`` whose sets to anything but ``value`` are skipped and reported."""

    def __init__(self, prop, name: str, value, attempt):
        self.prop, self.name, self.value, self.attempt = prop, name, value, attempt

    def __get__(self, obj, objtype=None):
        return self.prop.__get__(obj, objtype)

    def __set__(self, obj, val):
        if bool(val) != self.value:
            self.attempt(f"torch.backends.cudnn.{self.name} = {val!r}")
            return
        self.prop.__set__(obj, val)


def _hold_cudnn_prop(torch, name: str, value: bool, attempt) -> None:
    mod = torch.backends.cudnn
    cls = type(mod)
    prop = cls.__dict__.get(name)
    if prop is None or isinstance(prop, _HeldProp):
        return
    setattr(cls, name, _HeldProp(prop, name, value, attempt))


def _hold_setattr(cls, refused, attempt) -> None:
    """``cls.__setattr__`` wrapped: a set ``refused(self, name, value)`` describes (what the program asked) is
    skipped and reported; every other set goes through."""
    original = cls.__setattr__
    if getattr(original, "_nsighttc_held", False):
        return

    def __setattr__(self, name, value):
        what = refused(self, name, value)
        return attempt(what) if what else original(self, name, value)
    __setattr__._nsighttc_held = True
    cls.__setattr__ = __setattr__


def _hold_cublas(torch, on: bool, attempt) -> None:
    def refused(self, name, value):
        if (name == "allow_tf32" and bool(value) != on) or \
                (name == "fp32_precision" and _turns(value) not in (None, on)):
            return f"torch.backends.cuda.matmul.{name} = {value!r}"
        return None
    _hold_setattr(type(torch.backends.cuda.matmul), refused, attempt)


def _hold_fp32_precision(torch, on: bool, attempt) -> None:
    cls = getattr(torch.backends, "_FP32Precision", None)
    if cls is None:  # before torch 2.9
        return

    def refused(self, name, value):
        if name != "fp32_precision" or _turns(value) in (None, on):
            return None
        where = ".".join(p for p in ("torch.backends", getattr(self, "backend", ""), getattr(self, "op", ""))
                         if p and p != "all")
        return f"{where}.fp32_precision = {value!r}"
    _hold_setattr(cls, refused, attempt)


def _hold_matmul_precision(torch, on: bool, attempt) -> None:
    original = torch.set_float32_matmul_precision
    if getattr(original, "_nsighttc_held", False):
        return

    def set_float32_matmul_precision(precision):
        if (precision != "highest") != on:
            return attempt(f"torch.set_float32_matmul_precision({precision!r})")
        return original(precision)
    set_float32_matmul_precision._nsighttc_held = True
    set_float32_matmul_precision.__doc__ = original.__doc__
    torch.set_float32_matmul_precision = set_float32_matmul_precision


def _turns(value) -> bool | None:
    """Whether an ``fp32_precision`` value turns TF32 on (True), off (False), or neither ("none": follow the parent)."""
    v = str(value).lower()
    return True if v in _FP32_ON else False if v in _FP32_OFF else None


def _program_line() -> str | None:
    """``file:line`` of the program's frame that made the call (the first frame outside torch and nsighttc)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(2)
    while f is not None:
        path = f.f_code.co_filename
        if not path.startswith(here) and f"{os.sep}torch{os.sep}" not in path and not path.startswith("<"):
            return f"{os.path.basename(path)}:{f.f_lineno}"
        f = f.f_back
    return None
