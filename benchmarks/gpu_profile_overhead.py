#!/usr/bin/env python3
"""GPU check for issue 4: `nsighttc profile wrappers/vgg16.py` vs the plain run, and every engine.

Runs on the GPU machine (see README "GPU checks"):
  plain   python3 wrappers/vgg16.py ARGS
  auto    python3 -m nsighttc profile wrappers/vgg16.py ARGS            (budget: <= 1.5x plain)
  torch   ... profile --engine torch  (PATH without any Nsight tool)
  nsys    ... profile --engine nsys
  ncu     ... profile --engine ncu
and writes OUT/profile_overhead.json + .md with wall times, ratios, each run's headline verdicts and
evidence, the GPU, tool versions and the exact commands, plus the run directories' small files.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict, log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    return time.perf_counter() - t0, rc


def latest_run(runs: Path) -> Path | None:
    dirs = sorted((d for d in runs.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime) if runs.exists() else []
    return dirs[-1] if dirs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--engines", default="auto,auto_timeline,torch,nsys,ncu",
                    help="auto_timeline = auto --timeline")
    ap.add_argument("--repeat", type=int, default=1, help="alternate plain and each engine this many times; medians reported")
    ap.add_argument("wrapper_args", nargs="*", default=[])
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = dict(os.environ)
    wrapper = ["wrappers/vgg16.py", *a.wrapper_args]
    results = {"gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                                      "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(),
               "python": sys.version.split()[0], "runs": []}
    for tool in ("ncu", "nsys"):
        exe = shutil.which(tool)
        results[f"{tool}_version"] = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1] if exe else None
    import torch
    results["torch"] = torch.__version__
    plain_cmd = [py, *wrapper]
    import statistics
    samples: dict[str, list[float]] = {"plain": []}
    for rep in range(a.repeat):
        secs, rc = timed(plain_cmd, env, a.out / "plain.log")
        samples["plain"].append(secs)
        if rep < a.repeat - 1:  # all but the last round only time; the last one also collects verdicts
            for eng in a.engines.split(","):
                extra = {"auto": [], "auto_timeline": ["--timeline"]}.get(eng, ["--engine", eng])
                cmd = [py, "-m", "nsighttc", "profile", "--out", str(a.out / "runs_timing"), *extra, "--format", "json", *wrapper]
                samples.setdefault(eng, []).append(timed(cmd, env, a.out / f"{eng}.timing.log")[0])
    plain = statistics.median(samples["plain"])
    results["runs"].append({"name": "plain", "command": " ".join(plain_cmd), "seconds": round(plain, 2), "rc": rc,
                            "samples": [round(x, 2) for x in samples["plain"]],
                            "stdout": (a.out / "plain.log").read_text().strip().splitlines()[-1:]})
    for eng in a.engines.split(","):
        e_env = dict(env)
        if eng == "torch":  # no Nsight tool on PATH at all
            e_env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                            if not (Path(p) / "ncu").exists() and not (Path(p) / "nsys").exists())
        runs = a.out / f"runs_{eng}"
        extra = {"auto": [], "auto_timeline": ["--timeline"]}.get(eng, ["--engine", eng])
        cmd = [py, "-m", "nsighttc", "profile", "--out", str(runs), *extra, "--format", "json", *wrapper]
        secs, rc = timed(cmd, e_env, a.out / f"{eng}.log")
        samples.setdefault(eng, []).append(secs)
        secs = statistics.median(samples[eng])
        run = latest_run(runs)
        entry = {"name": eng, "command": " ".join(cmd[1:]).replace(str(runs), "RUNS"), "seconds": round(secs, 2),
                 "samples": [round(x, 2) for x in samples[eng]],
                 "ratio_to_plain": round(secs / plain, 2), "rc": rc, "run_dir": run.name if run else None}
        if run and (run / "verdict.json").exists():
            doc = json.loads((run / "verdict.json").read_text())
            tc, tl = doc["tensor_cores"], doc.get("timeline") or {}
            entry.update({"tc_verdict": tc["verdict"], "tc_evidence": tc["evidence"],
                          "tc_time_share": round(tc["tc_time_share"], 4), "by_dtype": tc["by_dtype"],
                          "timeline_verdict": tl.get("verdict"), "gpu_busy_share": tl.get("gpu_busy_share"),
                          "engines": doc.get("provenance", {}).get("engines"),
                          "pass_seconds": doc.get("provenance", {}).get("seconds"),
                          "profiled_kernels": doc.get("provenance", {}).get("profiled_kernels")})
        results["runs"].append(entry)
    (a.out / "profile_overhead.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"# nsighttc profile overhead on {results['gpu']}", "",
             f"Medians of {a.repeat} alternating rounds (plain, then each engine); seconds include start-up, "
             "export and analysis. Samples are in profile_overhead.json.", "",
             f"torch {results['torch']}, ncu `{results['ncu_version']}`, nsys `{results['nsys_version']}`, Python {results['python']}", "",
             "| run | seconds | x plain | Tensor Cores | evidence | TC share | timeline | GPU busy | command |",
             "|---|---:|---:|---|---|---:|---|---:|---|"]
    for r in results["runs"]:
        lines.append(f"| {r['name']} | {r['seconds']} | {r.get('ratio_to_plain', 1.0)} | {r.get('tc_verdict', '')} | "
                     f"{r.get('tc_evidence', '')} | {r.get('tc_time_share', '')} | {r.get('timeline_verdict', '')} | "
                     f"{'' if r.get('gpu_busy_share') is None else round(r['gpu_busy_share'], 3)} | `{r['command']}` |")
    (a.out / "profile_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
