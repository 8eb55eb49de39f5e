"""Run code right after the program imports a module, without importing it ourselves: the step hooks wait for the
program's ``import torch`` (a program without PyTorch pays nothing), the generation hooks for transformers'
lazily loaded ``transformers.generation.utils``."""
from __future__ import annotations

import sys

from .lines import say


class AfterImport:
    """A ``sys.meta_path`` finder that runs ``callback`` right after module ``name`` has been executed (the
    program's own ``import torch``), then leaves ``sys.meta_path``."""

    def __init__(self, name: str, callback):
        self.name, self.callback = name, callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        self.remove()
        import importlib.util
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original, callback = loader.exec_module, self.callback

        def exec_module(module):
            original(module)
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - the program must run whatever happens to the marks
                say(f"nsighttc.launch: step marks not installed ({type(exc).__name__}: {exc})")
        loader.exec_module = exec_module
        return spec

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def when_imported(name: str, fn, undo: list | None = None) -> None:
    """Run ``fn`` now if module ``name`` is imported, else right after the program imports it (``AfterImport``)."""
    if name in sys.modules:
        fn()
        return
    finder = AfterImport(name, fn)
    sys.meta_path.insert(0, finder)
    if undo is not None:
        undo.append(finder.remove)
