"""Run one mutated input through the CLI and check every promise about bad input (README, "What we promise
about bad input"):

- exit code 0 or 2 (never 1 from ``analyze``/``report``: 1 means "regression" to a CI gate), never a
  traceback or "internal error";
- on exit 2, one error line that names the file;
- done within 5 s for inputs under 1 MB;
- the input's bytes and mtime unchanged, and no file created beside it.

A case that breaks one is copied to ``tests/fixtures/bad/`` (unless ``NSIGHTTC_FUZZ_SAVE=0``) so it is
replayed by the suite from then on.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .seeds import ROOT, Seed

BAD = ROOT / "tests" / "fixtures" / "bad"
LIMIT_S = 5.0
HARD_STOP_S = 60.0  # a case still running after this is stopped so the run can report it


class _Hung(Exception):
    pass


def _alarm(*_):
    raise _Hung()


def run_cli(args: list[str], in_process: bool) -> tuple[int, str, str, float]:
    t0 = time.perf_counter()
    if not in_process:
        try:
            r = subprocess.run([sys.executable, "-m", "nsighttc", *args], capture_output=True, text=True,
                               timeout=HARD_STOP_S, cwd=ROOT, errors="replace")
            return r.returncode, r.stdout, r.stderr, time.perf_counter() - t0
        except subprocess.TimeoutExpired:
            return -9, "", "hung", time.perf_counter() - t0
    from nsighttc.cli import main
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, HARD_STOP_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    except _Hung:
        code = -9
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def check(seed: Seed, data: bytes, workdir: Path, label: str = "") -> list[str]:
    """Write ``data`` as the input of ``seed.command`` in its own folder, run it, return broken promises."""
    folder = workdir / hashlib.sha1(data).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"input{seed.suffix}"
    path.write_bytes(data)
    before = (path.stat().st_mtime_ns, sorted(p.name for p in folder.iterdir()))
    args = [seed.command, str(path)] + (["--format", "json"] if seed.command == "analyze" else [])
    code, _, err, secs = run_cli(args, seed.in_process)
    broken = []
    if code not in (0, 2):
        broken.append(f"exit code {code}")
    if "Traceback" in err or "internal error" in err:
        broken.append("traceback / internal error: " + err.strip().splitlines()[-1][:300])
    errors = [ln for ln in err.splitlines() if ln.startswith("nsighttc: error:")]
    if code == 2 and (len(errors) != 1 or str(path) not in errors[0] and path.name not in errors[0]):
        broken.append(f"exit 2 without one error line naming the file: {err.strip()[:300]!r}")
    if len(data) < 1_000_000 and secs > LIMIT_S:
        broken.append(f"took {secs:.1f} s")
    after = (path.stat().st_mtime_ns, sorted(p.name for p in folder.iterdir())) if path.exists() else None
    if after is None or path.read_bytes() != data or after != before:
        broken.append("the input was changed, or a file was created beside it")
    if broken and os.environ.get("NSIGHTTC_FUZZ_SAVE", "1") != "0":
        save(seed, data)
    return broken


def save(seed: Seed, data: bytes) -> Path:
    BAD.mkdir(parents=True, exist_ok=True)
    dest = BAD / f"{seed.kind}-{hashlib.sha1(data).hexdigest()[:10]}{seed.suffix}"
    if len(data) > STORE_COMPRESSED_OVER:
        import lzma
        dest = dest.with_name(dest.name + STORED)
        if not dest.exists():
            dest.write_bytes(lzma.compress(data, preset=9))
        return dest
    if not dest.exists():
        dest.write_bytes(data)
    return dest


# A case over ``STORE_COMPRESSED_OVER`` bytes is kept xz-compressed with ``STORED`` added to its name (the repository's
# size: a 400 KB kernel name, a 300 KB CSV, 40 KB verdicts that compress 6x); the test replays its bytes as they failed.
STORED, STORE_COMPRESSED_OVER = ".case.xz", 16_000


def bad_bytes(path: Path) -> bytes:
    """The bytes of a kept case as they failed."""
    import lzma
    data = path.read_bytes()
    return lzma.decompress(data) if path.name.endswith(STORED) else data


def seed_of_bad_file(path: Path) -> Seed:
    from .seeds import SEEDS
    # longest kind first: "kineto-gz-..." is not a "kineto" file
    return next(s for s in sorted(SEEDS, key=lambda s: -len(s.kind)) if path.name.startswith(s.kind + "-"))
