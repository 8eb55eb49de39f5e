#!/usr/bin/env python3
"""Take the recording machine's paths out of reports made elsewhere before they are committed to ``reports/``.

A verdict, run.json or report.md made on the GPU machine names its inputs and commands by absolute paths
(``/root/out/work/runs_trainer/2026.../torch_trace.json``): meaningless to a reader and a leak of how that machine
is laid out. Each absolute path under a machine root becomes the path relative to the report's own run directory
when it lies inside it (``torch_trace.json``), else ``…/`` and its last two parts (``…/runs_trainer/run.json``).

    python benchmarks/scrub_paths.py [DIR ...]          # rewrite in place (default: reports/)
    python benchmarks/scrub_paths.py --check [DIR ...]  # list files that still hold such paths (exit 1 if any)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# absolute paths under the roots where machines keep work and temporary files
MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:root|tmp|home|work|mnt|scratch|data|private|var/folders|Users)/"
                          r"[^\s\"'`()\[\]<>,;|{}]*")
SUFFIXES = (".json", ".md", ".txt", ".csv", ".log")


def scrub_text(text: str, run_dir_name: str | None) -> str:
    def repl(m: re.Match) -> str:
        path = m.group(0).rstrip(".:")
        tail = m.group(0)[len(path):]
        parts = [p for p in path.split("/") if p]
        if run_dir_name and run_dir_name in parts:
            rel = "/".join(parts[len(parts) - parts[::-1].index(run_dir_name):])
            return (rel or ".") + tail
        rest = parts[1:] if len(parts) > 1 else parts  # (never the machine's root folder itself)
        return "…/" + "/".join(rest[-2:]) + tail
    return MACHINE_PATH.sub(repl, text)


def files(dirs: list[Path]):
    for d in dirs:
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.name.endswith(SUFFIXES):
                yield f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, default=[ROOT / "reports"])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    left = []
    for f in files(args.dirs):
        text = f.read_text(encoding="utf-8", errors="surrogateescape")
        if not MACHINE_PATH.search(text):
            continue
        if args.check:
            left.append(f)
            continue
        f.write_text(scrub_text(text, f.parent.name), encoding="utf-8", errors="surrogateescape")
    for f in left:
        print(f)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
