"""The run directory: a new one per run (never reused), and what it says about the run (``run.json``: exact
commands, tool versions, GPU, options, notes, exit codes, where the time went; the same provenance goes into
``verdict.json``).
"""
from __future__ import annotations

import json
import re
import shlex
import sys
from datetime import datetime
from pathlib import Path

from .. import __version__
from ..collect import gpu
from ..errors import UsageError
from .window import summary as window_summary
from .passes import Options, Pass, last_words, signal_name
from .target import Target


def safe_name(text: str) -> str:
    """``text`` as a file name: runs of anything but letters, digits, ``_ . -`` become one ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def new_run_dir(base: Path | None, label: str) -> Path:
    """A fresh directory: ``<base>/<YYYYmmdd-HHMMSS>-<label>``, suffixed -2, -3... never an existing one."""
    base = Path(base or "nsighttc-runs")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the run directory's parent ({exc.strerror or exc}); choose another with --out",
                         base) from None
    stem = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{safe_name(label)[:60]}"
    for i in range(1, 1000):
        d = base / (stem if i == 1 else f"{stem}-{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot create a run directory here ({exc.strerror or exc}); choose another with --out",
                             base) from None
    raise UsageError(f"{base}: could not create a new run directory")


def kept(run_dir: Path) -> str:
    try:
        files = sorted(p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        return "nothing readable"
    return ", ".join(f"{p.name} ({p.stat().st_size:,} B)" for p in files) or "nothing"


def program_exit(done: list[Pass]) -> dict | None:
    """``{"code", "signal", "said"}`` where the program's own run (the first pass) failed by itself: not stopped by
    nsighttc after its window or its measurements, not interrupted, not timed out. The report leads with it: a program
    that failed after its start-up still gets a verdict on what it ran, and a reviewer reading only the report did not
    see that it failed (H200, a loop under `torch.compile(mode="reduce-overhead")` failing at its third step:
    "CPU-bound ... up to 145x", its exit code in a note on the terminal only)."""
    own = done[0] if done else None
    if own is None or own.returncode in (None, 0) or own.stopped_early or own.interrupted or own.timed_out:
        return None
    rc = own.returncode
    return {"code": rc, "signal": signal_name(-rc) if rc < 0 else None,
            "said": last_words(own.log.with_suffix(".stderr.log"), own.log)}


def provenance(run_dir: Path, target: Target, opts: Options, done: list[Pass], gpus: list, notes: list[str],
                evidence: dict | None = None) -> dict:
    versions = {"nsighttc": __version__, "python": sys.version.split()[0]}
    for p in done:
        if p.engine in ("ncu", "nsys"):
            versions[p.engine] = gpu.tool_version(p.exe)
    exited = program_exit(done)
    return {
        **({"program_exit": exited} if exited else {}),
        "gpu": [g.__dict__ for g in gpus], "engines": [p.engine for p in done],
        "commands": [shlex.join(p.argv) for p in done],
        "seconds": {p.engine: round(p.seconds, 3) for p in done},
        "profiled_kernels": {p.engine: p.profiled_kernels for p in done if p.engine == "ncu"},
        "versions": versions, "run_dir": str(run_dir), "target": target.argv, "options": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in opts.__dict__.items()},
        "notes": notes,
        **({"evidence": evidence} if evidence else {}),
        "passes": [{"engine": p.engine, "mode": p.mode or None, "seconds": round(p.seconds, 3),
                    "stopped_early": p.stopped_early,
                    **({"trace_written_s": p.trace_written_s} if p.trace_written_s is not None else {}),
                    **({"window": window_summary(p)} if p.window is not None else {})}
                   for p in done],
    }


def write_meta(run_dir: Path, target: Target, opts: Options, done: list[Pass], gpus: list, notes: list[str],
                evidence: dict | None = None, phases: dict | None = None) -> None:
    meta = provenance(run_dir, target, opts, done, gpus, notes, evidence)
    meta["exit_codes"] = {p.engine: p.returncode for p in reversed(done)}  # per engine: its first pass's
    meta["pass_exit_codes"] = [{"engine": p.engine, "mode": p.mode or None, "returncode": p.returncode,
                                "stopped_early": p.stopped_early} for p in done]
    if phases:
        meta["phase_seconds"] = phases
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
