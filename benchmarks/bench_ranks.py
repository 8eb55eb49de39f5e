#!/usr/bin/env python3
"""Benchmark: ``nsighttc analyze`` of a distributed job's directory: 64 rank files of 100,000 kernels each.

Inputs are built from the real per-rank nsys recordings of a DDP job on 2 H200s (tests/fixtures/ddp/
straggler_nsys: rank 0 waits in NCCL, rank 1 is the straggler): each is repeated in time to 100,000 kernels
(``bench_nsys_sqlite.make_input``), then hard-linked as ``rank<R>/nsys.sqlite`` for R = 0..63, even ranks
from rank 0's recording and odd ranks from rank 1's (the analysis reads and judges every file on its own;
links only save disk). Reports wall time, the main process's peak RSS and the largest worker's: memory is
bounded by ``--jobs`` workers at once, not by the number of ranks.

Run: python benchmarks/bench_ranks.py [--ranks 64] [--kernels 100000] [--jobs N] [--keep DIR]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DDP = ROOT / "tests" / "fixtures" / "ddp" / "straggler_nsys"


def build(root: Path, ranks: int, kernels: int) -> None:
    from bench_nsys_sqlite import make_input
    root.mkdir(parents=True, exist_ok=True)
    seeds = []
    for r in (0, 1):
        seed = root / f"seed{r}.sqlite"
        if not seed.exists():
            make_input(kernels, seed, DDP / f"rank{r}" / "nsys.sqlite.xz")
        seeds.append(seed)
    import shutil
    import sqlite3
    for r in range(ranks):
        d = root / "job" / f"rank{r}"
        d.mkdir(parents=True, exist_ok=True)
        dest = d / "nsys.sqlite"
        if not dest.exists():
            # a copy of its own per rank, its session start moved by the rank in nanoseconds: the same recording given
            # twice is refused (parse.same_job), as it would count twice
            shutil.copyfile(seeds[r % 2], dest)
            con = sqlite3.connect(dest)
            con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (r,))
            con.commit()
            con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=100_000, help="kernels per rank file")
    ap.add_argument("--jobs", type=int, default=None, help="ranks analysed at once (default: one per core for inputs this big, nsighttc.rank_map.RANKS_IN_PROCESSES_MIN_BYTES)")
    ap.add_argument("--keep", type=Path, help="build the job directory here and keep it (reused when present)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        build(root, args.ranks, args.kernels)
        built = time.perf_counter() - t0
        import nsighttc
        t0 = time.perf_counter()
        v = nsighttc.analyze([root / "job"], jobs=args.jobs)
        dt = time.perf_counter() - t0
        size_mb = (root / "seed0.sqlite").stat().st_size / 1e6
    main_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    from nsighttc.rank_map import rank_jobs
    jobs = rank_jobs(args.jobs, sorted(p for p in (root / "job").rglob("*") if p.is_file()))
    d = v.distributed
    print(f"ranks={len(v.ranks)} kernels/rank={args.kernels:,} file={size_mb:.0f}MB jobs={jobs} analyse={dt:.1f}s "
          f"({dt / len(v.ranks):.2f}s/rank) peak_rss_main={main_rss:.0f}MB peak_rss_largest_worker={child_rss:.0f}MB "
          f"bound~{main_rss + jobs * child_rss:.0f}MB straggler={(d['straggler'] or {}).get('rank')} "
          f"(build {built:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
