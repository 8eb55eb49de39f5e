#!/usr/bin/env python3
"""Where each rank's wall time went, from ``py-spy record --subprocesses --threads --idle --format raw`` of a whole
run (``gpu_torchrun_cost_probe.py --spy``): the rank's main thread only, every sample keyed by the program's line it
was under (``prog:FUNC:LINE>FUNC:LINE``: the program's two outermost function frames in ``--program``), with what
nsighttc or torch.profiler ran inside it (``+nsighttc:FUNC``, ``+profiler:FUNC``), or, outside the program, the
launcher's own function (``launch:FUNC``). Issue 50: a cached DDP run's rank lived 0.65 s longer than a plain one (call 15), and the stages the
launcher prints did not say where.

    python3 benchmarks/probes/spy_phases.py --program ddp_train.py --rate 100 RAW [RAW ...] [--diff A B]

Per file: each rank's seconds per key (largest first). ``--diff A B``: the keys' median seconds over the ranks of
the files whose names contain A, against those containing B.
"""
from __future__ import annotations

import argparse
import gzip
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

PROCESS = re.compile(r'process (\d+):"')
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?):(?P<line>\d+)\)$")


def _frames(stack: str) -> tuple[list[int], int | None, list[tuple[str, str, int]]]:
    """The stack's process ids (outermost first), its thread id and its frames (function, file, line)."""
    pids, rest = [], stack
    while True:  # process frames may hold ';' in their command lines: strip them by their own pattern
        m = PROCESS.match(rest)
        if not m:
            break
        end = rest.find('";', m.end())
        if end < 0:
            return pids, None, []
        pids.append(int(m.group(1)))
        rest = rest[end + 2:]
    parts = rest.split(";")
    tid = None
    if parts and parts[0].startswith("thread ("):
        tid = int(parts[0][len("thread ("):].split(")")[0], 0)  # "thread (TID)" or "thread (TID): NAME"
        parts = parts[1:]
    frames = []
    for p in parts:
        m = FRAME.match(p)
        if m:
            frames.append((m.group("func"), m.group("file"), int(m.group("line"))))
    return pids, tid, frames


def key_of(frames: list[tuple[str, str, int]], program: str) -> str | None:
    """The sample's key, or None where it is not a rank's (no program frame and no launcher frame)."""
    at = next((i for i, f in enumerate(frames) if f[1].endswith(program)), None)
    if at is None:
        launch = [f for f in frames if f[1].endswith("nsighttc/runtime/launch.py")]
        if not launch:
            return None
        deeper = [f for f in frames[frames.index(launch[-1]) + 1:]]
        extra = ""
        if any("profiler" in f[1] for f in deeper):
            extra = "+profiler:" + next(f[0] for f in deeper if "profiler" in f[1])
        elif any("/torch/__init__.py" in f[1] for f in deeper):
            extra = "+import torch"
        elif deeper:
            extra = "+" + Path(deeper[0][1]).name + ":" + deeper[0][0]
        return f"launch:{launch[-1][0]}{extra}"
    own = [(i, f) for i, f in enumerate(frames) if f[1].endswith(program) and f[0] != "<module>"][:2]
    if not own:
        own = [(at, frames[at])]
    key = "prog:" + ">".join(f"{f[0]}:{f[2]}" for _, f in own)
    inner = frames[own[-1][0] + 1:]
    nsi = next((f for f in inner if "/nsighttc/" in f[1]), None)
    prof = next((f for f in inner if "/torch/profiler/" in f[1] or "autograd/profiler" in f[1]), None)
    if prof is not None:
        key += f"+profiler:{prof[0]}"
    elif nsi is not None:
        key += f"+nsighttc:{Path(nsi[1]).stem}.{nsi[0]}"
    return key


def read(path: Path, program: str, rate: float) -> dict[int, Counter]:
    """Per rank process (its pid): seconds per key, main thread only."""
    opener = gzip.open if path.suffix == ".gz" else open
    per: dict[int, Counter] = defaultdict(Counter)
    with opener(path, "rt", errors="replace") as fh:
        buf = ""
        for line in fh:  # a command line may hold a newline: a stack ends with " COUNT"
            buf += line
            m = re.search(r" (\d+)\n?$", buf)
            if not m:
                continue
            stack, count = buf[:m.start()], int(m.group(1))
            buf = ""
            pids, tid, frames = _frames(stack)
            if not pids or tid != pids[-1]:  # (the main thread's id is its process id)
                continue
            key = key_of(frames, program)
            if key is not None:
                per[pids[-1]][key] += count / rate
    return {pid: c for pid, c in per.items() if sum(c.values()) > 1.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("raw", nargs="+", type=Path)
    ap.add_argument("--program", required=True, help="the program's file name (its frames key the samples)")
    ap.add_argument("--rate", type=float, required=True, help="py-spy's samples per second")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--diff", nargs=2, metavar=("A", "B"))
    a = ap.parse_args()
    tables = {p: read(p, a.program, a.rate) for p in a.raw}
    for p, ranks in tables.items():
        print(f"== {p.name}")
        for pid, c in ranks.items():
            print(f"  rank pid {pid}: {sum(c.values()):.2f} s sampled")
            for k, s in c.most_common(a.top):
                print(f"    {s:7.2f}  {k}")
    if a.diff:
        sides = []
        for tag in a.diff:
            ranks = [c for p, t in tables.items() if tag in p.name for c in t.values()]
            keys = set().union(*ranks) if ranks else set()
            sides.append({k: statistics.median(c.get(k, 0.0) for c in ranks) for k in keys})
        keys = sorted(set(sides[0]) | set(sides[1]), key=lambda k: -abs(sides[0].get(k, 0) - sides[1].get(k, 0)))
        print(f"\n== median seconds per rank: {a.diff[0]} against {a.diff[1]} (largest differences first)")
        print(f"  total {sum(sides[0].values()):.2f} against {sum(sides[1].values()):.2f}")
        for k in keys[:a.top * 2]:
            a_s, b_s = sides[0].get(k, 0), sides[1].get(k, 0)
            print(f"  {a_s:7.2f} {b_s:7.2f} {a_s - b_s:+7.2f}  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
