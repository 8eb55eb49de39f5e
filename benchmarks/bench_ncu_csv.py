"""Benchmark: parse + analyse a raw ncu CSV of N kernel launches (default 100,000).

The input is made from the real H200 recording (tests/fixtures/ncu_raw_tensor_metrics.csv.gz, 404
launches, 331 columns): its rows repeated with fresh IDs until N. Budget (issue 2): under 3 s on the
2-core CI machine. Run: python benchmarks/bench_ncu_csv.py [--launches N] [--keep FILE]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "ncu_raw_tensor_metrics.csv.gz"


def make_input(n: int, dest: Path) -> Path:
    rows = list(csv.reader(io.StringIO(gzip.open(FIXTURE, "rt").read())))
    header, units, body = rows[0], rows[1], rows[2:]
    with dest.open("w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        w.writerow(header)
        w.writerow(units)
        for i in range(n):
            r = list(body[i % len(body)])
            r[0] = str(i)
            w.writerow(r)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="write the generated CSV here and keep it")
    ap.add_argument("--budget-s", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench_raw.csv"
        make_input(args.launches, path)
        size_mb = path.stat().st_size / 1e6
        import nsighttc  # imported before the clock: interpreter start-up is not the parser's cost
        t0 = time.perf_counter()
        v = nsighttc.analyze([path])
        doc = v.to_json()
        dt = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = dt <= args.budget_s
    print(f"launches={args.launches} file={size_mb:.0f}MB parse+analyse={dt:.2f}s peak_rss={rss_mb:.0f}MB "
          f"verdict={doc['tensor_cores']['verdict']} kernels={len(doc['kernels'])} "
          f"budget={args.budget_s}s {'OK' if ok else 'OVER BUDGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
