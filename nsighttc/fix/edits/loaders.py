"""The DataLoader edits: ``num_workers``, ``pin_memory``, ``persistent_workers`` at the ``DataLoader(...)`` calls
(keyword or positional) and in transformers' ``TrainingArguments``, and the default of the program's own option
where the value comes from one (``num_workers=args.workers``)."""
from __future__ import annotations

import libcst as cst

from .syntax import (_Located, _add_args, _code, _dotted, _is_false, _is_true, _is_zero, _keywords, _kw, _option,
                     _option_names, _with_keyword)

# DataLoader's positional parameters (torch.utils.data.DataLoader.__init__, torch 2.1-2.13)
LOADER_POSITIONS = {"num_workers": 5, "pin_memory": 7}


class _Loader(_Located):
    """The DataLoader calls' arguments (module docstring)."""

    def __init__(self, filename: str, num_workers: int | None = None, pin_memory: bool = False,
                 persistent: bool = False):
        super().__init__(filename)
        self.num_workers, self.pin_memory, self.persistent = num_workers, pin_memory, persistent
        self.options: dict[str, tuple] = {}  # a value from the program's own option: --NAME -> (what, value, where)

    def _trainer_args(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``TrainingArguments(dataloader_num_workers=..., dataloader_pin_memory=..., dataloader_persistent_workers=...)``."""
        where = self.at(original)
        kws = _keywords(original)
        want = []
        if self.num_workers is not None:
            want.append(("dataloader_num_workers", cst.Integer(str(self.num_workers)), _is_zero))
        if self.pin_memory:  # (transformers' default is True already)
            want.append(("dataloader_pin_memory", cst.Name("True"), _is_false))
        if self.persistent:
            want.append(("dataloader_persistent_workers", cst.Name("True"), _is_false))
        out, added = updated, []
        for key, value, replaceable in want:
            if key not in kws:
                if key != "dataloader_pin_memory":
                    added.append(_kw(key, value))
                    self.done.append(f"{where}: TrainingArguments(..., {key}={_code(value)})")
            elif replaceable(kws[key].value):
                out = _with_keyword(out, key, value)
                self.done.append(f"{where}: TrainingArguments {key} -> {_code(value)}")
            elif _option(kws[key].value) is not None and key == "dataloader_num_workers":
                self.options[_option(kws[key].value)] = (key, self.num_workers, where)
            else:
                self.skipped.append(f"{where}: TrainingArguments {key} is "
                                    f"`{_code(kws[key].value)}`: set from elsewhere")
        return _add_args(out, added) if added else out

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = _dotted(original.func) or ""
        short = name.rsplit(".", 1)[-1]
        if short == "TrainingArguments":  # transformers' Trainer builds the loaders from these
            return self._trainer_args(original, updated)
        if short != "DataLoader":
            return updated
        where = self.at(original)
        if any(a.star == "**" for a in original.args):
            self.skipped.append(f"{where}: DataLoader(...) takes **kwargs: its arguments are built elsewhere")
            return updated
        positional = [a for a in original.args if a.keyword is None and not a.star]
        kws = _keywords(original)

        def current(param: str):
            if param in kws:
                return kws[param].value, "kw"
            pos = LOADER_POSITIONS.get(param)
            if pos is not None and pos < len(positional):
                return positional[pos].value, "pos"
            return None, None

        def set_value(call: cst.Call, param: str, how: str, value: cst.BaseExpression) -> cst.Call:
            if how == "kw":
                return _with_keyword(call, param, value)
            args = list(call.args)
            idx = [i for i, a in enumerate(args) if a.keyword is None and not a.star][LOADER_POSITIONS[param]]
            args[idx] = args[idx].with_changes(value=value)
            return call.with_changes(args=args)

        out, added = updated, []
        workers_after = None
        if self.num_workers is not None:
            value, how = current("num_workers")
            if value is None:
                added.append(_kw("num_workers", cst.Integer(str(self.num_workers))))
                self.done.append(f"{where}: DataLoader(..., num_workers={self.num_workers}) (was the default, 0)")
                workers_after = self.num_workers
            elif _is_zero(value):
                out = set_value(out, "num_workers", how, cst.Integer(str(self.num_workers)))
                self.done.append(f"{where}: DataLoader num_workers 0 -> {self.num_workers}")
                workers_after = self.num_workers
            elif _option(value) is not None:
                self.options[_option(value)] = ("num_workers", self.num_workers, where)
                workers_after = self.num_workers
            else:
                self.skipped.append(f"{where}: DataLoader num_workers is `{_code(value)}` "
                                    "already: left as it is")
        if self.pin_memory:
            value, how = current("pin_memory")
            if value is None:
                added.append(_kw("pin_memory", cst.Name("True")))
                self.done.append(f"{where}: DataLoader(..., pin_memory=True) (was the default, False)")
            elif _is_false(value):
                out = set_value(out, "pin_memory", how, cst.Name("True"))
                self.done.append(f"{where}: DataLoader pin_memory False -> True")
            elif not _is_true(value):
                self.skipped.append(f"{where}: DataLoader pin_memory is `{_code(value)}`: "
                                    "set from elsewhere")
        if self.persistent:
            workers, _ = current("num_workers")
            has_workers = workers_after or (workers is not None and not _is_zero(workers))
            value, how = current("persistent_workers")
            if not has_workers:
                self.skipped.append(f"{where}: DataLoader without workers: persistent_workers needs num_workers > 0")
            elif value is None:
                added.append(_kw("persistent_workers", cst.Name("True")))
                self.done.append(f"{where}: DataLoader(..., persistent_workers=True) (its workers started again "
                                 "each epoch)")
            elif _is_false(value):
                out = set_value(out, "persistent_workers", how, cst.Name("True"))
                self.done.append(f"{where}: DataLoader persistent_workers False -> True")
        return _add_args(out, added) if added else out


class _OptionDefault(_Located):
    """``add_argument("--NAME", ..., default=0)``: the default changed where a DataLoader's value comes from the
    program's own option, so the option still works and only its default moves."""

    def __init__(self, filename: str, options: dict[str, tuple]):
        super().__init__(filename)
        self.options = options
        self.found: set[str] = set()

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        hit = next((n for n in _option_names(original) or () if n in self.options), None)
        if hit is None:
            return updated
        self.found.add(hit)
        what, value, used = self.options[hit]
        default = _keywords(original).get("default")
        if default is None or not _is_zero(default.value):
            self.skipped.append(f"{self.at(original)}: --{hit} (used for {what} at {used}) has default "
                                f"`{_code(default.value) if default else 'None'}`: left as it is")
            return updated
        self.done.append(f"{self.at(original)}: --{hit} default 0 -> {value} (its value is {what} at {used})")
        return _with_keyword(updated, "default", cst.Integer(str(value)))
