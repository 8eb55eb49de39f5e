#!/usr/bin/env python3
"""GPU probe (issue 10): where the timeline pass's time goes after the program ends, seen from the parent.

Per round, alternating: a plain run, then the launcher under torch.profiler with ``--record-shapes`` (what a
first default run starts) in each variant below. Every output line of the child is time-stamped from the
moment it was started, so the log shows the launcher's own split (program / profiler stop / trace written)
*and* how long the process took to exit after it wrote the trace (interpreter shutdown, CUDA and CUPTI
teardown), which the default run waits for before it reads the trace.

Variants (``--variants``): ``shapes`` (as the default run), ``shapes-noteardown`` (``TEARDOWN_CUPTI=0``:
Kineto leaves CUPTI up when the profiler stops).

    python3 benchmarks/probes/gpu_launcher_tail_probe.py --out OUT [--rounds 2] [--keep-trace] wrappers/resnet_amp.py

Writes OUT/launcher_tail.txt (one line per run and the stamped lines of interest) and, with --keep-trace,
OUT/<program>_shapes_trace.json.gz (the first round's trace, for timing the analysis off the GPU machine).
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

INTEREST = ("nsighttc.runtime.launch", "images/s", "ms/step", "Traceback", "Error")


def run(argv: list[str], env: dict, log: list[str]) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    wrote = None
    lines = []

    def pump():
        nonlocal wrote
        for line in proc.stdout:
            t = time.monotonic() - t0
            lines.append(f"{t:8.3f} {line.rstrip()}")
            if "nsighttc.launch: wrote" in line:
                wrote = t
    th = threading.Thread(target=pump)
    th.start()
    proc.wait()
    th.join()
    total = time.monotonic() - t0
    log += [ln for ln in lines if any(k in ln for k in INTEREST)]
    return {"total": total, "wrote": wrote, "rc": proc.returncode}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="shapes,shapes-noteardown")
    ap.add_argument("--keep-trace", action="store_true")
    ap.add_argument("program")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.out / "tail_work"
    work.mkdir(exist_ok=True)
    name = Path(a.program).stem
    report = []
    env0 = dict(os.environ, PYTHONUNBUFFERED="1")
    for r in range(1, a.rounds + 1):
        for variant in ["plain"] + a.variants.split(","):
            env = dict(env0)
            trace = work / f"{name}.{variant}.json"
            if variant == "plain":
                argv = [sys.executable, a.program]
            else:
                argv = [sys.executable, "-m", "nsighttc.runtime.launch", "--torch-trace", str(trace), "--record-shapes",
                        "--", a.program]
            if variant.endswith("noteardown"):
                env["TEARDOWN_CUPTI"] = "0"
            log: list[str] = []
            res = run(argv, env, log)
            tail = f", exit {res['total'] - res['wrote']:.2f} s after the trace was written" if res["wrote"] else ""
            report.append(f"{name} round {r} {variant}: {res['total']:.2f} s (rc {res['rc']}){tail}")
            report += ["    " + ln for ln in log]
            print(report[-1 - len(log)], flush=True)
            if trace.exists():
                if a.keep_trace and r == 1 and variant == "shapes":
                    with open(trace, "rb") as src, gzip.open(a.out / f"{name}_shapes_trace.json.gz", "wb", 6) as dst:
                        shutil.copyfileobj(src, dst)
                trace.unlink()
    (a.out / "launcher_tail.txt").write_text("\n".join(report) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
