#!/usr/bin/env python3
"""GPU probe for issue 10: how Nsight Compute names, filters and stops, measured before relying on it.

Answers, on the GPU machine (after ``source .device-carry/setup.sh``):
1. which name the ``==PROF== Profiling "..."`` line prints with ``--print-kernel-base demangled``;
2. whether ``--kernel-name-base demangled --kernel-name regex:...`` searches or fully matches
   (a search pattern ``sgemm|gemm`` vs an anchored one);
3. whether SIGINT to the *program* (not ncu) after the wanted kernels were profiled ends the run with a
   complete report, and ncu's exit code then;
4. the wall time of such an early-stopped pass vs the whole pass.

    python3 benchmarks/probes/gpu_ncu_stop_probe.py OUTDIR
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

PROGRAM = r'''
import os, sys, time, torch
open(sys.argv[1], "w").write(str(os.getpid()))
a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
x = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.float16)
w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
try:
    for i in range(400):
        b = a @ a
        y = torch.nn.functional.conv2d(x, w, padding=1)
        z = (b * 2).relu()
        torch.cuda.synchronize()
        time.sleep(0.02)
except KeyboardInterrupt:
    print("program: KeyboardInterrupt at step", i, flush=True)
    sys.exit(130)
print("program: finished", flush=True)
'''


def run(ncu: str, out: Path, name: str, extra: list[str], stop_after: int | None) -> dict:
    prog = out / "probe_prog.py"
    prog.write_text(PROGRAM)
    pidf = out / f"{name}.pid"
    argv = [ncu, "--nvtx", "--clock-control", "none", "--cache-control", "none", "--target-processes", "all",
            "--metrics", "gpu__time_duration.sum,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum",
            "--filter-mode", "per-launch-config", "--launch-count", "1", "-f", "-o", str(out / name), *extra,
            sys.executable, str(prog), str(pidf)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, profiled, stopped_at = [], [], None
    for line in proc.stdout:
        lines.append(line.rstrip())
        m = re.search(r'==PROF== Profiling "([^"]+)"', line)
        if m:
            profiled.append(m.group(1))
            if stop_after and len(profiled) >= stop_after and stopped_at is None:
                stopped_at = time.perf_counter() - t0
                os.kill(int(pidf.read_text()), signal.SIGINT)
    rc = proc.wait()
    wall = time.perf_counter() - t0
    rep = out / f"{name}.ncu-rep"
    res = {"name": name, "argv": argv, "rc": rc, "wall_s": round(wall, 2), "stopped_at_s": stopped_at,
           "profiled": profiled, "report_bytes": rep.stat().st_size if rep.exists() else None,
           "tail": lines[-8:]}
    if rep.exists():
        r = subprocess.run([ncu, "-i", str(rep), "--csv", "--page", "raw", "--print-units", "base",
                            "--metrics", "gpu__time_duration.sum"], capture_output=True, text=True)
        res["report_rows"] = max(0, len(r.stdout.strip().splitlines()) - 2)
        res["report_names"] = [ln.split('","')[4] if ln.count('","') > 4 else ln[:120]
                               for ln in r.stdout.strip().splitlines()[2:]][:10]
        rep.unlink()
    return res


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    ncu = "ncu"
    results = []
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(out / "plain.pid")], capture_output=True, text=True)
    results.append({"name": "plain", "wall_s": round(time.perf_counter() - t0, 2), "rc": r.returncode})
    results.append(run(ncu, out, "all_default_print", [], None))
    results.append(run(ncu, out, "all_demangled_print", ["--print-kernel-base", "demangled"], None))
    results.append(run(ncu, out, "search_gemm", ["--kernel-name-base", "demangled", "--kernel-name", "regex:gemm|nvjet|xmma",
                                                 "--print-kernel-base", "demangled"], None))
    results.append(run(ncu, out, "anchored_gemm", ["--kernel-name-base", "demangled", "--kernel-name", "regex:^gemm$",
                                                   "--print-kernel-base", "demangled"], None))
    results.append(run(ncu, out, "function_base", ["--kernel-name-base", "function", "--kernel-name",
                                                   "regex:elementwise", "--print-kernel-base", "function"], None))
    results.append(run(ncu, out, "stop_after_2", ["--print-kernel-base", "demangled"], 2))
    (out / "ncu_stop_probe.json").write_text(json.dumps(results, indent=2) + "\n")
    for r in results:
        print(json.dumps({k: v for k, v in r.items() if k != "argv"})[:1500])
    return 0


if __name__ == "__main__":
    sys.exit(main())
