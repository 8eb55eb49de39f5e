"""What finding the steps costs `analyze` (issue 28's budget: at most +10% on the 1M-kernel benchmark).

    python benchmarks/bench_steps.py [--old TREE] [--rounds 5] [--work DIR]

Two measurements on the nsys export of 1M kernels that ``run_all.py`` builds (``nsys_1000000.sqlite`` in its work
directory; built here if missing):
1. ``analyze`` + ``to_json`` in a fresh process, this checkout against an older one (``--old``: a ``git worktree`` of
   the commit before the step finder), alternating, ``--rounds`` each: the export has step ranges, so this is what
   every recording pays (marks split, steady rule, start-up);
2. the worst case: the same export with its NVTX ranges deleted, so the steps come from the period of the kernel
   sequence over all 1M kernels: ``analyze`` in a fresh process, and ``steps.find`` alone in-process.
Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = ("import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); import nsighttc; "
         "nsighttc.analyze([sys.argv[2]]).to_json(); print(time.perf_counter() - t)")


def fresh(tree: Path, path: Path) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(path)], capture_output=True, text=True,
                         cwd=tree, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", type=Path, help="an older checkout to compare with (git worktree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "nsighttc" / "bench")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE.parent))
    src = a.work / "nsys_1000000.sqlite"
    if not src.exists():
        subprocess.run([sys.executable, str(HERE / "run_all.py"), "--only", "nsys_sqlite_1m_kernels", "--work",
                        str(a.work), "--out", str(a.work / "results_steps.json")], check=True)
    here = HERE.parent
    result: dict = {"input": str(src), "rounds": a.rounds}
    if a.old:
        new, old = [], []
        for _ in range(a.rounds):
            old.append(fresh(a.old, src))
            new.append(fresh(here, src))
        result["with_step_ranges"] = {"old_s": old, "new_s": new, "old_median_s": statistics.median(old),
                                      "new_median_s": statistics.median(new),
                                      "ratio": statistics.median(new) / statistics.median(old)}
    bare = a.work / "nsys_1000000_no_nvtx.sqlite"
    if not bare.exists():
        shutil.copy(src, bare)
        con = sqlite3.connect(bare)
        con.execute("DELETE FROM NVTX_EVENTS")
        con.commit()
        con.close()
    whole = [fresh(here, bare) for _ in range(a.rounds)]
    import numpy as np
    from nsighttc.analysis.timeline import steps
    from nsighttc.parse import load
    from nsighttc.parse.timeline import launch_times
    parsed = load(bare)
    tl = parsed.timeline
    start = launch_times(parsed.kernels, tl.api)["start_ns"].to_numpy(dtype="float64")
    find_s, found = [], None
    for _ in range(a.rounds):
        t = time.perf_counter()
        found = steps.find(tl.ranges, tl.marks, parsed.kernels, start, None)
        find_s.append(time.perf_counter() - t)
    result["kernel_period_worst_case"] = {
        "kernels": int(len(parsed.kernels)), "analyze_s": whole, "analyze_median_s": statistics.median(whole),
        "find_s": find_s, "find_median_s": statistics.median(find_s),
        "found": [{"name": s.name, "source": s.source, "steps": int(len(s.starts))} for s in found or []],
        "share_of_analyze": statistics.median(find_s) / statistics.median(whole)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
