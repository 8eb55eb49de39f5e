"""``.nsys-rep`` reports: exported to SQLite with ``nsys export`` (nsys must be installed), then parsed."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..collect import tools
from ..collect.nsys_export import export_sqlite
from ..errors import ReaderMissing
from . import nsys_sqlite
from .parsed import Parsed


def read(path: Path) -> Parsed:
    nsys = tools.find_or_none("nsys")
    if nsys is None:
        raise ReaderMissing("reading .nsys-rep needs Nsight Systems' nsys (not found on PATH or in "
                            "/opt/nvidia/nsight-systems); or pass the SQLite export: "
                            "`nsys export --type sqlite -o run.sqlite run.nsys-rep`", path)
    with tempfile.TemporaryDirectory(prefix="nsighttc-") as tmp:
        db = export_sqlite(nsys, path, Path(tmp) / "export.sqlite")
        parsed = nsys_sqlite.read(db)
    parsed.path = path
    parsed.kernels["input"] = str(path)
    return parsed
