"""Decide what kind of profiler output a file is, from its content (extensions are only a hint).

Users pass files renamed, gzipped, or captured from a terminal; the content tells us more than the
name. Every refusal names the file and says what we expected.
"""
from __future__ import annotations

from enum import Enum
from pathlib import Path

from ..errors import InputError
from . import textio


class Kind(str, Enum):
    NCU_CSV = "ncu-csv"
    NCU_REP = "ncu-rep"
    NSYS_SQLITE = "nsys-sqlite"
    NSYS_REP = "nsys-rep"
    KINETO_JSON = "kineto-json"


SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_REP_MAGIC = b"NVR\x00"
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"  # seen at byte 0 of nsys 2025.3.1 .nsys-rep files
QDSTRM_SUFFIX = ".qdstrm"


def sniff(path: Path) -> Kind:
    textio.check_file(path)
    if path.suffix == QDSTRM_SUFFIX:
        raise InputError("a .qdstrm is nsys's raw stream, left behind when its importer failed; no report "
                         "was written. Run `nsighttc doctor` (on Linux the importer usually lacks libdw.so.1)",
                         path)
    return kind_of(path.name, textio.head_bytes(path, 1 << 16), path)


HEAD_BYTES = 1 << 16  # what ``kind_of`` needs of a file's start (decompressed)


def kind_of(name: str, head: bytes, path) -> Kind:
    """The kind of a file from its name and its first ``HEAD_BYTES`` (decompressed): also for inputs that are not
    local files (``remote_inputs``). ``path``: how errors name the file."""
    if head.startswith(SQLITE_MAGIC):
        return Kind.NSYS_SQLITE
    if head.startswith(NCU_REP_MAGIC) or name.endswith(".ncu-rep"):
        return Kind.NCU_REP
    if head.startswith(NSYS_REP_MAGIC) or name.endswith(".nsys-rep"):
        return Kind.NSYS_REP
    if textio.looks_binary(head):
        raise InputError("binary data of an unknown kind; expected an ncu CSV/.ncu-rep, an nsys "
                         ".sqlite/.nsys-rep or a torch.profiler trace .json (.gz, .xz)", path)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if text.startswith("{") or text.startswith("["):
        return Kind.KINETO_JSON
    if '"Kernel Name"' in text or '"ID","Process ID"' in text:
        return Kind.NCU_CSV
    first = text.split("\n", 1)[0][:120]
    if "," in first or ";" in first or "\t" in first:
        raise InputError(f"a table, but not an Nsight Compute CSV export (header starts {first!r}; "
                         "expected columns \"ID\" and \"Kernel Name\")", path)
    raise InputError("not a profiler output nsighttc reads (expected an ncu CSV/.ncu-rep, an nsys "
                     ".sqlite/.nsys-rep or a torch.profiler trace .json (.gz, .xz))", path)
