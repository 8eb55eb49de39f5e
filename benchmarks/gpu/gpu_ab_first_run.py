#!/usr/bin/env python3
"""Issue 10: a first default run of this code against an older checkout's, on the same machine in the same
minutes (the lent H100's plain runs moved 11.6-23.5 s between calls, so ratios from different calls do not
compare). Each round runs, in rotating order, the plain program and a first `nsighttc profile` (empty evidence
cache) of each checkout; the summary has every wall time, the medians' ratios, and from each first run's
run.json when the trace was complete, when the replay's first call was listed, when the replay ended and
how long the trace's parse was waited for.

    git worktree add /tmp/old REV   # or git archive REV | tar -x -C DIR
    python3 benchmarks/gpu/gpu_ab_first_run.py --old DIR --out OUT [--rounds 3] [resnet_amp]

``--cached``: the same for second runs (issue 29's cached run): each checkout's evidence cache is filled by one
first run before the rounds (its time is kept as ``fill_s``), and every round's profile run reads it. Before the
rounds, one plain run that is not timed brings the program's files into the page cache (the first run of a
call was up to 1.8x slower than the next: VGG16 17.9 s against 10.0 s in reports/window/call8).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {"resnet_amp": ["wrappers/resnet_amp.py"], "vgg16": ["wrappers/vgg16.py"],
            "multi_phase": ["wrappers/multi_phase.py"], "trainer": ["wrappers/trainer_finetune.py"],
            "lightning": ["wrappers/lightning_module.py"],
            "dataloader": ["wrappers/dataloader_bound.py", "--no-annotate"]}


def run(argv: list[str], cwd: Path, env: dict, log: Path) -> float:
    t0 = time.perf_counter()
    with log.open("w") as fh:
        rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd).returncode
    if rc != 0:
        print(f"{' '.join(argv)}: exit {rc} (log {log})", file=sys.stderr)
    return round(time.perf_counter() - t0, 2)


def run_facts(runs: Path) -> dict:
    """From the newest run.json: trace complete, replay's first call and end, parse wait (seconds since start)."""
    dirs = [d for d in runs.iterdir() if (d / "run.json").exists()] if runs.exists() else []
    if not dirs:
        return {}
    newest = max(dirs, key=lambda d: d.stat().st_mtime)
    doc = json.loads((newest / "run.json").read_text())
    ev, passes = doc.get("evidence", {}), {p["mode"]: p for p in doc.get("passes", [])}
    return {"trace_written_s": passes.get("timeline", {}).get("trace_written_s"),
            "replay_end_s": passes.get("replay", {}).get("seconds"),
            "early_plan": ev.get("early_plan"), "trace_parse": ev.get("trace_parse"),
            "replay": {k: ev.get("replay", {}).get(k) for k in ("calls", "measured", "profiled", "seconds", "read_s")},
            "phase_seconds": doc.get("phase_seconds"),
            "timeline_s": passes.get("timeline", {}).get("seconds"),
            "recorded_from": (passes.get("timeline", {}).get("window") or {}).get("recorded_from"),
            "launcher": next((line.split("(", 1)[-1].rstrip(")\n") for line in _lines(newest / "torch.stderr.log")
                              if line.startswith("nsighttc.launch: wrote ")), None)}


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="the older checkout (its own nsighttc and wrappers)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cached", action="store_true",
                    help="time second runs: each checkout's evidence cache is filled by one first run before the rounds")
    ap.add_argument("program", nargs="?", default="resnet_amp", choices=sorted(PROGRAMS))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    prog = PROGRAMS[a.program]
    trees = {"new": ROOT, "old": a.old.resolve()}
    from gpu_profile_overhead import byte_compile  # both checkouts compiled, as installed (its docstring: why)
    byte_compile(*(t / "nsighttc" for t in trees.values()))
    times: dict[str, list[float]] = {"plain": [], "new": [], "old": []}
    facts: dict[str, list[dict]] = {"new": [], "old": []}
    order = ["plain", "new", "old"]
    stem = f"{a.program}{'_cached' if a.cached else ''}"

    def env_of(tree: Path) -> dict:
        return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *[p for p in os.environ.get(
            "PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() not in (ROOT, trees["old"])]])}

    def profile_argv(runs: Path) -> list[str]:
        return [sys.executable, "-m", "nsighttc", "profile", "--out", str(runs), *prog]

    prime_s = run([sys.executable, *prog], ROOT, env_of(ROOT), a.out / f"{stem}_prime.log")  # page cache
    caches, fill_s = {}, {}
    if a.cached:
        for kind in ("new", "old"):
            caches[kind] = Path(tempfile.mkdtemp(prefix=f"nsighttc-ab-{kind}-"))
            fill_s[kind] = run(profile_argv(a.out / f"runs_{stem}_fill_{kind}"), trees[kind],
                               {**env_of(trees[kind]), "NSIGHTTC_CACHE_DIR": str(caches[kind])},
                               a.out / f"{stem}_fill_{kind}.log")
    for r in range(a.rounds):
        for kind in order[r % 3:] + order[:r % 3]:
            tree = ROOT if kind == "plain" else trees[kind]
            env = env_of(tree)
            log = a.out / f"{stem}_{kind}_{r + 1}.log"
            if kind == "plain":
                times[kind].append(run([sys.executable, *prog], tree, env, log))
                continue
            cache = caches.get(kind) or Path(tempfile.mkdtemp(prefix="nsighttc-ab-"))
            env["NSIGHTTC_CACHE_DIR"] = str(cache)
            runs = a.out / f"runs_{stem}_{kind}"
            times[kind].append(run(profile_argv(runs), tree, env, log))
            facts[kind].append(run_facts(runs))
            if not a.cached:
                shutil.rmtree(cache, ignore_errors=True)
        print(f"{stem} round {r + 1}: " + ", ".join(f"{k} {v[-1]} s" for k, v in times.items()), flush=True)
    plain = statistics.median(times["plain"])
    summary = {"program": a.program, "runs": "cached (second runs)" if a.cached else "first (empty cache)",
               "command": f"nsighttc profile {' '.join(prog)}", "plain_command": f"python3 {' '.join(prog)}",
               "times_s": times, "ratio": {k: round(statistics.median(times[k]) / plain, 3) for k in ("new", "old")},
               "prime_s": prime_s, "fill_s": fill_s, "facts": facts, "old_tree": str(trees["old"])}
    (a.out / f"ab_{stem}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("program", "times_s", "ratio")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
