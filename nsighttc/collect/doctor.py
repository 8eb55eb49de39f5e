"""``nsighttc doctor``: what this machine can profile, each line OK / missing / broken with what to do.

The probes are real but tiny: ncu profiles one kernel of a one-line torch program (to see whether the
performance counters are permitted: ERR_NVGPUCTRPERM otherwise), and nsys records the same program and
must produce a ``.nsys-rep`` (the known broken case writes only a ``.qdstrm`` because its importer cannot
load libdw.so.1).

Speed (a doctor in <= 5 s): the slow checks (torch's import, tool versions, the two probes, each
a process start of seconds) run in parallel, and their result is cached in ``~/.cache/nsighttc/doctor.json``
(``$NSIGHTTC_CACHE_DIR`` or ``$XDG_CACHE_HOME/nsighttc``) keyed by the GPUs and driver, the Python, and the
path, size and mtime of ncu and nsys: a second doctor answers from the cache and says so; ``--refresh`` (or
any change of those) runs the probes again.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from . import gpu, process, tools

PROBE = "import torch; x = torch.ones(64, device='cuda'); y = (x * 2).sum().item()"


@dataclass
class Check:
    name: str
    status: str  # OK | missing | broken | warn | skipped
    detail: str
    fix: str = ""


def _torch_info() -> tuple[str | None, str | None, bool]:
    rc, out, _ = process.capture([sys.executable, "-c", "import torch; print(torch.__version__); "
                                  "print(torch.version.cuda); print(torch.cuda.is_available())"], timeout=120)
    if rc != 0:
        return None, None, False
    lines = out.strip().splitlines()
    return lines[0], lines[1] if len(lines) > 1 else None, len(lines) > 2 and lines[2] == "True"


def cache_dir() -> Path:
    if os.environ.get("NSIGHTTC_CACHE_DIR"):
        return Path(os.environ["NSIGHTTC_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsighttc"


def _tool_key(path: Path | None) -> list | None:
    if path is None:
        return None
    try:
        st = Path(path).resolve().stat()
        return [str(path), st.st_size, st.st_mtime_ns]
    except OSError:
        return [str(path)]


def run_checks(probe: bool = True, refresh: bool = False) -> list[Check]:
    checks: list[Check] = []
    gpus = gpu.list_gpus()
    if not gpus:
        checks.append(Check("GPU", "missing", "no NVIDIA GPU found (nvidia-smi missing or lists none)",
                            "profile on a machine with an NVIDIA GPU; here `nsighttc analyze` and `nsighttc demo` still work"))
    for g in gpus:
        cc = g.compute_capability
        try:
            tc = cc is not None and float(cc) >= 7.0
        except ValueError:
            tc = False
        checks.append(Check(f"GPU {g.index}", "OK" if tc else "warn",
                            f"{g.name}, compute capability {cc or '?'}" + ("" if tc else ": Tensor Cores need 7.0 or newer"),
                            "" if tc else "Tensor Core verdicts will be 'no' on this GPU"))
        if g.index == 0:
            checks.append(Check("driver", "OK", g.driver or "unknown"))
    ok = importlib.util.find_spec("nvtx") is not None
    checks.append(Check("python nvtx", "OK" if ok else "missing", "NVTX ranges for ncu/nsys",
                        "" if ok else "pip install nvtx"))
    from ..parse.ncu_rep import _import_ncu_report  # the same lookup the parser uses (PyPI, then ncu's extras)
    module = _import_ncu_report()
    checks.append(Check("python ncu_report", "OK" if module else "missing",
                        f"reads .ncu-rep in-process ({getattr(module, '__file__', '')})" if module else
                        "reading .ncu-rep in-process (else nsighttc exports through `ncu --import`)",
                        "" if module else "pip install ncu-report"))
    paths = {tool: tools.find_or_none(tool) for tool in ("ncu", "nsys")}
    key = {"gpus": [[g.name, g.driver, g.compute_capability] for g in gpus], "python": sys.executable,
           "probe": probe, **{t: _tool_key(p) for t, p in paths.items()}}
    cached = None if refresh else _load_cache(key)
    if cached is not None:
        slow, when = cached
        checks += slow
        checks.append(Check("cache", "OK", f"torch, tool and probe results from {when} (nothing changed since); "
                            "`nsighttc doctor --refresh` runs them again"))
        return checks
    slow = _slow_checks(gpus, paths, probe)
    _save_cache(key, slow)
    return checks + slow


def _slow_checks(gpus: list, paths: dict, probe: bool) -> list[Check]:
    """torch's import, tool versions and the probes: process starts of seconds each, run side by side."""
    with ThreadPoolExecutor(max_workers=5) as pool:
        torch_f = pool.submit(_torch_info)
        version_f = {t: pool.submit(gpu.tool_version, str(p)) for t, p in paths.items() if p is not None}
        probe_f = {}
        if probe and gpus:  # started before torch's answer; judged (or called skipped) after it
            if paths["ncu"] is not None:
                probe_f["ncu"] = pool.submit(_probe_ncu, paths["ncu"])
            if paths["nsys"] is not None:
                probe_f["nsys"] = pool.submit(_probe_nsys, paths["nsys"])
        tv, cuda, avail = torch_f.result()
        out: list[Check] = []
        if tv is None:
            out.append(Check("torch", "missing", "PyTorch not importable by this Python",
                             "pip install torch (needed by --engine torch and the wrappers)"))
        else:
            out.append(Check("torch", "OK" if avail or not gpus else "broken",
                             f"{tv}, CUDA {cuda}, cuda available: {avail}",
                             "" if avail or not gpus else "install a CUDA build of torch matching the driver"))
        can_probe = probe and bool(gpus) and avail
        for tool, path in paths.items():
            if path is None:
                out.append(Check(tool, "missing", f"not found (looked in: {', '.join(tools.candidates(tool))})",
                                 "install Nsight Compute" if tool == "ncu" else
                                 "install Nsight Systems (it also ships inside Nsight Compute)"))
                continue
            out.append(Check(tool, "OK", f"{path} ({version_f[tool].result() or 'version unknown'})"))
            if not can_probe:
                out.append(Check(f"{tool} probe", "skipped", "needs a GPU, a CUDA build of torch, and --probe"))
                continue
            out.append(probe_f[tool].result())
    return out


