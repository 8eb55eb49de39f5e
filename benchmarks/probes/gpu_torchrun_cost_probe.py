#!/usr/bin/env python3
"""GPU probe (issue 50, cost): where a torchrun job's time goes under ``nsighttc profile``, process by process, against
the same job run plain.

Every Python process the job starts (the profile command, torchrun, each rank: rankexec then the launcher it
``exec``s into) stamps the wall clock as its interpreter starts (``site``) and as its exit begins (``atexit``, after
the program's own handlers), through a ``sitecustomize`` on PYTHONPATH that then runs any other ``sitecustomize``; a
thread reads ``/proc`` every 20 ms for each descendant's life (first seen, first seen as a zombie, last seen). Per
round, alternating (after one first run fills the evidence cache):

  plain      the command alone
  cached     ``nsighttc profile -- COMMAND`` with the evidence cache (a user's second run)
  teardown   the same with ``TEARDOWN_CUPTI=1`` (kineto detaches CUPTI at the profiler's stop, here the program's end):
             not a default variant: on two H200s (torch 2.11) the DDP job's ranks wrote their traces and said their
             exit code, then hung (the run was stopped by the call's limit 540 s later). Kineto's teardown waits
             for the program's next CUDA call (pytorch/kineto#1554), which a program at its end never makes.
  nosamples  the same with ``--no-host-samples``
  switch5    the same with the host sampler leaving the interpreter's switch interval at Python's 5 ms
             (``NSIGHTTC_SAMPLER_SWITCH_MS=5``; the sampler's own is 0.5 ms)
  steps10    the same with ``--steps 10`` (a window of 10 steps instead of the default's)
  launcher   each rank run by ``python -m nsighttc.runtime.launch --annotate script -- SCRIPT`` (torchrun's ``-m``):
             the launcher and its step hooks without a profiler, a window or the profile command around the job
  launcher_nomarks  the same with ``--annotate none --step-marks off``: the launcher alone
  cached_noext  ``cached`` with the ranges-only sessions recorded without kineto's external correlation
             (``NSIGHTTC_EXTERNAL_CORRELATION=off``): does CUPTI's record of it per runtime call cost the steps?
  first_run  ``nsighttc profile -- COMMAND`` with an empty evidence cache (a user's first run: the replay under ncu)
  cached_after_first  as ``cached``; listed after ``first_run``, it runs right after a first run, as the cached runs of
             ``benchmarks/gpu/gpu_profile_overhead.py`` do (there they cost ~1 s more than here after a plain run)
  plain_loaded  the command alone, with the start-up load ``nsighttc profile`` puts beside it started with it (five
             processes importing the analysis and matplotlib, ``HELPERS_LOAD``): is the profiled job slower because
             of what runs beside its ranks' own start-up?

    python3 benchmarks/probes/gpu_torchrun_cost_probe.py --out OUT [--rounds 2] [--variants ...] -- COMMAND...

Writes OUT/torchrun_cost.txt (per variant, the median of each stage: the ranks' start, a rank's life until its
exit begins, the run's end after that, and ``ddp_train.py``'s own stages from its step line; per run: total
seconds; per process start, exit start, zombie and end on the run's clock; the launcher's trace lines and the
program's step line) and OUT/torchrun_cost.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {
    "plain": ([], {}),
    "cached": ([], {}),
    "teardown": ([], {"TEARDOWN_CUPTI": "1"}),
    "nosamples": (["--no-host-samples"], {}),
    # the host sampler with Python's own switch interval (5 ms) instead of its 0.5 ms (runtime.host_samples.SWITCH_ENV)
    "switch5": ([], {"NSIGHTTC_SAMPLER_SWITCH_MS": "5"}),
    "steps10": (["--steps", "10"], {}),
    # each rank under nsighttc's launcher alone (its step hooks, no profiler, no window, no profile command)
    "launcher": (["--annotate", "script"], {}),
    "launcher_nomarks": (["--annotate", "none", "--step-marks", "off"], {}),
    "plain_loaded": ([], {}),  # the command alone, HELPERS_LOAD started beside it
    "first_run": ([], {}),  # (its own empty evidence cache each round: main)
    # the cached run with the window's ranges-only sessions recorded without kineto's external correlation
    "cached_noext": ([], {"NSIGHTTC_EXTERNAL_CORRELATION": "off"}),
    "cached_after_first": ([], {}),
}
PLAIN = ("plain", "plain_loaded")  # the command as given, no nsighttc in it
LAUNCHER = ("launcher", "launcher_nomarks")
# what ``nsighttc profile`` starts beside a torchrun job as it begins (profile.default): two plot workers warming
# matplotlib, two rank workers importing the analysis, and its own preload of the analysis and the report
HELPERS_LOAD = [["-c", "from nsighttc.render import plots; plots.warm(full=True)"]] * 2 + \
    [["-c", "import nsighttc.api, nsighttc.rank_map"]] * 2 + [["-c", "import nsighttc.api, nsighttc.render.markdown"]]

SITECUSTOMIZE = r'''
import atexit, json, os, sys, time
_F = os.environ.get("NSIGHTTC_PROBE_STAMPS")
def _cmd():
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            return " ".join(a.decode(errors="replace") for a in fh.read().split(b"\0") if a)[:300]
    except OSError:
        return ""
def _stamp(event):
    if not _F:
        return
    try:
        with open(_F, "a") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "event": event, "t": time.time(),
                                 "cmd": _cmd()}) + "\n")
    except OSError:
        pass
_stamp("site")
atexit.register(_stamp, "atexit")
_SEEN = set()
def _audit(event, args):  # when the first ``import torch`` begins (the program's own start, or the launcher's)
    if event == "import" and args and args[0] == "torch" and "torch" not in _SEEN:
        _SEEN.add("torch")
        _stamp("import torch")
sys.addaudithook(_audit)
# the next sitecustomize on the path, if the environment has one
_here = os.path.dirname(os.path.abspath(__file__))
import importlib.machinery, importlib.util
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [p for p in sys.path
                                                                   if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
'''


TICK = os.sysconf("SC_CLK_TCK")


class ProcWatch(threading.Thread):
    """Every descendant of ``root``: first seen, first seen as a zombie, last seen (wall clock), the CPU time it had
    used when last seen (``cpu_s``, user and system), its command line."""

    def __init__(self, root: int, every_s: float = 0.02):
        super().__init__(daemon=True)
        self.root, self.every_s, self.seen, self.done = root, every_s, {}, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.time()
            parent, state, cpu = {}, {}, {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/stat") as fh:
                        stat = fh.read()
                except OSError:
                    continue
                rest = stat.rsplit(")", 1)[-1].split()
                parent[int(name)], state[int(name)] = int(rest[1]), rest[0]
                cpu[int(name)] = (int(rest[11]) + int(rest[12])) / TICK
            family, todo = {self.root}, [self.root]
            children = {}
            for pid, ppid in parent.items():
                children.setdefault(ppid, []).append(pid)
            while todo:
                for c in children.get(todo.pop(), []):
                    if c not in family:
                        family.add(c)
                        todo.append(c)
            for pid in family:
                if pid not in state:
                    continue
                rec = self.seen.get(pid)
                if rec is None:
                    try:
                        with open(f"/proc/{pid}/cmdline", "rb") as fh:
                            cmd = " ".join(a.decode(errors="replace") for a in fh.read().split(b"\0") if a)[:300]
                    except OSError:
                        cmd = ""
                    rec = self.seen[pid] = {"pid": pid, "ppid": parent[pid], "first": now, "cmd": cmd}
                rec["last"] = now
                rec["cpu_s"] = cpu[pid]
                if state[pid] == "Z" and "zombie" not in rec:
                    rec["zombie"] = now
            time.sleep(self.every_s)


def run_one(argv: list[str], env: dict, stamps: Path, log: Path, timeout: float, beside: list | None = None) -> dict:
    """``beside``: argument lists of processes started with the command (not waited for, not timed)."""
    stamps.write_text("")
    t0 = time.time()
    helpers = [subprocess.Popen(x, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
               for x in beside or []]
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
        watch = ProcWatch(proc.pid)
        watch.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            import signal
            os.killpg(proc.pid, signal.SIGKILL)
            rc = f"stopped after {timeout:.0f} s"
            proc.wait()
    total = time.time() - t0
    for h in helpers:
        h.wait()
    watch.done.set()
    watch.join()
    marks = [json.loads(x) for x in stamps.read_text().splitlines() if x.strip()]
    procs = {}
    for pid, rec in watch.seen.items():
        procs[pid] = {k: (round(v - t0, 3) if isinstance(v, float) and k != "cpu_s" else v) for k, v in rec.items()}
    for m in marks:
        p = procs.setdefault(m["pid"], {"pid": m["pid"], "ppid": m["ppid"], "cmd": m["cmd"]})
        p.setdefault(m["event"], []).append(round(m["t"] - t0, 3))
        p.setdefault("cmds", []).append(m["cmd"][:160])
    return {"total_s": round(total, 3), "rc": rc, "processes": sorted(procs.values(), key=lambda p: p.get("first", 0))}


def launcher_lines(runs: Path) -> tuple[list[str], dict]:
    """The newest run's launcher trace lines and program step lines, and its run.json marks."""
    dirs = sorted((d for d in runs.iterdir() if (d / "run.json").exists()), key=lambda d: d.stat().st_mtime) \
        if runs.exists() else []
    if not dirs:
        return [], {}
    d = dirs[-1]
    lines = []
    for name in ("torch.stderr.log", "torch.log"):
        f = d / name
        if f.exists():
            lines += [x.strip()[:400] for x in f.read_text(errors="replace").splitlines()
                      if "wrote" in x or "ms/step" in x or "window {" in x or "exit code" in x]
    run = json.loads((d / "run.json").read_text())
    facts = {"phase_seconds": run.get("phase_seconds"),
             "ranks": [(p.get("window") or {}).get("ranks") for p in run.get("passes") or []],
             "pass_seconds": [p.get("seconds") for p in run.get("passes") or []]}
    return lines, facts


