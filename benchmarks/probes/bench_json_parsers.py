#!/usr/bin/env python3
"""Parser candidates for torch.profiler traces (issue 13), measured on the same bytes: the first MB of the
benchmark trace's events array, cut into blocks as ``nsighttc.parse.kineto_scan`` cuts them.

    python benchmarks/probes/bench_json_parsers.py [TRACE] [--mb 256]

For each candidate: seconds to turn the events into Python objects (GC off, as during analysis), MB/s,
and the projection to 1 GB. ``ijson`` streams event by event (the reader before issue 13); the others
decode whole blocks; ``msgspec typed`` decodes only the fields nsighttc keeps (``kineto_scan.Event``).
The trace defaults to the one ``run_all.py`` builds (``kineto_1000mb.json`` in its work directory).
"""
from __future__ import annotations

import argparse
import gc
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def blocks(path: Path, total: int, block: int) -> list[bytes]:
    """``[ev, ev, ...]`` documents of about ``block`` bytes each, ``total`` bytes in all."""
    from nsighttc.parse import kineto_scan
    with path.open("rb") as fh:
        head = fh.read(1 << 20)
        m = kineto_scan._START.search(head)
        fh.seek(m.end())
        data = fh.read(total)
    out, pos = [], 0
    while pos < len(data):
        cut = data.rfind(b"},{", pos, pos + block)
        if cut < 0:
            break
        out.append(b"[" + data[pos:cut + 1] + b"]")
        pos = cut + 2
    return out


def measure(name: str, fn, docs: list[bytes]) -> dict:
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    n = 0
    for d in docs:
        got = fn(d)
        n += len(got)
        del got
    wall = time.perf_counter() - t0
    gc.enable()
    mb = sum(len(d) for d in docs) / 1e6
    return {"candidate": name, "events": n, "mb": round(mb, 1), "seconds": round(wall, 3),
            "mb_per_s": round(mb / wall, 1), "projected_1gb_s": round(1000 / (mb / wall), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", nargs="?", type=Path, default=Path.home() / ".cache/nsighttc/bench/kineto_1000mb.json")
    ap.add_argument("--mb", type=int, default=256)
    a = ap.parse_args()
    docs = blocks(a.trace, a.mb << 20, 16 << 20)
    rows = []
    import ijson
    rows.append(measure(f"ijson {ijson.backend} (event by event)",
                        lambda d: list(ijson.items(io.BytesIO(d), "item", use_float=True)), docs))
    rows.append(measure("json.loads (stdlib, blocks)", json.loads, docs))
    try:
        import orjson
        rows.append(measure("orjson.loads (blocks)", orjson.loads, docs))
    except ImportError:
        pass
    try:
        import msgspec
        from nsighttc.parse import kineto_scan
        rows.append(measure("msgspec generic (blocks)", msgspec.json.Decoder().decode, docs))
        rows.append(measure("msgspec typed, kept fields only (blocks; nsighttc)", kineto_scan._EVENTS.decode, docs))
    except ImportError:
        pass
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
