"""Fake profiler executables for tests of how we *launch* tools. They record their argv, run the inner
command like the real tool would, and write the real recorded fixtures as their output, so everything
we *parse* is still a real recording."""
from __future__ import annotations

import gzip
import shutil
import stat
import sys
from pathlib import Path

from tests.conftest import NCU_REP, NSYS_SQLITE_GZ, RAW, fixture_open


def _write(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def drop_kernels(sqlite: Path, short_names: list[str]) -> None:
    """Drop the kernel rows named (nsys shortName): a real recording, cut down to a subset of its kernels."""
    import sqlite3
    con = sqlite3.connect(sqlite)
    ids = [r[0] for r in con.execute("SELECT id, value FROM StringIds") if r[1] in short_names]
    con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE shortName IN ({','.join('?' * len(ids))})", ids)
    con.commit()
    con.close()


def make_bin(tmp: Path, *, gpu: bool = True, ncu: str | None = "ok", nsys: str | None = "ok",
             nsys_drop: list[str] | None = None) -> Path:
    """A bin/ folder with fake nvidia-smi / ncu / nsys; modes: 'ok', 'perm' (counters refused),
    'qdstrm' (nsys importer broken), 'hang' (ncu never returns, ignores SIGINT/SIGTERM), 'dies' (ncu
    writes half its report and is SIGKILLed), None (absent). The fake ncu writes its pid to TMP/ncu.pid. ``nsys_drop``: kernels (nsys shortName) left out of the nsys
    recording. The fake ncu runs the program with FAKE_TOOL=ncu in its environment."""
    b = tmp / "bin"
    b.mkdir(exist_ok=True)
    log = tmp / "calls.log"
    raw_csv = tmp / "raw.csv"
    raw_csv.write_text(fixture_open(RAW, "rt").read())
    sqlite = tmp / "fixture.sqlite"
    with fixture_open(NSYS_SQLITE_GZ, "rb") as src, sqlite.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    if nsys_drop:
        drop_kernels(sqlite, nsys_drop)
    if gpu:
        _write(b / "nvidia-smi", 'print("0, NVIDIA H200, 9.0, 580.159.03")\n')
    common = f"""import os, subprocess, sys, shutil
open({str(log)!r}, "a").write(repr(sys.argv) + "\\n")
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("FAKE {{tool}} version 2025.3.1"); sys.exit(0)
"""
    if ncu:
        _write(b / "ncu", common.replace("{tool}", "ncu") + f"""
if "--import" in args:
    sys.stdout.write(open({str(raw_csv)!r}).read()); sys.exit(0)
open({str(tmp)!r} + "/ncu.pid", "w").write(str(os.getpid()))
if {ncu!r} == "hang":  # a profiler that never returns and ignores SIGINT/SIGTERM
    import signal, time
    signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(3600)
if {ncu!r} == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0."); sys.exit(1)
out = args[args.index("-o") + 1]
# the inner command starts after the last ncu option value: it is the first arg that is an executable path
i = next(j for j, a in enumerate(args) if a == sys.executable or a.endswith("python") or os.path.sep in a and os.access(a, os.X_OK) and not a.startswith("regex:"))
for k in range(3):
    print(f'==PROF== Profiling "kernel_{{k}}" - {{k}}: 0%....50%....100% - 7 passes', flush=True)
rc = subprocess.call(args[i:], env=dict(os.environ, FAKE_TOOL="ncu"))
import lzma  # (the real report this fake writes is kept xz-compressed in the fixtures)
data = lzma.decompress(open({str(NCU_REP)!r}, "rb").read())
if {ncu!r} == "dies":  # half the report written, then killed (an OOM kill, a crash)
    open(out + ".ncu-rep", "wb").write(data[: len(data) // 2])
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
open(out + ".ncu-rep", "wb").write(data)
sys.exit(rc)
""")
    if nsys:
        _write(b / "nsys", common.replace("{tool}", "nsys") + f"""
if args[0] == "export":
    dest = args[args.index("--output") + 1]
    shutil.copy({str(sqlite)!r}, dest); sys.exit(0)
out = args[args.index("-o") + 1]
i = next(j for j, a in enumerate(args) if a == sys.executable)
rc = subprocess.call(args[i:])
if {nsys!r} == "qdstrm":
    open(out + ".qdstrm", "wb").write(b"x" * 64)
    print("Importer error status: An unknown error occurred."); sys.exit(rc)
open(out + ".nsys-rep", "wb").write(b"NVIDIA Tegra Profiler Report 363")
sys.exit(rc)
""")
    return b


def calls(tmp: Path) -> list[list[str]]:
    import ast
    f = tmp / "calls.log"
    return [ast.literal_eval(line) for line in f.read_text().splitlines()] if f.exists() else []


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie is gone for our purpose)."""
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
