"""nsighttc: did the Tensor Cores fire, and if it is not faster, why?

Hardware counters decide; kernel-name rules only guess and say "unknown" when they cannot tell.
Public API: ``analyze(paths) -> Verdict`` (see ``nsighttc.api``), ``nsighttc.annotate`` for NVTX ranges.
The heavy parts (pandas, pyarrow) load on first use, so ``from nsighttc import annotate`` inside a
profiled program stays cheap.
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["analyze", "Verdict", "NsighttcError", "__version__"]


def __getattr__(name: str):
    if name == "analyze":
        from .api import analyze
        return analyze
    if name == "Verdict":
        from .verdict import Verdict
        return Verdict
    if name == "NsighttcError":
        from .errors import NsighttcError
        return NsighttcError
    raise AttributeError(f"module 'nsighttc' has no attribute {name!r}")
