"""Export an ``.nsys-rep`` to SQLite with nsys itself."""
from __future__ import annotations

from pathlib import Path

from ..errors import CollectError
from . import process


def export_argv(nsys: Path | str, report: Path | str, dest: Path | str) -> list[str]:
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(dest), str(report)]


def export_sqlite(nsys: Path, report: Path, dest: Path, timeout: float = 900.0) -> Path:
    rc, out, err = process.capture(export_argv(nsys, report, dest), timeout=timeout)
    if rc != 0 or not dest.exists():
        line = next((ln for ln in (err + out).splitlines() if "rror" in ln), (err or out).strip()[:200])
        raise CollectError(f"{report}: nsys export failed: {line or f'exit code {rc}'}")
    return dest
