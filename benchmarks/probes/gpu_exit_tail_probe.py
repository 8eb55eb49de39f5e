#!/usr/bin/env python3
"""GPU probe (issue 29): what a second default run's timeline pass costs around the program's own time, phase by
phase, for programs whose whole run is about one window (multi_phase: second runs 0.96-1.16x in call30-35).

Per round, alternating: a plain run, then the launcher exactly as a second default run starts it (``--window
--record-from window --no-operators``, ranges only from the first window's start) through
``benchmarks/probes/exit_variant.py`` in each variant (``asis``: as shipped; ``free``: the profiler's recording freed
and timed before the shutdown; ``leak``: never freed; ``osexit``: no shutdown at all, a lower bound). Every output
line is stamped with the seconds since the process started, so the log shows: the program's own phase lines, the
launcher's split (profiler start / stop / trace written) and how long the process took to end after its last line
(plain) or after the trace was written (launcher).

    python3 benchmarks/probes/gpu_exit_tail_probe.py --out OUT [--rounds 3] [--variants asis,free,leak,osexit] \
        wrappers/multi_phase.py ["wrappers/vgg16.py --images 200" ...]   (a program with its arguments: one word)

Writes OUT/exit_tail.txt (a line per run, then its stamped lines of interest) and OUT/exit_tail.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTEREST = ("nsighttc.launch: wrote", "nsighttc.launch: program exit", "exit_variant", "phase ", "images/s",
            "Traceback", "Error")


def run(argv: list[str], env: dict) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            stdin=subprocess.DEVNULL, cwd=ROOT)
    lines: list[tuple[float, str]] = []

    def pump():
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip()))
    th = threading.Thread(target=pump)
    th.start()
    proc.wait()
    th.join()
    total = time.monotonic() - t0
    program = [t for t, ln in lines if not ln.startswith(("nsighttc.", "exit_variant", "/")) and ln.strip()
               and "Warning" not in ln and not ln.startswith(" ")]
    wrote = next((t for t, ln in lines if "nsighttc.launch: wrote" in ln), None)
    return {"total": round(total, 3), "rc": proc.returncode,
            "last_program_line": round(program[-1], 3) if program else None,
            "trace_written": None if wrote is None else round(wrote, 3),
            "lines": [f"{t:8.3f} {ln}" for t, ln in lines if any(k in ln for k in INTEREST)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="asis,free,leak,osexit")
    ap.add_argument("programs", nargs="+")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    results: dict = {}
    report: list[str] = []
    with tempfile.TemporaryDirectory() as work:
        for prog in a.programs:
            prog_argv = shlex.split(prog)  # a program with its arguments: "wrappers/multi_phase.py --steps 40"
            name = Path(prog_argv[0]).stem
            for r in range(1, a.rounds + 1):
                for variant in ["plain"] + a.variants.split(","):
                    trace = Path(work) / f"{name}.{variant}.json"
                    if variant == "plain":
                        argv = [sys.executable, *prog_argv]
                    else:
                        argv = [sys.executable, str(ROOT / "benchmarks/probes/exit_variant.py"), variant,
                                "--annotate", "script", "--window", "--window-warmup", "auto", "--window-steps", "auto",
                                "--window-end", "stop", "--record-from", "window", "--torch-trace", str(trace),
                                "--no-operators", "--", *prog_argv]
                    res = run(argv, env)
                    end_from = res["trace_written"] if variant != "plain" else res["last_program_line"]
                    res["tail"] = None if end_from is None else round(res["total"] - end_from, 3)
                    results.setdefault(name, {}).setdefault(variant, []).append(res)
                    head = f"{name} round {r} {variant}: {res['total']:.2f} s (rc {res['rc']}), ended {res['tail']} s " \
                           f"after its {'last line' if variant == 'plain' else 'trace was written'}"
                    print(head, flush=True)
                    report += [head] + ["    " + ln for ln in res["lines"]]
                    trace.unlink(missing_ok=True)
            for variant, runs in results[name].items():
                tails = [x["tail"] for x in runs if x["tail"] is not None]
                line = (f"{name} {variant}: total median {statistics.median(x['total'] for x in runs):.2f} s, "
                        f"tail median {statistics.median(tails) if tails else float('nan'):.3f} s")
                print(line, flush=True)
                report.append(line)
    (a.out / "exit_tail.txt").write_text("\n".join(report) + "\n")
    (a.out / "exit_tail.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
