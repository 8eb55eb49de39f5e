"""A timeline's host stacks, from wherever they are: the launcher's samples beside the recording
(``parse.host_samples``), else the Python calls a torch.profiler trace recorded ``with_stack=True`` carries
(``parse.python_calls``)."""
from __future__ import annotations

from ..errors import InputError
from .host_samples import beside, place, read


def attach(p):
    """A parsed timeline (``Parsed``) with its host stacks: the launcher's samples beside it (``host_samples.json`` in
    its directory), placed on its clock, else the Python calls a torch.profiler trace recorded ``with_stack=True``
    carries (``parse.python_calls``). A damaged file is a warning, never the end of the analysis."""
    if p.timeline is None or getattr(p.timeline, "host_samples", None) is not None:
        return p
    path = beside(p.path)
    if path is not None:
        try:
            p.timeline.host_samples = place(read(path), p.timeline.marks)
        except InputError as exc:
            p.warnings.append(str(exc))
        return p
    from . import python_calls
    from .sniff import Kind
    # the parse counted them where it read every event; else (a trace read by another path) a look at the file's head
    if p.kind is not Kind.KINETO_JSON or not (p.timeline.python_calls or python_calls.present(p.path)):
        return p
    try:
        hs = python_calls.read(p.path)
    except Exception as exc:  # noqa: BLE001 - the calls are extra: the analysis goes on without them
        p.warnings.append(f"{p.path}: its Python calls (with_stack) could not be read ({type(exc).__name__}: {exc})")
        return p
    if hs is not None:
        p.timeline.host_samples = hs
    return p
