"""``nsighttc doctor``: what this machine can profile, each line OK / missing / broken with what to do.

The probes are real but tiny: ncu profiles one kernel of a one-line torch program (to see whether the
performance counters are permitted: ERR_NVGPUCTRPERM otherwise), and nsys records the same program and
must produce a ``.nsys-rep`` (the known broken case writes only a ``.qdstrm`` because its importer cannot
load libdw.so.1).
"""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from dataclasses import dataclass
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


def run_checks(probe: bool = True) -> list[Check]:
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
        checks.append(Check("driver", "OK", g.driver or "unknown")) if g.index == 0 else None
    tv, cuda, avail = _torch_info()
    if tv is None:
        checks.append(Check("torch", "missing", "PyTorch not importable by this Python",
                            "pip install torch (needed by --engine torch and the wrappers)"))
    else:
        checks.append(Check("torch", "OK" if avail or not gpus else "broken",
                            f"{tv}, CUDA {cuda}, cuda available: {avail}",
                            "" if avail or not gpus else "install a CUDA build of torch matching the driver"))
    ok = importlib.util.find_spec("nvtx") is not None
    checks.append(Check("python nvtx", "OK" if ok else "missing", "NVTX ranges for ncu/nsys",
                        "" if ok else "pip install nvtx"))
    from ..parse.ncu_rep import _import_ncu_report  # the same lookup the parser uses (PyPI, then ncu's extras)
    module = _import_ncu_report()
    checks.append(Check("python ncu_report", "OK" if module else "missing",
                        f"reads .ncu-rep in-process ({getattr(module, '__file__', '')})" if module else
                        "reading .ncu-rep in-process (else nsighttc exports through `ncu --import`)",
                        "" if module else "pip install ncu-report"))
    can_probe = probe and bool(gpus) and avail
    for tool in ("ncu", "nsys"):
        path = tools.find_or_none(tool)
        if path is None:
            checks.append(Check(tool, "missing", f"not found (looked in: {', '.join(tools.candidates(tool))})",
                                "install Nsight Compute" if tool == "ncu" else "install Nsight Systems (it also ships inside Nsight Compute)"))
            continue
        version = gpu.tool_version(str(path)) or "version unknown"
        checks.append(Check(tool, "OK", f"{path} ({version})"))
        if not can_probe:
            checks.append(Check(f"{tool} probe", "skipped", "needs a GPU, a CUDA build of torch, and --probe"))
            continue
        checks.append(_probe_ncu(path) if tool == "ncu" else _probe_nsys(path))
    return [c for c in checks if c is not None]


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