STEP_LINE = re.compile(r"([\d.]+) ms/step.*torch and its device ([\d.]+) s, process group ([\d.]+) s, model "
                       r"([\d.]+) s \(built ([\d.]+) s, moved ([\d.]+) s, DDP ([\d.]+) s\), warm-up ([\d.]+) s")


def stages(r: dict) -> dict:
    """One run's time by stage (seconds, medians over its ranks): the ranks' start on the run's clock, a rank's life
    until its exit begins, the end of the run after the last rank's exit began, and the wrapper's own stages before
    its steps (``ddp_train.py``'s step line) and its steps."""
    def is_rank(p: dict) -> bool:
        cmd = " ".join(p.get("cmds") or [p.get("cmd", "")])
        return ("ddp_train.py" in cmd or "runtime.launch" in cmd) and "torch.distributed.run" not in cmd

    ranks = [p for p in r["processes"] if is_rank(p) and p.get("atexit") and p.get("first") is not None]
    out = {"total": r["total_s"], "cpu_all": sum(p.get("cpu_s") or 0 for p in r["processes"])}
    if ranks:
        out["rank_start"] = statistics.median(p["first"] for p in ranks)
        out["rank_life"] = statistics.median(p["atexit"][-1] - p["first"] for p in ranks)
        out["after_ranks"] = round(r["total_s"] - max(p["atexit"][-1] for p in ranks), 3)
        out["cpu_rank"] = statistics.median(p.get("cpu_s") or 0 for p in ranks)
    found = [m.groups() for m in (STEP_LINE.search(x) for x in r.get("lines") or []) if m]
    for i, key in enumerate(("step_ms", "torch", "group", "model", "built", "moved", "ddp", "warmup")):
        if found:
            out[key] = statistics.median(float(g[i]) for g in found)
    return {k: round(v, 3) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="plain,cached,nosamples,steps10")
    ap.add_argument("--timeout", type=float, default=90.0, help="a run still going after this long is stopped")
    ap.add_argument("--compiled", type=Path, default=None, metavar="DIR",
                    help="byte-compile the standard library, site-packages, nsighttc and the wrappers into DIR and run "
                         "everything with PYTHONPYCACHEPREFIX=DIR: an installed environment's start-up, where the lent "
                         "machine (PYTHONDONTWRITEBYTECODE=1, sympy and others shipped without .pyc) compiles them "
                         "from source in every process")
    ap.add_argument("--spy", type=float, default=None, metavar="HZ",
                    help="run the --spy-variants under `py-spy record --subprocesses --threads --idle "
                         "--nonblocking` at HZ samples a second (raw stacks to OUT/spy_VARIANT_ROUND.txt.gz; "
                         "benchmarks/probes/spy_phases.py reads them)")
    ap.add_argument("--spy-variants", default="plain,cached")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    variants = [v for v in a.variants.split(",") if v]
    a.out.mkdir(parents=True, exist_ok=True)
    import compileall  # as an install would: the lent machine sets PYTHONDONTWRITEBYTECODE=1 (gpu_profile_overhead.py)
    compileall.compile_dir(str(ROOT / "nsighttc"), quiet=1)
    work = Path(tempfile.mkdtemp(prefix="torchrun-cost-"))
    (work / "site").mkdir()
    (work / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    stamps = work / "stamps.jsonl"
    base = dict(os.environ, NSIGHTTC_PROBE_STAMPS=str(stamps), NSIGHTTC_CACHE_DIR=str(work / "cache"),
                PYTHONPATH=os.pathsep.join([str(work / "site")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    if a.compiled is not None:  # (gpu_profile_overhead.compile_environment says why)
        sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
        from gpu_profile_overhead import compile_environment
        took = compile_environment(a.compiled.resolve(), base, ROOT / "nsighttc", ROOT / "wrappers", work / "site")
        base["PYTHONPYCACHEPREFIX"] = str(a.compiled.resolve())
        print(f"compiled into {a.compiled} in {took:.0f} s", flush=True)
    profile = [sys.executable, "-m", "nsighttc", "profile", "--out"]
    # the first run fills the evidence cache (not one of the rows)
    first = run_one(profile + [str(work / "runs_first"), "--", *cmd], base, stamps, a.out / "first.log", a.timeout)
    results = [{"variant": "first", "round": 0, **first}]
    print(f"first: {first['total_s']} s rc {first['rc']}", flush=True)
    for rnd in range(1, a.rounds + 1):
        for v in variants:
            opts, extra = VARIANTS[v]
            runs = work / f"runs_{v}"
            if v in PLAIN:
                argv = cmd
            elif v in LAUNCHER:  # torchrun's -m runs the launcher; the script and its arguments follow its --
                at = next(i for i, x in enumerate(cmd) if x.endswith(".py"))
                argv = cmd[:at] + ["-m", "nsighttc.runtime.launch", *opts, "--"] + cmd[at:]
            else:
                argv = profile + [str(runs), *opts, "--", *cmd]
            if v == "first_run":  # an empty evidence cache: a first run
                extra = dict(extra, NSIGHTTC_CACHE_DIR=str(work / f"cache_first_{rnd}"))
            spy = a.out / f"spy_{v}_{rnd}.txt"
            if a.spy and v in a.spy_variants.split(","):
                argv = ["py-spy", "record", "--subprocesses", "--threads", "--idle", "--nonblocking", "--rate",
                        f"{a.spy:g}", "--format", "raw", "-o", str(spy), "--", *argv]
            r = run_one(argv, dict(base, **extra), stamps, a.out / f"{v}_{rnd}.log", a.timeout,
                        beside=[[sys.executable, *h] for h in HELPERS_LOAD] if v == "plain_loaded" else None)
            if v not in PLAIN + LAUNCHER:
                r["lines"], r["facts"] = launcher_lines(runs)
            else:
                r["lines"] = [x.strip() for x in (a.out / f"{v}_{rnd}.log").read_text(errors="replace").splitlines()
                              if "ms/step" in x]
            if spy.exists():
                import gzip
                import shutil
                with spy.open("rb") as src, gzip.open(f"{spy}.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                spy.unlink()
            results.append({"variant": v, "round": rnd, **r})
            print(f"{v} round {rnd}: {r['total_s']} s rc {r['rc']}", flush=True)
            (a.out / "torchrun_cost.json").write_text(json.dumps(results, indent=1))  # kept if a later run hangs
    with (a.out / "torchrun_cost.txt").open("w") as fh:
        for v in variants:
            totals = [r["total_s"] for r in results if r["variant"] == v]
            fh.write(f"{v}: median {statistics.median(totals):.2f} s of {totals}\n")
        fh.write("\nstages (seconds; per variant, the median over its rounds of each run's value):\n")
        for v in variants:
            per = [stages(r) for r in results if r["variant"] == v]
            keys = [k for k in per[0]] if per else []
            fh.write(f"  {v}: " + ", ".join(f"{k} {statistics.median(p[k] for p in per if k in p):.2f}"
                                           for k in keys) + "\n")
        for r in results:
            fh.write(f"\n== {r['variant']} round {r['round']}: {r['total_s']} s rc {r['rc']}\n")
            for p in r["processes"]:
                if not (p.get("site") or "python" in p.get("cmd", "")):
                    continue
                fh.write(f"  pid {p['pid']} ppid {p.get('ppid')} first {p.get('first')} site {p.get('site')} "
                         f"torch {p.get('import torch')} "
                         f"atexit {p.get('atexit')} zombie {p.get('zombie')} last {p.get('last')} | "
                         f"{' || '.join(p.get('cmds') or [p.get('cmd', '')])[:300]}\n")
            for x in r.get("lines") or []:
                fh.write(f"  | {x}\n")
            if r.get("facts"):
                fh.write(f"  facts {json.dumps(r['facts'])}\n")
    print((a.out / "torchrun_cost.txt").read_text().split("\n==")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
