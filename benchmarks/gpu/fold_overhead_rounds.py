#!/usr/bin/env python3
"""Fold one device call of ``gpu_overhead_rounds.sh`` into the repository's overhead reports.

The call brings back ``summary.json`` (one row per program: the medians, the pair ratios, the last round's verdicts)
and ``overhead.tgz`` (every run's folder). This writes, per program measured in that call:

* a slim row in ``reports/profile_overhead/<rounds>`` (default ``first_run_2026-11-29/rounds.json.gz``) with the call's
  number, the code it measured (``--change``) and **every** round's verdict, first and cached run alike (the summary
  keeps only the last round's, which hides a verdict that flips between rounds);
* the program's row in ``reports/profile_overhead/summary.json.gz``, replaced (or added), unless ``--rounds-only`` (a
  call of one round that checks a change keeps the rows of more rounds there).

    python3 benchmarks/gpu/fold_overhead_rounds.py --call 5 --change "..." DEVICE_DIR [DEVICE_DIR ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_profile_overhead import ROOT, read_rows, write_rows  # noqa: E402 - (the summary's own writer, beside this script)

REPORTS = ROOT / "reports" / "profile_overhead"


def run_verdicts(tgz: Path) -> dict[str, list[dict]]:
    """{program: [verdict summary of each profiled run, oldest first]}: first and cached runs alternate per round."""
    out: dict[str, list[tuple[str, dict]]] = {}
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if len(parts) < 3 or parts[-1] != "verdict.json" or not parts[-3].startswith("runs_"):
                continue
            v = json.load(tar.extractfile(m))
            t = v.get("timeline") or {}
            s = t.get("steps") or {}
            out.setdefault(parts[-3][len("runs_"):], []).append((parts[-2], {
                "timeline_verdict": t.get("verdict"), "gpu_busy_share": round(t.get("gpu_busy_share") or 0.0, 3),
                "headline_cause": t.get("headline_cause"), "steps": s.get("name"),
                "median_step_ms": round((s.get("median_iteration_ns") or 0.0) / 1e6, 2),
                "tc_verdict": (v.get("tensor_cores") or {}).get("verdict")}))
    return {p: [v for _, v in sorted(runs, key=lambda x: x[0])] for p, runs in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("devices", nargs="+", type=Path, help="folders a device call brought back (summary.json, overhead.tgz)")
    ap.add_argument("--call", required=True, help="the call's label in rounds.json")
    ap.add_argument("--change", required=True, help="what code the call measured, in words")
    ap.add_argument("--rounds", default="first_run_2026-11-29/rounds.json.gz")
    ap.add_argument("--rounds-only", action="store_true", help="leave summary.json's rows as they are")
    a = ap.parse_args()
    rounds_path, summary_path = REPORTS / a.rounds, REPORTS / "summary.json.gz"
    rounds = read_rows(rounds_path)
    summary = read_rows(summary_path)
    for dev in a.devices:
        rows = json.loads((dev / "summary.json").read_text())
        runs = run_verdicts(dev / "overhead.tgz")
        for r in rows:
            prog = r["program"]
            if prog not in runs or any(x.get("program") == prog and str(x.get("call")) == a.call for x in rounds):
                continue  # not measured in this call (a row carried over from an earlier one), or folded already
            each = runs[prog]
            rounds.append({"call": a.call, "change": a.change, **{k: r.get(k) for k in (
                "program", "command", "gpu", "plain_s", "default_s", "ratio", "warm_s", "ratio_warm", "pair_ratios")},
                "verdicts_each_round": {"first": each[0::2], "cached": each[1::2]}})
            if not a.rounds_only:
                summary = [x for x in summary if x["program"] != prog] + [r]
            print(f"{prog}: first {r['ratio']}x, cached {r['ratio_warm']}x; verdicts first "
                  f"{[x['timeline_verdict'] for x in each[0::2]]}, cached {[x['timeline_verdict'] for x in each[1::2]]}")
    write_rows(rounds_path, rounds)
    write_rows(summary_path, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
