#!/usr/bin/env python3
"""Issue 51's number: the generate loop's time per output token unrecorded (what nsighttc timed after its window, in
its own run) against plain runs of the program (its own TPOT), from one call's alternating rounds
(``gpu_host_frames.sh OUT gen51``). The host's speed moves between runs by up to a third (reports/host_frames), so
single pairs are shown but the claim is the medians over the rounds.

    python3 benchmarks/gpu/generate_speed_check.py WORK_DIR   (W: llm_<r>.plain.log, runs_llm_{first,cached}_<r>/)
"""
import glob
import json
import re
import statistics
import sys
from pathlib import Path


def plain_tpot_ms(log: Path) -> float | None:
    for line in log.read_text().splitlines():
        m = re.search(r'\{"wrapper": "llm_generate".*\}', line)
        if m:
            return float(json.loads(m.group(0))["tpot_ms"])
    return None


def unrecorded_ms(runs: str) -> tuple[float | None, float | None]:
    """(unrecorded time per output token, recorded TPOT) of the newest run in ``runs``, in ms."""
    dirs = sorted(glob.glob(runs + "/*/verdict.json"))
    if not dirs:
        return None, None
    inf = (json.load(open(dirs[-1]))["timeline"].get("inference") or {})
    u = (inf.get("unrecorded") or {}).get("tpot_ns")
    return (u / 1e6 if u else None), (inf["tpot_ns"] / 1e6 if inf.get("tpot_ns") else None)


def main(w: str) -> int:
    plain, unrec, rows = [], [], []
    for log in sorted(Path(w).glob("llm_*.plain.log")):
        r = log.name.split("_")[1].split(".")[0]
        p = plain_tpot_ms(log)
        first, first_rec = unrecorded_ms(f"{w}/runs_llm_first_{r}")
        cached, cached_rec = unrecorded_ms(f"{w}/runs_llm_cached_{r}")
        rows.append({"round": r, "plain_tpot_ms": p, "first_unrecorded_ms": first, "first_recorded_ms": first_rec,
                     "cached_unrecorded_ms": cached, "cached_recorded_ms": cached_rec})
        plain += [p] if p else []
        unrec += [x for x in (first, cached) if x]
    for row in rows:
        print(json.dumps(row))
    if plain and unrec:
        mp, mu = statistics.median(plain), statistics.median(unrec)
        print(json.dumps({"plain_tpot_median_ms": round(mp, 3), "unrecorded_median_ms": round(mu, 3),
                          "ratio": round(mu / mp, 3), "within_10pct": abs(mu / mp - 1) <= 0.10,
                          "plain_runs": len(plain), "profiled_runs": len(unrec)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
