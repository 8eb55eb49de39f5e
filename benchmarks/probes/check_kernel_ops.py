#!/usr/bin/env python3
"""GPU check (issue 10): does the timeline launcher's early kernel list (``kernel_ops.json``,
``nsighttc/runtime/kernel_ops.py``) say what the trace says? For a run directory of ``nsighttc profile`` (a first run,
with ``--record-shapes``): the same distinct kernels, and for each kernel's first launch the same operator
call (name, argument types, shapes, strides, values read back) as ``parse.kineto_ops`` finds in the trace.
Prints one summary line per run directory and the differences; exit 1 when any.

    python3 benchmarks/probes/check_kernel_ops.py RUN_DIR [RUN_DIR...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def check(run: Path) -> list[str]:
    from nsighttc.parse import load
    from nsighttc.parse.kineto_ops import launching_ops
    from nsighttc.runtime.replay import _concrete

    listing = json.loads((run / "kernel_ops.json").read_text())
    trace = run / "torch_trace.json"
    k = load(trace).kernels
    k = k.assign(name=k["name"].astype(str))
    first = k.sort_values("start_ns", kind="stable").drop_duplicates("name")
    ops = launching_ops(trace, first["launch_id"].dropna().astype(int))
    by_trace = {n: ops.get(int(c)) for n, c in zip(first["name"], first["launch_id"]) if c == c}
    early = {e["name"]: e for e in listing["kernels"]}
    problems = []
    if set(early) != set(first["name"]):
        problems.append(f"kernels only in the list: {sorted(set(early) - set(first['name']))[:5]}; only in the "
                        f"trace: {sorted(set(first['name']) - set(early))[:5]}")
    same = differ = 0
    for name, call in by_trace.items():
        mine = early.get(name, {}).get("op")
        if call is None and mine is None:
            continue
        theirs = call.to_json() if call is not None else None
        if mine is None or theirs is None or any(mine[f] != theirs[f] for f in ("name", "types", "dims", "strides")) \
                or [_concrete(c) for c in mine["concrete"]] != [_concrete(c) for c in theirs["concrete"]]:
            differ += 1
            problems.append(f"{name[:80]}: list {json.dumps(mine)[:300]} trace {json.dumps(theirs)[:300]}")
        else:
            same += 1
    print(f"{run.name}: {len(early)} kernels listed in {listing.get('seconds')} s, {len(first)} in the trace; "
          f"first-launch operator calls: {same} same, {differ} different")
    return problems


def main() -> int:
    bad = 0
    for run in map(Path, sys.argv[1:]):
        for p in check(run):
            print("  " + p)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
