"""Who uses the host's cores while a program runs: each process's CPU time, sampled from /proc, and when files appear
in a folder (a profile run's: its operators' trace, its timeline's trace).

Why: a first run (`nsighttc profile`, nothing in the evidence cache) of a host-bound program was 1.45x slower than its
cached run and its plain run, in its recorded and unrecorded steps alike (H200, the transformers pipeline of
user_programs/hf_pipeline_images.py: 20.4 / 22.6 ms a step against 14.1 / 14.8 and 14.3 plain;
reports/steps_time/users6). A first run has more beside the program (the ncu pass's and the replay's processes, gated,
their frontends; a forked writer of the operators' trace; the readers of that trace); this says which of them ran and
for how long, on which scheduling class, and what the machine's cores are (SMT siblings share a core's pipeline, which
the idle scheduling class does not protect).

    python3 proc_cpu_sampler.py OUT.csv [--every 0.25] [--watch DIR] &   # stopped by SIGTERM / SIGINT

Writes ``OUT.csv``: ``t`` (time.time()), ``pid``, ``ppid``, ``comm``, ``policy`` (0 normal, 5 idle), ``cpu_s`` (user +
system seconds since the last sample, only for processes that used some), ``cmd`` (the first 120 characters of the
command line, on a process's first row); and rows with ``comm`` = ``file:NAME`` when a file first appears under
``--watch``. Standard library only: runs on the GPU machine as it is.
"""
from __future__ import annotations

import argparse
import csv
import os
import signal
import time

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[str, int, float, int] | None:
    """(comm, ppid, utime + stime seconds, policy) of a process; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return None
    comm = raw[raw.index("(") + 1: raw.rindex(")")]
    rest = raw[raw.rindex(")") + 2:].split()
    # fields after the name, from 3 (state): ppid is 4, utime 14, stime 15, policy 41
    return comm, int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK, int(rest[38])


def _cmd(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--watch", default=None, help="a folder whose new files (at any depth) are noted when they appear")
    a = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    last: dict[str, float] = {}
    seen_files: set[str] = set()
    me = str(os.getpid())
    with open(a.out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "pid", "ppid", "comm", "policy", "cpu_s", "cmd"])
        while not stop:
            t = time.time()
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or pid == me:
                    continue
                s = _stat(pid)
                if s is None:
                    continue
                comm, ppid, cpu, policy = s
                new = pid not in last
                delta = cpu - last.get(pid, cpu if not new else 0.0)
                last[pid] = cpu
                if delta > 0 or new:
                    w.writerow([f"{t:.3f}", pid, ppid, comm, policy, f"{delta:.2f}", _cmd(pid) if new else ""])
            if a.watch and os.path.isdir(a.watch):
                for root, _, files in os.walk(a.watch):
                    for f in files:
                        p = os.path.join(root, f)
                        if p not in seen_files:
                            seen_files.add(p)
                            w.writerow([f"{t:.3f}", "", "", "file:" + os.path.relpath(p, a.watch), "", "", ""])
            fh.flush()
            time.sleep(max(0.0, a.every - (time.time() - t)))


if __name__ == "__main__":
    main()