def _load_cache(key: dict) -> tuple[list[Check], str] | None:
    try:
        doc = json.loads((cache_dir() / "doctor.json").read_text())
        if doc.get("key") != json.loads(json.dumps(key)):
            return None
        return [Check(**c) for c in doc["checks"]], doc["when"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_cache(key: dict, checks: list[Check]) -> None:
    if any(c.status == "broken" for c in checks):
        return  # a broken setup is re-checked every time: the user is about to fix it
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f"doctor.json.{os.getpid()}"
        tmp.write_text(json.dumps({"key": key, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                                   "checks": [asdict(c) for c in checks]}, indent=1))
        tmp.replace(d / "doctor.json")
    except OSError:
        pass  # no writable cache: the doctor still answers, only slower next time


def _probe_ncu(ncu: Path) -> Check:
    rc, out, err = process.capture([str(ncu), "--metrics", "gpu__time_duration.sum", "--launch-count", "1",
                                    "--clock-control", "none", sys.executable, "-c", PROBE], timeout=180)
    text = out + err
    if "ERR_NVGPUCTRPERM" in text:
        return Check("ncu counters", "broken", "performance counters not permitted (ERR_NVGPUCTRPERM)",
                     "run as root or with CAP_SYS_ADMIN, or set `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
                     "in /etc/modprobe.d and reload the driver")
    if rc != 0 or "gpu__time_duration" not in text:
        line = next((ln for ln in text.splitlines() if "==ERROR==" in ln), text.strip()[-200:])
        return Check("ncu counters", "broken", f"probe failed: {line}", "see `ncu --help`; is the driver new enough?")
    return Check("ncu counters", "OK", "profiled a probe kernel")


def _probe_nsys(nsys: Path) -> Check:
    with tempfile.TemporaryDirectory(prefix="nsighttc-doctor-") as tmp:
        base = Path(tmp) / "probe"
        rc, out, err = process.capture([str(nsys), "profile", "-t", "cuda", "-s", "none", "--cpuctxsw=none",
                                        "-o", str(base), sys.executable, "-c", PROBE], timeout=300)
        rep = base.with_suffix(".nsys-rep")
        if rep.exists():
            return Check("nsys import", "OK", "recorded a probe and imported it into a .nsys-rep")
        if list(Path(tmp).glob("*.qdstrm")):
            return Check("nsys import", "broken", "nsys wrote a .qdstrm but no .nsys-rep: its QdstrmImporter failed "
                         "(" + next((ln.strip() for ln in (out + err).splitlines() if "rror" in ln), "no message") + ")",
                         "the importer usually lacks libdw.so.1: install libdw1 (elfutils) or put it on LD_LIBRARY_PATH")
        return Check("nsys import", "broken", f"probe failed (exit code {rc})", (err or out).strip()[-200:])


def conclusion(checks: list[Check]) -> str:
    """One line: what this machine can do, and the next command to run."""
    by = {c.name: c for c in checks}
    broken = [c.name for c in checks if c.status == "broken"]
    gpu = any(c.name.startswith("GPU") and c.status in ("OK", "warn") for c in checks)
    torch_ok = by.get("torch") is not None and by["torch"].status == "OK"
    ncu = by.get("ncu") is not None and by["ncu"].status == "OK" and \
        (by.get("ncu counters") is None or by["ncu counters"].status == "OK")
    nsys = by.get("nsys") is not None and by["nsys"].status == "OK"
    if broken:
        return (f"needs a fix: {', '.join(broken)} (see the -> lines above); then `nsighttc doctor --refresh`")
    if not gpu:
        return ("no NVIDIA GPU here: `nsighttc profile` cannot run, `analyze` reads recordings made elsewhere; "
                "next: `nsighttc demo` (real H200 verdicts)")
    how = "hardware counters decide Tensor Cores (ncu)" if ncu else \
        "Tensor Cores judged by kernel names only (install Nsight Compute for hardware counters)"
    engine = "torch.profiler" if torch_ok else "nsys" if nsys else None
    if engine is None:
        return "a GPU, but neither PyTorch nor nsys for a timeline: install one; next: `nsighttc doctor --refresh`"
    return f"ready to profile with {engine}; {how}; next: `nsighttc profile train.py`"
