#!/usr/bin/env python3
"""Benchmark (issue 55): a job of 256 synthetic ranks analysed on a Dask LocalCluster against this machine's processes.

The ranks are ``bench_ranks.py``'s (the real per-rank nsys recordings of a DDP job on 2 H200s repeated in time to N
kernels each, one copy per rank<R>/nsys.sqlite). Each executor runs in a fresh process of its own (the Dask cluster, a
LocalCluster on loopback, in processes of its own, reached as ``--executor dask://127.0.0.1:PORT``); what is reported
per executor: the wall time of the analysis, the peak RSS of the client process (the one that makes the job's
verdict: it must stay small whatever the rank count, at most 500 MB) and that the verdicts agree (ranks, straggler,
median steps). Writes the numbers as JSON (``--json``) for reports/scale_out/.

Run: python benchmarks/bench_dask.py [--ranks 256] [--kernels 20000] [--workers 2] [--keep DIR] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
CLIENT_BUDGET_MB = 500


# A LocalCluster on loopback in a process of its own, until it is terminated.
CLUSTER = """
import time
from distributed import LocalCluster
c = LocalCluster(n_workers={workers}, threads_per_worker=1, processes=True, host="127.0.0.1",
                 scheduler_port={port}, dashboard_address=":0")
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _measure(job: Path, executor: str, workers: int) -> dict:
    """One analysis in this process (run as a child of ``main``): wall time, this process's peak RSS, the verdict."""
    import nsighttc
    from nsighttc import executors
    ex = executors.make(executor, workers)
    try:
        t0 = time.perf_counter()
        v = nsighttc.analyze([job], executor=ex)
        wall = time.perf_counter() - t0
    finally:
        ex.close()
    return {"executor": executor, "workers": workers, "ranks": len(v.ranks), "wall_s": round(wall, 2),
            "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "straggler": (v.distributed["straggler"] or {}).get("rank"),
            "incomplete": len(v.distributed["incomplete_ranks"]),
            "median_steps_ns": [r["median_step_ns"] for r in v.ranks]}


def _child(argv: list[str]) -> dict:
    """Run one measurement in a child process; its stderr is shown when it fails (a refused input names the file)."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"bench_dask: {' '.join(argv[2:])} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--kernels", type=int, default=20_000, help="kernels per rank file")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes / Dask workers")
    ap.add_argument("--keep", type=Path, help="build the job directory here and keep it (reused when present)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--measure", nargs=3, metavar=("JOB", "EXECUTOR", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        job, executor, workers = args.measure
        print(json.dumps(_measure(Path(job), executor, int(workers))))
        return 0
    from bench_ranks import build
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        build(root, args.ranks, args.kernels)
        built = time.perf_counter() - t0
        rows = []
        rows.append(_child([sys.executable, __file__, "--measure", str(root / "job"), "processes", str(args.workers)]))
        # the cluster (scheduler and workers) in processes of its own, reached on loopback as a remote one would be:
        # the client's memory is the client's alone
        port = _free_port()
        cluster = subprocess.Popen([sys.executable, "-c", CLUSTER.format(port=port, workers=args.workers)],
                                   stdout=subprocess.PIPE, text=True)
        try:
            assert cluster.stdout.readline().strip() == "ready"
            rows.append(_child([sys.executable, __file__, "--measure", str(root / "job"), f"dask://127.0.0.1:{port}",
                                str(args.workers)]))
        finally:
            cluster.terminate()
            cluster.wait(timeout=60)
    same = rows[0]["median_steps_ns"] == rows[1]["median_steps_ns"] and rows[0]["straggler"] == rows[1]["straggler"]
    for r in rows:
        print(f"{r['executor']:<26} ranks={r['ranks']} workers={r['workers']} analyse={r['wall_s']:.1f}s "
              f"client_peak_rss={r['client_peak_rss_mb']:.0f}MB (budget {CLIENT_BUDGET_MB}MB) "
              f"straggler={r['straggler']} incomplete={r['incomplete']}")
    print(f"verdicts agree: {same} (build {built:.0f}s, {args.kernels:,} kernels per rank)")
    doc = {"ranks": args.ranks, "kernels_per_rank": args.kernels, "cpus": os.cpu_count(),
           "results": [{k: v for k, v in r.items() if k != "median_steps_ns"} for r in rows],
           "verdicts_agree": same, "client_budget_mb": CLIENT_BUDGET_MB,
           "command": f"python benchmarks/bench_dask.py --ranks {args.ranks} --kernels {args.kernels} "
                      f"--workers {args.workers}"}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    ok = same and all(r["client_peak_rss_mb"] <= CLIENT_BUDGET_MB and not r["incomplete"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
