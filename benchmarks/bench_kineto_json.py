"""Benchmark: peak memory and time to analyse a large torch.profiler (Kineto) trace.

The trace is made from the real H200 recording (tests/fixtures/kineto_trace_cases_loops.json.xz): its
traceEvents repeated with shifted timestamps and correlation ids until the file reaches --mb MB.
Requirement (issue 3): a 1 GB trace must not need 10 GB of RAM; nsighttc streams it with ijson, so
memory follows the number of GPU/API events kept, not the file size. Prints MB/s and peak RSS.
Run: python benchmarks/bench_kineto_json.py [--mb 1000] [--keep FILE]
"""
from __future__ import annotations

import argparse
import lzma
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "kineto_trace_cases_loops.json.xz"


def make_input(mb: int, dest: Path) -> int:
    doc = json.load(lzma.open(FIXTURE))
    events = doc.pop("traceEvents")
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(e.get("ts", 0) for e in events if "ts" in e)
    corr_span = 1 + max(int((e.get("args") or {}).get("correlation", 0) or 0) for e in events)
    head = json.dumps(doc)[:-1] + ', "traceEvents": ['
    n = 0
    with dest.open("w") as fh:
        fh.write(head)
        copy = 0
        first = True
        while fh.tell() < mb * 1e6:
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e2["ts"] + copy * (span + 1000)
                if isinstance(e2.get("args"), dict) and "correlation" in e2["args"]:
                    e2["args"] = dict(e2["args"], correlation=e2["args"]["correlation"] + copy * corr_span)
                if e2.get("cat") == "ac2g" and "id" in e2:
                    e2["id"] = e2["id"] + copy * corr_span
                fh.write(("" if first else ",") + json.dumps(e2))
                first = False
                n += 1
            copy += 1
        fh.write("]}")
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--budget-rss-mb", type=float, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "trace.json"
        if not (args.keep and path.exists()):
            make_input(args.mb, path)
        size = path.stat().st_size / 1e6
        import nsighttc
        t0 = time.perf_counter()
        doc = nsighttc.analyze([path]).to_json()
        dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = rss <= args.budget_rss_mb
    print(f"file={size:.0f}MB events-kernels={doc['tensor_cores']['launches']} analyse={dt:.1f}s "
          f"({size / dt:.0f} MB/s) peak_rss={rss:.0f}MB budget={args.budget_rss_mb:.0f}MB {'OK' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
