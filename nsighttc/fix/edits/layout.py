"""The ``channels-last`` edit: the program's main model converted to ``torch.channels_last`` where it is built.

Which name is the model: what the program trains or evaluates, read from the calls that say so (``X.parameters()``
handed to anything, ``X.train()``, ``X.eval()``, ``X = Net().to(dev).eval()``, ``trainer.fit(X, ...)``). Where it is
built: its first assignment from a call in the file (a later ``model = torch.jit.trace(model, x)`` or
``model.to(device)`` keeps the layout: ``Tensor.to`` preserves the memory format). A ``.to(...)`` there gets
``memory_format=torch.channels_last`` (``nn.Module.to`` takes it beside the device and dtype); any other value gets
the conversion as the next statement; a model built inside ``trainer.fit(Net(), ...)`` is converted there. A model
whose layout the program sets itself (``model.to(memory_format=fmt)``, its own option) is left, with the line.
The inputs are left as they are, as the launcher's ``channels-last`` variant leaves them (``runtime.variants``):
PyTorch's convolutions follow the weight's memory format (cuDNN suggests channels-last when the weight is), so the
first convolution's output and every activation after it are channels-last without the input converted.
"""
from __future__ import annotations

import libcst as cst

from .syntax import _EachBlock, _Located, _Scoped, _add_args, _code, _dotted, _keywords, _kw

MEMORY_FORMAT = "torch.channels_last"


def model_names(module: cst.Module) -> dict[str, set]:
    """{name the program trains or evaluates (module docstring): the scopes that say so}."""
    found: dict[str, set] = {}

    class V(_Scoped):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name) and \
                    node.func.attr.value in ("parameters", "named_parameters", "train", "eval") and \
                    not (node.func.attr.value == "train" and node.args):
                found.setdefault(node.func.value.value, set()).add(self.scope)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "fit" and node.args and \
                    isinstance(node.args[0].value, cst.Name) and node.args[0].keyword is None:
                found.setdefault(node.args[0].value.value, set()).add(self.scope)

        def visit_Assign(self, node: cst.Assign) -> None:  # `model = Net().to(dev).eval()`
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and \
                    _chain_calls(node.value) & {"eval", "train"}:
                found.setdefault(node.targets[0].target.value, set()).add(self.scope)
    module.visit(V())
    return found


def _chain_calls(value) -> set[str]:
    """The method names of a call chain ``a(...).b(...).c(...)``: {"b", "c"}."""
    out = set()
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        out.add(value.func.attr.value)
        value = value.func.value
    return out


def _channels_last() -> cst.BaseExpression:
    return cst.parse_expression(MEMORY_FORMAT)


def _to_call(value) -> cst.Call | None:
    """The value when it is a ``.to(...)`` call (``Net().to(dev)``, ``model.to(device=dev)``), else None."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "to":
        return value
    return None


def _assigned(stmt, models: set[str]) -> str | None:
    """The model name a one-assignment statement line sets, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value in models:
            return a.targets[0].target.value
    return None


