"""The autocast edit (``bf16-autocast``, ``fp16-autocast``) where the program's structure says where its step is:

- transformers' ``TrainingArguments(...)``: ``bf16=True`` / ``fp16=True`` (the Trainer wraps its own step);
- Lightning's ``Trainer(...)``: ``precision="bf16-mixed"`` / ``"16-mixed"``, or the default of the program's own
  ``--precision`` option where the value comes from it;
- a loop of the program's own that calls ``NAME.backward()``: the statements that compute ``NAME`` (back to the
  batch's move to the device, ``zero_grad()`` or the block's start) wrapped in ``with torch.autocast("cuda",
  dtype=torch.bfloat16):``, the backward outside it, as PyTorch's AMP recipe has it. fp16 in such a loop needs a
  ``GradScaler`` around the backward and the optimizer step: not written (bf16 needs none).

Anything else (an evaluation loop, a step inside a library) keeps the advice: where the step begins and ends is not
in one place of the source."""
from __future__ import annotations

import libcst as cst

from .syntax import _Located, _add_args, _code, _dotted, _is_false, _keywords, _kw, _option, _option_names, _with_keyword

LIGHTNING = {"bf16": "bf16-mixed", "fp16": "16-mixed"}
LIGHTNING_FULL = ("32", "32-true", "64", "64-true")
DATA_MOVES = ("to", "cuda", "zero_grad", "pin_memory")


class _Precision(_Located):
    """``TrainingArguments`` and Lightning ``Trainer`` calls; counts the loops it finds for ``_LoopAutocast``."""

    def __init__(self, filename: str, dtype: str):
        super().__init__(filename)
        self.dtype = dtype
        self.options: dict[str, tuple] = {}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = _dotted(original.func) or ""
        short = name.rsplit(".", 1)[-1]
        kws = _keywords(original)
        if short == "TrainingArguments":
            key = self.dtype  # bf16= / fp16=
            if key not in kws:
                self.done.append(f"{self.at(original)}: TrainingArguments(..., {key}=True)")
                return _add_args(updated, [_kw(key, cst.Name("True"))])
            value = kws[key].value
            if _is_false(value) or not isinstance(value, cst.Name):
                self.done.append(f"{self.at(original)}: TrainingArguments {key}={_code(value)} -> True")
                return _with_keyword(updated, key, cst.Name("True"))
            return updated
        if short == "Trainer" and (name.split(".")[0] in ("L", "pl", "lightning", "pytorch_lightning")
                                   or {"max_steps", "max_epochs", "accelerator", "devices", "precision"} & set(kws)) \
                and "args" not in kws:
            want = LIGHTNING[self.dtype]
            if "precision" not in kws:
                self.done.append(f"{self.at(original)}: Trainer(..., precision=\"{want}\")")
                return _add_args(updated, [_kw("precision", cst.SimpleString(f'"{want}"'))])
            value = kws["precision"].value
            if isinstance(value, (cst.SimpleString, cst.Integer)) and \
                    str(getattr(value, "evaluated_value", value.value)) in LIGHTNING_FULL:
                self.done.append(f"{self.at(original)}: Trainer precision -> \"{want}\"")
                return _with_keyword(updated, "precision", cst.SimpleString(f'"{want}"'))
            if _option(value) is not None:
                self.options[_option(value)] = want
        return updated


class _OptionString(_Located):
    """``add_argument("--precision", default="32-true")`` -> the mixed precision's name."""

    def __init__(self, filename: str, options: dict[str, str]):
        super().__init__(filename)
        self.options = options

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        hit = next((n for n in _option_names(original) or () if n in self.options), None)
        default = _keywords(original).get("default")
        if hit is None or default is None or not isinstance(default.value, cst.SimpleString) \
                or default.value.evaluated_value not in LIGHTNING_FULL:
            return updated
        want, quote = self.options[hit], default.value.quote
        self.done.append(f"{self.at(original)}: --{hit} default {default.value.value} -> \"{want}\"")
        return _with_keyword(updated, "default", cst.SimpleString(f"{quote}{want}{quote}"))


def _backward_of(stmt) -> str | None:
    """NAME where the statement is ``NAME.backward(...)`` (or ``(NAME ...).backward()`` of a name)."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"):
        return None
    recv = call.func.value
    if isinstance(recv, cst.Call) and recv.args and isinstance(recv.args[0].value, cst.Name):
        return recv.args[0].value.value  # scaler.scale(loss).backward()
    return recv.value if isinstance(recv, cst.Name) else None


def _assigns(stmt, name: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, (cst.Assign,)) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                 for t in s.targets):
            return True
        if isinstance(s, (cst.AugAssign, cst.AnnAssign)) and isinstance(s.target, cst.Name) and s.target.value == name:
            return True
    return False


def _moves_data(stmt) -> bool:
    """A statement that moves the batch to the device or clears gradients: where the autocast region begins after."""
    found = []

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node):
            if node.attr.value in DATA_MOVES:
                found.append(node)
    stmt.visit(V())
    return bool(found)


class _LoopAutocast(_Located):
    """The loss's statements before ``NAME.backward()`` wrapped in ``torch.autocast`` (module docstring)."""

    def __init__(self, filename: str):
        super().__init__(filename)

    def _wrap(self, body: list) -> list:
        out = list(body)
        for i, stmt in enumerate(body):
            name = _backward_of(stmt)
            if name is None:
                continue
            j = next((k for k in range(i - 1, -1, -1) if _assigns(body[k], name)), None)
            if j is None:
                continue
            start = j
            while start > 0 and isinstance(body[start - 1], cst.SimpleStatementLine) \
                    and not _moves_data(body[start - 1]) and _backward_of(body[start - 1]) is None:
                start -= 1
            region = body[start:j + 1]
            if any(not isinstance(s, cst.SimpleStatementLine) for s in region):
                continue
            block = cst.With(items=[cst.WithItem(item=cst.parse_expression(
                'torch.autocast("cuda", dtype=torch.bfloat16)'))],
                body=cst.IndentedBlock(body=[s.with_changes(leading_lines=[]) for s in region]),
                leading_lines=region[0].leading_lines)
            out = body[:start] + [block] + body[j + 1:]
            self.done.append(f"{self.filename}: the {len(region)} statement(s) computing `{name}` before "
                             f"`{name}.backward()` inside torch.autocast(\"cuda\", dtype=torch.bfloat16)")
            return out
        return out

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._wrap(list(updated.body)))
