#!/usr/bin/env python3
"""Which verdict a distributed job's runs got, against the verdict of the rank the others waited for.

Reads each run's ``report.md`` (as the runs brought back from the GPU machine hold it: the ``.tgz`` files under
``reports/profile_overhead/torchrun_cost/``) and prints, per run: the headline's bound verdict, the rank it was
judged on, and the rank table's row of the rank whose own work per step (step less its waits in communication) is
longest, with its first cause. Made for issue 50's "one verdict per program": the same even DDP job read
"communication-bound" whenever the headline's rank was the one waiting (``analysis.ranks.shown_rank``).

    python benchmarks/probes/headline_by_rank.py \
        reports/profile_overhead/torchrun_cost/2026-11-27/call12_rounds_runs.tgz
    python benchmarks/probes/headline_by_rank.py RUN_DIR_OR_TGZ ...
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import tarfile
from pathlib import Path

UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
RANK_ROW = re.compile(r"^\| (\d+) \| ")


def _ms(cell: str) -> float:
    value, unit = cell.strip().split()
    return float(value.replace(",", "")) * UNITS[unit]


def reports(paths: list[str]):
    """(name, report text) of every report.md under the given run directories or inside the given .tgz files."""
    for p in map(Path, paths):
        if p.suffix in (".tgz", ".gz"):
            with tarfile.open(p) as tar:
                for m in sorted(tar.getmembers(), key=lambda m: m.name):
                    if m.name.endswith("report.md"):
                        yield m.name, tar.extractfile(m).read().decode()
        else:
            for f in sorted(p.rglob("report.md")) if p.is_dir() else [p]:
                yield str(f), f.read_text()


def read(text: str) -> dict | None:
    """The headline's bound verdict and the rank table's rows (rank, own work per step in ms, first cause)."""
    lines = text.splitlines()
    bound = next((x for x in lines if x.startswith("**GPU busy")), "")
    start = next((i for i, x in enumerate(lines) if x == "## Ranks"), None)
    if start is None:
        return None
    rows = []
    for x in lines[start + 1:]:
        if x.startswith("## "):
            break
        if RANK_ROW.match(x):
            cells = [c.strip() for c in x.strip("|").split("|")]
            rows.append({"rank": int(cells[0]), "own_ms": _ms(cells[2]), "cause": cells[-1]})
    shown = re.search(r"the timeline sections below are rank (\d+)'s", text)
    return {"bound": bound.split(" — ", 1)[-1].split(" (", 1)[0].strip("*"), "rows": rows,
            "shown": int(shown.group(1)) if shown else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="run directories, report.md files or .tgz files of runs")
    args = ap.parse_args(argv)
    tally = collections.Counter()
    for name, text in reports(args.paths):
        r = read(text)
        if not r or len(r["rows"]) < 2:
            continue
        crit = max(r["rows"], key=lambda x: (x["own_ms"], -x["rank"]))
        kind = crit["cause"].split(" (")[0].split(":")[0][:40]
        tally[(Path(name).parent.parent.name, "headline", r["bound"][:40])] += 1
        tally[(Path(name).parent.parent.name, "rank the others wait for", kind)] += 1
        own = ", ".join(f"{x['rank']}: {x['own_ms']:.1f}" for x in r["rows"])
        print(f"{name}\n  headline (rank {r['shown']}): {r['bound'][:70]}\n"
              f"  own work per step (ms) {own}; rank {crit['rank']}'s first cause: {crit['cause'][:70]}")
    print("\ncounts:")
    for (job, what, verdict), n in sorted(tally.items()):
        print(f"  {job:28} {what:26} {n:3}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
