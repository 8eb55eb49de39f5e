#!/usr/bin/env python3
"""Make a test fixture from a real recording by removing what nsighttc never reads, nothing else.

- nsys SQLite: drops the OS-runtime tables (``OSRT_API``, ``OSRT_CALLCHAINS``: 276,795 rows and 10 MB of a
  13 MB DDP rank; NCCL's polling threads), then VACUUM; every table the parser reads is unchanged.
- torch.profiler JSON: drops ``cpu_op``, ``ac2g`` (flow arrows) and ``fwdbwd`` events (the parser reads
  kernels, copies, sets, CUDA runtime/driver calls and user annotations), except the ``cpu_op`` events that span
  a torch.compile compilation (``parse.marks.COMPILE_OPS``: the parser reads those).
Output is gzipped.  Usage: strip_fixture.py IN OUT.gz   (IN may be gzipped)
"""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

DROP_TABLES = ("OSRT_API", "OSRT_CALLCHAINS")
DROP_CATS = {"cpu_op", "ac2g", "fwdbwd"}


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def main(src: str, dst: str) -> None:
    data = _read(Path(src))
    if data.startswith(b"SQLite format 3"):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "x.sqlite"
            db.write_bytes(data)
            con = sqlite3.connect(db)
            for t in DROP_TABLES:
                con.execute(f'DROP TABLE IF EXISTS "{t}"')
            con.commit()
            con.execute("VACUUM")
            con.close()
            with db.open("rb") as fi, gzip.open(dst, "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
    else:
        doc = json.loads(data)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from nsighttc.parse.marks import COMPILE_OPS
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in DROP_CATS
                              or (e.get("cat") == "cpu_op" and e.get("name") in COMPILE_OPS)]
        with gzip.open(dst, "wt", compresslevel=9) as fo:
            json.dump(doc, fo, separators=(",", ":"))
    print(f"{src} ({len(data):,} B) -> {dst} ({Path(dst).stat().st_size:,} B)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
