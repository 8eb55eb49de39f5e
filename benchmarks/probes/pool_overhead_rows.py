#!/usr/bin/env python3
"""Pool a new call's alternating rounds into ``reports/profile_overhead/summary.json.gz``'s rows of the same programs.

``benchmarks/gpu/gpu_profile_overhead.py`` writes one row per program and call (plain, first and cached runs in
alternating rounds). Calls of the same cost path on the same machine kind are pooled: the rounds are appended, and
the ratios made again from all of them, both ways: the ratio of the medians (``ratio``, ``ratio_warm``) and each
round's ratio over its own plain run (``pair_ratios``; their medians are printed), which a drift of the machine's
speed between or within calls moves less. The other fields (verdicts, phases) are the new call's.

    python3 benchmarks/probes/pool_overhead_rows.py reports/profile_overhead/summary.json.gz NEW_summary.json \
        --programs ddp_compiled fsdp2_compiled --call "call 16 (4 rounds each)"
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
from gpu_profile_overhead import read_rows, write_rows  # noqa: E402 - (the summary's own reader and writer)

POOLED = ("plain_s", "default_s", "warm_s", "exit_codes")


def pool(old: dict, new: dict, call: str) -> dict:
    row = dict(new)
    for key in POOLED:
        row[key] = list(old.get(key) or []) + list(new.get(key) or [])
    row["pair_ratios"] = {k: list((old.get("pair_ratios") or {}).get(k) or []) + list(new["pair_ratios"].get(k) or [])
                          for k in ("first", "cached")}
    plain = statistics.median(row["plain_s"])
    row["ratio"] = round(statistics.median(row["default_s"]) / plain, 3)
    row["ratio_warm"] = round(statistics.median(row["warm_s"]) / plain, 3) if row["warm_s"] else None
    row["time_to_verdict_s"] = {"plain": plain, "first": statistics.median(row["default_s"]),
                                "cached": statistics.median(row["warm_s"]) if row["warm_s"] else None}
    row["calls"] = f"{old.get('calls') or 'one call'}; and {call}"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summary", type=Path, help="the committed summary.json.gz (rewritten)")
    ap.add_argument("new", type=Path, help="the new call's summary.json")
    ap.add_argument("--programs", nargs="+", required=True)
    ap.add_argument("--call", required=True, help="how the new rounds are named in the row's 'calls'")
    a = ap.parse_args()
    rows = read_rows(a.summary)
    new = {r["program"]: r for r in read_rows(a.new)}
    for name in a.programs:
        i = next(i for i, r in enumerate(rows) if r["program"] == name)
        rows[i] = row = pool(rows[i], new[name], a.call)
        pr = row["pair_ratios"]
        print(f"{name}: {len(row['plain_s'])} rounds; ratio of medians first {row['ratio']}, cached "
              f"{row['ratio_warm']}; medians of the pair ratios {statistics.median(pr['first']):.3f}, "
              f"{statistics.median(pr['cached']):.3f}")
    write_rows(a.summary, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
