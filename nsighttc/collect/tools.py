"""Find the Nsight executables: PATH first, then where NVIDIA installs them.

Users rarely have nsys on PATH (on our GPU machine it ships inside the Nsight Compute folder,
``/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys``), so we look in the usual places
and say where we looked when nothing is found.
"""
from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from ..errors import ToolNotFound

_SEARCH = {
    "ncu": ["/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu"],
    "nsys": ["/usr/local/cuda/bin/nsys", "/opt/nvidia/nsight-systems/*/bin/nsys",
             "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys", "/usr/local/cuda-*/bin/nsys"],
}


def candidates(tool: str) -> list[str]:
    """The places we look for ``tool``, in order (PATH, then the glob patterns above)."""
    return ["$PATH"] + _SEARCH.get(tool, [])


def find(tool: str, explicit: str | os.PathLike | None = None) -> Path:
    """Path of ``tool`` (``explicit`` wins), or ToolNotFound naming every place we looked."""
    if explicit:
        p = Path(explicit)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        raise ToolNotFound(f"{tool} not found or not executable at {p}")
    hit = shutil.which(tool)
    if hit:
        return Path(hit)
    for pattern in _SEARCH.get(tool, []):
        for match in sorted(glob.glob(pattern), reverse=True):  # newest version first
            if os.access(match, os.X_OK):
                return Path(match)
    raise ToolNotFound(f"{tool} not found (looked in: {', '.join(candidates(tool))})")


def find_or_none(tool: str, explicit: str | os.PathLike | None = None) -> Path | None:
    try:
        return find(tool, explicit)
    except ToolNotFound:
        return None
