"""Number formatting shared by the renderers."""
from __future__ import annotations

from ..durations import duration


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def ns(x: float | None) -> str:
    """Duration in ns -> '1.23 ms' style (``durations.duration``: one formatter for every output)."""
    return duration(x)


def flop(x: float | None) -> str:
    if x is None:
        return "n/a"
    for unit, f in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if x >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.0f} FLOP"


def tc_word(v: bool | None) -> str:
    return {True: "yes", False: "no"}.get(v, "unknown")
