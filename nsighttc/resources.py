"""Real recordings shipped inside the package for ``nsighttc demo`` (from shared/fixtures/h200)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

DEMO_FILES = ("h200_probe_ncu_raw.csv.gz",)


def demo_inputs() -> list[Path]:
    base = resources.files("nsighttc") / "data"
    return [Path(str(base / name)) for name in DEMO_FILES]
