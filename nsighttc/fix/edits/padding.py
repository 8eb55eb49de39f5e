"""The ``pad-buckets`` edit: batches padded to a multiple of ``MULTIPLE`` tokens instead of to their own longest
request, so the model sees a few input shapes instead of one per batch (``shape-churn``: cuDNN's attention builds a
plan per shape, cuBLAS and Inductor pick kernels per shape; on the H200 a BERT-base loop of lengths 16-256 ran
2.78x faster padded to three lengths, reports/steps_time).

Two places a program pads:
- a tokenizer or collator asked to pad to the longest (``tokenizer(..., padding=True | "longest")``,
  ``tokenizer.pad(...)``, ``DataCollatorWithPadding(tokenizer)`` and its kin): ``pad_to_multiple_of=MULTIPLE`` added
  (transformers' own argument; the launcher's ``pad-buckets`` variant sets the same default at run time);
- padding written by hand, ``L = max(len(x) for x in batch)`` (or ``max(map(len, batch))``, or ``max([len(x) ...])``)
  whose ``L`` then sizes a tensor in the same function (``torch.zeros(n, L)``, ``torch.full``, ``torch.randint(...,
  (n, L))``, ``x.new_zeros``, ``F.pad``): ``L`` rounded up to the multiple on the next line. A ``max(len(...))`` that
  sizes no tensor (a column width, a log line) is left alone. The launcher cannot reach this kind: only the edit does.
"""
from __future__ import annotations

import libcst as cst

from ...runtime.variant_hooks import PAD_MULTIPLE
from .syntax import _EachBlock, _Located, _Scoped, _add_args, _code, _dotted, _keywords, _kw

# tokens: 16-256 becomes 4 shapes; a multiple of 8 keeps fp16/bf16 Tensor Core tiles aligned (the launcher's
# pad-buckets variant pads to the same multiple)
MULTIPLE = PAD_MULTIPLE
COLLATORS = ("DataCollatorWithPadding", "DataCollatorForTokenClassification", "DataCollatorForSeq2Seq",
             "DataCollatorForLanguageModeling", "DataCollatorForWholeWordMask")
# calls that size a tensor from their arguments (torch.*, Tensor.new_*, F.pad)
SIZERS = ("zeros", "ones", "full", "empty", "randint", "rand", "randn", "new_zeros", "new_ones", "new_full",
          "new_empty", "pad", "zeros_like", "arange")


def _longest(value) -> bool:
    """``max(len(x) for x in xs)``, ``max([len(x) for x in xs])``, ``max(map(len, xs))``."""
    if not (isinstance(value, cst.Call) and _dotted(value.func) == "max" and len(value.args) == 1):
        return False
    arg = value.args[0].value
    if isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
        elt = arg.elt
        return isinstance(elt, cst.Call) and _dotted(elt.func) == "len"
    return isinstance(arg, cst.Call) and _dotted(arg.func) == "map" and len(arg.args) == 2 and \
        _dotted(arg.args[0].value) == "len"


def _pads_to_longest(call: cst.Call) -> bool:
    """A tokenizer/collator call that pads each batch to its own longest member."""
    kws = _keywords(call)
    if "pad_to_multiple_of" in kws or any(a.star == "**" for a in call.args):
        return False
    name = (_dotted(call.func) or "").rsplit(".", 1)[-1]
    padding = kws.get("padding")
    if padding is None:
        # DataCollatorWithPadding and its kin pad to the longest by default; tokenizer.pad(...) too
        return name in COLLATORS or (name == "pad" and isinstance(call.func, cst.Attribute) and
                                     "tokenizer" in (_dotted(call.func.value) or "").lower())
    v = padding.value
    return (isinstance(v, cst.Name) and v.value == "True") or \
        (isinstance(v, cst.SimpleString) and v.evaluated_value == "longest")


class _Uses(_Scoped):
    """Per function (by its ``def`` node; the module: None), the names that appear in a tensor-sizing call."""

    def __init__(self):
        super().__init__()
        self.sized: dict[int | None, set[str]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        if (_dotted(node.func) or "").rsplit(".", 1)[-1] not in SIZERS:
            return
        names = self.sized.setdefault(self.scope, set())

        class N(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                names.add(n.value)
        for a in node.args:
            a.value.visit(N())


class _PadBuckets(_EachBlock, _Located):
    """The edit (module docstring); ``sized``: ``_Uses.sized`` of the same module."""

    def __init__(self, filename: str, sized: dict):
        super().__init__(filename)
        self.sized, self.scope = sized, [None]

    def visit_FunctionDef(self, node) -> None:
        self.scope.append(id(node))

    def leave_FunctionDef(self, original, updated):
        self.scope.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not _pads_to_longest(original):
            return updated
        self.done.append(f"{self.at(original)}: {_dotted(original.func) or 'call'}(..., pad_to_multiple_of={MULTIPLE})"
                         " (a few input shapes, not one per batch)")
        return _add_args(updated, [_kw("pad_to_multiple_of", cst.Integer(str(MULTIPLE)))])

    def _block(self, original_body, updated_body) -> list:
        out = []
        sized = self.sized.get(self.scope[-1], set())
        for old, new in zip(original_body, updated_body):
            out.append(new)
            if not (isinstance(old, cst.SimpleStatementLine) and len(old.body) == 1 and
                    isinstance(old.body[0], cst.Assign) and len(old.body[0].targets) == 1 and
                    isinstance(old.body[0].targets[0].target, cst.Name) and _longest(old.body[0].value)):
                continue
            name = old.body[0].targets[0].target.value
            if name not in sized:
                self.skipped.append(f"{self.at(old)}: `{_code(old.body[0])}` sizes no tensor in its function: "
                                    "left as it is")
                continue
            out.append(cst.parse_statement(f"{name} = -(-{name} // {MULTIPLE}) * {MULTIPLE}  # padded to a multiple "
                                           f"of {MULTIPLE}: a few input shapes, not one per batch\n"))
            self.done.append(f"{self.at(old)}: {name} rounded up to a multiple of {MULTIPLE} after "
                             f"`{_code(old.body[0].value)}` (a few input shapes, not one per batch)")
        return out

