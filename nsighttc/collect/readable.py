"""An input read whatever its kind: the readers' ``parse.load``, with a profiler's export in front where a binary
report needs one.

Why here: ``parse/`` reads files and launches nothing; a ``.nsys-rep`` can only be read through ``nsys export``, and an
``.ncu-rep`` without NVIDIA's ``ncu_report`` module through ``ncu --import``. Those exports run tools, which is what
``collect/`` does; this module chains the export and the reader (``parse.load`` raises ``NeedsExport``, and this
exports to a temporary file, reads it, and names the user's file in everything it returns).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from .. import labels
from ..errors import NeedsExport, ReaderMissing
from ..parse import Parsed, load as parse_load
from . import tools


def load(path: str | Path) -> Parsed:
    """``parse.load(path)``, or its tool's export read the same way where the reader needs one."""
    path = Path(path)
    try:
        return parse_load(path)
    except NeedsExport as need:
        return _exported(path, need)


def _exported(path: Path, need: NeedsExport) -> Parsed:
    exe = tools.find_or_none(need.tool)
    if exe is None:
        raise ReaderMissing(need.message, path) from None
    from ..parse.textio import plain_copy
    with tempfile.TemporaryDirectory(prefix="nsighttc-") as tmp, \
            plain_copy(path, "report" + ("".join(path.suffixes[:1]) or ".rep")) as plain:
        if need.tool == "nsys":
            from .nsys_export import export_sqlite
            parsed = parse_load(export_sqlite(exe, plain, Path(tmp) / "export.sqlite"))
        else:
            from .ncu_export import export_raw_csv
            parsed = parse_load(export_raw_csv(exe, plain, Path(tmp) / "raw.csv"))
            from ..parse.sniff import Kind
            parsed.kind = Kind.NCU_REP
    parsed.path = path
    parsed.kernels["input"] = labels.constant(str(path), len(parsed.kernels))
    return parsed
