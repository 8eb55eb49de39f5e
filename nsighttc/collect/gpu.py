"""What GPU is here: nvidia-smi (no CUDA import in our process), plus tool versions for provenance."""
from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass

from . import process


@dataclass
class GPU:
    index: int
    name: str
    compute_capability: str | None
    driver: str | None


def list_gpus(timeout: float = 20.0) -> list[GPU]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    rc, out, _ = process.capture([smi, "--query-gpu=index,name,compute_cap,driver_version",
                                  "--format=csv,noheader,nounits"], timeout=timeout)
    if rc != 0:
        rc, out, _ = process.capture([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                                     timeout=timeout)
        if rc != 0:
            return []
        return [GPU(int(p[0]), p[1], None, p[2]) for p in (list(map(str.strip, ln.split(","))) for ln in out.splitlines()) if len(p) >= 3]
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4:
            gpus.append(GPU(int(parts[0]), parts[1], parts[2] or None, parts[3] or None))
    return gpus


@functools.lru_cache(maxsize=16)
def tool_version(exe: str, flag: str = "--version", timeout: float = 30.0) -> str | None:
    rc, out, err = process.capture([exe, flag], timeout=timeout)
    text = (out or err).strip().splitlines()
    return text[-1].strip() if rc == 0 and text else None
