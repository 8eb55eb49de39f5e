#!/usr/bin/env python3
"""Keep, as test fixtures, the newest timeline trace of a program recorded with its operators (a first default run,
``--record-shapes`` for the replay) and the newest recorded with the ranges only (a second run, ``--no-operators``),
from a ``benchmarks/gpu/gpu_profile_overhead.py`` runs folder; each made smaller by ``strip_fixture.py``.

    python3 benchmarks/keep_traces.py OUT/runs_dataloader FIXDIR dataloader

Writes FIXDIR/<name>_operators_torch.json.gz and FIXDIR/<name>_ranges_torch.json.gz, and prints the launcher's
command of each.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(runs: str, out: str, name: str) -> int:
    Path(out).mkdir(parents=True, exist_ok=True)
    dirs = sorted((d for d in Path(runs).iterdir() if (d / "run.json").exists() and (d / "torch_trace.json").exists()),
                  key=lambda d: d.stat().st_mtime, reverse=True)
    for kind in ("operators", "ranges"):
        for d in dirs:
            cmd = " ".join(json.loads((d / "run.json").read_text()).get("commands", [""])[0:1])
            if ("--no-operators" in cmd) == (kind == "ranges"):
                dst = Path(out) / f"{name}_{kind}_torch.json.gz"
                subprocess.run([sys.executable, str(HERE / "strip_fixture.py"), str(d / "torch_trace.json"), str(dst)],
                               check=True)
                print(f"{dst.name}: {d.name}: {cmd}")
                break
        else:
            print(f"{name}: no {kind} trace in {runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
