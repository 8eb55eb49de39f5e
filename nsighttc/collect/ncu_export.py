"""Turn an ``.ncu-rep`` into the CSV we parse by asking ``ncu`` itself (when the Python reader is absent)."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import CollectError
from . import process


def export_raw_csv(ncu: Path, report: Path, dest: Path, timeout: float = 600.0) -> Path:
    """``ncu --import R --csv --page raw --print-units base`` into ``dest``; CollectError on failure."""
    rc, out, err = process.capture(export_argv(ncu, report), timeout=timeout)
    if rc != 0 or not out.strip():
        line = next((ln for ln in (err + out).splitlines() if "==ERROR==" in ln), (err or out).strip()[:200])
        raise CollectError(f"{report}: ncu could not export the report: {line or f'exit code {rc}'}")
    dest.write_text(out, encoding="utf-8")
    return dest


def export_argv(ncu: Path | str, report: Path | str) -> list[str]:
    return [os.fspath(ncu), "--import", os.fspath(report), "--csv", "--page", "raw", "--print-units", "base"]
