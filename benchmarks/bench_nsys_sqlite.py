"""Benchmark: analyse an nsys SQLite export with N kernels (default 1,000,000).

The database is made from the real H200 export (nsighttc/data/h200_loops_nsys.sqlite.xz): the same
schema, with kernel, memcpy/memset, CUDA API and NVTX rows copied with shifted timestamps and
correlation ids until there are N kernels. Budget (issue 54): 1M kernels in <= 3.0 s and <= 1 GB peak RSS on the
2-core machine, the import of the analysis included. Prints the wall time of each stage (``nsighttc.stages``: the
stages on the Tensor Core side run beside the timeline's, so the split does not add up to the total).
Run: python benchmarks/bench_nsys_sqlite.py [--kernels N] [--keep FILE]
"""
from __future__ import annotations

import argparse
import math
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "nsighttc" / "data" / "h200_loops_nsys.sqlite.xz"
API_KEEP = "(SELECT id FROM StringIds WHERE value LIKE 'cuda%' OR value LIKE 'cuLaunch%')"


def _replicate(con, table, copies, span, corr_span, where=""):
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    expr = []
    for c in cols:
        if c in ("start", "end"):
            expr.append(f"{c} + seq.i * {span}")
        elif c == "correlationId":
            expr.append(f"{c} + seq.i * {corr_span}")
        else:
            expr.append(c)
    con.execute(f'INSERT INTO "{table}" ({", ".join(cols)}) SELECT {", ".join(expr)} FROM "{table}" AS t, seq '
                f"WHERE seq.i > 0 {where}")


def make_input(n: int, dest: Path, fixture: Path = FIXTURE) -> int:
    """``dest``: the real recording ``fixture`` with its GPU work, API calls and ranges repeated (shifted in
    time and correlation id) until it holds ``n`` kernels."""
    from nsighttc.parse.textio import open_binary
    with open_binary(fixture) as src, dest.open("wb") as dst:  # (gzip or xz, as the fixture is kept)
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(dest)
    nk = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    lo, hi = con.execute("SELECT min(start), max(end) FROM NVTX_EVENTS").fetchone()
    k_lo, k_hi = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    span = max(hi, k_hi) - min(lo, k_lo) + 1_000_000
    corr_span = con.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    copies = math.ceil(n / nk)
    con.execute("CREATE TEMP TABLE seq (i INTEGER)")
    con.executemany("INSERT INTO seq VALUES (?)", [(i,) for i in range(copies)])
    _replicate(con, "CUPTI_ACTIVITY_KIND_KERNEL", copies, span, corr_span)
    for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        _replicate(con, t, copies, span, corr_span)
    _replicate(con, "CUPTI_ACTIVITY_KIND_RUNTIME", copies, span, corr_span, f"AND t.nameId IN {API_KEEP}")
    _replicate(con, "NVTX_EVENTS", copies, span, corr_span)
    total = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    extra = total - n
    if extra > 0:
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid IN (SELECT rowid FROM "
                    "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC LIMIT ?)", (extra,))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="write the generated database here and keep it")
    ap.add_argument("--budget-s", type=float, default=3.0)
    ap.add_argument("--budget-rss-mb", type=float, default=1024)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench.sqlite"
        if not (args.keep and path.exists()):
            make_input(args.kernels, path)
        import nsighttc
        from nsighttc import stages
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        with stages.record() as split:
            t_import = time.perf_counter()
            import nsighttc.api  # noqa: F401 - timed: a user's first analysis pays it
            split["import"] = time.perf_counter() - t_import
            v = nsighttc.analyze([path])
            with stages.stage("to_json"):
                doc = v.to_json()
        dt = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = dt <= args.budget_s and rss <= args.budget_rss_mb
    print(f"kernels={args.kernels} ranges={len(doc['ranges'])} file={size_mb:.0f}MB analyse={dt:.2f}s "
          f"peak_rss={rss:.0f}MB (before analyse {rss0:.0f}MB) timeline={doc['timeline']['verdict']} "
          f"budget={args.budget_s}s/{args.budget_rss_mb:.0f}MB {'OK' if ok else 'OVER BUDGET'}")
    print("stages (s): " + ", ".join(f"{k} {t:.2f}" for k, t in split.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
