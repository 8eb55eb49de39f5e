"""The real recordings the fuzzer mutates, cut to under 1 MB (the size the 5 s promise is about).

Cutting keeps real content: the first rows of a CSV, the first events of a trace; nothing is typed in."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tests.conftest import DETAILS, KINETO, NCU_REP, NSYS_SQLITE_GZ, RAW, fixture_bytes, fixture_open

ROOT = Path(__file__).resolve().parents[2]
VERDICT = ROOT / "reports" / "examples" / "nsys_plus_ncu_merged" / "verdict.json.gz"


@dataclass(frozen=True)
class Seed:
    kind: str        # ncu-raw | ncu-details | ncu-rep | nsys-sqlite | kineto | kineto-gz | verdict
    suffix: str      # file name ending the readers sniff on
    command: str     # analyze | report
    in_process: bool = True  # False: run in a subprocess (a native reader could crash the interpreter)


SEEDS = [Seed("ncu-raw", ".csv", "analyze"), Seed("ncu-details", ".csv", "analyze"),
         Seed("nsys-sqlite", ".sqlite", "analyze"), Seed("kineto", ".json", "analyze"),
         Seed("kineto-gz", ".json.gz", "analyze"), Seed("verdict", ".json", "report"),
         Seed("ncu-rep", ".ncu-rep", "analyze", in_process=False)]
BY_KIND = {s.kind: s for s in SEEDS}


def _csv_head(path: Path, lines: int) -> bytes:
    with fixture_open(path, "rt", encoding="utf-8") as fh:
        return "".join(line for _, line in zip(range(lines), fh)).encode()


@lru_cache(maxsize=None)
def seed_bytes(kind: str) -> bytes:
    if kind == "ncu-raw":
        return _csv_head(RAW, 120)          # header + units + the first ~120 launches
    if kind == "ncu-details":
        return _csv_head(DETAILS, 600)
    if kind == "nsys-sqlite":
        return fixture_open(NSYS_SQLITE_GZ, "rb").read()   # 446 KB
    if kind in ("kineto", "kineto-gz"):
        doc = json.loads(fixture_open(KINETO, "rt", encoding="utf-8").read())
        events = doc["traceEvents"]
        timed = sorted(float(e["ts"]) for e in events if isinstance(e.get("ts"), (int, float)))
        keep = len(timed)
        while True:  # the first stretch of the trace (all event kinds in it) that fits under 900 KB
            cut = timed[keep - 1]
            doc["traceEvents"] = [e for e in events if not isinstance(e.get("ts"), (int, float)) or e["ts"] <= cut]
            raw = json.dumps(doc).encode()
            if len(raw) < 900_000:
                break
            keep = int(keep * 0.8)
        return gzip.compress(raw) if kind == "kineto-gz" else raw
    if kind == "verdict":
        return gzip.decompress(VERDICT.read_bytes())
    if kind == "ncu-rep":
        return fixture_bytes(NCU_REP)  # (the report itself, not its xz-compressed file)
    raise KeyError(kind)