def first_builds(wrapper, models: dict[str, set]) -> tuple[dict[int, tuple], list[str]]:
    """({id of the statement that first assigns a model from a call, per scope: (model name, that statement)} (nodes
    of ``wrapper.module``, the ``MetadataWrapper`` the edit visits),
    [why a model is left: the program sets its memory format itself, with the line]).

    Which scopes: those that use the name as a model (``models``); where none of the scopes that assign it does (the
    model is handed to a helper that trains it), every scope that assigns it except builder functions that
    ``return`` it (``model = nn.Sequential()`` inside ``build()`` is empty when it is assigned)."""
    from libcst.metadata import PositionProvider
    pos = wrapper.resolve(PositionProvider)
    first: dict[tuple, cst.SimpleStatementLine] = {}
    returned: set[tuple] = set()
    own: dict[str, str] = {}

    class V(_Scoped):
        def visit_SimpleStatementLine(self, node) -> None:
            name = _assigned(node, set(models))
            if name is not None and (name, self.scope) not in first and isinstance(node.body[0].value, cst.Call):
                first[(name, self.scope)] = node

        def visit_Return(self, node: cst.Return) -> None:
            if isinstance(node.value, cst.Name):
                returned.add((node.value.value, self.scope))

        def visit_Call(self, node: cst.Call) -> None:
            fmt = _keywords(node).get("memory_format")
            if fmt is not None and _to_call(node) is not None and _dotted(fmt.value) != MEMORY_FORMAT:
                recv = node.func.value
                while isinstance(recv, cst.Call) and isinstance(recv.func, cst.Attribute):
                    recv = recv.func.value
                if isinstance(recv, cst.Name) and recv.value in models:
                    own.setdefault(recv.value, f"line {pos[node].start.line}: memory_format=`{_code(fmt.value)}`")
    wrapper.module.visit(V())
    out: dict[int, tuple] = {}
    for name, scopes in models.items():
        if name in own:
            continue
        assigned = [sc for (n, sc) in first if n == name]
        chosen = [sc for sc in assigned if sc in scopes] or [sc for sc in assigned if (name, sc) not in returned]
        out.update({id(first[(name, sc)]): (name, first[(name, sc)]) for sc in chosen})
    why = [f"{n}'s memory format is the program's own ({w}): left as it is" for n, w in own.items()]
    return out, why


class _ChannelsLast(_EachBlock, _Located):
    """The edit (module docstring) at ``targets`` (``first_builds``: nodes of the module this transformer visits)."""

    def __init__(self, filename: str, targets: dict[int, tuple]):
        super().__init__(filename)
        self.targets = {i: n for i, (n, _) in targets.items()}
        self.to_calls = {id(st.body[0].value): n for n, st in targets.values()
                         if _to_call(st.body[0].value) is not None}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = self.to_calls.get(id(original))
        if name is not None:  # `model = Net().to(dev)`: the keyword on the call that places the model
            if "memory_format" in _keywords(original):
                return updated
            if any(a.star for a in original.args):
                self.skipped.append(f"{self.at(original)}: {name}.to(...) takes *args/**kwargs: left as it is")
                return updated
            self.done.append(f"{self.at(original)}: {name} = ....to(..., memory_format={MEMORY_FORMAT}) (its "
                             "convolutions' inputs follow the weights' layout, as the launcher's variant does)")
            return _add_args(updated, [_kw("memory_format", _channels_last())])
        # `trainer.fit(Net(), loader)`: a model built in the call
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "fit" and original.args and \
                original.args[0].keyword is None and isinstance(original.args[0].value, cst.Call) and \
                _to_call(original.args[0].value) is None:
            inner = updated.args[0].value
            conv = cst.Call(func=cst.Attribute(value=inner, attr=cst.Name("to")),
                            args=[_kw("memory_format", _channels_last())])
            self.done.append(f"{self.at(original)}: .fit({_code(original.args[0].value)}.to(memory_format="
                             f"{MEMORY_FORMAT}), ...) (its convolutions' inputs follow the weights' layout, as the "
                             "launcher's variant does)")
            return updated.with_changes(args=[updated.args[0].with_changes(value=conv)] + list(updated.args[1:]))
        return updated

    def _block(self, original_body, updated_body) -> list:
        out = []
        for old, new in zip(original_body, updated_body):
            out.append(new)
            name = self.targets.get(id(old))
            if name is None or id(old.body[0].value) in self.to_calls:
                continue
            out.append(cst.parse_statement(f"{name} = {name}.to(memory_format={MEMORY_FORMAT})\n"))
            self.done.append(f"{self.at(old)}: {name} = {name}.to(memory_format={MEMORY_FORMAT}) after it is built "
                             "(its convolutions' inputs follow the weights' layout, as the launcher's variant does)")
        return out
