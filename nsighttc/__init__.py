"""nsighttc: did the Tensor Cores fire, and if it is not faster, why?

Hardware counters decide; kernel-name rules only guess and say "unknown" when they cannot tell.
Public API: ``analyze(paths) -> Verdict`` (see ``nsighttc.api``), ``nsighttc.annotate`` for NVTX ranges.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .api import analyze  # noqa: E402
from .errors import NsighttcError  # noqa: E402
from .verdict import Verdict  # noqa: E402

__all__ = ["analyze", "Verdict", "NsighttcError", "__version__"]
