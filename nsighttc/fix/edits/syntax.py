"""What every edit of ``nsighttc fix`` shares: the edit's record, names of call targets, literal checks, adding
keyword arguments in the call's own layout, and a transformer that knows each node's line."""
from __future__ import annotations

import libcst as cst
from dataclasses import dataclass, field

from libcst.metadata import PositionProvider


@dataclass
class Edit:
    """One fix kind applied to one file's source: the new source, what changed, why something was left."""
    kind: str
    source: str
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.done)


def _dotted(node) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, or None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        left = _dotted(node.value)
        return f"{left}.{node.attr.value}" if left else None
    return None


def _is_false(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _is_true(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _is_zero(node) -> bool:
    return isinstance(node, cst.Integer) and node.value == "0"


def _code(node) -> str:
    """The source text of one node, as the program wrote it."""
    return cst.Module([]).code_for_node(node)


def _keywords(call: cst.Call) -> dict[str, cst.Arg]:
    return {a.keyword.value: a for a in call.args if a.keyword is not None}


def _with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with the value of its keyword argument ``name`` replaced (its layout kept)."""
    return call.with_changes(args=[a.with_changes(value=value) if a.keyword is not None and a.keyword.value == name
                                   else a for a in call.args])


def _option(value) -> str | None:
    """``args.workers`` -> "workers": a value read from the program's parsed options (an attribute of a name)."""
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
        return value.attr.value
    return None


def _option_names(call: cst.Call) -> set[str] | None:
    """The names an ``add_argument(...)`` call's option is read by (``dest=``, else its ``--long`` flags with ``-``
    as ``_``): where a value like ``args.workers`` comes from. None for any other call."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "add_argument":
        return None
    dest = _keywords(call).get("dest")
    if dest is not None and isinstance(dest.value, cst.SimpleString):
        return {dest.value.evaluated_value}
    return {a.value.evaluated_value.lstrip("-").replace("-", "_") for a in call.args if a.keyword is None
            and isinstance(a.value, cst.SimpleString) and a.value.evaluated_value.startswith("--")}


def _kw(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(keyword=cst.Name(name), value=value,
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _add_args(call: cst.Call, new: list[cst.Arg]) -> cst.Call:
    """``call`` with keyword arguments appended in the call's own layout: on the same line after a space, or, in a
    call with one argument per line and a trailing comma, each on a line of its own with the same indentation and
    the trailing comma kept."""
    args = list(call.args)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    last = args[-1] if args else None
    if last is not None and isinstance(last.comma, cst.Comma) and \
            isinstance(last.comma.whitespace_after, cst.ParenthesizedWhitespace):
        # one per line, trailing comma: the new ones take the line breaks the others have
        prev = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
            else None
        closing = last.comma.whitespace_after
        if not isinstance(prev, cst.ParenthesizedWhitespace):
            prev = closing
        clean = cst.TrailingWhitespace(newline=cst.Newline())  # (a comment stays on the line it was written on)
        between = cst.ParenthesizedWhitespace(first_line=clean, empty_lines=[], indent=prev.indent,
                                              last_line=prev.last_line)
        args[-1] = last.with_changes(comma=last.comma.with_changes(
            whitespace_after=closing.with_changes(empty_lines=[], indent=prev.indent, last_line=prev.last_line)))
        for i, a in enumerate(new):
            ws = closing.with_changes(first_line=clean) if i == len(new) - 1 else between
            args.append(a.with_changes(comma=cst.Comma(whitespace_after=ws)))
        return call.with_changes(args=args)
    if last is not None:
        if isinstance(last.comma, cst.Comma):  # a trailing comma on one line: keep it after the new ones
            args[-1] = last.with_changes(comma=space)
            new = new[:-1] + [new[-1].with_changes(comma=cst.Comma())]
        else:
            args[-1] = last.with_changes(comma=space)
    for i, a in enumerate(new):
        if i < len(new) - 1:
            a = a.with_changes(comma=space)
        args.append(a)
    return call.with_changes(args=args)


class _Located(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename
        self.done: list[str] = []
        self.skipped: list[str] = []

    def at(self, node) -> str:
        try:
            return f"{self.filename}:{self.get_metadata(PositionProvider, node).start.line}"
        except KeyError:
            return self.filename


class _EachBlock:
    """A transformer mixin that rewrites each block's statement list (the module's and every indented block's) with
    ``_block(original_statements, updated_statements)``: statements added after some of them, the others kept."""

    def _block(self, original_body, updated_body) -> list:
        raise NotImplementedError

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._block(original.body, updated.body))

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._block(original.body, updated.body))


class _Scoped(cst.CSTVisitor):
    """A visitor that knows the function it is in (``scope``: the ``def`` node's id; the module: None)."""

    def __init__(self):
        super().__init__()
        self._stack: list = [None]

    @property
    def scope(self):
        return self._stack[-1]

    def visit_FunctionDef(self, node) -> None:
        self._stack.append(id(node))

    def leave_FunctionDef(self, node) -> None:
        self._stack.pop()
