"""The flag edits: TF32 and cuDNN's benchmark mode flipped where the program sets them, else set once after its
``import torch``; ``set_float32_matmul_precision``'s value."""
from __future__ import annotations

import libcst as cst

from .syntax import _EachBlock, _Located, _code, _dotted, _is_false, _is_true

TF32_FLAGS = ("torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32")
BENCHMARK_FLAG = "torch.backends.cudnn.benchmark"


class _Flags(_Located):
    """Assignments of boolean flags flipped to ``want`` (``flags``: dotted names), and
    ``set_float32_matmul_precision`` (``precision``: the value to hold, or None)."""

    def __init__(self, filename: str, flags: dict[str, bool], precision: str | None):
        super().__init__(filename)
        self.flags, self.precision = flags, precision
        self.seen: set[str] = set()

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if len(original.targets) != 1:
            return updated
        name = _dotted(original.targets[0].target)
        if name not in self.flags:
            return updated
        self.seen.add(name)
        want = self.flags[name]
        if (want and _is_false(original.value)) or (not want and _is_true(original.value)):
            self.done.append(f"{self.at(original)}: {name} = {want}")
            return updated.with_changes(value=cst.Name(str(want)))
        if not (_is_true(original.value) or _is_false(original.value)):
            self.skipped.append(f"{self.at(original)}: {name} is set from "
                                f"`{_code(original.value)}`: left as it is")
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.precision is None or (_dotted(original.func) or "").rsplit(".", 1)[-1] != "set_float32_matmul_precision":
            return updated
        self.seen.add("precision")
        if original.args and isinstance(original.args[0].value, cst.SimpleString):
            old = original.args[0].value.evaluated_value
            if (old == "highest") != (self.precision == "highest"):
                quote = original.args[0].value.quote
                args = [original.args[0].with_changes(value=cst.SimpleString(f"{quote}{self.precision}{quote}"))]
                self.done.append(f"{self.at(original)}: torch.set_float32_matmul_precision({self.precision!r})")
                return updated.with_changes(args=args + list(original.args[1:]))
        return updated


class _AfterImport(_EachBlock, cst.CSTTransformer):
    """Statements inserted after the first ``import torch`` (at whatever block level it is)."""

    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines, self.done = lines, False

    def _block(self, original_body, updated_body):
        out = []
        for stmt in updated_body:
            out.append(stmt)
            if not self.done and _imports_torch(stmt):
                out += [cst.parse_statement(line + "\n") for line in self.lines]
                self.done = True
        return out


def _imports_torch(stmt) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Import) and any(_dotted(a.name) == "torch" and a.asname is None for a in s.names):
            return True
    return False


def _top_level_sets(module: cst.Module, name: str, value: bool) -> set[str]:
    """{name} where the module sets ``name = value`` at its top level (unconditionally), else empty."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Assign) and len(s.targets) == 1 and _dotted(s.targets[0].target) == name \
                        and isinstance(s.value, cst.Name) and s.value.value == str(value):
                    return {name}
    return set()


def _mentions_torch_import(module: cst.Module) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node):
            if _imports_torch(node):
                found.append(node)
    module.visit(V())
    return bool(found)
