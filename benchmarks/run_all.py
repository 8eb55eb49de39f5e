#!/usr/bin/env python3
"""Every speed benchmark in one command: build the inputs from the real recordings, analyse each in a fresh
process, and write ``benchmarks/results.json`` (``{name, input, size, wall_s, peak_rss_mb, budget_s,
budget_mb, ok}`` per case).

    python benchmarks/run_all.py                 # the budgets (1M-kernel nsys, the analyze command, 1 GB Kineto, ...)
    python benchmarks/run_all.py --only analyze_command_gen_big_1m --repeat 7
                                                 # ``nsighttc analyze`` of gen_big_sqlite.py's 1M kernels: <= 3 s, 1 GB
    python benchmarks/run_all.py --huge          # also 4M kernels and a 4 GB trace
    python benchmarks/run_all.py --small         # CI smoke: tiny inputs, every path exercised, not timed
    python benchmarks/run_all.py --peers         # also HTA (HolisticTraceAnalysis, its own venv) on the
                                                 # same Kineto files, and nsys-ai on the same SQLite
    python benchmarks/run_all.py --repeat 3      # each case 3 times, the median run kept (shared machines vary)
    python benchmarks/run_all.py --readme        # rewrite docs/speed.md's speed table from the results

Inputs are the real H200 recordings repeated in time until they reach the size (``bench_nsys_sqlite``,
``bench_kineto_json``, ``bench_ncu_csv``, ``bench_ranks``); they are kept in ``--work`` (default
``~/.cache/nsighttc/bench``) and reused. Wall time and peak RSS are those of the measuring child process
(``os.wait4``), so each case's memory is its own. Inputs are opened read-only and never modified.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
GEN_BIG = ROOT.parent / "shared" / "bench" / "gen_big_sqlite.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))


@dataclass
class Case:
    name: str
    kind: str              # command | nsys | kineto | kineto_gz | ncu | ranks
    size: int              # kernels, MB, launches or ranks
    small: int             # the --small size
    budget_s: float | None
    budget_mb: float | None
    huge: bool = False


CASES = [
    # the whole command as a user runs it, on the export ../shared/bench/gen_big_sqlite.py makes (interpreter, imports,
    # the analysis, the JSON written, the exit); the other cases time the analysis inside one process
    Case("analyze_command_gen_big_1m", "command", 1_000_000, 20_000, 3.0, 1024),
    Case("nsys_sqlite_1m_kernels", "nsys", 1_000_000, 20_000, 3.0, 1024),
    Case("nsys_sqlite_4m_kernels", "nsys", 4_000_000, 40_000, 12.0, 2048, huge=True),
    Case("kineto_json_1gb", "kineto", 1000, 8, 15.0, 2048),
    Case("kineto_json_gz_1gb", "kineto_gz", 1000, 8, 15.0, 2048),
    Case("kineto_json_4gb", "kineto", 4000, 16, 60.0, 2048, huge=True),
    Case("ncu_raw_csv_1m_launches", "ncu", 1_000_000, 5_000, 10.0, 2048),
    Case("ranks_64x100k_kernels", "ranks", 64, 3, None, None),
]


def build(case: Case, size: int, work: Path) -> Path:
    """The case's input in ``work`` (built once, reused)."""
    work.mkdir(parents=True, exist_ok=True)
    if case.kind == "command":
        dest = work / f"gen_big_{size}.sqlite"
        if not dest.exists():
            if not GEN_BIG.is_file():
                raise FileNotFoundError(f"{GEN_BIG}: the shared folder beside the checkout holds it")
            tmp = dest.with_suffix(".partial")
            subprocess.run([sys.executable, str(GEN_BIG), str(tmp), str(size)], check=True, stdout=subprocess.DEVNULL)
            tmp.rename(dest)
    elif case.kind == "nsys":
        from bench_nsys_sqlite import make_input
        dest = work / f"nsys_{size}.sqlite"
        if not dest.exists():
            make_input(size, dest)
    elif case.kind in ("kineto", "kineto_gz"):
        from bench_kineto_json import make_input
        dest = work / f"kineto_{size}mb.json"
        if not dest.exists():
            make_input(size, dest)
        if case.kind == "kineto_gz":
            gz = work / f"kineto_{size}mb.json.gz"
            if not gz.exists():
                with dest.open("rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
            dest = gz
    elif case.kind == "ncu":
        from bench_ncu_csv import make_input
        dest = work / f"ncu_{size}.csv"
        if not dest.exists():
            make_input(size, dest)
    else:
        from bench_ranks import build as build_ranks
        kernels = 100_000 if size >= 16 else 10_000
        root = work / f"ranks_{size}x{kernels}"
        build_ranks(root, size, kernels)
        dest = root / "job"
    return dest


def measure(path: Path) -> None:
    """Child: analyse one input, print what the parent records (wall time of analyze + to_json)."""
    import nsighttc
    t0 = time.perf_counter()
    v = nsighttc.analyze([path])
    doc = v.to_json()
    wall = time.perf_counter() - t0
    tl = doc.get("timeline") or {}
    print(json.dumps({"wall_s": wall, "launches": doc["tensor_cores"]["launches"],
                      "tc_verdict": doc["tensor_cores"]["verdict"], "timeline_verdict": tl.get("verdict"),
                      "ranks": len(doc.get("ranks") or [])}))


def _self_measure(path: str) -> None:
    import resource
    measure(Path(path))
    # ru_maxrss of this process (and its analysis workers, for ranks)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    print(json.dumps({"peak_rss_mb": peak}))


def _command_run(path: Path) -> tuple[subprocess.CompletedProcess, float, dict]:
    """One ``nsighttc analyze PATH --format json -o OUT`` as a user runs it: its wall time from start to exit and its
    own peak RSS (``os.wait4``)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "nsighttc", "analyze", str(path), "--format", "json", "-o",
                str(Path(tmp) / "verdict.json"), "-q"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err = proc.stderr.read()
        proc.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        res = {}
        if code == 0:
            doc = json.loads((Path(tmp) / "verdict.json").read_text())
            tl = doc.get("timeline") or {}
            res = {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024,
                   "launches": doc["tensor_cores"]["launches"], "tc_verdict": doc["tensor_cores"]["verdict"],
                   "timeline_verdict": tl.get("verdict"), "ranks": len(doc.get("ranks") or [])}
    return subprocess.CompletedProcess(argv, code, "", err), wall, res


def _warm_page_cache(path: Path) -> None:
    """Read the input once before the timed runs, so every case starts from the page cache, like a file the
    profiler has just written: this machine keeps little cache, and the 740 MB 4M-kernel export read from
    disk took 16.8-20.0 s against 13-14 s cached (2026-11-23). Nothing is written."""
    for f in ([q for q in path.rglob("*") if q.is_file()] if path.is_dir() else [path]):
        with f.open("rb") as fh:
            while fh.read(16 << 20):
                pass


def run_case(case: Case, small: bool, work: Path, repeat: int = 1) -> dict:
    """Measure one case ``repeat`` times, each in a fresh process; the median run (by wall time) is the
    result, every sample is kept (wall times on a shared 2-core machine vary by ±25%)."""
    size = case.small if small else case.size
    path = build(case, size, work)
    file_mb = (sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir()
               else path.stat().st_size) / 1e6
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", str(path)]
    _warm_page_cache(path)
    if case.kind == "command":  # byte-compiled, as ``pip install`` leaves a package (an editable install under
        import compileall       # PYTHONDONTWRITEBYTECODE=1 compiles every module at each start: ~0.2 s)
        compileall.compile_dir(str(ROOT / "nsighttc"), quiet=1)
    runs = []
    for _ in range(max(1, repeat)):
        if case.kind == "command":
            runs.append(_command_run(path))
            continue
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        total = time.perf_counter() - t0
        lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
        runs.append((proc, total, {k: v for d in lines for k, v in d.items()}))
    samples = [(r[2].get("wall_s"), r[2].get("peak_rss_mb")) for r in runs]
    timed = sorted((r for r in runs if r[2].get("wall_s") is not None), key=lambda r: r[2]["wall_s"])
    proc, total, res = timed[len(timed) // 2] if len(timed) == len(runs) else next(r for r in runs if r[2].get("wall_s") is None)
    wall, rss = res.get("wall_s"), res.get("peak_rss_mb")
    ok = proc.returncode == 0 and wall is not None
    if not small and ok:
        ok = (case.budget_s is None or wall <= case.budget_s) and (case.budget_mb is None or rss <= case.budget_mb)
    return {"name": case.name, "input": str(path), "size": size, "file_mb": round(file_mb, 1),
            "wall_s": round(wall, 3) if wall is not None else None, "process_s": round(total, 2),
            "peak_rss_mb": round(rss, 1) if rss is not None else None, "budget_s": case.budget_s,
            "budget_mb": case.budget_mb, "ok": bool(ok), "small": small,
            "verdicts": {k: res.get(k) for k in ("launches", "tc_verdict", "timeline_verdict", "ranks")},
            **({"samples": [{"wall_s": round(w, 3), "peak_rss_mb": round(m, 1)} for w, m in samples if w is not None]}
               if repeat > 1 else {}),
            **({"error": proc.stderr.strip().splitlines()[-1][:300]} if proc.returncode and proc.stderr.strip() else {})}


# --- peers -------------------------------------------------------------------------------------------
HTA_SCRIPT = r"""
import json, resource, sys, time, tempfile, os, shutil
from pathlib import Path
src = Path(sys.argv[1])
d = Path(tempfile.mkdtemp())
os.symlink(src.resolve(), d / ("rank0." + ("json.gz" if src.name.endswith(".gz") else "json")))
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=str(d))
a.get_temporal_breakdown(visualize=False)
wall = time.perf_counter() - t0
shutil.rmtree(d)
print(json.dumps({"wall_s": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def peer_venv(work: Path, name: str, packages: list[str]) -> Path | None:
    venv = work / f"venv-{name}"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", *packages], capture_output=True, text=True)
        if r.returncode:
            print(f"run_all: could not install {name}: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            shutil.rmtree(venv, ignore_errors=True)
            return None
    return py


def _peer_row(peer: str, r: dict) -> dict:
    return {"peer": peer, "case": r["name"], "input": r["input"], "nsighttc_wall_s": r["wall_s"],
            "nsighttc_peak_rss_mb": r["peak_rss_mb"]}


def _measured(row: dict, wall: float, rss: float) -> None:
    """The peer's time and memory beside ours, as ratios (peer / nsighttc)."""
    row.update({"peer_wall_s": round(wall, 2), "peer_peak_rss_mb": round(rss, 1),
                "time_ratio": round(wall / row["nsighttc_wall_s"], 2),
                "memory_ratio": round(rss / row["nsighttc_peak_rss_mb"], 2) if row["nsighttc_peak_rss_mb"] else None})


def carried_peers(previous: dict, results: list[dict]) -> list[dict]:
    """Peer measurements of an earlier ``--peers`` run kept beside this run's numbers: the peers did not change,
    so their times stand, and the ratios are recomputed against the cases measured now (marked as carried)."""
    ours = {r["name"]: r for r in results if r.get("wall_s") is not None}
    out = []
    for p in previous.get("peers") or []:
        row = dict(p)
        r = ours.get(row.get("case"))
        if r is not None and row.get("peer_wall_s") is not None:
            row.update({"nsighttc_wall_s": r["wall_s"], "nsighttc_peak_rss_mb": r["peak_rss_mb"]})
            _measured(row, row["peer_wall_s"], row["peer_peak_rss_mb"])
            row["carried"] = "peer measured in an earlier --peers run; nsighttc measured in this one"
        out.append(row)
    return out


def run_peers(results: list[dict], work: Path) -> list[dict]:
    import tempfile
    out = []
    hta = peer_venv(work, "hta", ["HolisticTraceAnalysis"])
    nsys_ai = peer_venv(work, "nsys-ai", ["nsys-ai"])
    huge = {c.name for c in CASES if c.huge}
    for r in results:
        if r.get("wall_s") is None or r["name"] in huge:
            continue  # the peers on the budget cases only: HTA needs ~6 GB per GB of trace (23 GB machine)
        if r["name"].startswith("kineto"):
            row = _peer_row("HTA get_temporal_breakdown", r)
            if hta is None:
                row["error"] = "HolisticTraceAnalysis could not be installed"
            else:
                p = subprocess.run([str(hta), "-c", HTA_SCRIPT, r["input"]], capture_output=True, text=True,
                                   timeout=7200)
                got = next((json.loads(ln) for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
                if got:
                    _measured(row, got["wall_s"], got["peak_rss_mb"])
                else:
                    row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
        elif r["name"].startswith("nsys"):
            row = _peer_row("nsys-ai diagnose (default skill pack, offline)", r)
            if nsys_ai is None:
                row["error"] = "nsys-ai could not be installed"
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    copy = Path(tmp) / "profile.sqlite"  # nsys-ai writes a cache lock beside its input: never ours
                    shutil.copy(r["input"], copy)
                    argv = [str(nsys_ai.parent / "nsys-ai"), "diagnose", str(copy), "--format", "json", "-o",
                            str(Path(tmp) / "findings.json"), "--session", str(Path(tmp) / "session")]
                    err_path = Path(tmp) / "stderr.txt"
                    with err_path.open("w") as err:  # a file, not a pipe: a full pipe would block the child
                        t0 = time.perf_counter()
                        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
                        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
                        wall = time.perf_counter() - t0
                    if os.waitstatus_to_exitcode(status) == 0:
                        _measured(row, wall, usage.ru_maxrss / 1024)
                    else:
                        row["error"] = (err_path.read_text().strip().splitlines() or ["failed"])[-1][:300]
        else:
            continue
        out.append(row)
    return out


def readme_table(doc: dict) -> str:
    lines = ["| case | input | wall (s) | peak RSS (MB) | budget | ok |", "|---|---|---:|---:|---|---|"]
    for r in doc["results"]:
        budget = (f"≤ {r['budget_s']:g} s, ≤ {r['budget_mb']:g} MB" if r["budget_s"] is not None else "—")
        lines.append(f"| {r['name']} | {r['file_mb']:,.0f} MB | {r['wall_s']} | {r['peak_rss_mb']} | {budget} | "
                     f"{'yes' if r['ok'] else '**no**'} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="tiny inputs: a smoke test of every path, not timed")
    ap.add_argument("--huge", action="store_true", help="also the 4M-kernel and 4 GB cases")
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="run only these cases")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="measure each case N times (fresh processes) and keep the median run")
    ap.add_argument("--peers", action="store_true", help="also HTA and nsys-ai on the same inputs")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "nsighttc" / "bench")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    ap.add_argument("--readme", action="store_true", help="rewrite docs/speed.md's speed table from --out")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        _self_measure(a.measure)
        return 0
    if a.readme:
        doc = json.loads(a.out.read_text())
        readme = ROOT / "docs" / "speed.md"  # (the table moved there from README.md)
        text = readme.read_text()
        start, end = "<!-- speed-table:start -->", "<!-- speed-table:end -->"
        i, j = text.index(start) + len(start), text.index(end)
        readme.write_text(text[:i] + "\n" + readme_table(doc) + "\n" + text[j:])
        return 0
    cases = [c for c in CASES if (a.huge or not c.huge) and (not a.only or c.name in a.only)]
    results = []
    for c in cases:
        if c.kind == "command" and not GEN_BIG.is_file() and not a.only:
            # (its input is made by the shared folder's generator: a checkout without it skips this case, said)
            print(f"{c.name:<26} skipped: {GEN_BIG} is not beside this checkout", flush=True)
            continue
        r = run_case(c, a.small, a.work, 1 if a.small else a.repeat)
        results.append(r)
        print(f"{r['name']:<26} {r['file_mb']:>9,.1f} MB  {r['wall_s']} s  {r['peak_rss_mb']} MB  "
              f"{'ok' if r['ok'] else 'OVER BUDGET' if not r.get('error') else 'FAILED: ' + r['error']}", flush=True)
    doc = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}, "small": a.small,
           "results": results}
    if a.peers:
        doc["peers"] = run_peers(results, a.work)
        for p in doc["peers"]:
            print(json.dumps(p))
    elif not a.small and a.out.exists():
        doc["peers"] = carried_peers(json.loads(a.out.read_text()), results)
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"run_all: wrote {a.out}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
