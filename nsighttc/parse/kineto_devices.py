"""Which GPUs a torch.profiler trace was recorded on (``deviceProperties``), and who made them: a CUDA build and a ROCm
build of PyTorch write the same fields, so the vendor is told from the device itself (``device_vendor``)."""
from __future__ import annotations

from pathlib import Path


def device_properties(path: Path, opener) -> dict[int, dict]:
    try:
        import ijson
        with opener(path) as fh:
            items = list(ijson.items(fh, "deviceProperties.item"))
    except Exception:
        return {}
    return properties(items)


def properties(items) -> dict[int, dict]:
    if not isinstance(items, list):
        return {}
    out = {}
    for i, p in enumerate(items):
        if not isinstance(p, dict):
            continue
        vendor = device_vendor(p)
        cc = f"{p.get('computeMajor')}.{p.get('computeMinor')}" if p.get("computeMajor") is not None else None
        out[int(p.get("id", i))] = {"name": p.get("name"), "compute_capability": cc if vendor == "NVIDIA" else None,
                                    **({"vendor": vendor} if vendor != "NVIDIA" else {})}
    return out


def device_vendor(p: dict) -> str:
    """Who made the GPU a torch.profiler trace names. ROCm builds of PyTorch write the same ``deviceProperties`` as CUDA
    builds, with an AMD GPU's architecture in ``computeMajor`` (an MI250, gfx90a: 9, read as "compute capability 9.0"
    before: HolisticTraceAnalysis's test data) and its wavefront of 64 in ``warpSize`` (NVIDIA: 32)."""
    name = str(p.get("name") or "")
    if name.startswith("AMD") or any(w in name for w in ("Radeon", "Instinct")) or p.get("warpSize") == 64:
        return "AMD"
    if name.startswith(("NVIDIA", "Tesla", "Quadro", "GeForce", "TITAN")) or p.get("warpSize") == 32:
        return "NVIDIA"
    return "unknown"
