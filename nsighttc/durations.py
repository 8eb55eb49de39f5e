"""The one duration formatter of every output (reports, findings, the terminal, ``diff``, the launcher's lines):
"1.12 s", not "1.12e+03 ms" (what ``f"{x / 1e6:.3g} ms"`` wrote for a second-long idle time).

Its own module, importing nothing: the analysis writes durations into findings' text, the renderers into tables,
and neither should import the other for it.
"""
from __future__ import annotations

_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3))


def duration(x_ns: float | None) -> str:
    """Nanoseconds -> three significant digits in the largest unit that keeps the number at 1 or more: '812 ns',
    '4.07 µs', '18.3 ms', '1.12 s', '1,234 s'; None -> 'n/a'."""
    if x_ns is None or x_ns != x_ns:  # None or NaN
        return "n/a"
    for unit, f in _UNITS:
        if abs(x_ns) >= f:
            v = x_ns / f
            return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:,.0f} {unit}"
    return f"{x_ns:.0f} ns"


def duration_s(seconds: float | None) -> str:
    """Seconds -> the same wording as ``duration``."""
    return "n/a" if seconds is None else duration(seconds * 1e9)
