#!/usr/bin/env python3
"""GPU probe (issue 29): how long after it is started does the program's first line run, and its ``import torch``
end, under each thing nsighttc puts in front of it; a second default run's fixed cost before the program.

The program is a stand-in that prints the wall clock at its first line (``T0``) and after ``import torch`` and
CUDA's start (``T1``). Per round, alternating:
  plain      python3 PROG
  launcher   python3 -m nsighttc.runtime.launch as a second default run starts it (window, ranges only, recorded
             from the window's start)
  profile    python3 -m nsighttc profile --fast --out TMP PROG (the whole default run's start, then its timeline)

    python3 benchmarks/probes/gpu_startup_chain_probe.py --out OUT [--rounds 5]

Writes OUT/startup_chain.txt: per run, seconds from the spawn to T0 and to T1, and to the process' end; medians;
then ``-X importtime`` of the launcher (the top 15 cumulative).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = '''import time
print("T0", time.time(), flush=True)
import torch
torch.zeros(1, device="cuda" if torch.cuda.is_available() else "cpu")
print("T1", time.time(), flush=True)
'''


def run(argv: list[str], cwd: Path) -> dict:
    t0 = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, stdin=subprocess.DEVNULL)
    end = time.time() - t0
    marks = {}
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("T0", "T1"):
            marks[words[0]] = float(words[1]) - t0
    return {"rc": proc.returncode, "T0": marks.get("T0"), "T1": marks.get("T1"), "end": end}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        w = Path(work)
        prog = w / "first_line.py"
        prog.write_text(PROGRAM)
        kinds = {
            "plain": [sys.executable, str(prog)],
            "launcher": [sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "script", "--window",
                         "--window-warmup", "auto", "--window-steps", "auto", "--window-end", "stop", "--record-from",
                         "window", "--torch-trace", str(w / "t.json"), "--no-operators", "--", str(prog)],
            "profile": [sys.executable, "-m", "nsighttc", "profile", "--fast", "--out", str(w / "runs"), str(prog)],
        }
        res: dict[str, list[dict]] = {k: [] for k in kinds}
        for r in range(1, a.rounds + 1):
            for kind, argv in kinds.items():
                x = run(argv, root)
                res[kind].append(x)
                fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
                lines.append(f"round {r} {kind}: T0 {fmt(x['T0'])} s, T1 {fmt(x['T1'])} s, end {x['end']:.3f} s "
                             f"(rc {x['rc']})")
                print(lines[-1], flush=True)
        for kind, xs in res.items():
            med = {m: statistics.median(v for v in (x[m] for x in xs) if v is not None) if any(x[m] is not None for x in xs)
                   else float("nan") for m in ("T0", "T1", "end")}
            lines.append(f"median {kind}: T0 {med['T0']:.3f} s, T1 {med['T1']:.3f} s, end {med['end']:.3f} s")
            print(lines[-1], flush=True)
        imp = subprocess.run([sys.executable, "-X", "importtime", *kinds["launcher"][1:]], capture_output=True,
                             text=True, cwd=root)
        rows = [ln for ln in imp.stderr.splitlines() if ln.startswith("import time:") and "|" in ln]
        rows.sort(key=lambda ln: int(ln.split("|")[1].strip()) if ln.split("|")[1].strip().isdigit() else 0)
        lines.append("--- -X importtime, the launcher (top 15 cumulative, us)")
        lines += rows[-15:]
    (a.out / "startup_chain.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
