"""A rank's operators, recorded for the replay without a profiler session of their own.

A distributed first run's rank 0 records the ranges only, then changes sessions to record the operators with their
arguments for a few steps before its window (``recording.OperatorsUntilWindow``'s lead). A change of sessions waits
until no ``record_function`` of the program's is open; a program that keeps one open around its whole loop never
lets it run, and the window then starts in the ranges' session with no operators recorded: the replay has nothing to
call, and the whole job is launched again under Nsight Compute for the kernels that need evidence (2 x H200,
``ddp_w.py``, a ``train`` range around 20 steps: a first run at 2.07-2.34x a plain one).

Here the operators are recorded where the session cannot change: a ``TorchDispatchMode`` sees every aten call of
those steps (the backward's too: autograd's threads take the mode with the thread-local state of ``backward()``),
writes down its arguments as torch.profiler's ``record_shapes`` would (``parse.kineto_ops.OpCall``'s fields, what
``runtime.replay_args`` rebuilds), and wraps the call in a ``record_function`` named ``nsighttc.op#<n>``, which the
ranges' session records: the kernels a call launched are the launches inside its range on its thread
(``parse.op_capture``). Nothing stops or replaces the session that holds the window.

Runs inside the user's program: the standard library and torch only, and any failure only means no list.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..record_format import CAPTURE_FILE as FILE, CAPTURED_OP as PREFIX  # (the range's name; the list's file)

__all__ = ["FILE", "PREFIX", "OpCapture", "describe"]

# torch dtype -> the C++ type name torch.profiler writes in "Input type" (``replay_args.DTYPE_NAMES``, reversed)
_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
               "int8": "signed char", "uint8": "unsigned char", "int16": "short int", "int32": "int",
               "int64": "long int", "bool": "bool", "complex64": "c10::complex<float>",
               "complex128": "c10::complex<double>", "float8_e4m3fn": "c10::Float8_e4m3fn",
               "float8_e5m2": "c10::Float8_e5m2"}
# ScalarType arguments are recorded as their enum value (``replay_args.SCALAR_TYPES``'s order)
_SCALAR_TYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
                 "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16"]


def describe(torch, func, args: tuple, kwargs: dict) -> dict:
    """One call as the replay list holds it: its schema's arguments in order, each a tensor (type, dims, strides),
    a scalar or scalar list (its value as text), or nothing recorded ("" : None, a string, a device...)."""
    schema = func._schema
    types, dims, strides, concrete = [], [], [], []
    for i, a in enumerate(schema.arguments):
        if i < len(args) and not a.kwarg_only:
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        else:
            v = a.default_value if a.has_default_value() else None
        t, d, s, c = _one(torch, v)
        types.append(t), dims.append(d), strides.append(s), concrete.append(c)
    name = schema.name if "::" in schema.name else f"aten::{schema.name}"
    return {"name": name, "types": types, "dims": dims, "strides": strides, "concrete": concrete}


def _one(torch, v):
    if isinstance(v, torch.Tensor):
        dt = str(v.dtype).replace("torch.", "")
        return _TYPE_NAMES.get(dt, dt), list(v.shape), list(v.stride()), ""
    if isinstance(v, torch.dtype):
        dt = str(v).replace("torch.", "")
        return "Scalar", [], [], str(_SCALAR_TYPES.index(dt)) if dt in _SCALAR_TYPES else ""
    if isinstance(v, (bool, int, float)):
        return "Scalar", [], [], repr(v) if not isinstance(v, float) else repr(float(v))
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, torch.Tensor) for x in v):
            return "TensorList", [list(x.shape) for x in v], [list(x.stride()) for x in v], ""
        if all(isinstance(x, (bool, int, float)) for x in v):
            return "ScalarList", [], [], repr([x for x in v])
    return "", [], [], ""


class OpCapture:
    """Records the aten calls made between ``begin`` and ``end`` (on the thread that began it, and the threads its
    autograd runs on); ``end`` writes them to ``path``. Said in the launcher's log by the caller."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.calls: list = []
        self.mode = None
        self.error: str | None = None

    def begin(self) -> bool:
        try:
            import torch
            from torch.utils._python_dispatch import TorchDispatchMode
        except Exception as exc:  # noqa: BLE001 - no mode in this torch: no list
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        calls, rf = self.calls, torch.autograd.profiler.record_function

        class _Capture(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                n = len(calls)
                try:
                    calls.append(describe(torch, func, args, kwargs))
                except Exception:  # noqa: BLE001 - an argument this list cannot say: the call is not replayed
                    calls.append(None)
                with rf(f"{PREFIX}{n}"):
                    return func(*args, **kwargs)
        try:
            self.mode = _Capture()
            self.mode.__enter__()
        except Exception as exc:  # noqa: BLE001
            self.mode, self.error = None, f"{type(exc).__name__}: {exc}"
            return False
        return True

    def end(self) -> int:
        """Stop recording and write the list; returns how many calls it holds (0 where nothing could be written)."""
        if self.mode is None:
            return 0
        try:
            self.mode.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - another mode pushed after ours and not popped: ours is left
            self.error = f"{type(exc).__name__}: {exc}"
        self.mode = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.calls))
            os.replace(tmp, self.path)
        except OSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return 0
        return len(self.calls)
