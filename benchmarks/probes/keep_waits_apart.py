#!/usr/bin/env python3
"""Which of a distributed job's runs had their headline rank waiting in communication first (issue 50: ranks that
take turns being late within a step), and keep those runs' rank recordings as fixtures.

For every run directory under RUNS (``benchmarks/gpu/gpu_profile_overhead.py``'s ``runs_<program>`` folders), prints
the rank the headline was judged on, that rank's own first cause (its row of the rank table) and, where the job's
verdict set that rank's waits apart (``distributed.headline_waits_apart``, ``analysis/ranks/headline.py``), the cause
before and after. Up to ``--keep`` such runs are packed into OUT/waits_apart_<run>.tgz: each rank's trace made smaller
by ``benchmarks/strip_fixture.py``, its host samples, and the run's report and verdict.

    python3 benchmarks/probes/keep_waits_apart.py RUNS OUT [--keep 2]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

STRIP = Path(__file__).resolve().parents[1] / "strip_fixture.py"


def _pack(run: Path, out: Path) -> Path:
    dst = out / f"waits_apart_{run.name}.tgz"
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(dst, "w:gz") as tar:
        for rank_dir in sorted(run.glob("rank*")):
            trace = rank_dir / "torch_trace.json"
            if trace.exists():
                small = Path(tmp) / f"{rank_dir.name}_torch_trace.json.gz"
                subprocess.run([sys.executable, str(STRIP), str(trace), str(small)], check=True)
                tar.add(small, arcname=f"{run.name}/{rank_dir.name}/torch_trace.json.gz")
            for extra in ("host_samples.json",):
                if (rank_dir / extra).exists():
                    tar.add(rank_dir / extra, arcname=f"{run.name}/{rank_dir.name}/{extra}")
        for name in ("report.md", "verdict.json", "run.json"):
            if (run / name).exists():
                tar.add(run / name, arcname=f"{run.name}/{name}")
    return dst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--keep", type=int, default=2)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    kept = 0
    for run in sorted(d for d in a.runs.iterdir() if (d / "verdict.json").exists()):
        doc = json.loads((run / "verdict.json").read_text())
        dist = doc.get("distributed") or {}
        shown = dist.get("timeline_rank")
        row = next((r for r in doc.get("ranks") or [] if r.get("rank") == shown), {})
        apart = dist.get("headline_waits_apart")
        print(f"{run.name}: rank {shown} ({dist.get('timeline_rank_why')}); its own first cause: "
              f"{(row.get('headline_cause') or '')[:90]}")
        if apart:
            print(f"  waits set apart: communication {apart['communication_share']:.0%} of its time without compute, "
                  f"at most {apart['transfer_share']:.0%} transfers; headline cause now: "
                  f"{((doc.get('timeline') or {}).get('headline_cause') or '')[:120]}")
            if kept < a.keep:
                print(f"  kept: {_pack(run, a.out)}")
                kept += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
