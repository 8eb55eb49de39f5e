"""Edits of single calls: ``cache_implementation="static"`` for ``generate()``, ``fused=True`` for Adam, AdamW
and SGD."""
from __future__ import annotations

import libcst as cst

from .syntax import _Located, _add_args, _code, _dotted, _keywords, _kw

OPTIMIZERS = ("Adam", "AdamW", "SGD")


class _Generate(_Located):
    """``cache_implementation`` set to ``"static"`` where the program names it, or counted where it could be added."""

    def __init__(self, filename: str, add: bool):
        super().__init__(filename)
        self.add = add
        self.named = 0

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if original.keyword is not None and original.keyword.value == "cache_implementation":
            self.named += 1
            if not (isinstance(original.value, cst.SimpleString) and original.value.evaluated_value == "static"):
                self.done.append(f"{self.at(original)}: cache_implementation={_code(original.value)} -> \"static\"")
                return updated.with_changes(value=cst.SimpleString('"static"'))
        return updated

    def leave_DictElement(self, original, updated):
        if isinstance(original.key, cst.SimpleString) and original.key.evaluated_value == "cache_implementation":
            self.named += 1
            if not (isinstance(original.value, cst.SimpleString) and original.value.evaluated_value == "static"):
                self.done.append(f"{self.at(original)}: \"cache_implementation\": \"static\"")
                return updated.with_changes(value=cst.SimpleString('"static"'))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not self.add or not isinstance(original.func, cst.Attribute) or original.func.attr.value != "generate":
            return updated
        if "cache_implementation" in _keywords(original):
            return updated
        self.done.append(f"{self.at(original)}: .generate(..., cache_implementation=\"static\")")
        return _add_args(updated, [_kw("cache_implementation", cst.SimpleString('"static"'))])


class _Fused(_Located):
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = _dotted(original.func) or ""
        parts = name.split(".")
        if parts[-1] not in OPTIMIZERS or (len(parts) > 1 and parts[-2] != "optim"):
            return updated
        if any(a.star == "**" for a in original.args):
            self.skipped.append(f"{self.at(original)}: {name}(...) takes **kwargs")
            return updated
        if {"fused", "foreach"} & set(_keywords(original)):
            return updated
        self.done.append(f"{self.at(original)}: {name}(..., fused=True)")
        return _add_args(updated, [_kw("fused", cst.Name("True"))])
