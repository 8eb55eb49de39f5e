"""The program's global backend switches that choose kernels, carried from the program's process to the replay's.

The replay (``runtime.replay``) calls each recorded operator again in a process of its own, where every switch is at
torch's default. Some switches choose kernels without any argument of the call saying so: ``cudnn.benchmark`` (cuDNN
times its algorithms and keeps the fastest: image-model training scripts and Lightning's ``Trainer(benchmark=True)``
turn it on; off, cuDNN's heuristics choose), ``cudnn.deterministic`` and ``use_deterministic_algorithms`` (only
deterministic algorithms), the reduced-precision reductions of fp16/bf16 GEMMs (cuBLAS's split-K choices), fp16
accumulation of fp16 GEMMs and the preferred BLAS library (cuBLAS or cuBLASLt). A replay made under other switches
launches other kernels, which then go unmeasured and are left to Nsight Compute on the whole program (the pass a first
run pays most for: reports/profile_overhead). The TF32 switches are not carried: the replay makes each fp32 call
with TF32 off and on (``runtime.replay_settings``), and the program may have changed them after the operators were
recorded.

The launcher writes them once (``write_once``) where a profiler session that recorded the operators with their
arguments stops, before the operators' trace or kernel list exists, so the file is there before the replay's first
call. Standard library only (runs inside the user's program and the replay).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

# name -> (read, write): each a switch's value as JSON, and how to set it again (torch 2.11-2.13)
_SWITCHES = {
    "cudnn.benchmark": (lambda t: bool(t.backends.cudnn.benchmark),
                        lambda t, v: setattr(t.backends.cudnn, "benchmark", bool(v))),
    "cudnn.deterministic": (lambda t: bool(t.backends.cudnn.deterministic),
                            lambda t, v: setattr(t.backends.cudnn, "deterministic", bool(v))),
    "cudnn.enabled": (lambda t: bool(t.backends.cudnn.enabled),
                      lambda t, v: setattr(t.backends.cudnn, "enabled", bool(v))),
    "deterministic_algorithms": (lambda t: bool(t.are_deterministic_algorithms_enabled()),
                                 lambda t, v: t.use_deterministic_algorithms(bool(v), warn_only=True)),
    "matmul.fp16_reduced_precision_reduction": (
        lambda t: bool(t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
        lambda t, v: setattr(t.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", bool(v))),
    "matmul.bf16_reduced_precision_reduction": (
        lambda t: bool(t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
        lambda t, v: setattr(t.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", bool(v))),
    # fp16 GEMMs accumulating in fp16 (torch 2.7+; cuBLAS then runs other kernels)
    "matmul.fp16_accumulation": (lambda t: bool(t.backends.cuda.matmul.allow_fp16_accumulation),
                                 lambda t, v: setattr(t.backends.cuda.matmul, "allow_fp16_accumulation", bool(v))),
    "blas_library": (lambda t: str(t.backends.cuda.preferred_blas_library()).rpartition(".")[2].lower(),
                     lambda t, v: t.backends.cuda.preferred_blas_library(str(v))),
}

_TARGET: list[Path] = []  # where the launcher writes them (``remember``), emptied once written


def snapshot(torch) -> dict:
    """The switches' values now; a switch this torch does not have is left out."""
    out = {}
    for name, (read, _) in _SWITCHES.items():
        try:
            out[name] = read(torch)
        except Exception:  # noqa: BLE001 - a torch without this switch: nothing to carry
            pass
    return out


def remember(path: Path | None) -> None:
    """The launcher's ``--backend-flags FILE``: where ``write_once`` writes."""
    _TARGET[:] = [Path(path)] if path is not None else []


def write_once() -> None:
    """Write the switches to the remembered file, the first time only (a session of operators stopped: the values
    they were recorded under); nothing without a file or without torch. Never raises: the program goes on."""
    import sys
    torch = sys.modules.get("torch")
    if not _TARGET or torch is None:
        return
    path = _TARGET.pop()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(snapshot(torch)))
        os.replace(tmp, path)  # whole or absent: the replay may look for it meanwhile
    except OSError:
        pass


def read(path: Path | None) -> dict:
    """The switches written for this replay, or {} (no file yet, or unreadable: the replay runs at the defaults)."""
    if path is None:
        return {}
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if k in _SWITCHES} if isinstance(doc, dict) else {}


def apply(torch, flags: dict) -> list[str]:
    """Set the switches that differ from this process' values; returns ``name=value`` for each one set (the log)."""
    now = snapshot(torch)
    done = []
    for name, value in flags.items():
        if name not in _SWITCHES or now.get(name) == value:
            continue
        try:
            _SWITCHES[name][1](torch, value)
            done.append(f"{name}={value}")
        except Exception:  # noqa: BLE001 - a value this torch refuses: the replay runs with its own
            pass
    return done


def autotuned(call: dict, flags: dict) -> bool:
    """Whether the call's kernel is chosen by timing (cuDNN's benchmark mode, for a convolution): the replay then
    makes it once outside the profiled range, so that the algorithms tried are not profiled and the profiled call
    runs the one cuDNN kept for that shape."""
    return bool(flags.get("cudnn.benchmark")) and flags.get("cudnn.enabled", True) is not False \
        and call.get("name", "").startswith("aten::") and "conv" in call["name"]
